"""Saving, loading and clearing the inline suspend state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autodev.errors import InlineStateError
from autodev.orchestrator.inline_state import (
    InlineSuspendState,
    clear_suspend_state,
    load_suspend_state,
    write_suspend_state,
)
from autodev.state.paths import AutodevPaths


@pytest.fixture
def paths(tmp_path: Path) -> AutodevPaths:
    return AutodevPaths(repo_root=tmp_path)


def _state(**changes: object) -> InlineSuspendState:
    data: dict[str, object] = {
        "session_id": "sess-1",
        "phase": "execute",
        "pending_task_id": "1.2",
        "pending_role": "reviewer",
        "delegation_path": ".autodev/delegations/1.2-reviewer.md",
        "response_path": ".autodev/responses/1.2-reviewer.json",
        "orchestrator_step": "review",
        "attempt": 2,
        "retry_count": 1,
        "last_issues": ["missing test for empty input"],
        "created_at": "2024-05-01T12:00:00+00:00",
        "metadata": {"model": "inline", "budget": {"usd": 1.5}},
    }
    data.update(changes)
    return InlineSuspendState.model_validate(data)


def test_round_trip(paths: AutodevPaths) -> None:
    state = _state()

    written = write_suspend_state(paths, state)

    assert written == paths.inline_state
    assert written.is_file()
    assert load_suspend_state(paths) == state


def test_write_replaces_the_previous_state(paths: AutodevPaths) -> None:
    write_suspend_state(paths, _state())
    newer = _state(pending_task_id="1.3", attempt=1, retry_count=0, last_issues=[])

    write_suspend_state(paths, newer)

    assert load_suspend_state(paths) == newer
    assert [p.name for p in paths.state_dir.iterdir()] == ["inline-state.json"]


def test_absent_file_loads_as_none(paths: AutodevPaths) -> None:
    assert load_suspend_state(paths) is None


def test_malformed_json_names_the_file(paths: AutodevPaths) -> None:
    paths.state_dir.mkdir()
    paths.inline_state.write_text('{"session_id": ', encoding="utf-8")

    with pytest.raises(InlineStateError) as info:
        load_suspend_state(paths)

    assert "inline-state.json" in info.value.message
    assert "not valid JSON" in info.value.message


def test_unknown_field_names_the_file_and_the_field(paths: AutodevPaths) -> None:
    data = json.loads(_state().model_dump_json())
    data["pending_rol"] = "reviewer"
    paths.state_dir.mkdir()
    paths.inline_state.write_text(json.dumps(data), encoding="utf-8")

    with pytest.raises(InlineStateError) as info:
        load_suspend_state(paths)

    assert "inline-state.json" in info.value.message
    assert "'pending_rol'" in info.value.message


@pytest.mark.parametrize(
    ("field", "value"),
    [("attempt", 0), ("retry_count", -1), ("phase", "review")],
)
def test_out_of_range_value_names_the_field(paths: AutodevPaths, field: str, value: object) -> None:
    data = json.loads(_state().model_dump_json())
    data[field] = value
    paths.state_dir.mkdir()
    paths.inline_state.write_text(json.dumps(data), encoding="utf-8")

    with pytest.raises(InlineStateError) as info:
        load_suspend_state(paths)

    assert f"field {field!r}" in info.value.message


def test_clear(paths: AutodevPaths) -> None:
    write_suspend_state(paths, _state())

    assert clear_suspend_state(paths) is True
    assert load_suspend_state(paths) is None
    assert clear_suspend_state(paths) is False


@pytest.mark.parametrize(("field", "value"), [("attempt", 0), ("retry_count", -1)])
def test_model_rejects_out_of_range_counters(field: str, value: int) -> None:
    with pytest.raises(ValueError, match=field):
        _state(**{field: value})


def test_json_that_is_not_an_object_is_rejected(paths: AutodevPaths) -> None:
    paths.state_dir.mkdir()
    paths.inline_state.write_text("[]", encoding="utf-8")

    with pytest.raises(InlineStateError) as info:
        load_suspend_state(paths)

    assert "inline-state.json: top level" in info.value.message
