"""Reading the roles' output contracts: decorated answers are understood, missing ones never pass."""

from __future__ import annotations

import pytest

from autodev.agents import parsing
from autodev.agents.parsing import (
    LESSON_MAX_CHARS,
    CriticParse,
    ReviewParse,
    parse_confidence,
    parse_critic_verdict,
    parse_files,
    parse_lessons,
    parse_ranking,
    parse_review_verdict,
    parse_test_results,
    parse_topic,
    review_problem,
)

# --- reviewer verdict -----------------------------------------------------------------------------------

REVIEW = """\
The change adds the validator but misses one criterion.

VERDICT: NEEDS_CHANGES
ISSUES:
- src/app/models.py:42 User.create() never calls validate_email() - call it before saving
- tests/test_models.py has no test for a bad address - add one
  that checks nothing is stored
LESSON: the models module caches users; clear the cache in tests
"""


def test_review_with_issues_and_continuation_lines() -> None:
    assert parse_review_verdict(REVIEW) == ReviewParse(
        verdict="NEEDS_CHANGES",
        issues=(
            "src/app/models.py:42 User.create() never calls validate_email() - call it before saving",
            "tests/test_models.py has no test for a bad address - add one that checks nothing is stored",
        ),
    )


@pytest.mark.parametrize(
    ("line", "verdict"),
    [
        ("VERDICT: APPROVED", "APPROVED"),
        ("**VERDICT:** APPROVED", "APPROVED"),
        ("**VERDICT**: `REJECTED`", "REJECTED"),
        ("`VERDICT: APPROVED`", "APPROVED"),
        ("**VERDICT: NEEDS_CHANGES**", "NEEDS_CHANGES"),
        ("- VERDICT: APPROVED", "APPROVED"),
        ("* **Verdict:** approved.", "APPROVED"),
        ("> VERDICT: REJECTED", "REJECTED"),
        ("## VERDICT: NEEDS_CHANGES", "NEEDS_CHANGES"),
        ("VERDICT: needs changes", "NEEDS_CHANGES"),
        ("VERDICT: NEEDS-CHANGES", "NEEDS_CHANGES"),
        ("VERDICT: REJECTED - the approach cannot meet criterion 2", "REJECTED"),
        ("VERDICT: APPROVED (two style nits, not blocking)", "APPROVED"),
        ("  VERDICT:   APPROVED  ", "APPROVED"),
    ],
)
def test_decorated_verdict_lines(line: str, verdict: str) -> None:
    result = parse_review_verdict(f"Looks fine overall.\n{line}\nThanks.")

    assert result is not None
    assert result.verdict == verdict


@pytest.mark.parametrize(
    "text",
    [
        "",
        "I approve this change.",
        "Approved!",
        "The verdict is APPROVED",
        "VERDICT:",
        "VERDICT: APPROVED|NEEDS_CHANGES|REJECTED",
        "VERDICT: APPROVED, NEEDS_CHANGES or REJECTED",
        "VERDICT: APPROVED/REJECTED",
        "VERDICT: NOT APPROVED",
        "VERDICT: APPROVEDISH",
        "VERDICT: APPROVED-ish",
        "VERDICT: LGTM",
        "VERDICT: NEEDS_REVISION",
        "ISSUES:\n- none\n",
    ],
)
def test_missing_or_malformed_verdict_is_none_never_approved(text: str) -> None:
    assert parse_review_verdict(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "VERDICT: NEEDS_CHANGES\nISSUES:\n- add a test\n\nOn reflection:\nVERDICT: APPROVED",
        "VERDICT: APPROVED\n...\nVERDICT: REJECTED",
        "VERDICT: approved\nVERDICT: needs changes",
        "APPROVED\n\nNEEDS_CHANGES: the tests are missing\nVERDICT: NEEDS_CHANGES",
        "VERDICT: APPROVED\nNEEDS_CHANGES: the tests are missing",
        "**APPROVED**\nVERDICT: REJECTED",
        "## NEEDS CHANGES\nVERDICT: APPROVED",
        "> REJECTED.\nVERDICT: APPROVED",
        "VERDICT: APPROVED\nISSUES:\nREJECTED",
    ],
    ids=[
        "keyed-then-keyed",
        "approved-then-rejected",
        "any-case",
        "bare-lines",
        "keyed-then-bare-with-note",
        "bold-bare",
        "heading",
        "quote",
        "bare-last",
    ],
)
def test_verdicts_that_disagree_are_malformed_never_the_last_one(text: str) -> None:
    assert parse_review_verdict(text) is None
    assert (review_problem(text) or "").startswith("it states verdicts that disagree (")


