"""A checkout with a real remote: a bare ``origin`` repository on disk, a clone tracking its ``main``, and
commits pushed to the remote from elsewhere, so that the checkout falls behind as a real one does."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.parallel import git


def bare_origin_of(repo: Path, origin: Path) -> Path:
    """Make ``origin`` a bare copy of ``repo`` and ``repo``'s ``origin``, its branch tracking origin's."""
    git(repo.parent, "clone", "-q", "--bare", str(repo), str(origin))
    branch = git(repo, "symbolic-ref", "--short", "HEAD").strip()
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "fetch", "-q", "origin")
    git(repo, "branch", "-q", f"--set-upstream-to=origin/{branch}")
    git(repo, "remote", "set-head", "origin", branch)
    return origin


def push_from_elsewhere(origin: Path, scratch: Path, count: int, *, prefix: str = "upstream") -> None:
    """Push ``count`` new commits to ``origin``'s default branch from a clone in ``scratch``."""
    if scratch.exists():
        shutil.rmtree(scratch)
    git(origin.parent, "clone", "-q", str(origin), str(scratch))
    for n in range(count):
        (scratch / f"{prefix}_{n}.txt").write_text(f"{prefix} {n}\n")
        git(scratch, "add", "-A")
        git(scratch, "commit", "-q", "-m", f"{prefix} change {n}")
    git(scratch, "push", "-q", "origin", "HEAD")
