"""``Task.detached_copy``: what ``model_copy(deep=True)`` gives, each mutable value the copy's own."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from autodev.state.schemas import AcceptanceCriterion, Task

_JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
_METADATA = st.dictionaries(
    st.text(max_size=5),
    st.recursive(
        _JSON_LEAVES,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=8,
    ),
    max_size=4,
)
_TASKS = st.builds(
    Task,
    id=st.text(min_size=1, max_size=5),
    phase_id=st.just("1"),
    title=st.text(max_size=10),
    files=st.lists(st.text(max_size=8), max_size=3),
    acceptance=st.lists(st.builds(AcceptanceCriterion, description=st.text(max_size=8)), max_size=3),
    depends_on=st.lists(st.text(max_size=4), max_size=3),
    metadata=_METADATA,
    last_issues=st.lists(st.text(max_size=8), max_size=2),
    base_commit=st.none() | st.just("a" * 40),
    retry_count=st.integers(min_value=0, max_value=5),
)


def _mutables(task: Task) -> dict[str, Any]:
    return {name: value for name, value in task.__dict__.items() if isinstance(value, list | dict)}


@given(_TASKS)
def test_a_detached_copy_equals_the_deep_copy(task: Task) -> None:
    copied = task.detached_copy()
    deep = task.model_copy(deep=True)
    assert copied == deep == task
    assert copied.model_fields_set == task.model_fields_set
    assert copied.model_dump_json() == task.model_dump_json()


@given(_TASKS)
def test_nothing_done_to_the_copy_reaches_the_task(task: Task) -> None:
    before = task.model_dump()
    copied = task.detached_copy()
    for name, value in _mutables(copied).items():
        assert value is not getattr(task, name), name
    copied.files.append("new.py")
    copied.depends_on.append("9.9")
    copied.last_issues.append("an issue")
    copied.metadata["added"] = {"nested": [1]}
    for nested in copied.metadata.values():
        if isinstance(nested, list):
            nested.append("x")
        elif isinstance(nested, dict):
            nested["x"] = 1
    for criterion in copied.acceptance:
        criterion.met = not criterion.met
    copied.status = "complete"
    assert task.model_dump() == before


def test_a_nested_list_of_lists_is_copied_through() -> None:
    task = Task(id="1.1", phase_id="1", title="t", metadata={"runs": [[1, 2], [3]]})
    copied = task.detached_copy()
    copied.metadata["runs"][0].append(9)
    assert task.metadata == {"runs": [[1, 2], [3]]}
