"""Where a task's work lives, and how an isolated task's change reaches the main tree (seed 001, 5.6).

With one task at a time, a task works *in place*: in the user's main tree, committed there when complete.
With several at once, each task works in its own detached worktree from the main tree's HEAD at the time
it started, and its finished change is *integrated* in completion order, one task at a time:

1. the change is committed inside the task's worktree, and the commit is pinned by the ref
   ``refs/autodev/tasks/<task id>`` so that a crash at any later point cannot lose it;
2. if the main tree moved on meanwhile, the commit is replayed on the new HEAD by a 3-way merge in git's
   object store (``merge-tree``); the main tree is never touched by a merge that might conflict;
3. the main tree fast-forwards to the commit, which git refuses rather than overwrite anything.

A conflict in step 2 is reported with the conflicting paths; the caller sends the task back to the
developer on the new base, with its old change re-applied (conflict markers included), so no change is
ever silently dropped. Every step is idempotent: a run killed anywhere in here redoes the integration and
ends with the same single commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autodev.errors import AutodevError
from autodev.logging import get_logger
from autodev.orchestrator.git import GitRepo
from autodev.state.schemas import Task

if TYPE_CHECKING:
    from autodev.orchestrator.core import Orchestrator

__all__ = [
    "TASK_REF_PREFIX",
    "Integrated",
    "IntegrationConflict",
    "MainTreeChangedError",
    "TaskWorkspace",
    "commit_message",
    "integrate",
    "rebase_after_conflict",
    "task_ref",
]

TASK_REF_PREFIX = "refs/autodev/tasks/"
_log = get_logger("autodev.workspace")


class MainTreeChangedError(AutodevError):
    """The main tree has changes AutoDev did not make where a finished task must land; the run stops."""


@dataclass(frozen=True, slots=True)
class TaskWorkspace:
    """The working tree a task's agents, gates and diffs use: the main tree, or the task's worktree."""

    root: Path
    git: GitRepo
    isolated: bool = False


@dataclass(frozen=True, slots=True)
class Integrated:
    commit: str


@dataclass(frozen=True, slots=True)
class IntegrationConflict:
    """The task's change no longer applies on the main tree's HEAD ``head``."""

    head: str
    paths: tuple[str, ...]
    commit: str


def task_ref(task_id: str) -> str:
    return TASK_REF_PREFIX + task_id


def commit_message(task: Task) -> str:
    return f"autodev: {task.id} {task.title}"


async def _task_commit(workspace: TaskWorkspace, task: Task) -> str | None:
    """The task's committed change: pinned by its ref, or committed now (None: the tree has no change)."""
    git = workspace.git
    pinned = await git.resolve(task_ref(task.id))
    if pinned is not None:
        return pinned
    message = commit_message(task)
    commit = await git.commit_all(message)
    if commit is None:
        # Nothing left to commit: a run killed between the commit and the ref left the commit as HEAD.
        head = await git.head()
        parent = await git.resolve(f"{head}^") if head is not None else None
        if head is None or parent is None or parent != task.base_commit or await git.subject(head) != message:
            return None
        commit = head
    await git.set_ref(task_ref(task.id), commit)
    return commit


async def _land_on_main(orch: Orchestrator, commit: str, head: str) -> None:
    """Fast-forward the main tree from ``head`` to ``commit``, repairing a fast-forward a kill cut short."""
    main = orch.git
    if await main.fast_forward(commit):
        return
    dirty = await main.dirty_paths()
    touched = set(await main.changed_paths(head, commit))
    foreign = sorted(set(dirty) - touched)
    if foreign or not dirty:
        detail = f" ({', '.join(foreign[:5])}{'...' if len(foreign) > 5 else ''})" if foreign else ""
        raise MainTreeChangedError(
            f"{orch.repo_root} has changes AutoDev did not make{detail}, so task commit {commit[:10]} "
            "cannot be fast-forwarded onto it; commit or stash them, then run `autodev resume`"
        )
    # Only paths this fast-forward writes are dirty: what a killed fast-forward left half done.
    _log.warning("workspace.repair_interrupted_merge", paths=sorted(dirty))
    await main.restore_paths(head, sorted(dirty))
    if not await main.fast_forward(commit):
        raise MainTreeChangedError(f"the fast-forward of {orch.repo_root} to {commit[:10]} failed twice")


async def integrate(
    orch: Orchestrator, workspace: TaskWorkspace, task: Task
) -> Integrated | IntegrationConflict:
    """Bring an isolated task's finished change onto the main tree (see the module docstring).

    The caller holds the integration lock: the main tree's HEAD does not move underneath.
    """
    git = workspace.git
    await git.abort_cherry_pick()
    commit = await _task_commit(workspace, task)
    if commit is None:
        raise AutodevError(f"task {task.id}: its worktree holds no change to integrate")
    head = await orch.git.ensure_base_commit()
    if commit == head:
        return Integrated(commit)  # landed by a run that was killed before recording it
    if await git.resolve(f"{commit}^") != head:
        if await orch.git.is_ancestor(commit, head):
            return Integrated(commit)  # landed, and other tasks landed after it, before a kill
        replayed = await git.replay(commit, head, commit_message(task))
        if isinstance(replayed, list):
            return IntegrationConflict(head, tuple(replayed), commit)
        await git.set_ref(task_ref(task.id), replayed)
        commit = replayed
    await _land_on_main(orch, commit, head)
    return Integrated(commit)


async def rebase_after_conflict(workspace: TaskWorkspace, conflict: IntegrationConflict) -> bool:
    """Reset the worktree to the new base and re-apply the old change with conflict markers.

    Returns whether it applied without conflicts. The pinned ref is left for the caller to drop once the
    retry is recorded: until then, a rerun of the integration reproduces the same conflict.
    """
    patch = await workspace.git.commit_patch(conflict.commit)
    await workspace.git.checkout_detached(conflict.head)
    return await workspace.git.apply_three_way(patch)
