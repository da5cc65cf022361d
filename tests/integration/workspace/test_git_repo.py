"""GitRepo on real repositories: diffs include untracked files, never .autodev/, never touch the index."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections import Counter
from pathlib import Path

import pytest
from support.git_calls import command_names, git_started

from autodev.state.paths import AutodevPaths, ensure_state_dir
from autodev.workspace import git as git_module
from autodev.workspace.changes import WatchedCopy
from autodev.workspace.git import GitError, GitRepo, run_git


def _apply(root: Path, patch: bytes) -> None:
    subprocess.run(["git", "apply", "--index", "--binary", "-"], cwd=root, input=patch, check=True)


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    root = tmp_path / "r"
    root.mkdir()
    _git(root, "init", "-q")
    (root / "kept.py").write_text("a = 1\n")
    _git(root, "add", "kept.py")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    ensure_state_dir(AutodevPaths(root))
    return root


@pytest.mark.asyncio
async def test_diff_covers_modified_new_and_deleted_files_but_not_state(git_repo: Path) -> None:
    repo = GitRepo(git_repo)
    base = await repo.ensure_base_commit()
    (git_repo / "kept.py").write_text("a = 2\n")
    (git_repo / "new.py").write_text("b = 1\n")
    (git_repo / ".autodev" / "ledger.jsonl").write_text("{}\n")
    index_before = (git_repo / ".git" / "index").read_bytes()
    diff = await repo.diff_against(base)
    assert diff.files == ("kept.py", "new.py")
    assert "+b = 1" in diff.patch and "-a = 1" in diff.patch
    assert ".autodev" not in diff.patch
    assert (git_repo / ".git" / "index").read_bytes() == index_before
    (git_repo / "kept.py").unlink()
    assert "kept.py" in (await repo.diff_against(base)).files


@pytest.mark.asyncio
async def test_commit_all_commits_everything_once(git_repo: Path) -> None:
    repo = GitRepo(git_repo)
    base = await repo.ensure_base_commit()
    assert await repo.commit_all("autodev: nothing") is None
    (git_repo / "new.py").write_text("b = 1\n")
    sha = await repo.commit_all("autodev: 1.1 Add new")
    assert sha is not None and sha != base
    assert await repo.commits_since(base) == [sha]
    assert (await repo.diff_against(sha)).is_empty
    assert "autodev: 1.1 Add new" in _git(git_repo, "log", "-1", "--format=%s")
    assert await repo.is_clean()


@pytest.mark.asyncio
async def test_repository_without_commits_or_identity(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    _git(root, "init", "-q")
    repo = GitRepo(root)
    assert await repo.head() is None
    base = await repo.ensure_base_commit()
    assert await repo.head() == base


@pytest.mark.asyncio
async def test_not_a_repository_is_a_clear_error(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path)
    assert not await repo.is_repository()
    with pytest.raises(GitError, match="git rev-parse"):
        await repo.diff_against("HEAD")


@pytest.mark.asyncio
async def test_git_runs_in_a_process_group_of_its_own_so_a_terminals_ctrl_c_does_not_kill_it(
    tmp_path: Path,
) -> None:
    # The alias's shell is git's child, in git's process group: its group is git's.
    found = await run_git(
        ["-c", "alias.group=!ps -o pgid= -p $$", "group"], cwd=tmp_path, env=os.environ, timeout_s=30
    )

    assert found.returncode == 0, found.stderr
    assert int(found.stdout.strip()) != os.getpgrp()


@pytest.mark.asyncio
async def test_autodevs_commits_start_no_housekeeping_until_it_asks_for_it(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
    repo = GitRepo(git_repo)
    for index in range(3):
        (git_repo / f"new{index}.py").write_text(f"x = {index}\n")
        assert await repo.commit_all(f"task {index}")
    assert _maintenance_runs(trace) == 0
    await repo.maintain()
    assert _maintenance_runs(trace) == 1


def _maintenance_runs(trace: Path) -> int:
    """git processes that ran ``git maintenance`` (started by AutoDev or by another git command)."""
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    return sum(event["event"] == "start" and "maintenance" in event["argv"] for event in events)


@pytest.mark.asyncio
async def test_added_bytes_counts_what_each_changed_path_adds(git_repo: Path) -> None:
    (git_repo / "grow[1].py").write_text("x" * 10)
    (git_repo / "shrink me.py").write_text("y" * 50)
    (git_repo / "gone.py").write_text("z" * 5)
    _git(git_repo, "add", ".")
    _git(git_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "sizes")
    base = _git(git_repo, "rev-parse", "HEAD").strip()
    (git_repo / "grow[1].py").write_text("x" * 25)
    (git_repo / "shrink me.py").write_text("y" * 20)
    (git_repo / "gone.py").unlink()
    (git_repo / "new" / "deep").mkdir(parents=True)
    (git_repo / "new" / "deep" / "made.bin").write_bytes(b"\0" * 300)
    (git_repo / "line\nbreak.py").write_text("w" * 7)

    added = await GitRepo(git_repo).added_bytes(base)

    assert added == {
        "grow[1].py": 15,
        "shrink me.py": 0,
        "gone.py": 0,
        "new/deep/made.bin": 300,
        "line\nbreak.py": 7,
    }


@pytest.mark.asyncio
async def test_the_git_directory_read_from_disk_is_the_one_git_names(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _git(git_repo, "worktree", "add", "-q", "--detach", str(tmp_path / "wt"))
    (tmp_path / "linked").symlink_to(git_repo)
    nested = git_repo / "vendored"
    nested.mkdir()
    _git(nested, "init", "-q")
    # A submodule-style checkout: its .git is a file naming a directory relative to it.
    (git_repo / ".git" / "modules").mkdir()
    (nested / ".git").rename(git_repo / ".git" / "modules" / "vendored")
    (nested / ".git").write_text("gitdir: ../.git/modules/vendored\n")
    roots = (git_repo, tmp_path / "wt", tmp_path / "linked", nested)
    named = [Path(_git(root, "rev-parse", "--absolute-git-dir").strip()) for root in roots]

    async def no_git(*args: object, **kwargs: object) -> None:
        raise AssertionError("git was started to find a git directory on disk")

    monkeypatch.setattr("autodev.workspace.git.run_git", no_git)
    assert [await GitRepo(root).git_dir() for root in roots] == named


@pytest.mark.asyncio
async def test_a_diff_sees_every_kind_of_change_and_rebuilds_its_tree(git_repo: Path, tmp_path: Path) -> None:
    (git_repo / "moved.py").write_text("m = 1\n")
    (git_repo / "script.sh").write_text("echo hi\n")
    (git_repo / "old.bin").write_bytes(b"\0\1\2")
    _git(git_repo, "add", ".")
    _git(git_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    base = _git(git_repo, "rev-parse", "HEAD").strip()
    (git_repo / "kept.py").write_text("a = 2\n")  # changed
    (git_repo / "moved.py").rename(git_repo / "renamed.py")  # renamed
    (git_repo / "script.sh").chmod(0o755)  # mode change
    (git_repo / "old.bin").unlink()  # deleted
    (git_repo / "new.bin").write_bytes(bytes(range(256)))  # binary, new
    (git_repo / "fresh dir" / "deep").mkdir(parents=True)
    (git_repo / "fresh dir" / "deep" / "odd\nname.py").write_text("x = 1\n")  # untracked, new directory
    repo = GitRepo(git_repo)

    diff = await repo.diff_against(base)

    assert diff.files == (
        "fresh dir/deep/odd\nname.py",
        "kept.py",
        "moved.py",
        "new.bin",
        "old.bin",
        "renamed.py",
        "script.sh",
    )
    assert diff.tree == await repo.snapshot_tree()
    assert not (git_repo / ".autodev").exists() or ".autodev" not in diff.patch
    # The patch is the whole change: applied to a clean checkout of the base it gives the same tree.
    _git(git_repo, "worktree", "add", "-q", "--detach", str(tmp_path / "clean"), base)
    _apply(tmp_path / "clean", diff.patch.encode("utf-8", errors="surrogateescape"))
    assert _git(tmp_path / "clean", "write-tree").strip() == diff.tree
    assert (await repo.diff_against(diff.tree)).files == ()


@pytest.mark.asyncio
async def test_housekeeping_that_cannot_finish_fails_nothing(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    warnings: list[tuple[str, dict[str, object]]] = []

    class Recorder:
        def warning(self, event: str, **fields: object) -> None:
            warnings.append((event, fields))

    monkeypatch.setattr("autodev.workspace.git._log", Recorder())
    await GitRepo(git_repo, timeout_s=1e-6).maintain()  # raises nothing: the tasks are done
    assert [event for event, _ in warnings] == ["git.maintenance_failed"]
    assert "did not finish" in str(warnings[0][1]["detail"])


@pytest.mark.asyncio
async def test_commits_since_the_base_are_counted_with_their_paths_and_none_at_the_base(
    git_repo: Path,
) -> None:
    repo = GitRepo(git_repo)
    base = _git(git_repo, "rev-parse", "HEAD").strip()
    assert await repo.commits_and_paths_since(base) == (0, [])
    (git_repo / "new.py").write_text("b = 2\n")
    _git(git_repo, "add", "new.py")
    _git(git_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "on top")
    assert await repo.commits_and_paths_since(base) == (1, ["new.py"])


def _index_reads(trace: Path, command: str) -> list[int]:
    """The entry counts of the index reads git's trace (``GIT_TRACE2_EVENT``) records for ``command``."""
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    processes = {e["sid"] for e in events if e["event"] == "cmd_name" and e["name"] == command}
    return [
        int(event["value"])
        for event in events
        if event["sid"] in processes and event["event"] == "data" and event["key"] == "read/cache_nr"
    ]