def test_the_review_problem_says_what_is_wrong_with_a_reply() -> None:
    assert review_problem("VERDICT: APPROVED\nISSUES:\n") is None
    assert review_problem("Looks good to me.") == "it has no 'VERDICT: APPROVED|NEEDS_CHANGES|REJECTED' line"


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("VERDICT: APPROVED\nISSUES:\n\nTo repeat myself:\nVERDICT: APPROVED", "APPROVED"),
        ("APPROVED\n\nVERDICT: **approved**", "APPROVED"),
        ("VERDICT: NEEDS_CHANGES\nNEEDS CHANGES: see below\nISSUES:\n- add a test", "NEEDS_CHANGES"),
    ],
)
def test_the_same_verdict_stated_twice_is_that_verdict(text: str, verdict: str) -> None:
    result = parse_review_verdict(text)

    assert result is not None
    assert result.verdict == verdict


@pytest.mark.parametrize(
    "text",
    [
        # The contract's list of verdicts repeated, and issue items: list items are not verdicts.
        "- APPROVED: every criterion is met\n- NEEDS_CHANGES: concrete problems\nVERDICT: APPROVED",
        "VERDICT: APPROVED\nISSUES:\n- REJECTED: inputs over 10 characters are not handled",
        # Prose, a quoted contract line and a near miss state no verdict.
        "Rejected: nothing, the change is fine.\nVERDICT: APPROVED",
        "VERDICT: APPROVED|NEEDS_CHANGES|REJECTED\nVERDICT: APPROVED",
        "APPROVEDISH\nVERDICT: APPROVED",
        "I considered NEEDS_CHANGES, but no.\nVERDICT: APPROVED",
    ],
)
def test_lines_that_only_mention_a_verdict_do_not_disagree(text: str) -> None:
    result = parse_review_verdict(text)

    assert result is not None
    assert result.verdict == "APPROVED"


def test_a_malformed_last_verdict_is_not_rescued_by_an_earlier_one() -> None:
    assert parse_review_verdict("VERDICT: APPROVED\nVERDICT: probably fine") is None


EMPTY_ISSUES = ["ISSUES:", "ISSUES: none", "ISSUES:\n- none", "ISSUES: []", "ISSUES: N/A.", "ISSUES: (none)"]


@pytest.mark.parametrize("empty", EMPTY_ISSUES)
def test_approval_with_an_empty_issue_list(empty: str) -> None:
    assert parse_review_verdict(f"VERDICT: APPROVED\n{empty}\n") == ReviewParse("APPROVED", ())


def test_issues_may_come_before_the_verdict_and_inline() -> None:
    assert parse_review_verdict("ISSUES: the README is stale\nVERDICT: NEEDS_CHANGES") == ReviewParse(
        "NEEDS_CHANGES", ("the README is stale",)
    )


def test_issue_list_stops_at_prose_and_keeps_inline_markup() -> None:
    text = "ISSUES:\n1. `parse()` drops the last line\n* **blocker**: no test\n\nSummary: fine otherwise\n"

    result = parse_review_verdict(text + "VERDICT: NEEDS_CHANGES")

    assert result is not None
    assert result.issues == ("`parse()` drops the last line", "**blocker**: no test")


def test_a_verdict_note_naming_another_verdict_is_ambiguous() -> None:
    assert parse_review_verdict("VERDICT: APPROVED; not REJECTED") is None


