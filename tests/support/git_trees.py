"""Git repositories for the tree-splicing tests: commits on two sides of a base, each side's change as
AutoDev reads it (``git diff --raw``), and the in-process object writer of the repository."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from autodev.workspace.objects import CommitWriter
from autodev.workspace.trees import FileEntry, raw_entries
from support.parallel import git

IDENT = "Jane Q. Developer <jane@example.com> 1700000000 +0000"

Edit = Callable[[Path], None]


def write(root: Path, path: str, content: str | bytes = "x\n") -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content)


def commit(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", message)
    return git(root, "rev-parse", "HEAD").strip()


def branches(root: Path, landing: Edit, task: Edit) -> tuple[str, str, str]:
    """The base, a landing on it (the branch moved) and a task's commit on the base."""
    base = git(root, "rev-parse", "HEAD").strip()
    landing(root)
    landed = commit(root, "landing")
    git(root, "checkout", "-q", "--detach", base)
    task(root)
    own = commit(root, "task")
    return base, landed, own


def entries_between(root: Path, old: str, new: str) -> dict[str, FileEntry]:
    """Each changed path's new mode and object id, as AutoDev reads them from ``git diff --raw``."""
    return raw_entries(git(root, "diff", "--raw", "-z", "--no-renames", "--no-abbrev", old, new))


def object_writer(root: Path) -> CommitWriter:
    objects = Path(git(root, "rev-parse", "--path-format=absolute", "--git-common-dir").strip()) / "objects"
    writer = CommitWriter.from_git(objects, IDENT, IDENT, {}, os.environ)
    assert writer is not None
    return writer


def tree_of(root: Path, commit: str) -> str:
    return git(root, "rev-parse", f"{commit}^{{tree}}").strip()
