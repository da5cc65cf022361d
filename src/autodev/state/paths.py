"""The ``.autodev/`` layout in one place, and the check that keeps repository paths inside the repository."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from autodev.errors import PathEscapeError, StateError
from autodev.files import STAMP_SETTLED_NS

__all__ = [
    "STATE_DIR_NAME",
    "AutodevPaths",
    "StateDirKeeper",
    "ensure_state_dir",
    "find_repo_root",
    "normalize_repo_path",
    "transcript_name_part",
]

STATE_DIR_NAME = ".autodev"


@dataclass(frozen=True, slots=True)
class AutodevPaths:
    """Where every piece of AutoDev state lives, relative to one repository root."""

    repo_root: Path

    @property
    def state_dir(self) -> Path:
        return self.repo_root / STATE_DIR_NAME

    @property
    def ledger(self) -> Path:
        return self.state_dir / "ledger.jsonl"

    @property
    def snapshot(self) -> Path:
        return self.state_dir / "plan.json"

    @property
    def lock(self) -> Path:
        return self.state_dir / "lock"

    @property
    def lock_owner(self) -> Path:
        return self.state_dir / "lock.owner"

    @property
    def config(self) -> Path:
        return self.state_dir / "config.toml"

    @property
    def spec(self) -> Path:
        return self.state_dir / "spec.md"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def log_file(self) -> Path:
        return self.logs_dir / "autodev.jsonl"

    @property
    def evidence_dir(self) -> Path:
        return self.state_dir / "evidence"

    @property
    def delegations_dir(self) -> Path:
        return self.state_dir / "delegations"

    @property
    def responses_dir(self) -> Path:
        return self.state_dir / "responses"

    @property
    def transcripts_dir(self) -> Path:
        return self.state_dir / "transcripts"

    @property
    def tournaments_dir(self) -> Path:
        return self.state_dir / "tournaments"

    @property
    def worktrees_dir(self) -> Path:
        """Implementation-tournament variants (short-lived, one per variant)."""
        return self.state_dir / "worktrees"

    @property
    def task_worktrees_dir(self) -> Path:
        """The worktrees tasks work in when they run in parallel (one per in-flight task, or a pool)."""
        return self.state_dir / "task-worktrees"

    @property
    def baseline_dir(self) -> Path:
        """Cached gate results of base trees (``autodev.qa.baseline``)."""
        return self.state_dir / "baseline"

    @property
    def baseline_worktree_dir(self) -> Path:
        """Where the worktree that takes a base commit's baseline lives while a run needs it."""
        return self.state_dir / "baseline-worktree"

    @property
    def children_dir(self) -> Path:
        """Registrations of running agent CLIs and QA tools (see ``process_runner.reap_orphans``)."""
        return self.state_dir / "children"

    @property
    def calls_dir(self) -> Path:
        """What the repository looked like before each agent call still running or interrupted
        (``orchestrator.integrity``)."""
        return self.state_dir / "calls"

    @property
    def inline_state(self) -> Path:
        return self.state_dir / "inline-state.json"

    def relative(self, path: Path) -> str:
        """``path``, a path in the repository or its state, as the state records it: relative to the
        repository root, ``.autodev/...`` for the state.

        ``.autodev`` may be a link to a directory elsewhere, and paths that went through ``resolve()`` (git
        worktrees do) then lie outside the repository: they are put back under the name of the link.
        """
        bases = (
            (self.repo_root, ()),
            (self.state_dir.resolve(), (STATE_DIR_NAME,)),
            (self.repo_root.resolve(), ()),
        )
        for base, prefix in bases:
            if path.is_relative_to(base):
                return PurePosixPath(*prefix, path.relative_to(base).as_posix()).as_posix()
        raise PathEscapeError(str(path), str(self.repo_root), context="state path")

    def evidence_file(self, task_id: str, kind: str, attempt: int) -> Path:
        return self.evidence_dir / f"{task_id}-{kind}-{attempt}.json"

    def patch_file(self, task_id: str, *, developer: bool = False) -> Path:
        """``<task>.patch``: exactly the task's committed change; ``<task>.developer.patch``: the
        developer's own diff of its last attempt (before the test engineer added anything)."""
        return self.evidence_dir / f"{task_id}{'.developer' if developer else ''}.patch"

    def delegation_file(self, task_id: str, role: str) -> Path:
        return self.delegations_dir / f"{task_id}-{role}.md"

    def response_file(self, task_id: str, role: str) -> Path:
        return self.responses_dir / f"{task_id}-{role}.json"