# --- critic sounding board ----------------------------------------------------------------------------


def test_critic_diagnosis() -> None:
    text = """\
The three attempts fail on the same import.

**VERDICT:** NEEDS_REVISION
ISSUES:
- the task needs `requests`, which no earlier task adds
RECOMMENDATION: add a task that adds the dependency, and make 2.1 depend on it
LESSON: dependencies are declared in pyproject.toml, not requirements.txt
"""

    assert parse_critic_verdict(text) == CriticParse(
        verdict="NEEDS_REVISION",
        issues=("the task needs `requests`, which no earlier task adds",),
        recommendation="add a task that adds the dependency, and make 2.1 depend on it",
    )


def test_critic_without_recommendation_or_verdict() -> None:
    assert parse_critic_verdict("VERDICT: REJECTED") == CriticParse("REJECTED", (), None)
    assert parse_critic_verdict("RECOMMENDATION: retry") is None
    assert parse_critic_verdict("VERDICT: NEEDS_CHANGES") is None


# --- confidence, topic, files ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CONFIDENCE: HIGH", "HIGH"),
        ("- **Confidence:** medium - versions not checked", "MEDIUM"),
        ("CONFIDENCE: `LOW`.", "LOW"),
        ("CONFIDENCE: HIGH\nCONFIDENCE: LOW", "LOW"),
        ("CONFIDENCE: HIGH|MEDIUM|LOW", None),
        ("CONFIDENCE: very high", None),
        ("CONFIDENCE: 90%", None),
        ("I am fairly confident.", None),
    ],
)
def test_confidence(text: str, expected: str | None) -> None:
    assert parse_confidence(text) == expected


def test_topic() -> None:
    assert parse_topic("**TOPIC:** JWT validation with `PyJWT`\nfindings") == "JWT validation with `PyJWT`"
    assert parse_topic("TOPIC:\nfindings") is None
    assert parse_topic("no topic here") is None


def test_files_list_keeps_paths_once_in_order() -> None:
    text = """\
Findings...
FILES:
- `src/app/models.py` - the User model
- src/app/views.py:120 — the create view
- **tests/test_models.py**: model tests
- src/app/models.py
LESSON: tests use factories
"""

    assert parse_files(text) == ["src/app/models.py", "src/app/views.py", "tests/test_models.py"]


def test_inline_files_and_missing_files() -> None:
    assert parse_files("FILES: a.py, `b/c.py`") == ["a.py", "b/c.py"]
    assert parse_files("FILES: none") == []
    assert parse_files("no list") == []


# --- test results -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("RESULTS: passed=12 failed=0 total=12", (12, 0, 12)),
        ("**RESULTS:** passed = 3, failed = 1, total = 5.", (3, 1, 5)),
        ("`RESULTS: passed=2 failed=0 total=2`", (2, 0, 2)),
        ("- results: total=4 failed=1 passed=3", (3, 1, 4)),
        ("RESULTS: passed=0 failed=0 total=0", (0, 0, 0)),
        ("RESULTS: passed=1 failed=0 total=1\nre-ran:\nRESULTS: passed=0 failed=1 total=1", (0, 1, 1)),
    ],
)
def test_test_results(text: str, expected: tuple[int, int, int]) -> None:
    counts = parse_test_results(f"Added two tests.\n{text}\n")

    assert counts is not None
    assert (counts.passed, counts.failed, counts.total) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "All 12 tests pass.",
        "RESULTS: passed=N failed=M total=T",
        "RESULTS: passed=3 failed=1 total=3",
        "RESULTS: passed=-1 failed=0 total=0",
        "RESULTS: passed=1.5 failed=0 total=2",
        "RESULTS: passed=3 failed=0",
        "RESULTS: passed=3 passed=3 failed=0 total=3",
        "RESULTS: passed=3 failed=0 errors=2 total=5",
        "RESULTS: passed=3 failed=0 total=3 (estimated)",
        "RESULTS: about 3 passed",
        "RESULTS: passed=3 failed=0 total=3\nRESULTS: all green",
    ],
)
def test_missing_or_invalid_test_results_are_none(text: str) -> None:
    assert parse_test_results(text) is None


