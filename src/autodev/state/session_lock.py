"""The run lock: one ``autodev run|plan|execute|resume`` per repository at a time.

Taking it also stops the agent CLIs and QA tools a killed run left behind (``state.children``).

The ledger lock (``.autodev/lock``) is taken per change and waited for; this one is held for a whole run and
never waited for: a second run is refused at once, naming the first one's pid. The kernel drops the lock when
its holder dies, so a crashed run never leaves a stale lock behind. Read-only commands (``status``) never
take it.
"""

from __future__ import annotations

import contextlib
import os
from types import TracebackType
from typing import Self

from filelock import FileLock, Timeout

from autodev.errors import LockHeldError, StateError
from autodev.files import MAX_PID_FILE_BYTES, led_by, read_bounded
from autodev.logging import get_logger
from autodev.processes import kill_tagged, repository_tag
from autodev.state.children import reap_orphans
from autodev.state.paths import AutodevPaths, ensure_state_dir

__all__ = ["SessionLock"]

_log = get_logger("autodev.session")


class SessionLock:
    """Exclusive, never-waiting run lock on ``.autodev/session.lock``; the holder writes its pid beside it."""

    def __init__(self, paths: AutodevPaths) -> None:
        self.paths = paths
        self.lock_path = paths.state_dir / "session.lock"
        self.owner_path = paths.state_dir / "session.owner"
        self._lock = FileLock(str(self.lock_path), timeout=0)
        # The processes a killed run left behind that taking the lock stopped (``autodev clean`` says so).
        self.stopped: list[int] = []

    def acquire(self) -> None:
        ensure_state_dir(self.paths)
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            raise LockHeldError(str(self.lock_path), self._holder(), 0.0, session=True) from None
        except OSError as exc:
            raise StateError(
                f"cannot create {self.lock_path}: {exc.strerror or exc}; free disk space or fix the "
                "permissions of .autodev/, then try again"
            ) from exc
        stopped = reap_orphans(self.paths.children_dir)
        for worktree_children in self.paths.worktrees_dir.glob("*/.autodev/children"):
            stopped += reap_orphans(worktree_children)
        # What those started and hid in sessions of their own still carries the repository's tag.
        state_dirs = [self.paths.state_dir, *self.paths.worktrees_dir.glob("*/.autodev")]
        stopped += kill_tagged(
            tuple(repository_tag(state_dir) + ":" for state_dir in state_dirs), prefix=True
        )
        self.stopped = sorted(set(stopped))
        if stopped:
            _log.warning("session.orphans_stopped", pids=stopped)
        try:
            self.owner_path.write_text(f"{os.getpid()}\n", encoding="ascii")
        except OSError as exc:
            self._lock.release()
            raise StateError(
                f"cannot write {self.owner_path}: {exc.strerror or exc}; free disk space or fix the "
                "permissions of .autodev/, then try again"
            ) from exc

    def release(self) -> None:
        if self._lock.is_locked:
            with contextlib.suppress(OSError):
                self.owner_path.unlink()
            self._lock.release()

    def _holder(self) -> int | None:
        try:
            data = read_bounded(
                self.owner_path,
                limit=MAX_PID_FILE_BYTES,
                what="the run lock's owner file",
                follow_symlinks=False,
                error=led_by(self.owner_path, StateError),
            )
            return int(data.decode("ascii").strip())
        except (OSError, ValueError, StateError):
            return None

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