def find_repo_root(start: Path) -> Path:
    """The nearest directory at or above ``start`` holding ``.autodev/`` or ``.git``; else ``start``.

    Walking the tree is cheaper than asking git, and it also works for repositories git does not know yet.
    """
    start = start.resolve()
    for candidate in (start, *start.parents):
        if (candidate / STATE_DIR_NAME).is_dir() or (candidate / ".git").exists():
            return candidate
    return start


def normalize_repo_path(path: str, repo_root: Path | None = None, *, context: str = "") -> str:
    """Return ``path`` as a clean, relative POSIX path inside the repository, or raise ``PathEscapeError``.

    Rejects absolute paths and ``..`` that climb out. With ``repo_root`` given, existing symlinks are
    resolved too, so a link that points outside the repository is rejected as well.
    """
    raw = path.strip()
    root_text = str(repo_root) if repo_root is not None else "<repository>"
    if not raw or "\x00" in raw:
        raise PathEscapeError(path, root_text, context=context)
    pure = PurePosixPath(raw.replace("\\", "/"))
    if pure.is_absolute() or (len(raw) > 1 and raw[1] == ":"):
        raise PathEscapeError(path, root_text, context=context)
    parts: list[str] = []
    for part in pure.parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise PathEscapeError(path, root_text, context=context)
            parts.pop()
            continue
        parts.append(part)
    if not parts:
        raise PathEscapeError(path, root_text, context=context)
    clean = "/".join(parts)
    if repo_root is not None:
        root = repo_root.resolve()
        resolved = Path(os.path.realpath(root / clean))
        if resolved != root and root not in resolved.parents:
            raise PathEscapeError(path, str(root), context=context)
    return clean


def ensure_state_dir(paths: AutodevPaths) -> Path:
    """Create ``.autodev/`` with a ``.gitignore`` so AutoDev's own state never lands in a user's commit."""
    state_dir = paths.state_dir
    ignore = state_dir / ".gitignore"
    if state_dir.is_symlink() and not state_dir.exists():
        raise StateError(
            f"{state_dir} is a link to {os.readlink(state_dir)}, which does not exist; create that directory "
            "(or remove the link), then try again"
        )
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        if not ignore.exists():
            ignore.write_text("# AutoDev state: local to this checkout, never committed.\n*\n")
    except OSError as exc:
        raise StateError(
            f"cannot create {state_dir}: {exc.strerror or exc}; free disk space or fix the permissions of "
            f"{paths.repo_root}, then try again"
        ) from exc
    return state_dir


class StateDirKeeper:
    """``ensure_state_dir`` for a caller that asks before every state change (the plan manager, about
    twenty times a task), asked again only when ``.autodev/`` itself changed since its last answer.

    An agent may remove ``.autodev/``, its ``.gitignore`` or replace the directory: each changes the
    directory's identity or its change time (an entry added, removed or renamed in it), which one ``stat``
    reads instead of the checks' four system calls. The change time comes from a coarse clock, so a
    directory whose change time was recent when it was checked is checked again next time: a later change
    within the same tick could otherwise leave the same stamp (as the agent-call check trusts file stamps).
    """

    def __init__(self, paths: AutodevPaths) -> None:
        self.paths = paths
        self._checked: tuple[int, int, int, int] | None = None

    def ensure(self) -> None:
        stamp = self._stamp()
        if stamp is not None and stamp == self._checked:
            return
        ensure_state_dir(self.paths)
        stamp = self._stamp()
        settled = stamp is not None and time.time_ns() - stamp[3] > STAMP_SETTLED_NS
        self._checked = stamp if settled else None

    def _stamp(self) -> tuple[int, int, int, int] | None:
        try:
            found = os.stat(self.paths.state_dir)  # through a link: the directory the state is kept in
        except OSError:
            return None
        return (found.st_dev, found.st_ino, found.st_mtime_ns, found.st_ctime_ns)


_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def transcript_name_part(value: str) -> str:
    """``value`` (a task id, a role) as it appears in a transcript's file name."""
    # Leading dots would hide the file (or read as a parent directory to a person skimming the listing).
    return _UNSAFE_NAME_CHARS.sub("_", value).lstrip(".") or "_"
