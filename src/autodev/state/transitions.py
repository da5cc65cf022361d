"""The task state machine: its transition table and its checks.

It lives in the state layer because `PlanManager` (state) validates every status change with it, and state
imports nothing above it; `autodev.orchestrator` re-exports it beside the phases that drive it.
"""

from __future__ import annotations

from collections.abc import Mapping

from autodev.errors import InvalidTransitionError
from autodev.state.vocabulary import TASK_STATUSES, TaskStatus

__all__ = ["TASK_TRANSITIONS", "assert_transition", "can_transition"]

TASK_TRANSITIONS: Mapping[TaskStatus, frozenset[TaskStatus]] = {
    "pending": frozenset({"in_progress", "skipped", "blocked"}),
    # The self-loop is the retry bookkeeping edge: a failed step sends the task back to the developer.
    "in_progress": frozenset({"coded", "blocked", "in_progress"}),
    "coded": frozenset({"auto_gated", "in_progress", "blocked"}),
    "auto_gated": frozenset({"reviewed", "in_progress", "blocked"}),
    "reviewed": frozenset({"tested", "in_progress", "blocked"}),
    "tested": frozenset({"tournamented", "in_progress", "blocked"}),
    # Beyond the original design: a parallel task whose finished change no longer merges onto the main tree
    # (a conflict with work merged meanwhile) goes back to the developer on the new base (ADR 0009).
    "tournamented": frozenset({"complete", "in_progress", "blocked"}),
    "complete": frozenset(),
    "blocked": frozenset({"in_progress"}),
    "skipped": frozenset(),
}


def can_transition(current: str, target: str) -> bool:
    """True when ``current -> target`` is an edge of ``TASK_TRANSITIONS`` (unknown statuses: False)."""
    allowed = TASK_TRANSITIONS.get(current)  # type: ignore[call-overload]
    return allowed is not None and target in allowed


def assert_transition(current: str, target: str, *, task_id: str | None = None) -> None:
    """Raise ``InvalidTransitionError`` unless ``current -> target`` is allowed."""
    if can_transition(current, target):
        return
    allowed = sorted(TASK_TRANSITIONS.get(current, ()))  # type: ignore[call-overload]
    if current not in TASK_STATUSES:
        allowed = []
    raise InvalidTransitionError(task_id, current, target, allowed)
