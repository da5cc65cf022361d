"""AutoDev's commits written without starting git (``autodev.workspace.objects``): byte for byte what
``git commit-tree`` writes at the same moment, read back and checked by git itself, and left to git
whenever git would write something else."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from support.git_calls import command_names, git_started
from support.parallel import own_home

from autodev.workspace.git import GitRepo
from autodev.workspace.objects import CommitWriter, blocking_settings, commit_body, git_timezone
from autodev.workspace.worktree import WorktreeManager


@pytest.fixture(autouse=True)
def _local_zone_restored() -> Iterator[None]:
    """Set up before ``monkeypatch``, so torn down after it put ``TZ`` back: the C library's zone follows."""
    yield
    time.tzset()


_MESSAGE = "autodev: 1.2 Add the parser\n\nTask 1.2: Add the parser (ünïcödé)"


def _git(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    return done.stdout.strip()


def _project(root: Path, *init: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q", *init)
    _git(root, "config", "user.name", "Jane Q. Developer")
    _git(root, "config", "user.email", "jane@example.com")
    (root / "app.py").write_text("print('hello')\n")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "initial")
    return root


def _same_commit_by_git(root: Path, commit: str, message: str) -> str:
    """What ``git commit-tree`` writes for ``commit``'s tree, parent and message at its moment."""
    raw = _git(root, "cat-file", "commit", commit)
    tree = raw.split("\n")[0].removeprefix("tree ")
    parent = raw.split("\n")[1].removeprefix("parent ")
    moment = raw.split("\ncommitter ")[1].split("\n")[0].split(" ")[-2:]
    date = " ".join(moment)
    env = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    return _git(root, "commit-tree", tree, "-p", parent, "-m", message, env=env)


async def _commit(git: GitRepo, message: str = _MESSAGE) -> str:
    head = await git.head()
    assert head is not None
    return await git.commit_tree(await git.tree_of(head), head, message)


def _asked_already(root: Path) -> GitRepo:
    """The repository's GitRepo after its first commit, which asks git how it would write one."""
    git = GitRepo(root)
    anyio.run(_commit, git)
    return git


@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/St_Johns"])
def test_a_commit_written_in_process_is_the_one_git_commit_tree_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, zone: str
) -> None:
    monkeypatch.setenv("TZ", zone)
    root = _project(tmp_path / "repo")
    git = _asked_already(root)
    started = git_started(monkeypatch)

    commit = anyio.run(_commit, git)

    assert not {"commit-tree", "var", "config"} & set(command_names(started))  # git was asked once only
    assert _same_commit_by_git(root, commit, _MESSAGE) == commit
    _git(root, "fsck", "--strict", "--no-dangling")
    assert _git(root, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", commit).startswith(
        "Jane Q. Developer <jane@example.com>|Jane Q. Developer <jane@example.com>|autodev: 1.2"
    )


def test_a_message_git_would_end_with_a_newline_and_one_already_ending_with_one(
    tmp_path: Path,
) -> None:
    root = _project(tmp_path / "repo")
    git = GitRepo(root)
    for message in ("one line", "ends with a newline\n", "trailing blank lines\n\n"):
        commit = anyio.run(_commit, git, message)
        assert _same_commit_by_git(root, commit, message) == commit


def test_a_sha256_repository_gets_sha256_commits(tmp_path: Path) -> None:
    root = _project(tmp_path / "repo", "--object-format=sha256")
    git = GitRepo(root)

    commit = anyio.run(_commit, git)

    assert len(commit) == 64
    assert _same_commit_by_git(root, commit, _MESSAGE) == commit
    _git(root, "fsck", "--strict", "--no-dangling")


def test_a_worktree_commit_goes_to_the_shared_object_store(tmp_path: Path) -> None:
    root = _project(tmp_path / "repo")
    main = GitRepo(root)

    async def in_a_worktree() -> tuple[str, Path]:
        manager = WorktreeManager(root, tmp_path / "worktrees", main_git=main)
        worktree = await manager.create("1.1", base=await main.head() or "")
        (worktree.path / "app.py").write_text("print('changed')\n")
        copy = GitRepo(worktree.path, like=main)
        tree = await copy.snapshot_tree()
        head = await copy.head()
        assert head is not None
        return await copy.commit_tree(tree, head, _MESSAGE), worktree.path

    commit, path = anyio.run(in_a_worktree)

    assert _git(root, "cat-file", "-t", commit) == "commit"
    assert _git(path, "show", f"{commit}:app.py") == "print('changed')"
    assert _same_commit_by_git(root, commit, _MESSAGE) == commit


