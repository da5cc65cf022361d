"""Read the output contracts of the agent roles out of their replies.

Every parser here is a pure function of the reply text. It finds the contract's key lines however they
are decorated (``**VERDICT:**``, backticks, a leading bullet, quote or heading marker, any letter case)
and ignores the text around them, but it never turns something that is not there into a pass: a missing
or malformed line gives ``None``, never a default. When a key appears on several lines the last one
decides, because an agent that quotes the contract ends with its answer; a malformed last line gives
``None`` even when an earlier line was valid. The reviewer's verdict is the exception: a reply that states
two different verdicts is malformed, since taking either one would be a guess, and a guess of APPROVED
passes work the same reply asked to change.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar, get_args

from autodev.markdown_text import unwrap_emphasis

__all__ = [
    "LESSON_MAX_CHARS",
    "Confidence",
    "CriticParse",
    "CriticVerdict",
    "ReviewParse",
    "ReviewVerdict",
    "TestCounts",
    "parse_changed",
    "parse_confidence",
    "parse_critic_verdict",
    "parse_files",
    "parse_lessons",
    "parse_ranking",
    "parse_review_verdict",
    "parse_test_results",
    "parse_topic",
    "review_problem",
]

ReviewVerdict = Literal["APPROVED", "NEEDS_CHANGES", "REJECTED"]
CriticVerdict = Literal["APPROVED", "NEEDS_REVISION", "REJECTED"]
Confidence = Literal["HIGH", "MEDIUM", "LOW"]

LESSON_MAX_CHARS = 300
"""Longest lesson kept; longer ones are cut and end with an ellipsis."""


@dataclass(frozen=True, slots=True)
class ReviewParse:
    """A reviewer's ``VERDICT:`` and the items of its ``ISSUES:`` list."""

    verdict: ReviewVerdict
    issues: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CriticParse:
    """The critic sounding board's ``VERDICT:``, ``ISSUES:`` items and ``RECOMMENDATION:`` line."""

    verdict: CriticVerdict
    issues: tuple[str, ...]
    recommendation: str | None


@dataclass(frozen=True, slots=True)
class TestCounts:
    """The counts of a ``RESULTS: passed=N failed=M total=T`` line; ``total`` may include skipped tests."""

    # The name starts with "Test"; without this pytest tries to collect the class wherever it is imported.
    __test__ = False

    passed: int
    failed: int
    total: int

    def __post_init__(self) -> None:
        if min(self.passed, self.failed, self.total) < 0:
            raise ValueError(f"test counts must not be negative: {self}")
        if self.total < self.passed + self.failed:
            raise ValueError(f"total is smaller than passed + failed: {self}")


# --- key lines ----------------------------------------------------------------------------------------

_CONTRACT_KEYS = frozenset(
    {
        "VERDICT",
        "ISSUES",
        "RECOMMENDATION",
        "LESSON",
        "CONFIDENCE",
        "RESULTS",
        "RANKING",
        "FILES",
        "CHANGED",
        "TOPIC",
    }
)
# Bullets, numbering, quote and heading markers in front of a key; "*" and "+" only as bullets (followed
# by a space), so that "**VERDICT:**" keeps its bold for the key pattern to consume.
_LEAD = re.compile(r"^(?:[-*+][ \t]+|>[ \t]*|#{1,6}[ \t]+|\d{1,3}[.)][ \t]+)*")
# A verdict stated without its key may stand in a quote or a heading, but not as a list item: items are
# issues, or the contract's list of verdicts repeated.
_BARE_LEAD = re.compile(r"^(?:>[ \t]*|#{1,6}[ \t]+)*")
_KEY_LINE = re.compile(r"[*_`]{0,2}(?P<key>[A-Za-z]+)[*_`]{0,2}[ \t]*:(?:[*_`]{1,2}(?=\s|$))?(?P<value>.*)")
_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,3}[.)])[ \t]+(?P<text>.*)")
_NONE_ITEMS = frozenset(
    {"", "-", "none", "(none)", "n/a", "na", "[]", "empty", "(empty)", "nothing", "no issues", "none found"}
)


def _key_line(line: str) -> tuple[str, str] | None:
    """``(KEY, value)`` when ``line`` is a ``KEY: value`` line, whatever its decoration."""
    match = _KEY_LINE.fullmatch(unwrap_emphasis(_LEAD.sub("", line.strip(), count=1)))
    if match is None:
        return None
    return match["key"].upper(), match["value"].strip()


