"""Verified changes that wait to be adopted into the main checkout.

A task that works in a worktree of its own (several tasks at once, or ``write_mode = isolated``) ends with
its verified change as one commit, which lands on the main checkout as a strict fast-forward. When that
would touch somebody's work (a file the user created where the task adds one, an uncommitted edit of a
file it changes: ``MainTreeChangedError``), the change is not dropped and the run does not stop: it waits,
durably, as ``pending_adoption``, kept under ``refs/autodev/adopt/<task>`` (so it needs neither the worktree
nor the run that made it), while the tasks that do not depend on it go on. Its dependents wait with it.

- Each later run (``autodev resume`` / ``execute``) tries to adopt it once, first; so does ``autodev adopt
  TASK`` at any time no run is live. Adoption replays the commit onto the branch when the branch moved (in
  git's object store only) and fast-forwards the main checkout, refusing rather than overwriting; the task
  then completes like any other (``adopted``).
- ``autodev discard TASK`` gives it up: the task is blocked (``discarded``) and its change kept as a
  blocked task's is, so ``autodev retry`` continues from it.
- A run that leaves a change waiting never reports success: it ends with exit 3 naming the tasks and the
  commands (``AdoptionPendingError``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autodev.errors import EXIT_SUSPENDED, AutodevError
from autodev.logging import get_logger
from autodev.orchestrator.events import ProgressEvent
from autodev.orchestrator.execute.task_flow import TaskContext, block_task, hold_for_adoption, record_complete
from autodev.state.plan_manager import AdoptionRecord
from autodev.workspace.integration import (
    IntegrationConflict,
    MainTreeChangedError,
    TaskCommit,
    TaskWorkspace,
    adoption_ref,
    blocked_ref,
    integrate,
)

if TYPE_CHECKING:
    from autodev.orchestrator.run_context import RunContext

__all__ = ["AdoptionPendingError", "AdoptionRefusedError", "adopt", "discard", "pending_message"]

_log = get_logger("autodev.adoption")


class AdoptionPendingError(AutodevError):
    """The run ended with verified changes that wait to be adopted: it did not succeed."""

    exit_code = EXIT_SUSPENDED


class AdoptionRefusedError(AutodevError):
    """``autodev adopt`` could not land the change; it still waits, nothing lost."""


def pending_message(records: list[AdoptionRecord]) -> str:
    """The one line a run that leaves changes waiting ends with."""
    ids = ", ".join(record.task_id for record in records)
    first = records[0].task_id
    return (
        f"{len(records)} verified change(s) wait for adoption ({ids}): {first}: {records[0].reason}; "
        f"`autodev adopt {first}` lands it once that is sorted out, `autodev discard {first}` gives it up "
        "(the task is blocked, its change kept for `autodev retry`)"
    )


async def adopt(session: RunContext, task_id: str, ctx: TaskContext) -> bool:
    """Land ``task_id``'s waiting change on the main checkout and complete the task; False (and the new
    reason recorded) when it still cannot land. The caller holds the integration lock."""
    pm = session.plan_manager
    record = pm.adoption(task_id)
    if record is None or record.state != "pending_adoption":
        raise AutodevError(f"task {task_id} has no change waiting for adoption")
    task = pm.get_task(task_id)
    git = session.git
    if await git.resolve(f"{record.commit}^{{commit}}") is None:
        # The ref and the commit are gone (a user's gc, a deleted ref): nothing left to adopt.
        block_task(session, task_id, f"discarded: its verified change {record.commit[:10]} no longer exists")
        return False
    workspace = TaskWorkspace(session.repo_root, git, isolated=True)
    try:
        outcome = await integrate(git, workspace, task, TaskCommit(record.commit))
    except MainTreeChangedError as exc:
        await hold_for_adoption(session, task, record.commit, exc.message)
        return False
    if isinstance(outcome, IntegrationConflict):
        paths = ", ".join(outcome.paths[:10])
        reason = (
            f"it conflicts with what landed since ({paths}): `autodev discard {task_id}` and "
            f"`autodev retry {task_id}` redo it on the current code"
        )
        await hold_for_adoption(session, task, record.commit, reason)
        return False
    patch = await git.commit_patch(outcome.commit)
    pm.record_patch(task_id, patch, attempt=task.retry_count + 1)
    await record_complete(session, task, outcome.commit, patch, ctx, pinned=True)
    await git.delete_ref(adoption_ref(task_id))
    _log.info("adoption.adopted", task_id=task_id, commit=outcome.commit)
    session.emit(ProgressEvent("note", f"adopted its verified change ({outcome.commit[:10]})", task_id))
    return True


async def discard(session: RunContext, task_id: str, reason: str) -> None:
    """Give up ``task_id``'s waiting change: the task is blocked, the change kept for ``autodev retry``."""
    pm = session.plan_manager
    record = pm.adoption(task_id)
    if record is None or record.state != "pending_adoption":
        raise AutodevError(f"task {task_id} has no change waiting for adoption")
    await session.git.set_ref(blocked_ref(task_id), record.commit)
    block_task(session, task_id, f"discarded: {reason}")
    await session.git.delete_ref(adoption_ref(task_id))
