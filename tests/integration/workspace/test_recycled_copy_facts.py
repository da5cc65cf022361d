"""What a recycled worktree's watch and AutoDev's own landings tell without asking git, checked against
git: the paths a developer may have changed (so its dirty paths need no ``git status``), the whole change
a diff shows, the change a replayed landing makes, and what a worktree's reset must write. Real git, a real
pool of worktrees."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from support.git_calls import command_names, git_started
from support.parallel import commit_everything as _commit
from support.parallel import git as _git

from autodev.state.schemas import Task
from autodev.workspace.git import GitError, GitRepo
from autodev.workspace.integration import (
    Integrated,
    IntegrationConflict,
    TaskWorkspace,
    commit_task,
    integrate,
    prepare_landing,
)
from autodev.workspace.worktree_pool import WorktreePool


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path.resolve() / "repo"
    (root / "pkg").mkdir(parents=True)
    _git(root, "init", "-q")
    (root / ".gitignore").write_text("*.log\n.autodev/\n")
    (root / "app.py").write_text("VALUE = 1\n")
    (root / "tool.sh").write_text("echo hi\n")
    (root / "image.bin").write_bytes(bytes(range(256)))
    (root / "pkg" / "gone.py").write_text("GONE = False\n")
    _commit(root, "init")
    return root


def _head(path: Path) -> str:
    return _git(path, "rev-parse", "HEAD").strip()


def _status_paths(path: Path) -> set[str]:
    """git's own list of the paths that differ from HEAD (ignored files left out, as AutoDev's are)."""
    listing = _git(path, "status", "--porcelain", "-z", "--no-renames", "--untracked-files=all")
    return {entry[3:] for entry in listing.split("\0") if len(entry) > 3}


def _pool(repo: Path, main: GitRepo, size: int = 2) -> WorktreePool:
    return WorktreePool(repo, repo / ".autodev" / "worktrees", size, main_git=main)


async def _started_pool(repo: Path) -> tuple[GitRepo, WorktreePool, str]:
    """The run's GitRepo of the main checkout, a started pool sharing its records, and the base."""
    main = GitRepo(repo)
    pool = _pool(repo, main)
    await pool.cold_start()
    return main, pool, _head(repo)


@pytest.mark.asyncio
async def test_a_recycled_copys_watch_bounds_every_kind_of_change_and_its_diff_is_the_whole_change(
    repo: Path,
) -> None:
    main, pool, base = await _started_pool(repo)
    worktree = await pool.claim("1.1", base)
    copy = GitRepo(worktree.path, like=main)
    root = worktree.path
    (root / "app.py").write_text("VALUE = 2\n")  # edited
    (root / "pkg" / "gone.py").unlink()  # deleted
    (root / "tool.sh").chmod(0o755)  # mode change
    (root / "image.bin").write_bytes(bytes(reversed(range(256))))  # binary
    (root / "pkg" / "new.py").write_text("NEW = 1\n")  # new, in a directory the base has
    os.symlink("app.py", root / "link.py")  # a link
    (root / "debug.log").write_text("ignored\n")

    bound = await copy.change_bound(base)
    diff = await copy.diff_against(base)

    changed = {"app.py", "pkg/gone.py", "tool.sh", "image.bin", "pkg/new.py", "link.py"}
    assert bound is not None and changed <= set(bound)
    assert copy.shows_whole_change(diff)
    assert set(diff.files) == changed == _status_paths(root)
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_a_new_directory_or_a_staged_index_leaves_the_change_to_git(repo: Path) -> None:
    main, pool, base = await _started_pool(repo)
    worktree = await pool.claim("1.1", base)
    copy = GitRepo(worktree.path, like=main)
    (worktree.path / "fresh").mkdir()
    (worktree.path / "fresh" / "big.bin").write_bytes(b"\0" * 4096)
    # A stat of the directory says nothing of the files in it: no bound, git lists them.
    assert await copy.change_bound(base) is None
    await pool.release(worktree)

    worktree = await pool.claim("1.2", base)
    copy = GitRepo(worktree.path, like=main)
    (worktree.path / "app.py").write_text("VALUE = 3\n")
    (worktree.path / "staged.py").write_text("STAGED = 1\n")
    _git(worktree.path, "add", "staged.py")  # the agent staged a file itself
    assert await copy.change_bound(base) is None
    diff = await copy.diff_against(base)
    assert not copy.shows_whole_change(diff)
    assert set(diff.files) == {"app.py", "staged.py"} == set(await copy.dirty_paths())
    await pool.cleanup_all()


