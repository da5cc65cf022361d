"""A landing's fast-forward moves the user's branch as ``git update-ref`` does, without starting git
(``autodev.workspace.refs.advance_branch``): the same ref file, the same reflog lines in HEAD's log and the
branch's, and git itself wherever it would do otherwise. Real git, compared line for line."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import pytest
from support.git_calls import command_names, git_started

from autodev.workspace.git import GitRepo
from autodev.workspace.refs import advance_branch


def _git(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    environment = {**os.environ, **(env or {})}
    done = subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True, env=environment
    )
    return done.stdout.strip()


def _repository(root: Path) -> tuple[str, str]:
    """A checkout on ``main`` at commit A, and a commit B on top of A that adds a file, not checked out."""
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "config", "user.name", "Jane Q. Developer")
    _git(root, "config", "user.email", "jane@example.com")
    (root / "kept.txt").write_text("A\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "A")
    old = _git(root, "rev-parse", "HEAD")
    (root / "added.txt").write_text("B\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "B")
    new = _git(root, "rev-parse", "HEAD")
    _git(root, "reset", "-q", "--hard", old)
    return old, new


def _fast_forward(root: Path, commit: str) -> bool:
    async def move() -> bool:
        main = GitRepo(root)
        assert await main.watch()
        try:
            return await main.fast_forward(commit)
        finally:
            main.unwatch()

    return anyio.run(move)


def _last_line(path: Path) -> str:
    return path.read_text().splitlines()[-1]


def test_a_fast_forward_moves_the_branch_and_writes_the_reflog_lines_git_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    old, new = _repository(root)
    started = git_started(monkeypatch)

    assert _fast_forward(root, new)

    assert "update-ref" not in command_names(started)
    assert (root / ".git/refs/heads/main").read_text() == f"{new}\n"
    assert _git(root, "rev-parse", "HEAD") == new
    assert (root / "added.txt").read_text() == "B\n"
    assert _git(root, "status", "--porcelain") == ""
    ours = [_last_line(root / ".git/logs/HEAD"), _last_line(root / ".git/logs/refs/heads/main")]
    assert ours[0] == ours[1]
    assert _git(root, "reflog", "-1", "--format=%gs") == f"merge {new}: Fast-forward"
    assert not (root / ".git/HEAD.lock").exists() and not (root / ".git/refs/heads/main.lock").exists()
    # The same move by git at the same moment writes the same line.
    moment = ours[0].split("\t")[0].split(" ")[-2:]
    _git(root, "update-ref", "HEAD", old)
    date = {"GIT_COMMITTER_DATE": " ".join(moment)}
    _git(root, "update-ref", "-m", f"merge {new}: Fast-forward", "HEAD", new, old, env=date)
    theirs = [_last_line(root / ".git/logs/HEAD"), _last_line(root / ".git/logs/refs/heads/main")]
    assert theirs == ours
    _git(root, "fsck", "--strict", "--no-dangling")


def test_a_branch_only_in_packed_refs_is_moved_by_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    _, new = _repository(root)
    _git(root, "pack-refs", "--all")
    started = git_started(monkeypatch)

    assert _fast_forward(root, new)

    assert "update-ref" in command_names(started)
    assert _git(root, "rev-parse", "HEAD") == new


def test_without_reflogs_kept_none_is_started(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    _, new = _repository(root)
    _git(root, "config", "core.logAllRefUpdates", "false")
    for log in (root / ".git/logs/HEAD", root / ".git/logs/refs/heads/main"):
        log.unlink()

    assert _fast_forward(root, new)

    assert _git(root, "rev-parse", "HEAD") == new
    assert not (root / ".git/logs/HEAD").exists()
    assert not (root / ".git/logs/refs/heads/main").exists()


def test_a_lock_someone_holds_leaves_the_branch_and_the_lock_as_they_are(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    old, new = _repository(root)
    (root / ".git/refs/heads/main.lock").write_text("someone else's\n")

    assert not advance_branch(root / ".git", new, old, b"line\n", create_logs=True)

    assert (root / ".git/refs/heads/main").read_text() == f"{old}\n"
    assert (root / ".git/refs/heads/main.lock").read_text() == "someone else's\n"
    assert not (root / ".git/HEAD.lock").exists()
    assert "line" not in (root / ".git/logs/HEAD").read_text()


def test_a_branch_that_moved_elsewhere_is_not_moved(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    old, new = _repository(root)

    assert not advance_branch(root / ".git", new, new, b"line\n", create_logs=True)

    assert _git(root, "rev-parse", "HEAD") == old
    assert not (root / ".git/HEAD.lock").exists() and not (root / ".git/refs/heads/main.lock").exists()


def test_a_detached_head_is_left_to_git(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    old, new = _repository(root)
    _git(root, "checkout", "-q", "--detach")

    assert not advance_branch(root / ".git", new, old, b"line\n", create_logs=True)

    assert _git(root, "rev-parse", "HEAD") == old


def test_a_main_checkout_in_a_linked_worktree_is_moved_by_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "repo"
    old, new = _repository(root)
    linked = tmp_path / "linked"
    _git(root, "worktree", "add", "-q", "-b", "feature", str(linked), old)
    started = git_started(monkeypatch)

    assert _fast_forward(linked, new)

    assert "update-ref" in command_names(started)
    assert _git(linked, "rev-parse", "HEAD") == new
    assert _git(root, "rev-parse", "refs/heads/feature") == new
    assert _git(root, "rev-parse", "HEAD") == old