def test_without_an_identity_the_fallback_one_is_written_as_git_writes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own_home(tmp_path / "home", monkeypatch)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv("EMAIL", raising=False)
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q")
    _git(
        root,
        "-c",
        "user.name=X",
        "-c",
        "user.email=x@example.com",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "i",
    )

    commit = anyio.run(_commit, GitRepo(root))

    assert _git(root, "log", "-1", "--format=%an <%ae>", commit) == "AutoDev <autodev@localhost>"
    _git(root, "fsck", "--strict", "--no-dangling")


@pytest.mark.parametrize(
    ("setting", "value", "seen"),
    [
        ("i18n.commitEncoding", "ISO-8859-1", "encoding ISO-8859-1"),
        ("core.sharedRepository", "group", None),
        ("core.fsyncObjectFiles", "true", None),
    ],
)
def test_settings_that_make_git_write_otherwise_leave_the_commit_to_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, value: str, seen: str | None
) -> None:
    root = _project(tmp_path / "repo")
    _git(root, "config", setting, value)
    started = git_started(monkeypatch)

    commit = anyio.run(_commit, GitRepo(root), "plain ascii")

    assert "commit-tree" in command_names(started)
    raw = _git(root, "cat-file", "commit", commit)
    if seen is not None:
        assert seen in raw.split("\n\n")[0]


@pytest.mark.parametrize(
    ("before", "after", "name"),
    [
        ({}, {"GIT_AUTHOR_NAME": "Someone Else", "GIT_COMMITTER_DATE": "1700000000 +0000"}, "Someone Else"),
        # GIT_CONFIG_COUNT stays the same while the numbered setting it counts changes.
        (
            {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.name", "GIT_CONFIG_VALUE_0": "First Name"},
            {"GIT_CONFIG_VALUE_0": "Second Name"},
            "Second Name",
        ),
    ],
)
def test_an_environment_changed_after_git_was_asked_leaves_the_commit_to_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, before: dict[str, str], after: dict[str, str], name: str
) -> None:
    root = _project(tmp_path / "repo")
    for variable, value in before.items():
        monkeypatch.setenv(variable, value)
    git = _asked_already(root)
    for variable, value in after.items():
        monkeypatch.setenv(variable, value)
    started = git_started(monkeypatch)

    commit = anyio.run(_commit, git)

    assert "commit-tree" in command_names(started)
    assert _git(root, "log", "-1", "--format=%an", commit) == name
    if "GIT_COMMITTER_DATE" in after:
        assert _git(root, "log", "-1", "--format=%ct", commit) == after["GIT_COMMITTER_DATE"].split()[0]


def test_a_store_that_cannot_be_written_leaves_the_commit_to_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "repo")
    git = _asked_already(root)

    def refuse(self: CommitWriter, object_id: str, compressed: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(CommitWriter, "_store", refuse)
    started = git_started(monkeypatch)

    commit = anyio.run(_commit, git)

    assert "commit-tree" in command_names(started)
    assert _git(root, "cat-file", "-t", commit) == "commit"


def test_names_that_are_not_full_object_ids_are_resolved_by_git(tmp_path: Path) -> None:
    root = _project(tmp_path / "repo")
    git = GitRepo(root)

    async def by_names() -> str:
        return await git.commit_tree("HEAD^{tree}", "HEAD", "by names")

    commit = anyio.run(by_names)

    assert _git(root, "rev-parse", f"{commit}^") == _git(root, "rev-parse", "HEAD~0")


def test_what_blocks_the_writer() -> None:
    assert blocking_settings({}) == []
    assert blocking_settings({"core.sharedrepository": "false", "i18n.commitencoding": "UTF-8"}) == []
    assert blocking_settings({"core.sharedrepository": "0640"}) == ["core.sharedRepository"]
    assert blocking_settings({"core.fsync": "loose-object"}) == ["core.fsync"]
    assert blocking_settings({"extensions.compatobjectformat": "sha256"}) == ["extensions.compatObjectFormat"]
    writer = CommitWriter.from_git(
        Path("objects"), "A <a@b> 1 +0000", "A <a@b> 1 +0000", {"core.loosecompression": "11"}, {}
    )
    assert writer is None
    fixed = {"GIT_AUTHOR_DATE": "1700000000 +0000"}
    assert CommitWriter.from_git(Path("objects"), "A <a@b> 1 +0000", "A <a@b> 1 +0000", {}, fixed) is None


def test_git_timezone_and_body(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/St_Johns")
    time.tzset()
    assert git_timezone(1_700_000_000) == "-0330"  # November: standard time
    assert git_timezone(1_690_000_000) == "-0230"  # July: daylight saving time
    body = commit_body("t" * 40, "p" * 40, "A <a@b> 1 +0000", "C <c@d> 2 -0100", "subject")
    assert body == (
        b"tree "
        + b"t" * 40
        + b"\nparent "
        + b"p" * 40
        + b"\nauthor A <a@b> 1 +0000\ncommitter C <c@d> 2 -0100"
        b"\n\nsubject\n"
    )
