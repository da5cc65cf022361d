"""Git as the evidence of what changed: diffs against a task's base commit, and one commit per finished task.

What a developer agent says it changed is never trusted; the change is read from git. Diffs include untracked
files without touching the user's index: they are computed through a throw-away index file
(``GIT_INDEX_FILE``) seeded from the real one. AutoDev's own ``.autodev/`` directory is always excluded.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from autodev.errors import AutodevError

__all__ = ["GitError", "GitRepo", "WorkingDiff"]

_EXCLUDE_STATE = ":(exclude).autodev"
# Used only when the repository has no identity configured, so that auto-commit works on fresh machines.
_FALLBACK_IDENTITY = ("-c", "user.name=AutoDev", "-c", "user.email=autodev@localhost")


def _git_running_in(root: Path) -> bool:
    """Whether any git process has its working directory inside ``root`` (read from /proc)."""
    resolved = root.resolve()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
            cwd = (entry / "cwd").resolve()
        except OSError:
            continue
        if name.startswith("git") and (cwd == resolved or resolved in cwd.parents):
            return True
    return False


class GitError(AutodevError):
    """A git command failed; the message carries the command and git's own words."""


@dataclass(frozen=True, slots=True)
class WorkingDiff:
    """The working tree's change against a base commit: tracked and untracked files, binary-safe."""

    base: str
    patch: str
    files: tuple[str, ...]

    @property
    def is_empty(self) -> bool:
        return not self.files

    @property
    def size_bytes(self) -> int:
        return len(self.patch.encode("utf-8", errors="surrogateescape"))


@dataclass(frozen=True, slots=True)
class _GitOutput:
    code: int
    stdout: str
    stderr: str


class GitRepo:
    """Async wrapper over the ``git`` executable for one working tree (the main tree or a worktree)."""

    def __init__(self, root: Path, *, timeout_s: float = 120.0) -> None:
        self.root = Path(root)
        self.timeout_s = timeout_s

    async def _run(self, *args: str, env: Mapping[str, str] | None = None, check: bool = True) -> _GitOutput:
        # GIT_OPTIONAL_LOCKS=0: status and diff never take the index lock just to refresh stat data, so a
        # kill during them cannot leave a lock behind.
        full_env = {
            **os.environ,
            **(env or {}),
            "GIT_TERMINAL_PROMPT": "0",
            "LC_ALL": "C",
            "GIT_OPTIONAL_LOCKS": "0",
        }
        try:
            with anyio.fail_after(self.timeout_s):
                result = await anyio.run_process(
                    ["git", *args], cwd=self.root, env=full_env, check=False, stdin=None
                )
        except TimeoutError as exc:
            raise GitError(f"git {' '.join(args[:3])} did not finish within {self.timeout_s:.0f}s") from exc
        except FileNotFoundError as exc:
            raise GitError("git is not installed or not on PATH; install git and try again") from exc
        output = _GitOutput(
            result.returncode,
            result.stdout.decode("utf-8", errors="surrogateescape"),
            result.stderr.decode("utf-8", errors="replace"),
        )
        if check and output.code != 0:
            detail = " ".join(output.stderr.split())[:300] or f"exit code {output.code}"
            raise GitError(f"git {' '.join(args[:3])} failed in {self.root}: {detail}")
        return output

    async def clear_stale_locks(self) -> list[Path]:
        """Remove lock files a killed git left behind (``index.lock``, ``HEAD.lock``, ref locks).

        Only called under AutoDev's run lock, and only when no git process is running in this repository:
        a lock with no live git holding it can only be debris, and git refuses to work until it is gone.
        """
        git_dir = Path((await self._run("rev-parse", "--absolute-git-dir")).stdout.strip())
        candidates = [git_dir / "index.lock", git_dir / "HEAD.lock", git_dir / "ORIG_HEAD.lock"]
        candidates += list((git_dir / "refs").rglob("*.lock"))
        stale = [path for path in candidates if path.exists()]
        if not stale or _git_running_in(self.root):
            return []
        for path in stale:
            path.unlink(missing_ok=True)
        return stale

    async def is_repository(self) -> bool:
        result = await self._run("rev-parse", "--is-inside-work-tree", check=False)
        return result.code == 0 and result.stdout.strip() == "true"

    async def head(self) -> str | None:
        """The commit HEAD points at, or None in a repository without commits."""
        result = await self._run("rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
        return result.stdout.strip() or None if result.code == 0 else None

    async def ensure_base_commit(self) -> str:
        """HEAD, creating an empty initial commit first in a repository that has none."""
        head = await self.head()
        if head is not None:
            return head
        await self._run(*await self._identity(), "commit", "--allow-empty", "-m", "autodev: initial commit")
        created = await self.head()
        if created is None:
            raise GitError(f"could not create an initial commit in {self.root}")
        return created

    async def diff_against(self, base: str) -> WorkingDiff:
        """Everything in the working tree that differs from ``base``, untracked files included."""
        git_dir = Path((await self._run("rev-parse", "--absolute-git-dir")).stdout.strip())
        with tempfile.TemporaryDirectory(prefix="autodev-index-") as tmp:
            index = Path(tmp) / "index"
            real_index = git_dir / "index"
            if real_index.exists():
                shutil.copyfile(real_index, index)
            env = {"GIT_INDEX_FILE": str(index)}
            await self._run("add", "-A", "--", ".", _EXCLUDE_STATE, env=env)
            names = await self._run(
                "diff",
                "--cached",
                "--name-only",
                "-z",
                "--no-renames",
                base,
                "--",
                ".",
                _EXCLUDE_STATE,
                env=env,
            )
            patch = await self._run(
                "diff", "--cached", "--binary", "--no-renames", base, "--", ".", _EXCLUDE_STATE, env=env
            )
        files = tuple(sorted(name for name in names.stdout.split("\0") if name))
        return WorkingDiff(base=base, patch=patch.stdout, files=files)

    async def commit_all(self, message: str) -> str | None:
        """Commit every change in the working tree (not ``.autodev/``); None when there is nothing to commit.

        Hooks are skipped (``--no-verify``): AutoDev has already run its own gates on this change, and a
        hook that prompts or fails for environment reasons must not lose a reviewed, tested change.
        """
        await self._run("add", "-A", "--", ".", _EXCLUDE_STATE)
        staged = await self._run("diff", "--cached", "--quiet", check=False)
        if staged.code == 0:
            return None
        await self._run(*await self._identity(), "commit", "--no-verify", "-q", "-m", message)
        return await self.head()

    async def head_subject(self) -> str | None:
        """The subject line of the HEAD commit, or None without commits."""
        result = await self._run("log", "-1", "--format=%s", check=False)
        return result.stdout.strip() if result.code == 0 else None

    async def commits_since(self, base: str) -> list[str]:
        result = await self._run("rev-list", "--reverse", f"{base}..HEAD")
        return [line for line in result.stdout.split() if line]

    async def is_clean(self, paths: Sequence[str] = ()) -> bool:
        result = await self._run("status", "--porcelain", "--", *(paths or ["."]), _EXCLUDE_STATE)
        return not result.stdout.strip()

    async def _identity(self) -> tuple[str, ...]:
        email = await self._run("config", "user.email", check=False)
        return () if email.code == 0 and email.stdout.strip() else _FALLBACK_IDENTITY