def _last_key(lines: Sequence[str], key: str) -> tuple[int, str] | None:
    """Index and value of the last line carrying ``key``."""
    for index in range(len(lines) - 1, -1, -1):
        found = _key_line(lines[index])
        if found is not None and found[0] == key:
            return index, found[1]
    return None


def _is_none_item(item: str) -> bool:
    return item.strip().rstrip(".").casefold() in _NONE_ITEMS


def _section(lines: Sequence[str], key: str) -> tuple[str, list[str]] | None:
    """The inline value and the bullet items of the last ``KEY:`` list.

    Bullets may carry indented continuation lines; the list ends at the next contract key or at the
    first unindented line that is not a bullet. Items that only say "none" are dropped.
    """
    found = _last_key(lines, key)
    if found is None:
        return None
    start, inline = found
    items: list[str] = []
    for raw in lines[start + 1 :]:
        if not raw.strip():
            continue
        contract_key = _key_line(raw)
        if contract_key is not None and contract_key[0] in _CONTRACT_KEYS:
            break
        bullet = _ITEM.fullmatch(raw)
        if bullet is not None:
            items.append(bullet["text"].strip())
        elif items and raw[0] in " \t":
            items[-1] += " " + raw.strip()
        else:
            break
    inline = unwrap_emphasis(inline)
    return ("" if _is_none_item(inline) else inline), [item for item in items if not _is_none_item(item)]


def _section_items(lines: Sequence[str], key: str) -> tuple[str, ...]:
    """The items of the last ``KEY:`` list, an inline value first; ``()`` when there is no list."""
    section = _section(lines, key)
    if section is None:
        return ()
    inline, items = section
    return (inline, *items) if inline else tuple(items)


# --- enumerated values --------------------------------------------------------------------------------


_Option = TypeVar("_Option", bound=str)


class _Choices(Generic[_Option]):
    """One enumerated contract value (a verdict, a confidence level) and how to read it from a line.

    The option may be followed by end punctuation or by a note after a separator; anything else
    ("APPROVED|REJECTED" copied from the contract, "APPROVEDISH", "NOT APPROVED") is malformed, and so
    is a note that names another option ("APPROVED, NEEDS_CHANGES or REJECTED").
    """

    def __init__(self, options: tuple[_Option, ...]) -> None:
        # "NEEDS_CHANGES" is also accepted as "NEEDS CHANGES" or "NEEDS-CHANGES".
        alternatives = "|".join(r"[ _-]+".join(map(re.escape, option.split("_"))) for option in options)
        self._options = options
        self._pattern = re.compile(
            rf"(?P<choice>{alternatives})(?:[ \t]*[.!]*|(?:[ \t]*[:(,;]|[ \t]+[-\u2013\u2014])(?P<note>.*))",
            # ASCII only: Unicode case folding would let "\u017f" (long s) stand in for an "S".
            re.IGNORECASE | re.DOTALL | re.ASCII,
        )
        self._finder = re.compile(rf"\b(?:{alternatives})\b", re.IGNORECASE | re.ASCII)
        self._capitals = re.compile(rf"(?:{alternatives})\b", re.ASCII)

    def read(self, value: str) -> _Option | None:
        """The option ``value`` names, or ``None`` when it names none or more than one."""
        match = self._pattern.fullmatch(value.replace("*", "").replace("`", "").strip())
        if match is None:
            return None
        choice = self._option(match["choice"])
        if any(self._option(other) != choice for other in self._finder.findall(match["note"] or "")):
            return None
        return choice

    def read_bare(self, line: str) -> _Option | None:
        """The option a line states on its own, without a key ("APPROVED", "**NEEDS_CHANGES:** ...").

        Only in capitals, as the contract writes it: "Rejected: ..." is a sentence, not a verdict.
        """
        value = unwrap_emphasis(_BARE_LEAD.sub("", line.strip(), count=1)).replace("*", "").replace("`", "")
        return self.read(value) if self._capitals.match(value.strip()) else None

    def last(self, lines: Sequence[str], key: str) -> _Option | None:
        """The option on the last ``key`` line; ``None`` when there is none or it is malformed."""
        found = _last_key(lines, key)
        return None if found is None else self.read(found[1])

    def _option(self, raw: str) -> _Option:
        canonical = re.sub(r"[ _-]+", "_", raw.upper())
        return next(option for option in self._options if option == canonical)


_REVIEW_VERDICTS: _Choices[ReviewVerdict] = _Choices(get_args(ReviewVerdict))
_CRITIC_VERDICTS: _Choices[CriticVerdict] = _Choices(get_args(CriticVerdict))
_CONFIDENCES: _Choices[Confidence] = _Choices(get_args(Confidence))


