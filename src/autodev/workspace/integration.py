"""Where a task's work lives, and how an isolated task's change reaches the main tree.

With one task at a time, a task works *in place*: in the user's main tree, committed there when complete.
With several at once, each task works in its own detached worktree from the main tree's HEAD at the time
it started, and its finished change is *integrated* in completion order, one task at a time:

1. the change is committed inside the task's worktree (where it stays the worktree's HEAD);
2. if the main tree moved on meanwhile, the commit is replayed on the new HEAD by a 3-way merge in git's
   object store (``merge-tree``); the main tree is never touched by a merge that might conflict. The
   replay is made ahead, before the one-at-a-time part (``prepare_landing``), and made again there only
   when another task landed in between;
3. the main tree fast-forwards to the commit, which git refuses rather than overwrite anything.

A conflict in step 2 is reported with the conflicting paths; the caller sends the task back to the
developer on the new base, with its old change re-applied (conflict markers included), so no change is
ever silently dropped. Every step is idempotent: a run killed anywhere in here redoes the integration and
ends with the same single commit: a rerun recognises a landed task by its commit subject
(``autodev: <id> <title>``) between the task's base and HEAD.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from autodev.errors import AutodevError
from autodev.logging import get_logger
from autodev.state.paths import AutodevPaths
from autodev.state.schemas import Task
from autodev.workspace.git import GitRepo

__all__ = [
    "ADOPTION_REF_PREFIX",
    "BASE_REF_PREFIX",
    "BLOCKED_REF_PREFIX",
    "TASK_REF_PREFIX",
    "Integrated",
    "IntegrationConflict",
    "Landing",
    "MainTreeChangedError",
    "TaskCommit",
    "TaskWorkspace",
    "adoption_ref",
    "base_ref",
    "blocked_ref",
    "commit_message",
    "commit_task",
    "integrate",
    "land_on_main",
    "main_tree_base",
    "park_change",
    "prepare_landing",
    "rebase_after_conflict",
    "task_ref",
    "unpark_change",
]

TASK_REF_PREFIX = "refs/autodev/tasks/"
ADOPTION_REF_PREFIX = "refs/autodev/adopt/"
BLOCKED_REF_PREFIX = "refs/autodev/blocked/"
BASE_REF_PREFIX = "refs/autodev/bases/"
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
class TaskCommit:
    """An isolated task's change as one commit. ``parent`` is known when it was just made; ``pinned``: it
    is held by the task's ref (a ref that must be dropped once the task is recorded complete)."""

    commit: str
    parent: str | None = None
    pinned: bool = False


@dataclass(frozen=True, slots=True)
class Integrated:
    commit: str
    pinned: bool = False


@dataclass(frozen=True, slots=True)
class Landing:
    """A task's commit made ready, before the integration lock, to land on ``onto`` (``prepare_landing``)."""

    onto: str
    commit: str


@dataclass(frozen=True, slots=True)
class IntegrationConflict:
    """The task's change no longer applies on the main tree's HEAD ``head``."""

    head: str
    paths: tuple[str, ...]
    commit: str


def adoption_ref(task_id: str) -> str:
    """The ref that keeps a verified change waiting to be adopted."""
    return ADOPTION_REF_PREFIX + task_id


def task_ref(task_id: str) -> str:
    return TASK_REF_PREFIX + task_id


def blocked_ref(task_id: str) -> str:
    """Where a blocked task's last change is kept, as a commit on its base (``git show`` it)."""
    return BLOCKED_REF_PREFIX + task_id


def base_ref(task_id: str) -> str:
    """Where the base of a task in the main tree is pinned while the task runs, when it is not HEAD."""
    return BASE_REF_PREFIX + task_id


