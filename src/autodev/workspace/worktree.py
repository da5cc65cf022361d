"""Detached git worktrees for implementation-tournament variants.

Each variant gets its own worktree under ``.autodev/worktrees/``, created *detached* at the task's base
commit with the current change applied, so a variant starts from exactly what the main tree holds and
never moves a branch. Worktrees share the object store, so creating one is cheap. A run that dies leaves
its worktrees behind; ``prune_stale`` finds the ones under the manager's root and removes them.

The parallel execute phase gives each in-flight task a worktree of its own: ``claim`` one at the task's base
commit, ``release`` it when the task ends, and ``adopt`` the worktree a resumed task recorded in the ledger.
``WorktreePool`` (``worktree_pool.py``) offers the same calls with recycled worktrees; both are a
``WorkspaceProvider``, all the dispatcher knows of them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import anyio

from autodev.errors import AutodevError
from autodev.logging import get_logger
from autodev.workspace.git import GitError, GitRepo, WorkingDiff, index_entries, run_git
from autodev.workspace.worktree_setup import WorktreePreparer

__all__ = ["Worktree", "WorktreeError", "WorktreeManager"]

_log = get_logger("autodev.worktree")


class WorktreeError(AutodevError):
    """A worktree could not be created, changed or removed, or a patch did not apply."""


@dataclass(frozen=True, slots=True)
class Worktree:
    """One detached worktree: its name (directory under the root), path and base commit."""

    name: str
    path: Path
    base: str


@dataclass(frozen=True, slots=True)
class _Out:
    code: int
    stdout: str
    stderr: str


def _encode(patch: str) -> bytes:
    # WorkingDiff decodes with surrogateescape so that binary-safe patches survive the round trip.
    return patch.encode("utf-8", errors="surrogateescape")


class WorkspaceProvider(Protocol):
    """Where parallel tasks get their worktrees: one per task (``WorktreeManager``) or a pool of them
    recycled between tasks (``WorktreePool``). The dispatcher sees only this."""

    @property
    def recycles(self) -> bool:
        """Whether a released worktree is reset for the next task (quick) instead of removed (slower)."""
        ...

    async def warm_up(self, workers: int) -> None:
        """Make ready what ``workers`` tasks at once will claim, before the first starts."""
        ...

    async def claim(self, task_id: str, base: str) -> Worktree:
        """A worktree for ``task_id`` at commit ``base``, set up as the repository's working copies are."""
        ...

    async def release(self, worktree: Worktree) -> None:
        """The task is done with ``worktree``."""
        ...

    async def advance(self, base: str) -> None:
        """A landing is about to move the branch to ``base``: what the next claim will take is made ready
        at it meanwhile, so the tasks that landing frees start without waiting for that."""
        ...

    def adopt(self, path: Path, base: str) -> Worktree:
        """Take over a worktree a killed run left at ``path`` (its task resumes there)."""
        ...

    def keep(self, worktree: Worktree) -> None:
        """Stop holding ``worktree`` without removing it: it outlives the run (its task's change waits for
        adoption), and a later start keeps it while that task is in flight."""
        ...

    async def wind_down(self) -> None:
        """No task is left to start: what is kept only for a next task goes now, and what comes back goes
        when released. A claim after it is still served."""
        ...

    async def cleanup_all(self) -> None:
        """Remove every worktree this provider holds (the run is over)."""
        ...