# --- public parsers -----------------------------------------------------------------------------------


def parse_review_verdict(text: str) -> ReviewParse | None:
    """The reviewer's verdict and issues, or ``None`` when there is no well-formed ``VERDICT:`` line.

    A missing verdict is a failed review, never an approval, and so are verdicts that disagree: two
    ``VERDICT:`` lines, or a ``VERDICT:`` line and a line that is a verdict on its own ("APPROVED",
    "NEEDS_CHANGES: ..."), naming different verdicts. ``issues`` holds the items of the last ``ISSUES:``
    list (empty when there is none, or when it says ``none``).
    """
    lines = text.splitlines()
    verdict = _REVIEW_VERDICTS.last(lines, "VERDICT")
    if verdict is None or _stated_verdicts(lines) != {verdict}:
        return None
    return ReviewParse(verdict=verdict, issues=_section_items(lines, "ISSUES"))


def review_problem(text: str) -> str | None:
    """Why ``parse_review_verdict`` finds no usable verdict in ``text`` (for the repair turn), or None."""
    if parse_review_verdict(text) is not None:
        return None
    stated = _stated_verdicts(text.splitlines())
    if len(stated) > 1:
        return f"it states verdicts that disagree ({', '.join(sorted(stated))}); give exactly one"
    return "it has no 'VERDICT: APPROVED|NEEDS_CHANGES|REJECTED' line"


def _stated_verdicts(lines: Sequence[str]) -> set[ReviewVerdict]:
    """Every well-formed verdict a reply states, with its ``VERDICT:`` key or on a line of its own."""
    stated: set[ReviewVerdict] = set()
    for line in lines:
        found = _key_line(line)
        keyed = _REVIEW_VERDICTS.read(found[1]) if found is not None and found[0] == "VERDICT" else None
        verdict = keyed or _REVIEW_VERDICTS.read_bare(line)
        if verdict is not None:
            stated.add(verdict)
    return stated


def parse_critic_verdict(text: str) -> CriticParse | None:
    """The critic sounding board's diagnosis, or ``None`` without a well-formed ``VERDICT:`` line."""
    lines = text.splitlines()
    verdict = _CRITIC_VERDICTS.last(lines, "VERDICT")
    if verdict is None:
        return None
    return CriticParse(
        verdict=verdict,
        issues=_section_items(lines, "ISSUES"),
        recommendation=_last_text(lines, "RECOMMENDATION"),
    )


def parse_confidence(text: str) -> Confidence | None:
    """``HIGH``, ``MEDIUM`` or ``LOW`` from the last ``CONFIDENCE:`` line; ``None`` if absent or malformed."""
    return _CONFIDENCES.last(text.splitlines(), "CONFIDENCE")


_COUNT_TOKEN = re.compile(r"(?P<key>[A-Za-z]+)=(?P<value>[0-9]+)")
_COUNT_KEYS = frozenset({"passed", "failed", "total"})


def parse_test_results(text: str) -> TestCounts | None:
    """The counts of the last ``RESULTS: passed=N failed=M total=T`` line.

    ``None`` when the line is missing, a count is missing, repeated, negative or not a whole number,
    an unknown key is present, or ``total`` is smaller than ``passed + failed``.
    """
    found = _last_key(text.splitlines(), "RESULTS")
    if found is None:
        return None
    plain = found[1].replace("*", "").replace("`", "")
    plain = re.sub(r"[ \t]*=[ \t]*", "=", plain).strip().rstrip(".")
    counts: dict[str, int] = {}
    for token in re.split(r"[\s,;]+", plain):
        match = _COUNT_TOKEN.fullmatch(token)
        if match is None:
            return None
        key = match["key"].lower()
        if key not in _COUNT_KEYS or key in counts:
            return None
        counts[key] = int(match["value"])
    if counts.keys() != _COUNT_KEYS or counts["total"] < counts["passed"] + counts["failed"]:
        return None
    return TestCounts(passed=counts["passed"], failed=counts["failed"], total=counts["total"])


def parse_lessons(text: str) -> list[str]:
    """Every ``LESSON:`` line's text, in order, once each (ignoring case and spacing).

    Lessons are stripped, their whitespace collapsed and cut to ``LESSON_MAX_CHARS`` characters.
    """
    lessons: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        found = _key_line(line)
        if found is None or found[0] != "LESSON":
            continue
        lesson = " ".join(unwrap_emphasis(found[1]).split())
        if _is_none_item(lesson):
            continue
        if len(lesson) > LESSON_MAX_CHARS:
            lesson = lesson[: LESSON_MAX_CHARS - 1].rstrip() + "\u2026"
        key = lesson.casefold()
        if key not in seen:
            seen.add(key)
            lessons.append(lesson)
    return lessons


