"""KnowledgeStore: LESSON: lines stored de-duplicated and bounded, ranked for later prompts, never fatal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autodev.state.knowledge import INJECT_HEADER, KnowledgeStore, Lesson
from autodev.state.paths import AutodevPaths

DEVELOPER_OUTPUT = """\
Implemented the parser.

LESSON: the test suite needs --import-mode=importlib
- LESSON: Ledger appends must hold the .autodev lock
* **LESSON:** pydantic models here forbid extra keys
**LESSON**: `ruff format` runs before ruff check
> lesson: quote markers are fine too
1. LESSON: numbered bullets work
**LESSON: a fully bold line loses its bold**
LESSON: none
LESSON:
The word LESSON: in the middle of a sentence is not a lesson line.
"""


@pytest.fixture
def paths(repo: Path) -> AutodevPaths:
    return AutodevPaths(repo)


def test_extracts_lesson_lines_whatever_their_decoration(paths: AutodevPaths) -> None:
    store = KnowledgeStore(paths)
    added = store.add_from_text(DEVELOPER_OUTPUT, role="developer", task_id="1.1")
    assert [lesson.text for lesson in added] == [
        "the test suite needs --import-mode=importlib",
        "Ledger appends must hold the .autodev lock",
        "pydantic models here forbid extra keys",
        "`ruff format` runs before ruff check",
        "quote markers are fine too",
        "numbered bullets work",
        "a fully bold line loses its bold",
    ]
    assert all(lesson.role == "developer" and lesson.task_id == "1.1" for lesson in added)
    assert store.add_from_text("no lessons here", role="reviewer", task_id="1.1") == []


def test_long_lessons_are_cut_to_max_chars(paths: AutodevPaths) -> None:
    store = KnowledgeStore(paths, max_chars=20)
    (lesson,) = store.add_from_text("LESSON: " + "word " * 20, role="critic_sounding_board", task_id="1.1")
    assert len(lesson.text) <= 20
    assert lesson.text.endswith("\u2026")


def test_a_lesson_seen_again_is_bumped_not_duplicated(paths: AutodevPaths) -> None:
    store = KnowledgeStore(paths)
    store.add_from_text("LESSON: Run make test, not pytest.", role="developer", task_id="1.1")
    store.add_from_text("LESSON: other thing", role="developer", task_id="1.1")
    (again,) = store.add_from_text("- LESSON:   run MAKE test,  not pytest", role="reviewer", task_id="1.2")

    assert len(store) == 2
    assert again.count == 2
    assert again.text == "Run make test, not pytest."  # the first wording and origin are kept
    assert (again.role, again.task_id) == ("developer", "1.1")
    assert store.lessons()[0].text == "Run make test, not pytest."  # now the most recently seen
    # Within one output, a repeated lesson counts once.
    (once,) = store.add_from_text("LESSON: twice\nLESSON: Twice.", role="developer", task_id="1.3")
    assert once.count == 1


def test_the_least_recently_seen_lessons_are_evicted_beyond_the_bound(paths: AutodevPaths) -> None:
    store = KnowledgeStore(paths, max_lessons=3)
    for name in ("alpha", "bravo", "charlie"):
        store.add_from_text(f"LESSON: {name} lesson", role="developer", task_id="1.1")
    store.add_from_text("LESSON: alpha lesson", role="reviewer", task_id="1.2")  # alpha is fresh again
    store.add_from_text("LESSON: delta lesson", role="developer", task_id="1.3")

    expected = ["delta lesson", "alpha lesson", "charlie lesson"]
    assert [lesson.text for lesson in store.lessons()] == expected
    reopened = KnowledgeStore(paths, max_lessons=3)
    assert [lesson.text for lesson in reopened.lessons()] == expected


def test_relevance_ranks_by_overlap_then_count_then_recency(paths: AutodevPaths) -> None:
    store = KnowledgeStore(paths)
    store.add_from_text("LESSON: ledger appends need the lock", role="developer", task_id="1.1")
    store.add_from_text("LESSON: snapshot writes are atomic", role="developer", task_id="1.1")
    store.add_from_text("LESSON: ledger replay is slow on big plans", role="reviewer", task_id="1.2")
    store.add_from_text("LESSON: ledger hashes use sha256", role="reviewer", task_id="1.2")
    store.add_from_text("LESSON: ledger hashes use sha256", role="developer", task_id="1.3")
    store.add_from_text("LESSON: colours in the CLI come from rich", role="developer", task_id="1.3")

    ranked = store.relevant("Make ledger appends faster", files=["src/autodev/state/ledger.py"])
    assert [lesson.text for lesson in ranked] == [
        "ledger appends need the lock",  # shares "ledger" and "appends"
        "ledger hashes use sha256",  # shares "ledger", seen twice
        "ledger replay is slow on big plans",  # shares "ledger", seen once
    ]
    assert store.relevant("Make ledger appends faster", files=["src/autodev/state/ledger.py"]) == ranked
    assert [lesson.text for lesson in store.relevant("ledger", limit=1)] == ["ledger hashes use sha256"]
    # Of two lessons equal in overlap and count, the more recently seen comes first.
    store.add_from_text("LESSON: ledger replay is slow on big plans", role="developer", task_id="1.4")
    assert [lesson.text for lesson in store.relevant("ledger", limit=2)] == [
        "ledger replay is slow on big plans",
        "ledger hashes use sha256",
    ]


def test_inject_block_lists_relevant_lessons_or_is_empty(paths: AutodevPaths) -> None:
    store = KnowledgeStore(paths)
    assert store.inject_block("anything at all") == ""
    store.add_from_text("LESSON: ledger appends need the lock", role="developer", task_id="1.1")
    store.add_from_text("LESSON: snapshot writes are atomic", role="developer", task_id="1.1")

    assert store.inject_block("Rework the CLI colours") == ""
    assert store.inject_block("the and for") == ""  # stop words relate nothing
    assert store.inject_block("Speed up ledger appends") == (
        f"{INJECT_HEADER}\n- ledger appends need the lock"
    )
    # One word each in common (the second through the file path): the more recently seen comes first.
    block = store.inject_block("ledger", files=["src/autodev/state/snapshot.py"])
    assert block.splitlines() == [
        "LESSONS FROM EARLIER TASKS:",
        "- snapshot writes are atomic",
        "- ledger appends need the lock",
    ]


def test_lessons_survive_reopening(paths: AutodevPaths) -> None:
    store = KnowledgeStore(paths)
    store.add_from_text("LESSON: first\nLESSON: second", role="test_engineer", task_id="2.1")
    store.add_from_text("LESSON: first", role="critic_sounding_board", task_id="2.2")

    reopened = KnowledgeStore(paths)
    assert [lesson.model_dump() for lesson in reopened.lessons()] == [
        lesson.model_dump() for lesson in store.lessons()
    ]
    # The logical clock carries on from the stored lessons.
    (third,) = reopened.add_from_text("LESSON: third", role="developer", task_id="2.3")
    assert third.last_seen > max(lesson.last_seen for lesson in store.lessons())
    assert (paths.state_dir / ".gitignore").exists()


def test_a_corrupt_file_is_moved_aside_and_the_store_starts_empty(paths: AutodevPaths) -> None:
    knowledge = paths.state_dir / "knowledge.json"
    knowledge.parent.mkdir(parents=True)
    for broken in ("{not json", json.dumps({"version": 1, "lessons": [{"text": "x", "bogus": 1}]})):
        knowledge.write_text(broken)
        store = KnowledgeStore(paths)
        assert len(store) == 0
        assert not knowledge.exists()
    moved = sorted(path.read_text() for path in paths.state_dir.glob("knowledge.json.corrupt-*"))
    assert len(moved) == 2
    assert "{not json" in moved

    store.add_from_text("LESSON: fresh start", role="developer", task_id="1.1")
    assert [lesson.text for lesson in KnowledgeStore(paths).lessons()] == ["fresh start"]


def test_a_hand_edited_file_with_a_repeated_lesson_is_merged(paths: AutodevPaths) -> None:
    knowledge = paths.state_dir / "knowledge.json"
    knowledge.parent.mkdir(parents=True)
    lessons = [
        Lesson(text="Same lesson", role="developer", task_id="1.1", count=2, last_seen=3),
        Lesson(text="same lesson.", role="reviewer", task_id="1.2", count=1, last_seen=5),
    ]
    knowledge.write_text(json.dumps({"version": 1, "lessons": [lesson.model_dump() for lesson in lessons]}))

    (merged,) = KnowledgeStore(paths).lessons()
    assert (merged.text, merged.count, merged.last_seen) == ("Same lesson", 3, 5)


def test_bounds_must_be_positive(paths: AutodevPaths) -> None:
    with pytest.raises(ValueError, match="max_lessons"):
        KnowledgeStore(paths, max_lessons=0)
    with pytest.raises(ValueError, match="max_chars"):
        KnowledgeStore(paths, max_chars=1)