@pytest.mark.asyncio
async def test_the_paths_between_two_commits_are_listed_without_reading_the_index(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(git_repo)
    base = await repo.ensure_base_commit()
    (git_repo / "kept.py").write_text("a = 2\n")
    (git_repo / "pkg").mkdir()
    (git_repo / "pkg" / "new.py").write_text("b = 1\n")
    _git(git_repo, "add", "-A", "kept.py", "pkg")
    _git(git_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "two")
    ahead = _git(git_repo, "rev-parse", "HEAD").strip()
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
    assert await repo.changed_between(base, ahead) == ["kept.py", "pkg/new.py"]
    assert await repo.changed_between(ahead, base) == ["kept.py", "pkg/new.py"]
    # What git's own diff-tree says, reading the index as it always does: the same names.
    _git(git_repo, "diff-tree", "-r", "--name-only", base, ahead)
    assert _index_reads(trace, "diff-tree") == [2]
    assert (git_repo / ".git" / "index").exists()


async def _landed(repo: GitRepo, parent: str, message: str) -> str:
    """A commit of the working tree on ``parent``, its change read as a landing reads it."""
    commit = await repo.commit_tree(await repo.snapshot_tree(), parent, message)
    await repo.learn_change(commit)
    return commit


@pytest.mark.asyncio
async def test_the_paths_between_autodevs_own_commits_come_from_their_changes_without_git(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(git_repo)
    base = await repo.ensure_base_commit()
    (git_repo / "pkg").mkdir()
    (git_repo / "pkg" / "one.py").write_text("one = 1\n")
    first = await _landed(repo, base, "one")
    (git_repo / "kept.py").unlink()
    (git_repo / "two.py").write_text("two = 2\n")
    second = await _landed(repo, first, "two")
    # Another GitRepo of the same repository (a pooled worktree's) shares what the run's one learned.
    worktree_view = GitRepo(git_repo, like=repo)
    started = git_started(monkeypatch)
    assert await worktree_view.changed_between(base, second) == ["kept.py", "pkg/one.py", "two.py"]
    assert await worktree_view.changed_between(first, second) == ["kept.py", "two.py"]
    assert started == []
    # Every answer is git's own.
    assert _git(git_repo, "diff-tree", "-r", "--name-only", base, second).split() == [
        "kept.py",
        "pkg/one.py",
        "two.py",
    ]


@pytest.mark.asyncio
async def test_a_path_changed_by_two_of_autodevs_commits_is_left_to_git_which_sees_it_back_as_it_was(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = GitRepo(git_repo)
    base = await repo.ensure_base_commit()
    (git_repo / "kept.py").write_text("a = 2\n")
    (git_repo / "other.py").write_text("o = 1\n")
    first = await _landed(repo, base, "change")
    (git_repo / "kept.py").write_text("a = 1\n")  # back as the base has it
    second = await _landed(repo, first, "change back")
    started = git_started(monkeypatch)
    assert await repo.changed_between(base, second) == ["other.py"]
    assert command_names(started) == ["diff-tree"]
    # Commits AutoDev did not make (or whose change it never read) are git's to compare as well.
    (git_repo / "kept.py").write_text("a = 3\n")
    _git(git_repo, "add", "-A")
    _git(git_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "by hand")
    by_hand = _git(git_repo, "rev-parse", "HEAD").strip()
    started.clear()
    assert await repo.changed_between(base, by_hand) == ["kept.py", "other.py"]
    assert command_names(started) == ["diff-tree"]


def _preloads(trace: Path) -> Counter[str]:
    """How often each git command preloaded its whole index (``GIT_TRACE2_EVENT``)."""
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    names = {event["sid"]: event["name"] for event in events if event["event"] == "cmd_name"}
    return Counter(
        names.get(event["sid"], "?")
        for event in events
        if event["event"] == "region_enter" and event.get("label") == "preload"
    )


@pytest.mark.asyncio
async def test_commands_on_a_few_paths_leave_the_rest_of_the_index_alone(
    git_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # git's index preload matches every entry against the pathspecs in threads (about 1 ms a command at
    # 5,000 entries) for the one or two paths a task wrote.
    (git_repo / "other.py").write_text("b = 1\n")
    _git(git_repo, "add", "other.py")
    _git(git_repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "other")
    base = _git(git_repo, "rev-parse", "HEAD").strip()
    monkeypatch.setenv("GIT_TEST_PRELOAD_INDEX", "1")  # git preloads from two entries, not from 1,000
    trace = tmp_path / "trace.json"
    monkeypatch.setenv("GIT_TRACE2_EVENT", str(trace))
    repo = GitRepo(git_repo)
    assert await repo.dirty_paths() == []
    assert _preloads(trace) == {"status": 1}  # the whole tree: as git does it
    assert await repo.watch()
    try:
        trace.unlink()
        started = git_started(monkeypatch)
        (git_repo / "kept.py").write_text("a = 2\n")
        assert await repo.dirty_paths() == ["kept.py"]
        assert await repo.is_clean(["other.py"])
        ahead = await repo.commit_all("change")
        assert ahead is not None
        _git(git_repo, "reset", "-q", "--hard", base)
        assert await repo.fast_forward(ahead)
        assert (git_repo / "kept.py").read_text() == "a = 2\n"
        assert {"status", "add", "restore"} <= set(command_names(started))
        assert not {"status", "add", "restore"} & set(_preloads(trace))
    finally:
        repo.unwatch()


@pytest.mark.asyncio
async def test_the_scratch_index_is_copied_beside_the_event_loop_not_on_it(
    git_repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy is as large as the index (megabytes in a large repository): every other task's work on the
    event loop would wait for each snapshot's copy if it were made there."""
    seeded_in: list[int] = []
    seed = git_module._seed_scratch_index

    def recording_seed(index: Path, real_index: Path, own: WatchedCopy | None) -> None:
        seeded_in.append(threading.get_ident())
        seed(index, real_index, own)

    monkeypatch.setattr(git_module, "_seed_scratch_index", recording_seed)
    repo = GitRepo(git_repo)
    base = await repo.ensure_base_commit()
    (git_repo / "kept.py").write_text("a = 2\n")
    diff = await repo.diff_against(base)
    assert diff.files == ("kept.py",)  # staged onto the copy of the real index, which knew kept.py
    await repo.restore_from_tree(await repo.tree_of(base), ["kept.py"])
    assert (git_repo / "kept.py").read_text() == "a = 1\n"
    assert len(seeded_in) == 2
    assert threading.get_ident() not in seeded_in