def _last_text(lines: Sequence[str], key: str) -> str | None:
    found = _last_key(lines, key)
    if found is None:
        return None
    value = unwrap_emphasis(found[1])
    return None if _is_none_item(value) else value


def parse_topic(text: str) -> str | None:
    """The domain expert's ``TOPIC:`` line, or ``None`` when it is missing or empty."""
    return _last_text(text.splitlines(), "TOPIC")


_FILE_SUFFIX = re.compile(r"(?::[0-9]+(?:-[0-9]+)?)?[:,;.]*$")


def parse_changed(text: str) -> list[str] | None:
    """The paths of a writer's last ``CHANGED:`` list (what it says it changed), once each, in order;
    None when it gave none (``CHANGED: none`` is an empty claim, not a missing one)."""
    section = _section(text.splitlines(), "CHANGED")
    if section is None:
        return None
    inline, items = section
    paths: dict[str, None] = {}
    for item in [*inline.split(","), *items]:
        path = _item_path(item)
        if path:
            paths[path.removeprefix("./")] = None
    return list(paths)


def parse_files(text: str) -> list[str]:
    """The paths of the last ``FILES:`` list, once each, in order; ``[]`` when there is none.

    An item is one path, optionally in backticks and followed by a note (``- `src/a.py` - entry
    point``); a ``:line`` suffix is dropped. An inline value is read as comma-separated paths.
    """
    section = _section(text.splitlines(), "FILES")
    if section is None:
        return []
    inline, items = section
    paths: dict[str, None] = {}
    for item in [*inline.split(","), *items]:
        path = _item_path(item)
        if path:
            paths[path] = None
    return list(paths)


def _item_path(item: str) -> str:
    item = item.strip()
    if item.startswith("`"):
        end = item.find("`", 1)
        if end > 1:
            return item[1:end].strip()
    first = item.split(maxsplit=1)[0] if item else ""
    return _FILE_SUFFIX.sub("", unwrap_emphasis(_FILE_SUFFIX.sub("", first)))


def parse_ranking(text: str, labels: Sequence[str]) -> list[str] | None:
    """The order of the last ``RANKING:`` line, best first, when it ranks exactly ``labels``.

    Labels are separated by ``>`` or ``,``; a label may be decorated and may differ in letter case when
    that is unambiguous. A line that repeats, misses or adds a label gives ``None``. Raises
    ``ValueError`` for ``labels`` that cannot be ranked: empty, repeated, blank, padded with whitespace
    or containing a separator.
    """
    _check_labels(labels)
    found = _last_key(text.splitlines(), "RANKING")
    if found is None:
        return None
    exact = set(labels)
    folded = {label.casefold(): label for label in labels}
    by_case = folded if len(folded) == len(labels) else {}
    raw = found[1]
    # Decoration around the whole line ("**A > B**") is tried only after the line as written, so that
    # labels such as "_a" and "b_" are not unwrapped into other names.
    for value in dict.fromkeys((raw, unwrap_emphasis(raw))):
        ranking = _ranking(value, exact, by_case)
        if ranking is not None:
            return ranking
    return None


def _ranking(value: str, exact: set[str], by_case: dict[str, str]) -> list[str] | None:
    ranking: list[str] = []
    for token in re.split(r"[>,]", value):
        label = _match_label(token, exact, by_case)
        if label is None:
            return None
        ranking.append(label)
    if len(ranking) != len(exact) or set(ranking) != exact:
        return None
    return ranking


def _check_labels(labels: Sequence[str]) -> None:
    if not labels:
        raise ValueError("parse_ranking needs at least one label")
    if len(set(labels)) != len(labels):
        raise ValueError(f"labels must be distinct: {list(labels)}")
    for label in labels:
        if label != label.strip() or len(label.splitlines()) != 1 or ">" in label or "," in label:
            raise ValueError(
                f"label {label!r} cannot be ranked: it must be non-empty, without surrounding "
                "whitespace, '>', ',' or line breaks"
            )


def _match_label(token: str, exact: set[str], by_case: dict[str, str]) -> str | None:
    stripped = token.strip()
    unwrapped = unwrap_emphasis(stripped)
    for candidate in (stripped, unwrapped, unwrapped.rstrip(".")):
        if candidate in exact:
            return candidate
    for candidate in (unwrapped, unwrapped.rstrip(".")):
        label = by_case.get(candidate.casefold())
        if label is not None:
            return label
    return None
