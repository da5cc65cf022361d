"""Landing a task's commit on the main checkout is a fast-forward that never overwrites anybody's work: a
file the user created where the task adds one, or an uncommitted edit of a file the task changes, stops the
landing with the paths named and the file untouched; only what a fast-forward cut short leaves (each path as
the old or the new commit has it) is repaired. Real git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest

from autodev.workspace.git import GitRepo
from autodev.workspace.integration import MainTreeChangedError, land_on_main

IDENTITY = ["-c", "user.name=t", "-c", "user.email=t@invalid"]


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()


def _repository(tmp_path: Path) -> tuple[Path, str, str]:
    """A checkout at commit A (``kept.txt``, ``edited.txt``, ``gone.txt``) and a commit B on top of it,
    not checked out, that adds ``added.txt``, changes ``edited.txt`` and deletes ``gone.txt``."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    for name in ("kept.txt", "edited.txt", "gone.txt"):
        (root / name).write_text(f"{name} as in A\n")
    _git(root, "add", "-A")
    _git(root, *IDENTITY, "commit", "-qm", "A")
    head = _git(root, "rev-parse", "HEAD")
    _git(root, "checkout", "-q", "--detach")
    (root / "added.txt").write_text("added by the task\n")
    (root / "edited.txt").write_text("edited.txt as the task left it\n")
    (root / "gone.txt").unlink()
    _git(root, "add", "-A")
    _git(root, *IDENTITY, "commit", "-qm", "B")
    task_commit = _git(root, "rev-parse", "HEAD")
    _git(root, "checkout", "-q", "-")
    return root, head, task_commit


@pytest.mark.parametrize(
    ("path", "content"),
    [("added.txt", "the user's own notes\n"), ("edited.txt", "the user's uncommitted edit\n")],
)
def test_the_users_file_on_a_path_the_task_writes_stops_the_landing_untouched(
    tmp_path: Path, path: str, content: str
) -> None:
    root, head, task_commit = _repository(tmp_path)
    (root / path).write_text(content)

    with pytest.raises(MainTreeChangedError, match=f"changes AutoDev did not make \\({path}\\)"):
        anyio.run(land_on_main, GitRepo(root), task_commit, head)

    assert (root / path).read_text() == content
    assert _git(root, "rev-parse", "HEAD") == head


def test_what_a_fast_forward_cut_short_left_is_repaired_and_the_commit_lands(tmp_path: Path) -> None:
    root, head, task_commit = _repository(tmp_path)
    # Killed half way: one path already as B has it, one deleted as B deletes it, one not yet written.
    (root / "edited.txt").write_text("edited.txt as the task left it\n")
    (root / "gone.txt").unlink()

    anyio.run(land_on_main, GitRepo(root), task_commit, head)

    assert _git(root, "rev-parse", "HEAD") == task_commit
    assert _git(root, "status", "--porcelain") == ""
    assert (root / "added.txt").read_text() == "added by the task\n"