async def main_tree_base(main: GitRepo, task_id: str, *, committed: bool) -> str:
    """The commit a task that works in the main tree starts from.

    With ``committed`` (``auto_commit``) that is HEAD. Without it the tasks before this one left their
    changes uncommitted in the working tree: the base is then that tree, as a commit on top of HEAD pinned
    under ``base_ref`` (no branch moves), so that the task's diff, its review and a block that sets its
    change aside concern its own change only and never take away the earlier tasks' work.
    """
    head = await main.ensure_base_commit()
    if committed:
        return head
    tree = await main.snapshot_tree()
    if tree == await main.tree_of(head):
        return head
    base = await main.commit_tree(tree, head, f"autodev: the uncommitted work {task_id} starts from")
    await main.set_ref(base_ref(task_id), base)
    return base


async def park_change(
    workspace: TaskWorkspace, task: Task, main: GitRepo, *, set_aside: Sequence[str] = ()
) -> str | None:
    """Keep a blocked task's last change under ``blocked_ref`` (never lost) and, when the task worked in
    the main tree, take the change out of it, so that the tasks after it start from the code as
    committed. Returns the commit that keeps the change (None when there was none).

    ``set_aside`` are files too big to put into git (over ``guardrails.max_file_bytes``): they are moved,
    not copied, to ``.autodev/oversized/<task>/`` first and the rest of the change is kept as usual."""
    if task.base_commit is None:
        return None
    git = workspace.git
    if set_aside:
        aside = AutodevPaths(main.root).state_dir / "oversized" / task.id
        for path in set_aside:
            target = aside / path
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(workspace.root / path, target)
            except OSError:
                (workspace.root / path).unlink(missing_ok=True)  # another file system: too big to copy
    tree = await git.snapshot_tree()
    base_tree = await git.tree_of(task.base_commit)
    if tree == base_tree:
        return None
    kept = await git.commit_tree(tree, task.base_commit, f"autodev: {task.id} blocked (its last change)")
    await main.set_ref(blocked_ref(task.id), kept)
    if not workspace.isolated:
        await git.restore_from_tree(base_tree, await git.changed_between(base_tree, tree))
    _log.info("workspace.blocked_change_parked", task_id=task.id, commit=kept)
    return kept


async def unpark_change(workspace: TaskWorkspace, task_id: str, main: GitRepo) -> bool | None:
    """Put a retried task's parked change back into its working copy (3-way, conflict markers where it
    no longer fits). None when nothing was parked, else whether it applied cleanly."""
    kept = await main.resolve(blocked_ref(task_id))
    if kept is None:
        return None
    applied = await workspace.git.apply_three_way(await main.commit_patch(kept))
    await main.delete_ref(blocked_ref(task_id))
    return applied


def commit_message(task: Task) -> str:
    return f"autodev: {task.id} {task.title}"


async def commit_task(workspace: TaskWorkspace, task: Task, *, resumed: bool) -> TaskCommit:
    """Commit the task's change inside its worktree (no lock needed: only the worktree changes).

    Idempotent: a pinned commit, or a commit a killed run already made as the worktree's HEAD, is reused.
    ``resumed``: the task was interrupted by a killed run, so its merge may be half done.
    """
    git = workspace.git
    if resumed:
        # Only a run killed mid-merge leaves a half-done cherry-pick or a pinned commit behind.
        await git.abort_cherry_pick()
        pinned = await git.resolve(task_ref(task.id))
        if pinned is not None:
            return TaskCommit(pinned, pinned=True)
    message = commit_message(task)
    commit = await git.commit_all(message)
    if commit is not None:
        return TaskCommit(commit, parent=task.base_commit)
    head = await git.head()
    if head is not None and head != task.base_commit and await git.subject(head) == message:
        return TaskCommit(head)
    raise AutodevError(f"task {task.id}: its worktree holds no change to merge")


