"""Git as AutoDev runs it: with nothing an agent could have planted switched on, and the check of
recorded commits that ``autodev status`` and ``autodev ledger verify`` make.

A module of its own, below the orchestrator: the read-only commands use it without importing the
orchestrator (which costs start-up time they do not have).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

__all__ = ["HARDENED_CONFIG", "missing_landed_commits", "run_git_sync"]

# An agent with a shell can plant programs that git runs on its own: hooks (also through core.hooksPath),
# an fsmonitor, a signing program, external diff and textconv drivers. None of AutoDev's git calls needs
# any of them, so every call switches them off; what an agent wrote into .git/ is also put back after its
# call (``autodev.orchestrator.integrity``), these settings stop what slips in between.
HARDENED_CONFIG: tuple[str, ...] = (
    "-c",
    f"core.hooksPath={os.devnull}",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "commit.gpgSign=false",
    "-c",
    "tag.gpgSign=false",
    "-c",
    "diff.external=",
    "-c",
    "core.pager=cat",
    "-c",
    "protocol.ext.allow=never",
)


def run_git_sync(repo_root: Path, *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    """One git command in ``repo_root``, hardened, with a deadline, its output as text; for the read-only
    commands that run without an event loop. Raises ``OSError`` or ``subprocess.TimeoutExpired``."""
    env = {**os.environ, "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.run(
        ["git", *HARDENED_CONFIG, *args],
        cwd=repo_root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout_s,
    )


def missing_landed_commits(repo_root: Path, landed: Mapping[str, str]) -> list[str]:
    """``task id (commit)`` for each commit recorded as landed that the checked-out branch does not hold.

    Synchronous, for ``autodev status`` and ``autodev ledger verify``. Landed commits are recent: one walk
    of the branch's newest commits finds them all in the usual case; only a commit not found there costs
    a call of its own.
    """

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return run_git_sync(repo_root, *args)

    try:
        window = git("rev-list", f"--max-count={1000 + 20 * len(landed)}", "HEAD")
        if window.returncode != 0:
            return []  # no git, no branch: nothing here can tell
        recent = set(window.stdout.split())
        missing = []
        for task_id, commit in landed.items():
            if commit not in recent and git("merge-base", "--is-ancestor", commit, "HEAD").returncode != 0:
                missing.append(f"{task_id} ({commit[:10]})")
    except (OSError, subprocess.TimeoutExpired):
        return []
    return missing
