"""Progress events: what the orchestrator tells a listener (the CLI's live display) as it works.

The orchestrator never prints; it emits ``ProgressEvent``s to an optional listener and logs structured
events. A listener must be quick and must not raise (an exception from it is logged and ignored).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from autodev.logging import get_logger

__all__ = ["EventKind", "ProgressEvent", "ProgressListener", "deliver"]

EventKind = Literal[
    "phase",  # plan phase / execute phase started or finished
    "task_started",  # a task left pending and began; ``details`` holds its worktree path when isolated
    "step_started",  # an agent call, a gate run or a commit began for a task
    "step_finished",  # ... and ended (``ok`` says how)
    "task_finished",  # a task reached complete or blocked
    "retry",  # a task goes back to the developer with concrete failures
    "suspended",  # the run stops, resumable (inline delegation, approval, budget)
    "waiting",  # a task's call waits in the delegation policy's queue (for a worker, a lease)
    "note",  # anything else worth a line (a skipped tournament, a resumed step)
]


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    kind: EventKind
    message: str
    task_id: str | None = None
    step: str | None = None
    attempt: int | None = None
    ok: bool | None = None
    cost_usd: float | None = None
    details: tuple[str, ...] = field(default_factory=tuple)


ProgressListener = Callable[[ProgressEvent], None]


_log = get_logger("autodev.orchestrator")


def deliver(listener: ProgressListener | None, event: ProgressEvent) -> None:
    """Hand ``event`` to ``listener``, if any; a failing listener is logged and never stops the run."""
    if listener is None:
        return
    try:
        listener(event)
    except Exception:
        _log.exception("orchestrator.listener_failed", kind=event.kind)