async def land_on_main(main: GitRepo, commit: str, head: str) -> None:
    """Fast-forward the main tree from ``head`` to ``commit``, repairing a fast-forward a kill cut short."""
    if await main.fast_forward(commit):
        return
    dirty = await main.dirty_paths()
    touched = set(await main.changed_paths(head, commit))
    foreign = sorted(set(dirty) - touched)
    if not foreign:
        # A fast-forward cut short leaves each path as the old or the new commit has it; anything else on
        # those paths (a file the user created where the task adds one, an edit) is somebody's work.
        foreign = await main.paths_unlike(sorted(dirty), head, commit)
    if foreign or not dirty:
        detail = f" ({', '.join(foreign[:5])}{'...' if len(foreign) > 5 else ''})" if foreign else ""
        raise MainTreeChangedError(
            f"{main.root} has changes AutoDev did not make{detail}, so task commit {commit[:10]} "
            "cannot be fast-forwarded onto it; commit or stash them, then run `autodev resume`"
        )
    # Only paths this fast-forward writes are dirty: what a killed fast-forward left half done.
    _log.warning("workspace.repair_interrupted_merge", paths=sorted(dirty))
    await main.restore_paths(head, sorted(dirty))
    if not await main.fast_forward(commit):
        raise MainTreeChangedError(f"the fast-forward of {main.root} to {commit[:10]} failed twice")


async def prepare_landing(
    main: GitRepo, workspace: TaskWorkspace, task: Task, change: TaskCommit
) -> Landing | None:
    """Before the integration lock: ``change`` replayed onto the main tree's HEAD as it is now, and what the
    fast-forward to it will write read ahead, all in git's object store. Tasks landing meanwhile wait on
    the lock for less. ``integrate`` uses it when HEAD has not moved since, and replays again when it has.
    None when there is nothing to prepare: a commit made before a kill (it may have landed already) or a
    conflict (``integrate`` meets it again under the lock and reports it)."""
    head = await main.head()
    if change.parent is None or head is None:
        return None
    commit = change.commit
    if change.parent != head:
        replayed = await workspace.git.replay(commit, head, commit_message(task))
        if isinstance(replayed, list):
            return None
        commit = replayed
    await main.learn_change(commit)
    return Landing(head, commit)


async def integrate(
    main: GitRepo,
    workspace: TaskWorkspace,
    task: Task,
    change: TaskCommit,
    ready: Landing | None = None,
    landing: Callable[[str], None] | None = None,
) -> Integrated | IntegrationConflict:
    """Bring an isolated task's committed change onto the main tree ``main`` (see the module docstring);
    ``ready``: what ``prepare_landing`` made of it before the lock; ``landing``: told the commit the main
    tree is about to fast-forward to, before it does (work that waits for it can start meanwhile).

    The caller holds the integration lock: the main tree's HEAD does not move underneath.
    """
    git = workspace.git
    commit, pinned = change.commit, change.pinned
    head = await main.ensure_base_commit()
    message = commit_message(task)
    if change.parent is None and task.base_commit is not None:
        # A commit made before a kill may have landed already (replayed or not): its subject is unique.
        landed = await main.find_subject(task.base_commit, head, message)
        if landed is not None:
            return Integrated(landed, pinned)
    parent = change.parent or await git.resolve(f"{commit}^")
    if ready is not None and ready.onto == head:
        commit = ready.commit
    elif parent != head:
        replayed = await git.replay(commit, head, message)
        if isinstance(replayed, list):
            return IntegrationConflict(head, tuple(replayed), commit)
        commit = replayed
    if landing is not None:
        landing(commit)
    await land_on_main(main, commit, head)
    return Integrated(commit, pinned)


async def rebase_after_conflict(workspace: TaskWorkspace, task: Task, conflict: IntegrationConflict) -> bool:
    """Reset the worktree to the new base and re-apply the old change with conflict markers.

    The old change is pinned first: until the retry is recorded (and the caller drops the ref), a rerun
    after a kill merges the same commit and meets the same conflict, never the half-resolved tree.
    Returns whether the old change applied without conflicts.
    """
    await workspace.git.set_ref(task_ref(task.id), conflict.commit)
    patch = await workspace.git.commit_patch(conflict.commit)
    await workspace.git.checkout_detached(conflict.head)
    return await workspace.git.apply_three_way(patch)
