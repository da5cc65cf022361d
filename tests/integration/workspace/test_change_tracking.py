"""Working copies whose changes the kernel reports (inotify): the tracker itself, and every git call that
asks about the changed paths only instead of scanning the tree. Each answer is compared with git's own
full scan of the same copy, so a path the tracker missed shows up as a difference."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
import pytest_asyncio
from support.git_calls import command_names, git_started
from support.parallel import commit_everything as _commit
from support.parallel import git as _git
from support.parallel import index_format

from autodev.faults import environment_fault
from autodev.workspace import changes
from autodev.workspace import git as git_module
from autodev.workspace.changes import ChangeTracker
from autodev.workspace.git import GitError, GitRepo
from autodev.workspace.worktree import WorktreeManager
from autodev.workspace.worktree_pool import WorktreePool


def _inotify_available() -> bool:
    with tempfile.TemporaryDirectory() as empty:
        tracker = ChangeTracker.start(Path(empty))
        if tracker is None:
            return False
        tracker.close()
        return True


pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not _inotify_available(), reason="needs Linux inotify"
)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path.resolve() / "repo"
    (root / "pkg" / "deep").mkdir(parents=True)
    _git(root, "init", "-q")
    (root / ".gitignore").write_text("*.log\nbuild/\n")
    (root / "app.py").write_text("VALUE = 1\n")
    (root / "tool.sh").write_text("echo hi\n")
    (root / "pkg" / "gone.py").write_text("GONE = False\n")
    (root / "pkg" / "moved.py").write_text("MOVED = 1\n")
    (root / "pkg" / "deep" / "leaf.py").write_text("LEAF = 1\n")
    (root / "data.bin").write_bytes(bytes(range(256)))
    _commit(root, "init")
    return root


def _every_kind_of_change(copy: Path, outside: Path) -> None:
    """New, deleted, renamed, mode change, binary, untracked in new directories, ignored output, a
    directory moved in from outside, a tracked directory moved out, a symbolic link, a hard link."""
    (copy / "app.py").write_text("VALUE = 2\n")
    (copy / "pkg" / "gone.py").unlink()
    (copy / "pkg" / "moved.py").rename(copy / "pkg" / "renamed.py")
    (copy / "tool.sh").chmod(0o755)
    (copy / "data.bin").write_bytes(bytes(reversed(range(256))) + b"\0\1")
    (copy / "new" / "pkg").mkdir(parents=True)
    (copy / "new" / "pkg" / "added.py").write_text("ADDED = True\n")
    (copy / "debug.log").write_text("ignored\n")
    (copy / "build").mkdir()
    (copy / "build" / "out.o").write_bytes(b"\0\1")
    staged = outside / "incoming"
    (staged / "inner").mkdir(parents=True)
    (staged / "inner" / "brought.py").write_text("BROUGHT = 1\n")
    staged.rename(copy / "incoming")
    (copy / "incoming" / "inner" / "later.py").write_text("LATER = 1\n")  # inside the moved-in directory
    (copy / "pkg" / "deep").rename(outside / "deep-away")
    (copy / "link").symlink_to("app.py")
    os.link(copy / "tool.sh", outside / "hard-link")


def _full_scan_tree(copy: Path) -> str:
    """The tree git's full scan writes from ``copy`` (the way AutoDev did before it watched)."""
    env_index = copy.parent / f"{copy.name}-full-index"
    git_dir = Path(_git(copy, "rev-parse", "--absolute-git-dir").strip())
    shutil.copy2(git_dir / "index", env_index)
    env = {**os.environ, "GIT_INDEX_FILE": str(env_index)}
    subprocess.run(["git", "add", "-A", "--", ".", ":(exclude).autodev"], cwd=copy, env=env, check=True)
    tree = subprocess.run(["git", "write-tree"], cwd=copy, env=env, check=True, capture_output=True)
    env_index.unlink()
    return tree.stdout.decode().strip()


