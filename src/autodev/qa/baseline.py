"""What a change is blamed for: only what is new against its base commit.

A project with a failing test, a lint finding in an old file or a test fixture that looks like a secret has
them before any task touches it; a task must not pay for them. The gates key every finding so that it can
be recognised on another commit (``GateResult.finding_keys``), and a failing gate is compared with the same
gate on the task's base:

- the test gate and the build gate against a run of the same gate on the base commit's whole tree
  (``TreeBaseline``), cached by tree, gate configuration and environment (``baseline_key``);
- the file-by-file gates (syntax, lint, secretscan) against the same gate run on the base versions of the
  changed files (``autodev.qa.gates.run_on_base_versions``).

Findings the base has as well move to ``GateResult.preexisting`` (counted: two copies of a finding at the
base excuse two, not three); a gate whose findings are all pre-existing passes, saying so. A test gate
that collects nothing where the base ran tests fails: deleting the tests is not "no tests".

``cannot_run`` says whether a base run is unusable as a baseline: a gate that could not run at all there
(an internal or usage error, a collection error, a tool that is missing) stops a run before any agent is
paid, because every task would fail it for reasons no developer can fix.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autodev.config.schema import QAGatesSettings
from autodev.qa.detect import Language
from autodev.qa.environment import ProjectEnvironment
from autodev.qa.gates import GateName, GateResult, GateStatus, RunCounts
from autodev.state.atomic import atomic_write_text

__all__ = [
    "BaselineStore",
    "GateBaseline",
    "TreeBaseline",
    "baseline_key",
    "cannot_run",
    "excuse",
    "require_tests_like_base",
    "require_tests_still_run",
]

_SHOWN = 10


class GateBaseline(BaseModel):
    """One gate's result on a base tree, as much of it as a later comparison needs."""

    model_config = ConfigDict(extra="forbid")

    gate: GateName
    language: Language | None = None
    status: GateStatus
    reason: str | None = None
    findings: list[str] = Field(default_factory=list)
    finding_keys: list[str] = Field(default_factory=list)
    counts: RunCounts | None = None
    # The test ids that ran to an outcome there, and those skipped there; None in a baseline taken before
    # AutoDev kept them.
    executed: list[str] | None = None
    skipped: list[str] | None = None

    @classmethod
    def of(cls, result: GateResult) -> GateBaseline:
        # A base result is judged by nothing: its pre-existing findings are findings of that tree too.
        return cls(
            gate=result.gate,
            language=result.language,
            status=result.status,
            reason=result.reason,
            findings=[*result.findings, *result.preexisting],
            finding_keys=list(result.finding_keys),
            counts=result.counts,
            executed=list(result.executed) if result.gate == "test" and result.counts else None,
            skipped=[_test_id(text) for text in result.not_run]
            if result.gate == "test" and result.counts
            else None,
        )


class TreeBaseline(BaseModel):
    """The whole-tree gates (test, build and the project-wide commands) on one tree."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    tree: str
    key: str
    taken_in: str = Field(description="Where the run happened: the main checkout, a fresh worktree, ...")
    environment: str
    created_at: str
    gates: list[GateBaseline]

    def gate(self, gate: GateName, language: Language | None) -> GateBaseline | None:
        return next((g for g in self.gates if g.gate == gate and g.language == language), None)


def baseline_key(config: QAGatesSettings, environment: ProjectEnvironment | None) -> str:
    """A digest of what a gate's result depends on besides the tree: its settings and the environment."""
    material = {
        # Raised when a baseline starts to hold something new (2: the tests that ran), so that an older
        # cached baseline is taken again instead of deciding without it.
        "format": 2,
        "gates": config.model_dump(mode="json"),
        "environment": None
        if environment is None
        else [environment.source, environment.python, environment.version, environment.has_pytest],
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode("utf-8")).hexdigest()[:16]


class BaselineStore:
    """``TreeBaseline`` files under ``.autodev/baseline/``: a cache, never the source of any decision that
    is not re-derivable (a lost or corrupt file is taken again)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, tree: str, key: str) -> Path:
        return self.directory / f"{tree}-{key}.json"

    def load(self, tree: str, key: str) -> TreeBaseline | None:
        try:
            baseline = TreeBaseline.model_validate_json(self._path(tree, key).read_bytes())
        except (OSError, ValidationError, ValueError):
            return None
        return baseline if baseline.tree == tree and baseline.key == key else None

    def save(self, baseline: TreeBaseline) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self._path(baseline.tree, baseline.key), baseline.model_dump_json())
        except OSError:
            return  # a cache that cannot be written is taken again next time


def tree_baseline(
    tree: str,
    key: str,
    results: Sequence[GateResult],
    *,
    taken_in: str,
    environment: ProjectEnvironment | None,
) -> TreeBaseline:
    return TreeBaseline(
        tree=tree,
        key=key,
        taken_in=taken_in,
        environment=environment.summary() if environment is not None else "no project environment",
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        gates=[GateBaseline.of(result) for result in results if result.status != "skipped"],
    )


def cannot_run(result: GateBaseline | GateResult) -> str | None:
    """Why a gate's run on a base tree cannot serve as a baseline, or None when it can."""
    if result.status == "error":
        return result.reason or "the gate could not run"
    if result.gate == "test" and result.status == "fail":
        if result.counts is None:
            return result.reason or "the tests did not run"
        if (result.reason or "").startswith("test collection failed"):
            broken = [key for key in result.finding_keys if "::" not in key]
            where = f" ({', '.join(broken[:_SHOWN])})" if broken else ""
            return f"test collection failed{where}: pytest ran no test"
    return None


