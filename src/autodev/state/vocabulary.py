"""The task statuses, once: what every layer (the state, the status object, the dispatcher, the CLI) calls
a task's progress. Imports nothing, so that anything may import it."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["DONE_STATUSES", "IN_FLIGHT_STATUSES", "TASK_STATUSES", "TERMINAL_STATUSES", "TaskStatus"]

TaskStatus = Literal[
    "pending",
    "in_progress",
    "coded",
    "auto_gated",
    "reviewed",
    "tested",
    "tournamented",
    "complete",
    "blocked",
    "skipped",
]

TASK_STATUSES: tuple[TaskStatus, ...] = get_args(TaskStatus)
"""Every status, in the order a task goes through them."""

IN_FLIGHT_STATUSES: tuple[TaskStatus, ...] = TASK_STATUSES[1:7]
"""Started and not yet terminal: the task holds its files (and maybe a worktree) until it finishes."""

DONE_STATUSES: frozenset[TaskStatus] = frozenset({"complete", "skipped"})
"""Finished in a way that lets the tasks depending on it go on."""

TERMINAL_STATUSES: frozenset[TaskStatus] = DONE_STATUSES | {"blocked"}
"""Never runs again on its own; ``blocked`` only leaves through an explicit retry or resume."""
