"""The user's checkout as a command that commits needs it, checked once at the start of the command.

It must be a git repository git agrees to work in (not one git refuses because another user owns it), its
HEAD must be on a branch (else every task commit lands on no branch, unless the user allows it), and it
must hold no uncommitted changes of the user's. Only the main checkout is checked: the worktrees of
parallel tasks are detached on purpose. Each refusal is one line naming the cause and its fix, given
before any agent call and without a ledger entry.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from autodev.errors import DetachedHeadError, RepositoryError, UnsafeRepositoryError
from autodev.logging import get_logger
from autodev.orchestrator.events import ProgressEvent, ProgressListener
from autodev.orchestrator.execute.task_flow import WorkingTreeDirtyError, check_working_tree
from autodev.workspace.git import GitRepo, run_git

if TYPE_CHECKING:
    from autodev.orchestrator.run_context import RunContext

__all__ = ["check_head", "require_clean_tree", "require_repository"]

_log = get_logger("autodev.orchestrator.checkout")
_SHOWN_PATHS = 5
# git's own advice ("git config --global --add safe.directory <path>") names the exact path it checked.
_SAFE_DIRECTORY = re.compile(r"safe\.directory[ \t]+(?P<path>\S.*)$", re.MULTILINE)
# "dubious ownership" since git 2.36; "unsafe repository" in the releases that introduced the check.
_OWNERSHIP = ("dubious ownership", "unsafe repository")


async def _git(git: GitRepo, *args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of a git command whose failure is an answer, not an error."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    result = await run_git(args, cwd=git.root, env=env, timeout_s=git.timeout_s)
    return (
        result.returncode,
        result.stdout.decode("utf-8", errors="replace").strip(),
        result.stderr.decode("utf-8", errors="replace"),
    )


async def require_repository(git: GitRepo) -> None:
    """Refuse a directory git does not work in, with git's reason when it is not a missing repository."""
    if await git.is_repository():
        return
    code, _, stderr = await _git(git, "rev-parse", "--git-dir")
    if any(marker in stderr for marker in _OWNERSHIP):
        found = _SAFE_DIRECTORY.search(stderr)
        target = found["path"].strip() if found else str(git.root)
        raise UnsafeRepositoryError(
            f"git refuses to work in {target}: the repository is owned by another user (git's 'dubious "
            f"ownership' check); if you trust it, run `git config --global --add safe.directory {target}`, "
            "or run AutoDev as the user who owns it"
        )
    if code == 0 or "not a git repository" in stderr:
        raise RepositoryError(
            f"{git.root} is not a git repository; AutoDev reads every change from git "
            "(run `git init` there first)"
        )
    detail = " ".join(stderr.split())[:300] or f"exit code {code}"
    raise RepositoryError(f"git cannot work in {git.root}: {detail}")


async def check_head(git: GitRepo, emit: ProgressListener, *, allow_detached: bool) -> None:
    """Refuse a detached HEAD in the main checkout, or with ``allow_detached`` warn about it once."""
    code, _, _ = await _git(git, "symbolic-ref", "-q", "HEAD")
    if code != 1:
        return  # 0: on a branch (an unborn one too); anything else is for require_repository to report
    _, short, _ = await _git(git, "rev-parse", "--short", "HEAD")
    if not allow_detached:
        raise DetachedHeadError(
            f"{git.root}: HEAD is detached at {short}; check out a branch (`git switch -c <name>`) "
            "or pass --allow-detached"
        )
    _log.warning("orchestrator.detached_head", commit=short)
    emit(
        ProgressEvent(
            "note",
            f"warning: HEAD is detached at {short}; task commits go on no branch, and `git switch -c <name>` "
            "afterwards keeps them",
        )
    )


def _dirty_listing(paths: Sequence[str]) -> str:
    """The first few of ``paths``, and how many more there are."""
    shown = ", ".join(paths[:_SHOWN_PATHS])
    more = len(paths) - _SHOWN_PATHS
    return f"{shown} +{more} more" if more > 0 else shown


async def require_clean_tree(session: RunContext) -> None:
    """The execute phase's refusal of uncommitted user changes, naming them and a stash that takes them all.

    A plain ``git stash`` leaves untracked files behind, and they would still end up in the first task's
    commit.
    """
    try:
        await check_working_tree(session)
    except WorkingTreeDirtyError:
        listing = _dirty_listing(await session.git.dirty_paths())
        raise WorkingTreeDirtyError(
            f"{session.repo_root} has uncommitted changes{f' ({listing})' if listing else ''}; commit or "
            "stash them first (`git stash -u` sets untracked files aside too), so that each task's change "
            "and commit contain only that task's work"
        ) from None
