"""Git submodules: a task's change may not reach into one.

A change inside a submodule is a commit in another repository plus a new pointer in this one; AutoDev
reviews, tests and commits changes of one repository. Rather than drop such edits (git shows the parent
no change for a submodule's modified files), a plan whose task lists a file inside a submodule is refused
when it is saved, and an attempt that changed a submodule's files or pointer fails with the paths named.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from autodev.errors import PlanParseError
from autodev.gitsafety import HARDENED_CONFIG
from autodev.state.schemas import Plan

__all__ = ["refuse_submodule_files", "submodule_paths", "submodules_touched"]

_GITLINK = "160000"


def submodule_paths(root: Path) -> list[str]:
    """The paths of the submodules recorded in ``root``'s index (none without a ``.gitmodules``)."""
    if not (root / ".gitmodules").exists():
        return []
    listed = subprocess.run(
        ["git", *HARDENED_CONFIG, "ls-files", "--stage", "-z"],
        cwd=root,
        env={**os.environ, "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"},
        capture_output=True,
        check=False,
        timeout=120,
    )
    found = []
    for entry in listed.stdout.decode("utf-8", "surrogateescape").split("\0"):
        meta, _, path = entry.partition("\t")
        if meta.startswith(_GITLINK + " "):
            found.append(path)
    return found


def _inside(path: str, submodules: Sequence[str]) -> str | None:
    return next((sub for sub in submodules if path == sub or path.startswith(sub + "/")), None)


def refuse_submodule_files(plan: Plan, root: Path, *, source: str) -> None:
    """Refuse ``plan`` when one of its tasks lists a file inside a submodule of ``root``."""
    submodules = submodule_paths(root)
    if not submodules:
        return
    for task in plan.iter_tasks():
        for path in task.files:
            sub = _inside(path, submodules)
            if sub is not None:
                raise PlanParseError(
                    f"task {task.id} lists {path}, which is inside the git submodule {sub}; AutoDev changes "
                    f"one repository at a time: plan that work in the submodule's own repository (run "
                    f"autodev there), and here only the pointer update after it",
                    source=source,
                )


def submodules_touched(root: Path, dirty: Sequence[str]) -> list[str]:
    """The submodules of ``root`` an agent changed: among ``dirty`` paths (files or recorded commit
    changed), or, where the submodule is not checked out (a task's worktree), any file written into its
    directory, which git does not report at all."""
    submodules = submodule_paths(root)
    touched = {sub for path in dirty if (sub := _inside(path, submodules)) is not None}
    for sub in submodules:
        directory = root / sub
        if not (directory / ".git").exists() and directory.is_dir() and any(directory.iterdir()):
            touched.add(sub)
    return sorted(touched)
