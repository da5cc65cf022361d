"""pytest's JUnit XML report, read into test outcomes (``--junitxml``).

The test gate reads which tests ran and how each ended from the report pytest writes, not from its console:
the console's wording changes with plugins, verbosity and versions, while the report has one element per
test. Both families pytest writes are read (``xunit1``, ``xunit2``). A test's id is its ``classname`` and
``name`` joined by ``::`` (``tests.test_slug::test_accents[x]``); a module that failed to collect is
reported by pytest as an errored case named after the module.

The standard library's parser is enough for a file pytest wrote a moment ago; expat, which it uses, refuses
entity-expansion bombs, and a report over ``MAX_REPORT_BYTES`` is not read at all.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["MAX_REPORT_BYTES", "CaseOutcome", "JUnitCase", "JUnitReport", "read_junit"]

CaseOutcome = Literal["passed", "failed", "error", "skipped"]
MAX_REPORT_BYTES = 64 * 1024 * 1024
# An error (setup or teardown) outranks a failure in the same case; a skip (xfail included) counts only
# when nothing went wrong.
_OUTCOME_TAGS: tuple[tuple[str, CaseOutcome], ...] = (
    ("error", "error"),
    ("failure", "failed"),
    ("skipped", "skipped"),
)


@dataclass(frozen=True, slots=True)
class JUnitCase:
    """One test case: its id, how it ended, and the first line of the failure message, if any."""

    id: str
    outcome: CaseOutcome
    message: str = ""
    # A skipped case pytest reports as an expected failure (``xfail``): it ran no assertion that counts.
    xfailed: bool = False

    @property
    def executed(self) -> bool:
        """Whether the test ran to an outcome (passed, failed or errored) rather than being skipped."""
        return self.outcome != "skipped"

    def not_run_text(self) -> str:
        how = "xfailed" if self.xfailed else "skipped"
        return f"{self.id}: {how}" + (f" ({self.message})" if self.message else "")


@dataclass(frozen=True, slots=True)
class JUnitReport:
    """Every case of one report, in the order pytest ran them."""

    cases: tuple[JUnitCase, ...]

    def _count(self, outcome: CaseOutcome) -> int:
        return sum(case.outcome == outcome for case in self.cases)

    @property
    def total(self) -> int:
        return len(self.cases)

    @property
    def passed(self) -> int:
        return self._count("passed")

    @property
    def failed(self) -> int:
        """Failed and errored cases: a test whose setup broke did not pass either."""
        return self._count("failed") + self._count("error")

    @property
    def skipped(self) -> int:
        return self._count("skipped")

    @property
    def executed(self) -> int:
        return self.total - self.skipped

    @property
    def failing(self) -> tuple[JUnitCase, ...]:
        return tuple(case for case in self.cases if case.outcome in ("failed", "error"))

    def outcomes(self) -> Counter[str]:
        return Counter(case.outcome for case in self.cases)


def _outcome(element: ElementTree.Element) -> tuple[CaseOutcome, str, bool]:
    for tag, outcome in _OUTCOME_TAGS:
        child = element.find(tag)
        if child is not None:
            message = (child.get("message") or (child.text or "")).strip().splitlines()
            xfailed = outcome == "skipped" and child.get("type") == "pytest.xfail"
            return outcome, (message[0][:300] if message else ""), xfailed
    return "passed", "", False


def read_junit(path: Path) -> JUnitReport | str:
    """The report at ``path``, or why it cannot be read (missing, too large, not a pytest JUnit report)."""
    try:
        size = path.stat().st_size
    except OSError:
        return "pytest wrote no JUnit report"
    if size > MAX_REPORT_BYTES:
        return f"the JUnit report is {size} bytes, over {MAX_REPORT_BYTES}; it was not read"
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError) as exc:
        return f"the JUnit report cannot be parsed: {exc}"
    if root.tag not in ("testsuites", "testsuite"):
        return f"the JUnit report's root element is <{root.tag}>, not <testsuites> or <testsuite>"
    cases = []
    for element in root.iter("testcase"):
        classname = element.get("classname") or ""
        name = element.get("name") or ""
        case_id = f"{classname}::{name}" if classname and name else classname or name
        outcome, message, xfailed = _outcome(element)
        cases.append(JUnitCase(case_id, outcome, message, xfailed))
    return JUnitReport(tuple(cases))
