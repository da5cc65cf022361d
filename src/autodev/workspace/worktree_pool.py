"""A pool of detached worktrees recycled between the parallel execute phase's tasks.

A fresh worktree per task costs a checkout of every file (about half a millisecond a file on a local disk:
seconds on a large repository, and growing with the repository as tasks add files). The pool makes each of
its worktrees once, when a claim finds none idle (``warm_up`` starts it; ``cold_start`` makes some up
front: a parallel run's first one, while its preflight runs), and lends it to one task after another,
reset to the task's base. A worktree whose changes are followed (``autodev.workspace.changes``, on Linux)
is reset by undoing only the paths that changed and writing those that differ between the bases
(``GitRepo.recycle``); otherwise with ``git checkout --force`` and ``git clean -ffdx``, which read every
file of the tree.

The claim does the reset, not the release: a release only queues the worktree, so the slot of a task that
finished frees at once and neither a task writing after its release nor a cancelled reset can leak into the
next task. A worktree that cannot be reset is removed and the claim takes another. Beyond the pool's size,
or before it is started, a claim gets a fresh ``task-<id>`` worktree, removed again on release. Otherwise the
pool offers ``WorktreeManager``'s calls, delegating to the manager it wraps.

A landing about to move the branch has the idle worktree the next claim takes reset to the new commit
meanwhile (``advance``), beside the main checkout's fast-forward: the task that landing frees claims a
worktree already there, and its claim's reset is left only what was written in it since, usually nothing.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Collection
from contextlib import suppress
from pathlib import Path

import anyio

from autodev.errors import AutodevError
from autodev.logging import get_logger
from autodev.workspace.git import GitRepo, WorkingDiff
from autodev.workspace.worktree import Worktree, WorktreeError, WorktreeManager
from autodev.workspace.worktree_setup import WorktreePreparer

__all__ = ["WorktreePool"]

_log = get_logger("autodev.worktree_pool")

# Each worktree add checks out the whole tree; more at once only makes the disk the bottleneck.
_COLD_START_CONCURRENCY = 4


class WorktreePool:
    """Pre-created worktrees ``pool-0..pool-(size-1)`` under ``root_dir``, recycled between tasks."""

    recycles = True

    def __init__(
        self,
        main_repo: Path,
        root_dir: Path,
        size: int,
        *,
        timeout_s: float = 120.0,
        admin_lock: anyio.Lock | None = None,
        preparer: WorktreePreparer | None = None,
        track_changes: bool = True,
        split_index_min_entries: int = 0,
        main_git: GitRepo | None = None,
    ) -> None:
        if size < 0:
            raise ValueError(f"pool size must be >= 0, not {size}")
        self._manager = WorktreeManager(
            main_repo,
            root_dir,
            timeout_s=timeout_s,
            admin_lock=admin_lock,
            preparer=preparer,
            split_index_min_entries=split_index_min_entries,
            main_git=main_git,
        )
        self._size = size
        self._track_changes = track_changes
        self._baseline: str | None = None
        self._started = False
        self._pooled: set[str] = set()  # names of the pool's own worktrees: idle, claimed or being reset
        self._idle: deque[Worktree] = deque()
        self._claimed: dict[str, Worktree] = {}
        # No task is left to start (``wind_down``): a released worktree is removed instead of kept idle.
        self._winding_down = False
        # The newest commit a landing announced (``advance``), and the reset towards it under way, if any:
        # a claim waits for that reset rather than take the worktree halfway.
        self._advance_to: str | None = None
        self._advancing: anyio.Event | None = None
        # Worktrees ``cold_start`` is still making, and what is set when one of them is done (made or
        # given up): a claim that finds none idle waits for one of those rather than make another.
        self._filling = 0
        self._filled = anyio.Event()
        self._promised = 0  # claims waiting for those

    @property
    def size(self) -> int:
        """How many worktrees the pool keeps at most."""
        return self._size

    @property
    def baseline(self) -> str | None:
        """The main repository's HEAD when the pool started (None before): the base of a claim naming none."""
        return self._baseline

    @property
    def active(self) -> list[Worktree]:
        """Every worktree held: pooled (idle or claimed), overflow, adopted and created."""
        return self._manager.active

    async def cold_start(self, n: int | None = None) -> list[Worktree]:
        """Create ``n`` (default: ``size``) pooled worktrees at the main HEAD, concurrently; return them.

        A worktree that cannot be created is logged and the pool runs smaller. Leftover ``pool-*``
        directories of a crashed run are replaced. Only the first call does anything. A claim meanwhile
        that finds none idle waits for one of those still being made, when no other claim waits for it,
        instead of making its own.
        """
        count = self._size if n is None else n
        if not 0 <= count <= self._size:
            raise ValueError(f"cold_start(n) needs 0 <= n <= size ({self._size}), not {n}")
        if self._started:
            return []
        self._started = True  # before the first await, so a concurrent second call returns at once
        self._filling += count  # so is a claim meanwhile told to wait for these
        try:
            baseline = self._baseline = await self._head()
        except BaseException:
            self._started = False
            self._one_filled(count)
            raise
        # A resumed task may have adopted a pool-* worktree of the crashed run, and a claim meanwhile may
        # have named one it makes: those names are left alone, and these are taken before the next await
        # (as ``_pooled_name`` takes a claim's).
        taken = {worktree.name for worktree in self._manager.active} | self._pooled
        free = (name for name in (f"pool-{i}" for i in range(count + len(taken))) if name not in taken)
        names = list(itertools.islice(free, count))
        self._pooled.update(names)
        created: list[Worktree] = []
        limiter = anyio.CapacityLimiter(_COLD_START_CONCURRENCY)

        async def start(name: str) -> None:
            made = False
            try:
                async with limiter:
                    try:
                        worktree = await self._manager.create(name, baseline, replace=True)
                    except WorktreeError as exc:
                        _log.warning("worktree_pool.create_failed", name=name, error=str(exc))
                        return
                await self._watch(worktree)
                self._idle.append(worktree)
                created.append(worktree)
                made = True
            finally:
                if not made:
                    self._pooled.discard(name)
                self._one_filled()

        async with anyio.create_task_group() as group:
            for name in names:
                group.start_soon(start, name)
        _log.info("worktree_pool.started", size=len(created), wanted=count, baseline=baseline)
        return created

    def _one_filled(self, count: int = 1) -> None:
        """``count`` worktrees ``cold_start`` was making are done (made or given up): claims waiting look."""
        self._filling -= count
        self._filled.set()
        self._filled = anyio.Event()

    async def warm_up(self, workers: int) -> None:
        """Start the pool at the main HEAD; its worktrees are made by the claims that need them, so the
        first task waits for one checkout, not ``workers``. ``workers`` above the pool's size is capped."""
        del workers  # the pool's size already follows the run's parallelism
        if self._started:
            return
        self._started = True
        try:
            self._baseline = await self._head()
        except BaseException:
            self._started = False
            raise

    async def claim(self, task_id: str, base: str | None = None) -> Worktree:
        """A worktree exactly clean at ``base`` (default: the baseline) for task ``task_id``.

        Takes an idle pooled worktree when there is one, else creates ``task-<task_id>`` (removed on release).
        """
        self._winding_down = False  # a task started after all: the pool serves the ones that follow
        target = base or self._baseline or await self._head()
        while self._advancing is not None:
            await self._advancing.wait()
        if not self._idle and self._filling > self._promised:
            # A worktree ``cold_start`` is making and no other claim waits for it: this one takes it when
            # it is done, rather than make another (which a claim beyond those worktrees does at once).
            self._promised += 1
            try:
                while not self._idle and self._filling:
                    await self._filled.wait()
            finally:
                self._promised -= 1
        while self._idle:
            worktree = self._idle.popleft()  # no await since the check: no other claim can take it
            try:
                claimed = await self._manager.reset(worktree, target)
            except WorktreeError as exc:
                _log.warning("worktree_pool.reset_failed", name=worktree.name, error=str(exc))
                await self._drop(worktree)
                continue
            except BaseException:
                # Cancelled mid-reset: still ours, and the next claim resets it anyway.
                self._idle.append(worktree)
                raise
            self._claimed[claimed.name] = claimed
            return claimed
        if self._started and len(self._pooled) < self._size:
            return await self._new_pooled(target)
        return await self._manager.claim(task_id, target)

    async def advance(self, base: str) -> None:
        """Reset the idle worktree the next claim takes to ``base``, the commit a landing is about to move
        the branch to (see the module docstring). One reset at a time; a landing announced meanwhile is
        reset to after it. The claim resets the worktree again all the same: what anyone wrote in it since
        is undone there, and only that is left to do.

        With none idle and room in the pool, a new worktree is made at ``base`` instead, beside the tasks:
        the spare the next landings reset ahead. A claim never waits for its making."""
        if self._advancing is not None:
            self._advance_to = base  # the reset under way goes on to this commit when it is done
            return
        if not self._idle:
            await self._make_spare(base)
            return
        self._advance_to = base
        done = self._advancing = anyio.Event()
        try:
            while self._idle and not self._winding_down and self._advance_to is not None:
                target, self._advance_to = self._advance_to, None
                worktree = self._idle.popleft()  # the one the next claim takes
                try:
                    # The setup's copies are made by the claim's reset, once.
                    moved = await self._manager.reset(worktree, target, prepare=False)
                except WorktreeError as exc:
                    _log.warning("worktree_pool.reset_failed", name=worktree.name, error=str(exc))
                    await self._retire(worktree)
                    continue
                except BaseException:
                    self._idle.appendleft(worktree)  # still ours: the next claim resets it anyway
                    raise
                if self._winding_down:
                    await self._retire(moved)  # no task is left to start (``wind_down``)
                else:
                    self._idle.appendleft(moved)
        finally:
            self._advance_to = None
            self._advancing = None
            done.set()

    async def _make_spare(self, base: str) -> None:
        """A new pooled worktree at ``base``, queued idle once made (see ``advance``)."""
        if not self._started or self._winding_down or len(self._pooled) >= self._size:
            return
        name = self._pooled_name()
        try:
            worktree = await self._manager.create(name, base, replace=True)
        except WorktreeError as exc:
            self._pooled.discard(name)
            _log.warning("worktree_pool.create_failed", name=name, error=str(exc))
            return
        except BaseException:
            self._pooled.discard(name)
            raise
        await self._watch(worktree)
        if self._winding_down:
            await self._retire(worktree)
        else:
            self._idle.append(worktree)

    def _pooled_name(self) -> str:
        """A free ``pool-<n>`` name, taken at once: named before any await, so concurrent makings never
        pick the same one."""
        taken = self._pooled | {worktree.name for worktree in self._manager.active}
        name = next(name for name in (f"pool-{i}" for i in range(len(taken) + 1)) if name not in taken)
        self._pooled.add(name)
        return name

    async def _new_pooled(self, base: str) -> Worktree:
        name = self._pooled_name()
        try:
            worktree = await self._manager.create(name, base, replace=True)
        except BaseException:
            self._pooled.discard(name)
            raise
        await self._watch(worktree)
        self._claimed[name] = worktree
        return worktree

    async def release(self, worktree: Worktree) -> None:
        """Give ``worktree`` back: a pooled one is queued as it is (the next claim resets it), any other is
        removed. Releasing twice does nothing. Runs to the end even when the calling task is being
        cancelled, as cleanup in ``finally`` must.
        """
        with anyio.CancelScope(shield=True):
            if worktree.name not in self._pooled:
                await self._manager.release(worktree)
                return
            # Identity, not equality: a stale handle must not queue the worktree now lent to another task.
            if self._claimed.get(worktree.name) is not worktree:
                return
            del self._claimed[worktree.name]
            if self._winding_down:
                await self._retire(worktree)
                return
            self._idle.append(worktree)

    async def wind_down(self) -> None:
        """No task is left to start (``WorkspaceProvider.wind_down``): the idle worktrees are removed now,
        while the last tasks' agents work, instead of after them, and each claimed one when released. A
        claim after it is served as before, and ends it."""
        self._winding_down = True
        with anyio.CancelScope(shield=True):
            while self._idle and self._winding_down:
                await self._retire(self._idle[0])

    async def _retire(self, worktree: Worktree) -> None:
        """Remove a pooled worktree no task is waiting for. A failure stops neither the task releasing it
        nor the run: the worktree is left to the next start's prune of stale worktrees."""
        try:
            await self._drop(worktree)
        except WorktreeError as exc:
            _log.warning("worktree_pool.remove_failed", name=worktree.name, error=str(exc))

    def adopt(self, path: Path, base: str) -> Worktree:
        """Track a resumed task's existing worktree; it is removed on release (see ``WorktreeManager``)."""
        return self._manager.adopt(path, base)

    def keep(self, worktree: Worktree) -> None:
        """Forget ``worktree`` without removing it or lending it again (``WorkspaceProvider.keep``)."""
        if self._claimed.get(worktree.name) is worktree:
            del self._claimed[worktree.name]
            self._pooled.discard(worktree.name)
            GitRepo(worktree.path).unwatch()
        self._manager.keep(worktree)

    async def cleanup_all(self) -> None:
        """Remove every worktree the pool holds and, when nothing else is left in it, its root directory.

        Safe to call more than once; afterwards ``cold_start`` may run again.
        """
        with anyio.CancelScope(shield=True):
            for worktree in [*self._idle, *self._claimed.values()]:
                GitRepo(worktree.path).unwatch()
            self._idle.clear()
            self._claimed.clear()
            self._pooled.clear()
            self._started = False
            self._baseline = None
            await self._manager.cleanup_all()
            # rmdir, not rmtree: the root may be shared with other managers' worktrees.
            with suppress(OSError):
                await anyio.Path(self._manager.root_dir).rmdir()

    async def create(self, name: str, base: str, patch: str = "", *, replace: bool = False) -> Worktree:
        """A worktree outside the pool (see ``WorktreeManager.create``); removed on release."""
        return await self._manager.create(name, base, patch, replace=replace)

    async def diff(self, worktree: Worktree) -> WorkingDiff:
        """Everything in ``worktree`` that differs from its base commit (see ``WorktreeManager.diff``)."""
        return await self._manager.diff(worktree)

    async def apply_to_main(self, patch: str) -> None:
        """Apply ``patch`` to the main working tree (see ``WorktreeManager.apply_to_main``)."""
        await self._manager.apply_to_main(patch)

    async def revert_on_main(self, patch: str) -> None:
        """Take ``patch`` back out of the main tree (see ``WorktreeManager.revert_on_main``)."""
        await self._manager.revert_on_main(patch)

    async def remove(self, worktree: Worktree) -> None:
        """Remove ``worktree`` for good, taking it out of the pool if it was pooled."""
        self._claimed.pop(worktree.name, None)
        await self._drop(worktree)

    async def prune_stale(self, keep: Collection[Path] = ()) -> list[Path]:
        """Remove worktrees a crashed run left under the root, except held ones and ``keep``."""
        return await self._manager.prune_stale(keep)

    async def _watch(self, worktree: Worktree) -> None:
        """Follow a new pooled worktree's changes, so its resets and checks touch only what changed."""
        if not self._track_changes:
            return
        try:
            await GitRepo(worktree.path, timeout_s=self._manager.timeout_s).watch(recycled=True)
        except AutodevError as exc:  # it still works, with git's full scans
            _log.warning("worktree_pool.unwatched", name=worktree.name, error=str(exc))

    async def _drop(self, worktree: Worktree) -> None:
        GitRepo(worktree.path).unwatch()
        self._pooled.discard(worktree.name)
        idle = [held for held in self._idle if held.name != worktree.name]
        if len(idle) != len(self._idle):
            self._idle = deque(idle)
        await self._manager.remove(worktree)

    async def _head(self) -> str:
        repo = self._manager.main_repo
        try:
            head = await GitRepo(repo, timeout_s=self._manager.timeout_s).head()
        except AutodevError as exc:
            raise WorktreeError(f"cannot read the HEAD commit of {repo}: {exc}") from exc
        if head is None:
            raise WorktreeError(f"{repo} has no commit yet; a worktree pool needs one to start from")
        return head