def test_counts_refuse_impossible_values() -> None:
    with pytest.raises(ValueError, match="smaller than passed"):
        parsing.TestCounts(passed=2, failed=1, total=2)
    with pytest.raises(ValueError, match="negative"):
        parsing.TestCounts(passed=-1, failed=0, total=0)


# --- lessons ------------------------------------------------------------------------------------------


def test_lessons_are_stripped_deduplicated_and_bounded() -> None:
    text = "\n".join(
        [
            "LESSON: run `make test`,  not   pytest",
            "- **LESSON:** Run `make test`, not pytest",
            "lesson: the API client retries on 429",
            "LESSON:",
            "LESSON: none",
            "Some prose mentioning LESSON: inline is not a lesson line",
            "LESSON: " + "x" * 1000,
        ]
    )

    lessons = parse_lessons(text)

    assert lessons[:2] == ["run `make test`, not pytest", "the API client retries on 429"]
    assert len(lessons) == 3
    assert len(lessons[2]) == LESSON_MAX_CHARS
    assert lessons[2].endswith("\u2026")


def test_no_lessons() -> None:
    assert parse_lessons("Implemented the task.") == []


# --- ranking ------------------------------------------------------------------------------------------

LABELS = ["A", "B", "AB"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("RANKING: AB > A > B", ["AB", "A", "B"]),
        ("RANKING: B, AB, A", ["B", "AB", "A"]),
        ("**RANKING:** `A` > **AB** > B.", ["A", "AB", "B"]),
        ("- Ranking: b > ab > a", ["B", "AB", "A"]),
        ("RANKING:A>B>AB", ["A", "B", "AB"]),
        ("RANKING: A > B > AB\nOn reflection AB is best.\nRANKING: AB > A > B", ["AB", "A", "B"]),
    ],
)
def test_ranking(text: str, expected: list[str]) -> None:
    assert parse_ranking(f"{text}\nAB keeps the tests of A.", LABELS) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "AB is best, then A, then B.",
        "RANKING: AB > A",
        "RANKING: AB > A > A",
        "RANKING: AB > A > B > C",
        "RANKING: AB > A > > B",
        "RANKING: AB > A > B (AB wins)",
        "RANKING: X > Y > Z",
        "RANKING: AB > A > B\nRANKING: AB first",
    ],
)
def test_invalid_ranking_is_none(text: str) -> None:
    assert parse_ranking(text, LABELS) is None


def test_labels_differing_only_in_case_must_match_exactly() -> None:
    assert parse_ranking("RANKING: a > A", ["A", "a"]) == ["a", "A"]
    assert parse_ranking("RANKING: A > A", ["A", "a"]) is None


@pytest.mark.parametrize("labels", [[], ["A", "A"], ["A", ""], [" A"], ["A>B"], ["A,B"], ["A\nB"]])
def test_unrankable_labels_are_a_caller_error(labels: list[str]) -> None:
    with pytest.raises(ValueError, match="label"):
        parse_ranking("RANKING: A", labels)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Done.\nCHANGED:\n- `src/a.py`\n- ./src/b.py - the entry point\n", ["src/a.py", "src/b.py"]),
        ("Done.\nCHANGED: src/a.py, src/b.py\nLESSON: x", ["src/a.py", "src/b.py"]),
        ("Done.\nCHANGED: none\n", []),
        ("Done, changed src/a.py.", None),
        ("CHANGED:\n- a.py\nlater\nCHANGED:\n- b.py\n- b.py\n", ["b.py"]),
    ],
)
def test_a_writers_changed_list_is_its_claim_and_its_absence_is_no_claim(
    text: str, expected: list[str] | None
) -> None:
    assert parsing.parse_changed(text) == expected