class WorktreeManager:
    """Create, diff, apply and remove detached worktrees of ``main_repo`` under ``root_dir``."""

    recycles = False

    def __init__(
        self,
        main_repo: Path,
        root_dir: Path,
        *,
        timeout_s: float = 120.0,
        admin_lock: anyio.Lock | None = None,
        preparer: WorktreePreparer | None = None,
        split_index_min_entries: int = 0,
        main_git: GitRepo | None = None,
    ) -> None:
        self.main_repo = Path(main_repo).resolve()
        self.root_dir = Path(root_dir)
        self.timeout_s = timeout_s
        # 0: never split (see ``_index_format``); the run passes ``worktree_split_index_min_files``.
        self.split_index_min_entries = split_index_min_entries
        # ``main_git``: the run's own GitRepo of the main repository, whose record of the commits AutoDev
        # made (its landings) resets a worktree to a newer base without asking git what changed.
        self._main_git = main_git or GitRepo(self.main_repo, timeout_s=timeout_s)
        # The repository's worktree setup: every worktree made here becomes a working copy its tests accept.
        self.preparer = preparer
        self._active: dict[str, Worktree] = {}
        # git worktree add/remove/list/prune read every worktree's admin files and fail on one a concurrent
        # add has half written ("failed to read .git/worktrees/x/commondir"), so they take turns.
        # Share ``admin_lock`` between managers of one repository (task worktrees and tournament variants).
        self._admin_lock = admin_lock or anyio.Lock()

    @property
    def active(self) -> list[Worktree]:
        """The worktrees this manager created and has not removed yet."""
        return list(self._active.values())

    async def _git(self, cwd: Path, *args: str, stdin: bytes | None = None, check: bool = True) -> _Out:
        env: Mapping[str, str] = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
        try:
            result = await run_git(args, cwd=cwd, env=env, timeout_s=self.timeout_s, stdin=stdin)
        except GitError as exc:
            raise WorktreeError(exc.message) from exc
        out = _Out(
            result.returncode,
            result.stdout.decode("utf-8", errors="surrogateescape"),
            result.stderr.decode("utf-8", errors="replace"),
        )
        if check and out.code != 0:
            detail = " ".join(out.stderr.split())[:300] or f"exit code {out.code}"
            raise WorktreeError(f"git {' '.join(args[:3])} failed in {cwd}: {detail}")
        return out

    async def create(self, name: str, base: str, patch: str = "", *, replace: bool = False) -> Worktree:
        """A detached worktree ``root_dir/name`` at ``base`` with ``patch`` (a binary git diff) applied.

        An existing ``root_dir/name`` is an error, unless ``replace``: then it is removed first.
        """
        if not name or "/" in name or name.startswith("."):
            raise WorktreeError(f"not a usable worktree name: {name!r}")
        path = self.root_dir / name
        if path.exists():
            if not replace:
                raise WorktreeError(f"{path} already exists; remove it (or run prune_stale) first")
            _log.warning("worktree.replaced_leftover", name=name, path=str(path))
            self._active.pop(name, None)
            await self._remove_path(path)
        self.root_dir.mkdir(parents=True, exist_ok=True)
        # A kill inside `git worktree add` leaves the name registered and locked ("initializing") with no
        # directory: with `replace`, forcing twice takes such a leftover over instead of failing on it.
        force = ("--force", "--force") if replace else ()
        await self._admin("add", "--detach", "--no-checkout", "--quiet", *force, str(path), base)
        worktree = Worktree(name, path.resolve(), base)
        self._active[name] = worktree
        try:
            # Checking out every file is the slow part: outside the lock, so worktrees fill in parallel.
            await self._git(worktree.path, *await self._index_format(), "reset", "--hard", "--quiet")
            if self.preparer is not None:
                await self.preparer.prepare(worktree.path, fresh=True)
            if patch:
                await self._git(
                    worktree.path, "apply", "--binary", "--whitespace=nowarn", "-", stdin=_encode(patch)
                )
        except (WorktreeError, AutodevError):
            await self.remove(worktree)
            raise
        _log.info("worktree.created", name=name, base=base, patch_bytes=len(patch))
        return worktree

    async def _index_format(self) -> tuple[str, ...]:
        """git options for a new worktree's first index: split (``core.splitIndex``) when the index of the
        repository's main checkout has ``split_index_min_entries`` entries or more (never when that is 0).

        Every git command that changes an index writes the whole file and hashes it: 25-30 ms at 50,000
        entries, and a task's working copy is staged and reset several times. A split index writes only
        the entries that differ from a shared base file (kept in the worktree's own git directory, removed
        with it), so those writes cost what the change does. The commands after this one keep the format
        without being told. The user's own index is never split, and small repositories, where it gains
        nothing, keep git's default format for every tool that reads a worktree's index."""
        threshold = self.split_index_min_entries
        # The main checkout's index, also when ``main_repo`` is a worktree: one of AutoDev's may be split.
        if not threshold or index_entries(await self._main_git.common_dir()) < threshold:
            return ()
        return ("-c", "core.splitIndex=true")

    async def warm_up(self, workers: int) -> None:
        """Nothing to prepare: each task's worktree is made when it is claimed."""

    async def claim(self, task_id: str, base: str) -> Worktree:
        """A clean detached worktree ``task-<task_id>`` at ``base`` for one task.

        A directory of that name (left by a crashed run) is removed first, so a retried task starts clean.
        """
        return await self.create(f"task-{task_id}", base, replace=True)

    async def release(self, worktree: Worktree) -> None:
        """Give back a worktree from ``claim`` or ``adopt``: it is removed."""
        await self.remove(worktree)

    async def advance(self, base: str) -> None:
        """Nothing to make ready: each task's worktree is made when it is claimed."""

    def adopt(self, path: Path, base: str) -> Worktree:
        """Track an existing worktree under ``root_dir`` (a resumed task's) as this manager's own.

        ``cleanup_all`` and ``release`` remove it and ``prune_stale`` keeps it, as for one ``create`` made.
        """
        resolved = Path(path).resolve()
        # Only a directory under the root: removing an adopted path must never reach the main tree.
        if self.root_dir.resolve() not in resolved.parents or not resolved.is_dir():
            raise WorktreeError(f"cannot adopt {path}: not a worktree directory under {self.root_dir}")
        held = self._active.get(resolved.name)
        if held is not None and held.path != resolved:
            raise WorktreeError(f"cannot adopt {path}: the name {resolved.name!r} is taken by {held.path}")
        worktree = Worktree(resolved.name, resolved, base)
        self._active[worktree.name] = worktree
        _log.info("worktree.adopted", name=worktree.name, base=base)
        return worktree

    async def reset(self, worktree: Worktree, base: str, *, prepare: bool = True) -> Worktree:
        """Make ``worktree`` exactly ``base``: tracked files restored, untracked and ignored files deleted.

        With a worktree setup configured, ignored files stay (they are what the setup made) and the
        setup's copies are made again (unless ``prepare`` is false).
        """
        keep_ignored = self.preparer is not None and self.preparer.keeps_ignored
        git = GitRepo(worktree.path, timeout_s=self.timeout_s, like=self._main_git)
        try:
            recycled = await git.recycle(base, keep_ignored=keep_ignored)
        except AutodevError as exc:
            raise WorktreeError(f"cannot reset the worktree {worktree.path} to {base[:10]}: {exc}") from exc
        if not recycled:
            await self._git(worktree.path, "checkout", "--detach", "--force", "--quiet", base)
            # -ff: also nested repositories a task may have cloned or initialised.
            await self._git(worktree.path, "clean", "-ffdq" if keep_ignored else "-ffdxq")
        if prepare and self.preparer is not None:
            await self.preparer.prepare(worktree.path, fresh=False)
        try:
            await git.settle()
        except AutodevError as exc:
            raise WorktreeError(f"cannot reset the worktree {worktree.path} to {base[:10]}: {exc}") from exc
        moved = Worktree(worktree.name, worktree.path, base)
        if worktree.name in self._active:
            self._active[worktree.name] = moved
        return moved

    async def diff(self, worktree: Worktree) -> WorkingDiff:
        """Everything in ``worktree`` that differs from its base commit (untracked files included)."""
        return await GitRepo(worktree.path, timeout_s=self.timeout_s).diff_against(worktree.base)

    async def apply_to_main(self, patch: str) -> None:
        """Apply ``patch`` to the main working tree: exactly when it applies, else with a 3-way merge.

        A patch that applies neither way raises ``WorktreeError``; a plain ``git apply`` that fails its
        check changes nothing, so the tree is untouched unless the 3-way merge was attempted.
        """
        if not patch:
            return
        data = _encode(patch)
        plain = ("apply", "--binary", "--whitespace=nowarn")
        if (await self._git(self.main_repo, *plain, "--check", "-", stdin=data, check=False)).code == 0:
            await self._git(self.main_repo, *plain, "-", stdin=data)
            return
        merged = await self._git(self.main_repo, *plain, "--3way", "-", stdin=data, check=False)
        if merged.code != 0:
            detail = " ".join(merged.stderr.split())[:300]
            raise WorktreeError(
                f"the change does not apply to {self.main_repo}, not even with a 3-way merge: {detail}"
            )

    async def revert_on_main(self, patch: str) -> None:
        """Take ``patch`` back out of the main tree; refuses, changing nothing, when it does not fit."""
        if not patch:
            return
        data = _encode(patch)
        args = ("apply", "--binary", "--whitespace=nowarn", "-R")
        check = await self._git(self.main_repo, *args, "--check", "-", stdin=data, check=False)
        if check.code != 0:
            detail = " ".join(check.stderr.split())[:300]
            raise WorktreeError(f"the change to take back no longer matches {self.main_repo}: {detail}")
        await self._git(self.main_repo, *args, "-", stdin=data)

    async def remove(self, worktree: Worktree) -> None:
        """Remove ``worktree`` and its administrative entry; never raises for one already gone."""
        self._active.pop(worktree.name, None)
        await self._remove_path(worktree.path)

    def keep(self, worktree: Worktree) -> None:
        """Forget ``worktree`` without removing it (``WorkspaceProvider.keep``)."""
        self._active.pop(worktree.name, None)

    async def wind_down(self) -> None:
        """``WorkspaceProvider.wind_down``: this manager keeps nothing for a next task (a released worktree
        is removed at once), so there is nothing to remove early."""

    async def cleanup_all(self) -> None:
        """Remove every worktree this manager created (safe to call in ``finally``)."""
        for worktree in list(self._active.values()):
            await self.remove(worktree)

    async def prune_stale(self, keep: Collection[Path] = ()) -> list[Path]:
        """Remove worktrees under ``root_dir`` left by a run that crashed; return their paths.

        Active worktrees and the paths in ``keep`` (resumed tasks' worktrees, about to be adopted) stay.
        Called at start under the run lock, when no other AutoDev run can be using them.
        """
        listing = await self._admin("list", "--porcelain", check=False)
        stale = _paths_under(self.root_dir, listing.stdout)
        kept = _resolved(keep) | {worktree.path for worktree in self._active.values()}
        removed = sorted(stale - kept)
        for path in removed:
            await self._remove_path(path)
        if removed:
            _log.warning("worktree.pruned_stale", count=len(removed), paths=[str(p) for p in removed])
        return removed

    async def _admin(self, *args: str, check: bool = True) -> _Out:
        async with self._admin_lock:
            return await self._git(self.main_repo, "worktree", *args, check=check)

    async def _remove_path(self, path: Path) -> None:
        # Twice: a worktree a killed `git worktree add` left locked is removed too.
        result = await self._admin("remove", "--force", "--force", str(path), check=False)
        if result.code != 0:
            # Not a registered worktree any more (or half-created): delete the directory itself, and let
            # git forget it (a successful remove already did).
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(path, ignore_errors=True))
            await self._admin("prune", check=False)


def _resolved(paths: Collection[Path]) -> set[Path]:
    return {Path(path).resolve() for path in paths}


def _paths_under(root_dir: Path, porcelain: str) -> set[Path]:
    """Registered worktrees (from ``git worktree list --porcelain``) and directories under ``root_dir``."""
    root = root_dir.resolve()
    registered = (
        Path(line.removeprefix("worktree ")).resolve()
        for line in porcelain.splitlines()
        if line.startswith("worktree ")
    )
    found = {path for path in registered if root in path.parents}
    if root_dir.is_dir():
        found.update(entry.resolve() for entry in root_dir.iterdir() if entry.is_dir())
    return found
