"""Hypothesis: whatever agents write, the knowledge store stays bounded and free of duplicates."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from autodev.state.knowledge import KnowledgeStore
from autodev.state.paths import AutodevPaths

# A small vocabulary so that the same lesson keeps coming back in other spellings and decorations.
_WORDS = ["Ledger", "lock", "tests", "need", "ruff", "run", "first", "cache"]
_lesson_body = st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join)
_case = st.sampled_from([str, str.upper, str.lower])
_decoration = st.sampled_from(["{}", "- {}", "* **{}**", "> {}", "1. {}", "  {}  ", "**{}**"])
_lesson_line = st.builds(
    lambda body, case, decoration, key, dot: decoration.format(f"{key}: {case(body)}{dot}"),
    _lesson_body,
    _case,
    _decoration,
    st.sampled_from(["LESSON", "lesson", "Lesson"]),
    st.sampled_from(["", ".", " "]),
)
_line = st.one_of(_lesson_line, st.text(max_size=40))
_output = st.lists(_line, max_size=6).map("\n".join)


@settings(max_examples=80, deadline=None)
@given(outputs=st.lists(_output, max_size=12), max_lessons=st.integers(min_value=1, max_value=5))
def test_store_is_bounded_and_never_holds_duplicates(outputs: list[str], max_lessons: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = AutodevPaths(Path(tmp))
        store = KnowledgeStore(paths, max_lessons=max_lessons)
        for index, text in enumerate(outputs):
            store.add_from_text(text, role="developer", task_id=f"1.{index}")
            held = store.lessons()
            assert len(held) <= max_lessons
            keys = [lesson.key for lesson in held]
            assert len(keys) == len(set(keys))
        reopened = KnowledgeStore(paths, max_lessons=max_lessons).lessons()
        assert [lesson.model_dump() for lesson in reopened] == [
            lesson.model_dump() for lesson in store.lessons()
        ]