def _files(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every file below ``root`` but ``.git``: its mode bits and its content (a link's target)."""
    found = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if relative == ".git" or relative.startswith(".git/"):
            continue
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            found[relative] = (info.st_mode, os.readlink(path).encode())
        elif stat.S_ISREG(info.st_mode):
            found[relative] = (info.st_mode & 0o777, path.read_bytes())
        else:
            found[relative] = (stat.S_IFMT(info.st_mode), b"")
    return found


def test_the_tracker_reports_every_kind_of_change_and_nothing_it_skips(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    tracker = ChangeTracker.start(repo, skip=(".git", "build"))
    assert tracker is not None
    mark = tracker.mark()
    assert tracker.changes_since(mark) == set()
    _every_kind_of_change(repo, outside)  # makes build/, which the tracker is told to skip
    (repo / "build" / "inside.o").write_bytes(b"x")
    found = tracker.changes_since(mark)
    assert found is not None
    assert {
        "app.py",
        "pkg/gone.py",
        "pkg/moved.py",
        "pkg/renamed.py",
        "tool.sh",
        "data.bin",
        "new",
        "debug.log",
        "incoming",
        "pkg/deep",
        "link",
    } <= found
    assert not any(path == "build" or path.startswith("build/") for path in found)
    later = tracker.mark()
    assert tracker.changes_since(later) == set()
    # A directory moved in is watched from when its arrival was read (before, its name covers it).
    (repo / "incoming" / "inner" / "latest.py").write_text("LATEST = 1\n")
    (repo / "new" / "pkg" / "added.py").unlink()
    assert tracker.changes_since(later) == {"incoming/inner/latest.py", "new/pkg/added.py"}
    tracker.close()


def test_the_tracker_cannot_tell_once_its_root_is_gone(tmp_path: Path) -> None:
    root = tmp_path / "copy"
    root.mkdir()
    tracker = ChangeTracker.start(root)
    assert tracker is not None
    mark = tracker.mark()
    root.rename(tmp_path / "elsewhere")
    assert tracker.changes_since(mark) is None and tracker.broken
    tracker.close()


def _inotify_descriptors() -> set[int]:
    found = set()
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{name}") == "anon_inode:inotify":
                found.add(int(name))
    return found


def test_closing_a_tracker_leaves_the_kernel_s_wait_to_a_thread_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed_in: list[str] = []
    real_close = changes._close

    def noted(fd: int) -> None:
        closed_in.append(threading.current_thread().name)
        real_close(fd)

    monkeypatch.setattr(changes, "_close", noted)
    for closing in threading.enumerate():  # an earlier test's descriptor closing now could be reused below
        if closing.name == "autodev-inotify-close":
            closing.join(timeout=30)
    before = _inotify_descriptors()
    tracker = ChangeTracker.start(tmp_path)
    assert tracker is not None
    (fd,) = _inotify_descriptors() - before
    tracker.close()
    assert tracker.broken == "closed"  # given up at once, whenever the kernel is done with it
    deadline = time.monotonic() + 30
    while fd in _inotify_descriptors() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fd not in _inotify_descriptors()
    assert closed_in == ["autodev-inotify-close"]


def test_a_file_system_mounted_below_the_copy_makes_the_tracker_unsure(tmp_path: Path) -> None:
    """Writes under a mount point raise no event on the copy's watches: the tracker must stop answering.
    The mount table is read again only when the kernel reports a change, so a mount made after the
    tracker's last answer is what this checks."""
    root = tmp_path / "copy"
    (root / "mnt").mkdir(parents=True)
    tracker = ChangeTracker.start(root)
    assert tracker is not None
    mark = tracker.mark()
    assert tracker.changes_since(mark) == set()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "autodev-test", str(root / "mnt")], capture_output=True)
    if mounted.returncode != 0:
        tracker.close()
        pytest.skip("cannot mount a file system here (needs root)")
    try:
        assert tracker.changes_since(mark) is None and tracker.broken
    finally:
        subprocess.run(["umount", str(root / "mnt")], check=True)
        tracker.close()


def test_a_changed_gitignore_makes_a_tracker_that_skips_ignored_directories_unsure(repo: Path) -> None:
    tracker = ChangeTracker.start(repo, skip=(".git", "build"), skip_ignore_files=True)
    assert tracker is not None
    mark = tracker.mark()
    (repo / ".gitignore").write_text("*.log\n")  # build/ is no longer ignored, and it is not watched
    assert tracker.changes_since(mark) is None
    tracker.close()


@pytest_asyncio.fixture(params=["whole", "split"])
async def watched_worktree(repo: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[GitRepo, str]]:
    """A worktree at the repository's HEAD, watched as a pooled one is, and that HEAD; its index whole, or
    split as a large repository's worktrees have it."""
    split_from = 1 if request.param == "split" else 0
    manager = WorktreeManager(repo, repo / ".autodev" / "worktrees", split_index_min_entries=split_from)
    base = _git(repo, "rev-parse", "HEAD").strip()
    worktree = await manager.create("pool-0", base)
    assert index_format(worktree.path) == request.param
    git = GitRepo(worktree.path)
    assert await git.watch(recycled=True)
    try:
        yield git, base
    finally:
        git.unwatch()
        await manager.cleanup_all()


@pytest.mark.asyncio
async def test_a_watched_worktree_writes_the_full_scan_tree_and_diff(
    watched_worktree: tuple[GitRepo, str], tmp_path: Path
) -> None:
    git, base = watched_worktree
    copy = git.root
    outside = tmp_path / "outside"
    outside.mkdir()
    _every_kind_of_change(copy, outside)
    _git(copy, "update-index", "--chmod=+x", "app.py")  # an agent's own staging
    diff = await git.diff_against(base)
    assert diff.tree == _full_scan_tree(copy)
    expected = {"app.py", "pkg/gone.py", "pkg/renamed.py", "new/pkg/added.py", "incoming/inner/later.py"}
    assert expected <= set(diff.files)
    assert "GIT binary patch" in diff.patch and "new mode 100755" in diff.patch
    assert sorted(await git.dirty_paths()) == sorted(await _unwatched(git).dirty_paths())
    # Nothing changed since: the tree written last is the answer, and a later change is not missed.
    assert (await git.diff_against(base)).tree == diff.tree
    (copy / "new" / "pkg" / "added.py").write_text("ADDED = False\n")
    assert (await git.snapshot_tree()) == _full_scan_tree(copy) != diff.tree


def _unwatched(git: GitRepo) -> GitRepo:
    class Unwatched(GitRepo):
        def _watched(self) -> changes.WatchedCopy | None:
            return None

    return Unwatched(git.root)


@pytest.mark.asyncio
@pytest.mark.parametrize("layout", ["whole", "split"])
async def test_a_recycled_worktree_keeps_nothing_of_the_previous_task(
    repo: Path, tmp_path: Path, layout: str
) -> None:
    split_from = 1 if layout == "split" else 0
    pool = WorktreePool(repo, repo / ".autodev" / "worktrees", 1, split_index_min_entries=split_from)
    await pool.warm_up(1)
    fresh_dir = tmp_path / "fresh"
    try:
        first = await pool.claim("1.1")
        outside = tmp_path / "outside"
        outside.mkdir()
        _every_kind_of_change(first.path, outside)
        _git(first.path, "add", "new")  # staged by the agent: an index entry the base does not have
        _git(first.path, "commit", "-q", "-m", "the agent's own commit", "--", "new")
        (first.path / "pkg" / "after-commit.py").write_text("X = 1\n")
        # The next task's base: the main branch moved on meanwhile.
        (repo / "app.py").write_text("VALUE = 10\n")
        (repo / "pkg" / "gone.py").unlink()
        (repo / "pkg" / "deep" / "added-on-main.py").write_text("MAIN = 1\n")
        next_base = _commit(repo, "main moved")
        await pool.release(first)
        copy = changes.watched(first.path)
        assert copy is not None and copy.index_bytes is not None
        recycled = GitRepo(first.path)
        second = await pool.claim("1.2", next_base)
        assert second.path == first.path
        assert changes.watched(second.path) is copy  # reset by undoing the changes, not re-checked-out
        _git(repo, "worktree", "add", "-q", "--detach", str(fresh_dir), next_base)
        assert _files(second.path) == _files(fresh_dir)
        assert _git(second.path, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
        assert _git(second.path, "ls-files", "-s") == _git(fresh_dir, "ls-files", "-s")  # no stale entry
        assert _git(second.path, "rev-parse", "HEAD").strip() == next_base
        assert index_format(second.path) == layout
        # The hard-linked file was written anew: writing through the outside name no longer reaches it.
        (outside / "hard-link").write_text("through the other name\n")
        assert (second.path / "tool.sh").read_text() == "echo hi\n"
        assert await recycled.dirty_paths() == []
    finally:
        _git(repo, "worktree", "remove", "--force", str(fresh_dir)) if fresh_dir.exists() else None
        await pool.cleanup_all()
    assert changes.watched(first.path) is None


@pytest.mark.asyncio
async def test_what_the_last_task_wrote_and_the_new_base_changes_is_written_once_from_the_new_base(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The usual recycle: the last task's change has landed, so the next base changes every path it wrote.
    Those paths are written from the new base directly, whatever the task left there (a new file hard-linked
    from outside, a directory with an ignored file in place of a tracked file, a link), without first being
    cleaned and checked out as the old base had them."""
    pool = WorktreePool(repo, repo / ".autodev" / "worktrees", 1)
    await pool.warm_up(1)
    fresh_dir = tmp_path / "fresh"
    outside = tmp_path / "outside"
    outside.mkdir()
    try:
        first = await pool.claim("1.1")
        (outside / "landed.py").write_text("LANDED = 1\n")
        os.link(outside / "landed.py", first.path / "pkg" / "landed.py")
        (first.path / "app.py").unlink()
        (first.path / "app.py").mkdir()
        (first.path / "app.py" / "debug.log").write_text("ignored\n")
        (first.path / "tool.sh").unlink()
        (first.path / "tool.sh").symlink_to(outside / "landed.py")
        # The next base: the task's change as it landed on main.
        (repo / "pkg" / "landed.py").write_text("LANDED = 1\n")
        (repo / "app.py").write_text("VALUE = 10\n")
        (repo / "tool.sh").write_text("echo landed\n")
        next_base = _commit(repo, "the task landed")
        await pool.release(first)
        started = git_started(monkeypatch)
        second = await pool.claim("1.2", next_base)
        assert second.path == first.path
        assert not {"clean", "ls-files", "checkout-index"} & set(command_names(started))
        _git(repo, "worktree", "add", "-q", "--detach", str(fresh_dir), next_base)
        assert _files(second.path) == _files(fresh_dir)
        assert _git(second.path, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
        assert _git(second.path, "ls-files", "-s") == _git(fresh_dir, "ls-files", "-s")
        (outside / "landed.py").write_text("through the other name\n")
        assert (second.path / "pkg" / "landed.py").read_text() == "LANDED = 1\n"
    finally:
        _git(repo, "worktree", "remove", "--force", str(fresh_dir)) if fresh_dir.exists() else None
        await pool.cleanup_all()


@pytest.mark.asyncio
async def test_a_worktree_whose_changes_are_unknown_is_reset_the_full_way(repo: Path) -> None:
    pool = WorktreePool(repo, repo / ".autodev" / "worktrees", 1)
    await pool.warm_up(1)
    try:
        first = await pool.claim("1.1")
        copy = changes.watched(first.path)
        assert copy is not None
        copy.tracker.close()  # as after an overflowed event queue: the tracker cannot tell any more
        (first.path / "stray.py").write_text("STRAY = 1\n")
        await pool.release(first)
        second = await pool.claim("1.2")
        assert _git(second.path, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
        renewed = changes.watched(second.path)
        assert renewed is not None and renewed is not copy and renewed.tracker.broken is None
    finally:
        await pool.cleanup_all()


@pytest.mark.asyncio
async def test_the_watched_main_checkout_sees_what_a_full_status_sees(repo: Path, tmp_path: Path) -> None:
    (repo / "build").mkdir()
    (repo / "build" / "cache.o").write_bytes(b"1")
    (repo / "user-edit.py").write_text("BEFORE_THE_RUN = 1\n")
    main = GitRepo(repo)
    assert await main.ignored_directories() == ["build"]
    assert await main.watch(skip=["build"])
    try:
        assert await main.dirty_paths() == ["user-edit.py"]
        (repo / "app.py").write_text("VALUE = 3\n")
        (repo / "fresh" / "dir").mkdir(parents=True)
        (repo / "fresh" / "dir" / "new.py").write_text("N = 1\n")
        (repo / ".autodev").mkdir(exist_ok=True)
        (repo / ".autodev" / "ledger.jsonl").write_text("{}\n")  # AutoDev's own state: never a change
        assert sorted(await main.dirty_paths()) == sorted(await _unwatched(main).dirty_paths())
        # A change staged and committed by someone else moves the index and HEAD, and is still seen.
        _git(repo, "add", "app.py")
        assert sorted(await main.dirty_paths()) == sorted(await _unwatched(main).dirty_paths())
        _git(repo, "commit", "-q", "-m", "someone's commit", "--", "app.py")
        (repo / "app.py").write_text("VALUE = 4\n")
        assert sorted(await main.dirty_paths()) == sorted(await _unwatched(main).dirty_paths())
    finally:
        main.unwatch()


def _ahead_of_main(repo: Path) -> str:
    """A commit one ahead of the checked-out branch, made on another: an edit, a new file, a deletion."""
    _git(repo, "checkout", "-q", "-b", "work")
    (repo / "app.py").write_text("VALUE = 5\n")
    (repo / "pkg" / "gone.py").unlink()
    (repo / "pkg" / "deep" / "more.py").write_text("MORE = 1\n")
    ahead = _commit(repo, "ahead")
    _git(repo, "checkout", "-q", "-")
    return ahead


@pytest.mark.asyncio
async def test_a_watched_main_checkout_fast_forwards_like_git_merge(repo: Path, tmp_path: Path) -> None:
    base = _git(repo, "rev-parse", "HEAD").strip()
    ahead = _ahead_of_main(repo)
    main = GitRepo(repo)
    assert await main.watch()
    try:
        (repo / "pkg" / "deep" / "more.py").write_text("an untracked file the merge would overwrite\n")
        assert not await main.fast_forward(ahead)
        assert _git(repo, "rev-parse", "HEAD").strip() == base
        (repo / "pkg" / "deep" / "more.py").unlink()
        (repo / "app.py").write_text("a local change to a file the merge writes\n")
        assert not await main.fast_forward(ahead)  # as `git merge --ff-only` refuses it
        assert _git(repo, "rev-parse", "HEAD").strip() == base
        _git(repo, "checkout", "--", "app.py")
        (repo / "unrelated.txt").write_text("a local change the merge leaves alone\n")
        assert await main.fast_forward(ahead)
        assert _git(repo, "rev-parse", "HEAD").strip() == ahead
        assert _git(repo, "status", "--porcelain", "--untracked-files=all") == "?? unrelated.txt\n"
        assert (repo / "app.py").read_text() == "VALUE = 5\n" and not (repo / "pkg" / "gone.py").exists()
        assert "Fast-forward" in _git(repo, "reflog", "-1")
    finally:
        main.unwatch()


@pytest.mark.asyncio
@pytest.mark.parametrize("staged_after_the_look", [False, True])
async def test_after_its_own_fast_forward_a_watched_main_checkout_knows_its_index_unless_someone_wrote_it(
    repo: Path, monkeypatch: pytest.MonkeyPatch, staged_after_the_look: bool
) -> None:
    ahead = _ahead_of_main(repo)
    main = GitRepo(repo)
    assert await main.watch()
    try:
        (repo / "unrelated.txt").write_text("a local change the merge leaves alone\n")
        (repo / "staged.py").write_text("STAGED = 1\n")
        _git(repo, "add", "staged.py")  # the user staged a file: the look asks git about the index
        assert sorted(await main.dirty_paths()) == ["staged.py", "unrelated.txt"]
        if staged_after_the_look:
            (repo / "later.py").write_text("LATER = 1\n")
            _git(repo, "add", "later.py")  # an index AutoDev has not looked at
        started = git_started(monkeypatch)

        assert await main.fast_forward(ahead)
        dirty = await main.dirty_paths()

        assert sorted(dirty) == sorted(await _unwatched(main).dirty_paths())
        expected = ["staged.py", "unrelated.txt", *(["later.py"] if staged_after_the_look else [])]
        assert sorted(dirty) == sorted(expected)
        assert _git(repo, "rev-parse", "HEAD").strip() == ahead
        assert (repo / "app.py").read_text() == "VALUE = 5\n" and not (repo / "pkg" / "gone.py").exists()
        assert not (repo / ".git" / "index.lock").exists()
        # Its own restore's index is known; one someone else wrote is asked about, as before.
        assert ("diff-index" in command_names(started)) is staged_after_the_look
    finally:
        main.unwatch()


@pytest.mark.asyncio
async def test_a_recycled_worktree_commits_only_what_changed(watched_worktree: tuple[GitRepo, str]) -> None:
    git, _ = watched_worktree
    copy = git.root
    assert await git.commit_all("nothing yet") is None
    (copy / "app.py").write_text("VALUE = 6\n")
    (copy / "fresh.py").write_text("F = 1\n")
    tree = _full_scan_tree(copy)
    commit = await git.commit_all("autodev: 1.1 a task")
    assert commit is not None and _git(copy, "rev-parse", "HEAD").strip() == commit
    assert _git(copy, "rev-parse", f"{commit}^{{tree}}").strip() == tree
    assert _git(copy, "log", "-1", "--format=%s").strip() == "autodev: 1.1 a task"
    assert await git.dirty_paths() == [] and await git.is_clean()


@pytest.mark.asyncio
async def test_a_recycled_worktree_s_head_moves_as_git_moves_it_without_git(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = WorktreePool(repo, repo / ".autodev" / "worktrees", 1)
    await pool.warm_up(1)
    try:
        first = await pool.claim("1.1")
        git = GitRepo(first.path)
        (first.path / "app.py").write_text("VALUE = 2\n")
        started = git_started(monkeypatch)
        commit = await git.commit_all("autodev: 1.1 a task")
        (repo / "pkg" / "on-main.py").write_text("MAIN = 1\n")
        next_base = _commit(repo, "main moved")
        await pool.release(first)
        second = await pool.claim("1.2", next_base)

        assert "update-ref" not in command_names(started)
        assert commit is not None and second.path == first.path
        assert _git(second.path, "rev-parse", "HEAD").strip() == next_base
        git_dir = Path(_git(second.path, "rev-parse", "--absolute-git-dir").strip())
        assert (git_dir / "HEAD").read_text() == f"{next_base}\n"  # detached, as git writes it
        assert not (git_dir / "HEAD.lock").exists()
        assert _git(second.path, "status", "--porcelain") == ""
        # git itself takes it from there.
        _git(second.path, "checkout", "-q", "--detach", commit)
        assert await GitRepo(second.path).head() == commit
    finally:
        await pool.cleanup_all()


@pytest.mark.asyncio
async def test_a_head_git_holds_or_someone_moved_is_left_to_git(
    watched_worktree: tuple[GitRepo, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    git, base = watched_worktree
    git_dir = await git.git_dir()
    (git.root / "app.py").write_text("VALUE = 3\n")
    lock = git_dir / "HEAD.lock"
    lock.write_text("another git's\n")
    started = git_started(monkeypatch)

    with pytest.raises(GitError, match=r"HEAD\.lock"):
        await git.commit_all("autodev: 1.1 a task")

    assert command_names(started).count("update-ref") == 1  # git was asked, and refused as for anybody
    assert lock.read_text() == "another git's\n"
    assert (git_dir / "HEAD").read_text().strip() == base
    lock.unlink()
    other = _git(git.root, "commit-tree", "-m", "elsewhere", f"{base}^{{tree}}", "-p", base).strip()
    _git(git.root, "update-ref", "--no-deref", "HEAD", other)  # moved by somebody else meanwhile
    assert not git_module._move_detached_head(git_dir, base, base)
    assert (git_dir / "HEAD").read_text().strip() == other and not lock.exists()


@pytest.mark.asyncio
async def test_a_head_that_cannot_be_written_fails_as_git_would_and_keeps_its_commit(
    watched_worktree: tuple[GitRepo, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    git, base = watched_worktree
    git_dir = await git.git_dir()
    other = _git(git.root, "commit-tree", "-m", "next", f"{base}^{{tree}}", "-p", base).strip()

    def disk_full(source: object, target: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as patched:
        patched.setattr(os, "replace", disk_full)
        with pytest.raises(GitError, match="No space left") as failed:
            git_module._move_detached_head(git_dir, other, base)

    assert (git_dir / "HEAD").read_text().strip() == base and not (git_dir / "HEAD.lock").exists()
    fault = environment_fault(failed.value, "task 1.1 (merging)")
    assert fault is not None and "ENOSPC" in fault.message  # a resumable stop, as a full disk is


# --- answers from what AutoDev already knows: each must be git's own answer ---------------------------


@pytest.mark.asyncio
async def test_answers_kept_while_nothing_changed_follow_every_later_change(
    watched_worktree: tuple[GitRepo, str],
) -> None:
    """``dirty_paths``, ``added_bytes``, the snapshot and the diff are answered again from memory only
    while no file, index or HEAD changed; each step below changes one and expects git's new answer."""
    git, base = watched_worktree
    copy = git.root
    (copy / "app.py").write_text("VALUE = 10\n")
    assert await git.dirty_paths() == ["app.py"] == await git.dirty_paths()
    first = await git.diff_against(base)
    assert await git.diff_against(base) == first and first.files == ("app.py",)
    (copy / "added.txt").write_text("x" * 100)
    assert sorted(await git.dirty_paths()) == sorted(await _unwatched(git).dirty_paths())
    assert await git.added_bytes(base) == {"added.txt": 100, "app.py": 1}
    (copy / "added.txt").write_text("x" * 250)  # the same paths, the base's sizes known: new sizes count
    assert await git.added_bytes(base) == {"added.txt": 250, "app.py": 1}
    second = await git.diff_against(base)
    assert second.tree == _full_scan_tree(copy) != first.tree
    _git(copy, "add", "added.txt")  # only the index changes
    assert sorted(await git.dirty_paths()) == sorted(await _unwatched(git).dirty_paths())
    commit = await git.commit_all("autodev: 1.1 kept answers")
    assert commit is not None
    assert _git(copy, "rev-parse", f"{commit}^{{tree}}").strip() == second.tree
    assert await git.dirty_paths() == [] == await _unwatched(git).dirty_paths()


@pytest.mark.asyncio
async def test_the_known_dirty_paths_are_the_last_answer_only_while_nothing_changed(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main = GitRepo(repo)
    assert main.known_dirty_paths() is None  # not watched: only git knows
    assert await main.watch()
    try:
        assert main.known_dirty_paths() is None  # nothing asked yet
        (repo / "app.py").write_text("VALUE = 2\n")
        assert await main.dirty_paths() == ["app.py"]
        assert main.known_dirty_paths() == ["app.py"]
        started = git_started(monkeypatch)
        assert await main.dirty_paths() == ["app.py"] and started == []  # asked again: no git
        (repo / "notes.txt").write_text("a file written after the answer\n")
        assert main.known_dirty_paths() is None
        assert sorted(await main.dirty_paths()) == ["app.py", "notes.txt"] == main.known_dirty_paths()
        _git(repo, "add", "notes.txt")  # only the index changes
        assert main.known_dirty_paths() is None
        assert sorted(await main.dirty_paths()) == ["app.py", "notes.txt"]
        _git(repo, "commit", "-q", "-m", "notes")  # HEAD moves
        assert main.known_dirty_paths() is None
        assert await main.dirty_paths() == ["app.py"] == main.known_dirty_paths()
    finally:
        main.unwatch()


@pytest.mark.asyncio
async def test_a_look_already_asking_git_answers_a_second_caller_unless_something_changed_meanwhile(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two checks of the main checkout at once (the look after a landing, a freed task's check after its
    call) start one ``git status``; a write made while git looks makes the waiting caller ask again, and a
    caller that comes after a write does not wait for a look begun before it."""
    main = GitRepo(repo)
    assert await main.watch()
    try:
        assert await main.dirty_paths() == []
        (repo / "app.py").write_text("VALUE = 3\n")
        started: list[tuple[str, ...]] = []
        real = git_module.run_git_now
        early_writes: list[Path] = []  # written as soon as git has read the tree
        late_writes: list[Path] = []  # written once the second caller has come in
        git_has_read = threading.Event()
        under_way = 0
        overlapped: list[bool] = []  # for each status: whether another one was under way as it started

        def slow_status(args: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
            nonlocal under_way
            started.append(tuple(args))
            if "status" not in args:
                return real(args, **kwargs)
            overlapped.append(under_way > 0)
            under_way += 1
            try:
                result = real(args, **kwargs)
                for path in early_writes:
                    path.write_text("written after git read the tree\n")
                early_writes.clear()
                git_has_read.set()
                time.sleep(0.3)  # the second caller comes in while this look is still in flight
                for path in late_writes:
                    path.write_text("written while git looked\n")
                late_writes.clear()
                return result
            finally:
                under_way -= 1

        monkeypatch.setattr(git_module, "run_git_now", slow_status)

        async def both() -> list[list[str]]:
            """Ask twice: first at once, then as soon as the first look's git has read the tree."""
            answers: list[list[str]] = [[], []]
            git_has_read.clear()

            async def ask(slot: int) -> None:
                if slot == 1:
                    await anyio.to_thread.run_sync(git_has_read.wait)
                answers[slot] = sorted(await main.dirty_paths())

            async with anyio.create_task_group() as group:
                group.start_soon(ask, 0)
                group.start_soon(ask, 1)
            return answers

        assert await both() == [["app.py"], ["app.py"]]
        assert command_names(started) == ["status"]

        started.clear()
        overlapped.clear()
        (repo / "app.py").write_text("VALUE = 4\n")
        late_writes.append(repo / "late.txt")
        first, second = await both()
        assert first == ["app.py"]  # git looked before the write
        assert second == ["app.py", "late.txt"]
        assert command_names(started) == ["status", "status"]
        assert overlapped == [False, False]  # the second began after the first had ended: it waited
        assert second == sorted(await _unwatched(main).dirty_paths())

        started.clear()
        overlapped.clear()
        (repo / "app.py").write_text("VALUE = 5\n")
        early_writes.append(repo / "between.txt")
        first, second = await both()
        assert first == ["app.py", "late.txt"]
        assert second == ["app.py", "between.txt", "late.txt"]
        assert command_names(started) == ["status", "status"]
        assert overlapped == [False, True]  # the second began while the first was under way: it did not wait
    finally:
        main.unwatch()


@pytest.mark.asyncio
async def test_what_autodev_knows_of_its_own_commits_is_what_git_says(repo: Path) -> None:
    """Trees, ancestry and the patch of a commit AutoDev made, answered from memory, against git."""
    main = GitRepo(repo)
    assert await main.watch()
    try:
        base = _git(repo, "rev-parse", "HEAD").strip()
        tree_before = await main.tree_of(base)
        (repo / "app.py").write_text("VALUE = 11\n")
        (repo / "data.bin").write_bytes(bytes(range(255, -1, -1)))
        staged = await main.snapshot_tree()
        (repo / "app.py").write_text("VALUE = 1\n")
        (repo / "data.bin").write_bytes(bytes(range(256)))
        made = await main.commit_tree(staged, base, "autodev: 1.2 made in the object store")
        replayed = await main.replay(made, base, "autodev: 1.2 replayed")
        assert isinstance(replayed, str)
        assert await main.tree_of(made) == _git(repo, "rev-parse", f"{made}^{{tree}}").strip() == staged
        assert await main.tree_of(base) == tree_before
        assert await main.is_ancestor(base, replayed) and await main.is_ancestor(replayed, replayed)
        assert not await main.is_ancestor(replayed, base)  # not known from memory: git answers no
        assert await main.fast_forward(replayed)
        expected = _git(repo, "diff", "--binary", "--full-index", "--no-renames", f"{replayed}^", replayed)
        assert await main.commit_patch(replayed) == expected  # kept from the fast-forward
        assert await main.commit_patch(replayed) == expected  # asked of git once it was handed out
        assert sorted(await main.dirty_paths()) == sorted(await _unwatched(main).dirty_paths()) == []
    finally:
        main.unwatch()


@pytest.mark.asyncio
async def test_a_commit_right_after_its_snapshot_installs_the_snapshot_index(
    watched_worktree: tuple[GitRepo, str],
) -> None:
    git, base = watched_worktree
    copy = git.root
    (copy / "app.py").write_text("VALUE = 12\n")
    (copy / "pkg" / "new.py").write_text("NEW = 1\n")
    (copy / "pkg" / "gone.py").unlink()
    checked = (await git.diff_against(base)).tree
    commit = await git.commit_all("autodev: 1.3 committed as checked")
    assert commit is not None
    assert _git(copy, "rev-parse", f"{commit}^{{tree}}").strip() == checked == _full_scan_tree(copy)
    # The worktree's own index is the commit's: git sees nothing staged and nothing changed.
    assert _git(copy, "diff", "--cached", "--name-only", "HEAD") == ""
    assert _git(copy, "status", "--porcelain", "--untracked-files=all") == ""