def excuse(result: GateResult, base_keys: Sequence[str] | None, *, base_label: str) -> GateResult:
    """``result`` with the findings ``base_keys`` has too moved to ``preexisting``.

    Only a ``fail`` with keyed findings is judged; a gate that passes, cannot run, or reports no finding
    one by one keeps its status. ``base_label`` names the base in the reason ("the base commit 1a2b3c").
    """
    if result.status != "fail" or not result.finding_keys or base_keys is None:
        return result
    remaining = Counter(base_keys)
    new_texts: list[str] = []
    new_keys: list[str] = []
    old: list[str] = []
    for key, text in zip(result.finding_keys, result.findings, strict=True):
        if remaining[key] > 0:
            remaining[key] -= 1
            old.append(text)
        else:
            new_texts.append(text)
            new_keys.append(key)
    if not old:
        return result
    what = "failing test(s)" if result.gate == "test" else "finding(s)"
    if new_texts:
        reason = (
            f"{len(new_texts)} new {what} ({len(old)} more fail on {base_label} too and are not blamed on "
            "this change)"
        )
        status: GateStatus = "fail"
    else:
        reason = f"only pre-existing {what}: {len(old)} fail on {base_label} too"
        status = "pass"
    return result.model_copy(
        update={
            "status": status,
            "reason": reason,
            "findings": new_texts,
            "finding_keys": new_keys,
            "preexisting": [*result.preexisting, *old],
        }
    )


def require_tests_like_base(result: GateResult, base: GateBaseline | None, *, base_label: str) -> GateResult:
    """A test gate that finds no tests where the base ran some fails: the tests were removed or hidden."""
    if result.gate != "test" or result.status != "no_tests" or base is None or base.counts is None:
        return result
    if base.counts.total == 0:
        return result
    reason = f"no tests ran, but {base.counts.total} ran on {base_label}: the change removed or hid them"
    return result.model_copy(update={"status": "fail", "reason": reason})


def _test_id(not_run_text: str) -> str:
    """The test id of a ``GateResult.not_run`` entry ("id: how (message)")."""
    return not_run_text.split(": ", 1)[0]


def _module_of(path: str) -> str:
    """The dotted module name pytest puts in a test's ``classname`` for a file path."""
    return path.removesuffix(".py").replace("/", ".")


def require_tests_still_run(
    result: GateResult, base: GateBaseline | None, changed: Sequence[str], *, base_label: str
) -> GateResult:
    """A test gate fails when tests did not run that must: those that ran on the base and are now skipped,
    xfailed, or gone from a file the change did not touch (deselected by a hook or an option), and new
    tests of the change that are skipped or xfailed (they prove nothing about it). A test the change
    itself edits, renames or deletes in its own file is the reviewer's to judge, not this check's."""
    if result.gate != "test" or base is None or base.executed is None or result.counts is None:
        return result
    if result.status not in ("pass", "fail", "no_tests"):
        return result
    now = set(result.executed)
    touched = tuple(_module_of(path) for path in changed if path.endswith(".py"))
    skipped = {_test_id(text): text for text in result.not_run}
    known = {*base.executed, *(base.skipped or ())}
    lost = [text for test_id, text in skipped.items() if test_id not in known]
    for test_id in base.executed:
        if test_id in now:
            continue
        if test_id in skipped:
            lost.append(skipped[test_id])
        elif not test_id.startswith(touched) or not touched:
            lost.append(f"{test_id}: not run (deselected or not collected)")
    if not lost:
        return result
    shown = "; ".join(lost[:_SHOWN]) + (f" and {len(lost) - _SHOWN} more" if len(lost) > _SHOWN else "")
    reason = (
        f"{len(lost)} test(s) did not run that ran on {base_label} or that the change adds: {shown}; "
        "tests that do not run prove nothing, so skipping, xfailing or deselecting them is no pass"
    )
    return result.model_copy(
        update={
            "status": "fail",
            "reason": reason if result.status != "fail" else f"{result.reason}; {reason}",
            "findings": [*result.findings, *lost],
            "finding_keys": [*result.finding_keys, *(f"not-run:{_test_id(text)}" for text in lost)],
        }
    )
