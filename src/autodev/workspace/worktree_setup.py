"""Making a fresh git worktree a working copy the project's tests accept.

A worktree holds exactly the tracked files of its commit. Many projects need more to be importable: a
version file written by their build backend (``_version.py`` from setuptools-scm or hatch-vcs), compiled
translations, generated code, all git-ignored. The repository's worktree setup says what they are, as the
setup scripts of worktree-based tools do:

- ``worktree_setup.copy_ignored``: paths or glob patterns (``**`` for any depth) of git-ignored files to
  copy from the main checkout; git itself lists the matching ignored files (``git ls-files --others
  --ignored --exclude-standard``), so a tracked file is never overwritten by a copy;
- ``worktree_setup.command``: an argv run once in each new worktree, from its root, in the project's
  environment, after the copies (a build step that generates what the tests import).

The copies are made again whenever a pooled or reused worktree is reset (cheap, and the main checkout may
have regenerated them); the command runs only when the worktree is new, and a worktree reset while a
setup is configured keeps its ignored files, so what the command produced survives the reset.

``missing_ignored_files`` lists what the main checkout has and a worktree lacks, for the message that
tells a user which setting would fix a worktree that the project's tests reject.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

from autodev.config.schema import WorktreeSetupSettings
from autodev.errors import EnvironmentFaultError
from autodev.logging import get_logger
from autodev.qa.runner import CheckSpec, run_check
from autodev.workspace.git import run_git

__all__ = ["WorktreePreparer", "WorktreeSetupError", "ignored_project_files", "missing_ignored_files"]

_log = get_logger("autodev.worktree_setup")
# Ignored paths that are environments, caches or AutoDev's own state: never what a worktree lacks.
_NOT_PROJECT_FILES = frozenset(
    {
        ".autodev",
        ".git",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        "node_modules",
        "__pycache__",
        ".pytest_cache",
        ".ruff_cache",
        ".mypy_cache",
        ".hypothesis",
        ".coverage",
        ".idea",
        ".vscode",
        ".DS_Store",
    }
)


class WorktreeSetupError(EnvironmentFaultError):
    """The worktree setup failed (a copy or the setup command): the run stops until it is fixed."""


async def _git_lines(root: Path, *args: str) -> list[str]:
    env = {**os.environ, "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}
    result = await run_git(args, cwd=root, env=env, timeout_s=120.0)
    if result.returncode != 0:
        detail = " ".join(result.stderr.decode("utf-8", errors="replace").split())[:300]
        raise WorktreeSetupError(f"git {' '.join(args[:2])} failed in {root}: {detail}")
    return [name for name in result.stdout.decode("utf-8", errors="surrogateescape").split("\0") if name]


async def ignored_files(root: Path, patterns: Sequence[str] = ()) -> list[str]:
    """Git-ignored, untracked files of the checkout at ``root`` (those matching ``patterns`` when given)."""
    specs = [f":(glob){pattern}" for pattern in patterns]
    args = ["ls-files", "-z", "--others", "--ignored", "--exclude-standard"]
    if not patterns:
        args.append("--directory")
    return await _git_lines(root, *args, "--", *specs)


def _project_file(path: str) -> bool:
    parts = path.rstrip("/").split("/")
    return not any(part in _NOT_PROJECT_FILES or part.endswith(".pyc") for part in parts)


async def ignored_project_files(root: Path) -> list[str]:
    """The checkout's git-ignored files and directories, environments, caches and AutoDev's state aside."""
    return [path for path in await ignored_files(root) if _project_file(path)]


async def missing_ignored_files(main_root: Path, worktree_root: Path, *, limit: int = 10) -> list[str]:
    """Ignored files and directories of the main checkout (environments and caches left out) that
    ``worktree_root`` does not have, at most ``limit``."""
    found = []
    for path in await ignored_project_files(main_root):
        if not (worktree_root / path.rstrip("/")).exists():
            found.append(path)
            if len(found) >= limit:
                break
    return found


class WorktreePreparer:
    """Applies ``WorktreeSetupSettings`` to worktrees of ``main_root`` (see the module docstring)."""

    def __init__(
        self,
        main_root: Path,
        settings: WorktreeSetupSettings,
        *,
        env: Mapping[str, str] | None = None,
        children_dir: Path | None = None,
    ) -> None:
        self.main_root = main_root
        self.settings = settings
        self.env = dict(env or {})
        self.children_dir = children_dir

    @property
    def keeps_ignored(self) -> bool:
        """Whether a reset worktree must keep its ignored files (what the setup made)."""
        return self.settings.configured

    async def prepare(self, worktree_root: Path, *, fresh: bool) -> None:
        """Copy the configured ignored files; run the setup command when the worktree is ``fresh``."""
        if not self.settings.configured:
            return
        if self.settings.copy_ignored:
            await self._copy(worktree_root)
        if fresh and self.settings.command is not None:
            await self._run_command(worktree_root)

    async def _copy(self, worktree_root: Path) -> None:
        paths = await ignored_files(self.main_root, self.settings.copy_ignored)

        def copy() -> None:
            for relative in paths:
                source = self.main_root / relative
                target = worktree_root / relative
                if not source.is_file():
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)

        try:
            await anyio.to_thread.run_sync(copy)
        except OSError as exc:
            raise WorktreeSetupError(
                f"worktree_setup.copy_ignored: cannot copy into {worktree_root}: {exc.strerror or exc}"
            ) from exc
        _log.info("worktree_setup.copied", worktree=str(worktree_root), files=len(paths))

    async def _run_command(self, worktree_root: Path) -> None:
        command = self.settings.command
        assert command is not None
        spec = CheckSpec(
            argv=tuple(command),
            cwd=worktree_root,
            timeout_s=self.settings.timeout_s,
            env=self.env,
            children_dir=self.children_dir,
        )
        result = await run_check(spec)
        if result.status != "pass":
            tail = " ".join(result.output_excerpt.split())[-300:]
            raise WorktreeSetupError(
                f"worktree_setup.command {' '.join(command)!r} failed in {worktree_root} ({result.reason}): "
                f"{tail}; fix the command or the project, then run `autodev resume`"
            )
        _log.info("worktree_setup.command_done", worktree=str(worktree_root), seconds=result.duration_s)