def _write_tree_args(started: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    return [args for args, name in zip(started, command_names(started), strict=True) if name == "write-tree"]


@pytest.mark.asyncio
async def test_git_looks_for_each_entrys_object_only_in_an_index_anyone_else_wrote(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main, pool, base = await _started_pool(repo)
    worktree = await pool.claim("1.1", base)
    copy = GitRepo(worktree.path, like=main)
    (worktree.path / "app.py").write_text("VALUE = 2\n")
    # A deletion: git writes the tree (``autodev.workspace.stored_files`` writes only files put in).
    (worktree.path / "pkg" / "gone.py").unlink()
    started = git_started(monkeypatch)
    diff = await copy.diff_against(base)
    # The index its reset left: every entry's object is in the store, git is not asked to look for each.
    assert diff.files == ("app.py", "pkg/gone.py")
    assert [args[-1] for args in _write_tree_args(started)] == ["--missing-ok"]
    await pool.release(worktree)

    worktree = await pool.claim("1.2", base)
    copy = GitRepo(worktree.path, like=main)
    (worktree.path / "app.py").write_text("VALUE = 3\n")
    # The agent writes the index itself: an entry naming an object the store does not have, in a
    # directory no diff shows. A tree naming it must not be written, let alone committed.
    missing = "0123456789abcdef0123456789abcdef01234567"
    _git(worktree.path, "update-index", "--add", "--info-only", "--cacheinfo", f"100644,{missing},.autodev/x")
    started.clear()
    with pytest.raises(GitError):
        await copy.diff_against(base)
    assert [args[-1] for args in _write_tree_args(started)] == ["write-tree"]
    await pool.cleanup_all()


async def _develop(pool: WorktreePool, main: GitRepo, task: Task, name: str) -> TaskWorkspace:
    """A task's worktree with its developer's file written and diffed, as the developer step leaves it."""
    return await _develop_with(
        pool, main, task, lambda root: (root / "pkg" / name).write_text(f"# by {task.id}\n")
    )


async def _develop_with(
    pool: WorktreePool, main: GitRepo, task: Task, edit: Callable[[Path], object]
) -> TaskWorkspace:
    """A task's worktree after its developer made ``edit`` in it, diffed as the developer step does."""
    assert task.base_commit is not None
    worktree = await pool.claim(task.id, task.base_commit)
    workspace = TaskWorkspace(worktree.path, GitRepo(worktree.path, like=main), isolated=True)
    edit(worktree.path)
    await workspace.git.diff_against(task.base_commit)
    return workspace


async def _land(main: GitRepo, workspace: TaskWorkspace, task: Task) -> str:
    landed, _ = await _land_noting_own(main, workspace, task)
    return landed


async def _land_noting_own(main: GitRepo, workspace: TaskWorkspace, task: Task) -> tuple[str, str]:
    """The commit that landed and the task's own commit (on its base) it replays."""
    change = await commit_task(workspace, task, resumed=False)
    ready = await prepare_landing(main, workspace, task, change)
    outcome = await integrate(main, workspace, task, change, ready)
    assert isinstance(outcome, Integrated)
    return outcome.commit, change.commit


def _tree_git_merges(repo: Path, onto: str, commit: str) -> str:
    """The tree git's own 3-way merge gives ``commit``'s change replayed onto ``onto``."""
    return _git(repo, "merge-tree", "--write-tree", onto, commit).strip()


def _tree(repo: Path, commit: str) -> str:
    return _git(repo, "rev-parse", f"{commit}^{{tree}}").strip()


async def _two_tasks_on_a_watched_pool(repo: Path) -> tuple[GitRepo, WorktreePool, Task, Task]:
    """The main checkout, watched; a started pool sharing its records; two tasks on its HEAD."""
    main = GitRepo(repo)
    assert await main.watch()
    pool = _pool(repo, main)
    await pool.cold_start()
    base = _head(repo)
    first = Task(id="1.1", phase_id="1", title="one", description="d", base_commit=base)
    second = Task(id="1.2", phase_id="1", title="two", description="d", base_commit=base)
    return main, pool, first, second


@pytest.mark.asyncio
async def test_a_replayed_landing_takes_the_tasks_own_diff_and_a_reset_the_landings_paths(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    main, pool, first, second = await _two_tasks_on_a_watched_pool(repo)
    first_copy = await _develop(pool, main, first, "one.py")
    second_copy = await _develop(pool, main, second, "two.py")

    landed_first = await _land(main, first_copy, first)
    started = git_started(monkeypatch)
    # The second task's base moved (the first landed): its change is replayed onto the new HEAD, its
    # file put into the branch's tree without git (the first task's landing touched another path).
    landed_second, own_commit = await _land_noting_own(main, second_copy, second)
    assert "merge-tree" not in command_names(started)
    assert "diff" not in command_names(started)  # what it writes is its own diff, already read
    assert _tree(repo, landed_second) == _tree_git_merges(repo, landed_first, own_commit)

    assert _head(repo) == landed_second and _git(repo, "rev-parse", "HEAD^").strip() == landed_first
    assert _status_paths(repo) == set()
    git_patch = _git(repo, "diff", "--binary", "--full-index", "--no-renames", landed_first, landed_second)
    assert await main.commit_patch(landed_second) == git_patch

    for workspace in (first_copy, second_copy):
        await pool.release(next(w for w in pool.active if w.path == workspace.root))
    started.clear()
    worktree = await pool.claim("1.3", landed_second)
    # The reset learns what changed since the worktree's base from the landings: no diff-tree.
    assert "diff-tree" not in command_names(started)
    assert _head(worktree.path) == landed_second
    assert _status_paths(worktree.path) == set()
    assert (worktree.path / "pkg" / "one.py").exists() and (worktree.path / "pkg" / "two.py").exists()
    main.unwatch()
    await pool.cleanup_all()


@pytest.mark.asyncio
async def test_a_landing_replayed_again_under_the_lock_writes_the_tasks_own_diff_without_asking_git(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The branch moves between a landing's preparation and its lock (another task lands): the change is
    replayed again under the lock, and what the fast-forward writes is still the task's own diff."""
    main = GitRepo(repo)
    assert await main.watch()
    pool = _pool(repo, main, size=3)
    await pool.cold_start()
    base = _head(repo)
    tasks = [
        Task(id=f"1.{n}", phase_id="1", title=f"task {n}", description="d", base_commit=base)
        for n in (1, 2, 3)
    ]
    copies = [await _develop(pool, main, task, f"mod{n}.py") for n, task in enumerate(tasks, 1)]
    await _land(main, copies[0], tasks[0])
    change = await commit_task(copies[1], tasks[1], resumed=False)
    ready = await prepare_landing(main, copies[1], tasks[1], change)
    landed_third = await _land(main, copies[2], tasks[2])  # lands between the preparation and the lock

    started = git_started(monkeypatch)
    outcome = await integrate(main, copies[1], tasks[1], change, ready)

    assert ready is not None and isinstance(outcome, Integrated) and outcome.commit != ready.commit
    assert "merge-tree" not in command_names(started)  # the change meets no landing: spliced in
    assert "diff" not in command_names(started)
    assert _tree(repo, outcome.commit) == _tree_git_merges(repo, landed_third, change.commit)
    assert _head(repo) == outcome.commit and _git(repo, "rev-parse", "HEAD^").strip() == landed_third
    assert _status_paths(repo) == set()
    assert (repo / "pkg" / "mod2.py").read_text() == "# by 1.2\n"
    git_patch = _git(repo, "diff", "--binary", "--full-index", "--no-renames", landed_third, outcome.commit)
    assert await main.commit_patch(outcome.commit) == git_patch
    main.unwatch()
    await pool.cleanup_all()


def _moved_out(root: Path) -> None:
    (root / "lib").mkdir()
    (root / "pkg" / "gone.py").rename(root / "lib" / "gone.py")


def _remove(path: str) -> Callable[[Path], None]:
    return lambda root: (root / path).unlink()


def _add(path: str) -> Callable[[Path], None]:
    def write(root: Path) -> None:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(f"# {path}\n")

    return write


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("landing", "task", "conflict"),
    [
        # The task deletes a file: git's rename detection may pair it, so git merges.
        (_add("pkg/landed.py"), _remove("tool.sh"), False),
        # A landing deleted one: the same.
        (_remove("tool.sh"), _add("pkg/task.py"), False),
        # A landing moved the task's directory away: git moves the task's new file after it and says so
        # (a conflict), where putting the file in would have landed it in the old place without a word.
        (_moved_out, _add("pkg/task.py"), True),
        # A landing made a file where the task makes a directory: git's merge decides.
        (_add("extra"), _add("extra/inside.py"), True),
    ],
    ids=["the task deletes", "a landing deleted", "a landing moved the directory", "a file in the way"],
)
async def test_a_change_that_deletes_or_meets_a_landing_is_replayed_by_git(
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    landing: Callable[[Path], None],
    task: Callable[[Path], None],
    conflict: bool,
) -> None:
    main, pool, first, second = await _two_tasks_on_a_watched_pool(repo)
    first_copy = await _develop_with(pool, main, first, landing)
    second_copy = await _develop_with(pool, main, second, task)
    landed_first = await _land(main, first_copy, first)

    started = git_started(monkeypatch)
    change = await commit_task(second_copy, second, resumed=False)
    outcome = await integrate(
        main, second_copy, second, change, await prepare_landing(main, second_copy, second, change)
    )

    assert "merge-tree" in command_names(started)
    if conflict:
        assert isinstance(outcome, IntegrationConflict) and _head(repo) == landed_first
    else:
        assert isinstance(outcome, Integrated)
        assert _tree(repo, outcome.commit) == _tree_git_merges(repo, landed_first, change.commit)
        assert _status_paths(repo) == set()
    main.unwatch()
    await pool.cleanup_all()
