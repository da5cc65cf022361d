"""TASK_TRANSITIONS exactly as seed 001 section 3.4, checked edge by edge."""

from __future__ import annotations

import itertools

import pytest

from autodev.errors import InvalidTransitionError
from autodev.state.transitions import TASK_TRANSITIONS, assert_transition, can_transition
from autodev.state.vocabulary import TASK_STATUSES

SEED_TABLE = {
    "pending": {"in_progress", "skipped", "blocked"},
    "in_progress": {"coded", "blocked", "in_progress"},
    "coded": {"auto_gated", "in_progress", "blocked"},
    "auto_gated": {"reviewed", "in_progress", "blocked"},
    "reviewed": {"tested", "in_progress", "blocked"},
    "tested": {"tournamented", "in_progress", "blocked"},
    "tournamented": {"complete", "in_progress", "blocked"},
    "complete": set(),
    "blocked": {"in_progress"},
    "skipped": set(),
}


def test_table_is_the_seed_table() -> None:
    assert {k: set(v) for k, v in TASK_TRANSITIONS.items()} == SEED_TABLE
    assert set(TASK_TRANSITIONS) == set(TASK_STATUSES)


@pytest.mark.parametrize(("current", "target"), list(itertools.product(TASK_STATUSES, repeat=2)))
def test_every_pair(current: str, target: str) -> None:
    allowed = target in SEED_TABLE[current]
    assert can_transition(current, target) is allowed
    if allowed:
        assert_transition(current, target)
    else:
        with pytest.raises(InvalidTransitionError) as info:
            assert_transition(current, target, task_id="2.1")
        message = str(info.value)
        assert "task 2.1" in message and repr(current) in message and repr(target) in message


def test_unknown_statuses_are_refused_with_a_clear_message() -> None:
    assert not can_transition("done", "complete")
    assert not can_transition("pending", "done")
    with pytest.raises(InvalidTransitionError, match="allowed from 'done': none"):
        assert_transition("done", "complete")


def test_terminal_statuses_say_so() -> None:
    with pytest.raises(InvalidTransitionError, match=r"none \(terminal status\)"):
        assert_transition("complete", "pending")
