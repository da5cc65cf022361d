"""Landing a task's commit on the main checkout is a fast-forward that never overwrites anybody's work: a
file the user created where the task adds one, or an uncommitted edit of a file the task changes, stops the
landing with the paths named and the file untouched; only what a fast-forward cut short leaves (each path as
the old or the new commit has it) is repaired. Real git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest
from support.git_calls import command_names, git_started

from autodev.state.schemas import Task
from autodev.workspace.git import GitRepo
from autodev.workspace.integration import (
    Integrated,
    IntegrationConflict,
    Landing,
    MainTreeChangedError,
    TaskCommit,
    TaskWorkspace,
    commit_message,
    integrate,
    land_on_main,
    prepare_landing,
)

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


def _task_in_a_worktree(tmp_path: Path) -> tuple[Path, GitRepo, TaskWorkspace, Task, TaskCommit]:
    """A watched main checkout at A, and task 1.1's commit, made in a worktree of its own at A, that
    adds ``task.txt``; the main branch then moves on with a commit that adds ``other.txt``."""
    root, head, _ = _repository(tmp_path)
    copy = tmp_path / "task"
    _git(root, "worktree", "add", "-q", "--detach", str(copy), head)
    main = GitRepo(root)
    workspace = TaskWorkspace(copy, GitRepo(copy, like=main), isolated=True)
    task = Task(id="1.1", phase_id="1", title="Add task.txt", description="d", base_commit=head)
    (copy / "task.txt").write_text("the task's file\n")
    _git(copy, "add", "task.txt")
    tree = _git(copy, "write-tree")
    commit = anyio.run(workspace.git.commit_tree, tree, head, commit_message(task))
    (root / "other.txt").write_text("landed by another task\n")
    _git(root, "add", "other.txt")
    _git(root, *IDENTITY, "commit", "-qm", "another task")
    return root, main, workspace, task, TaskCommit(commit, head)


def test_a_landing_prepared_before_the_lock_lands_without_git_merging_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, main, workspace, task, change = _task_in_a_worktree(tmp_path)
    onto = _git(root, "rev-parse", "HEAD")

    async def land() -> tuple[Landing | None, Integrated | IntegrationConflict, list[str]]:
        assert await main.watch()
        try:
            ready = await prepare_landing(main, workspace, task, change)
            started = git_started(monkeypatch)
            outcome = await integrate(main, workspace, task, change, ready)
            return ready, outcome, command_names(started)
        finally:
            main.unwatch()

    ready, outcome, started = anyio.run(land)

    assert ready is not None and ready.onto == onto
    assert outcome == Integrated(ready.commit)
    assert not {"merge-tree", "commit-tree", "diff"} & set(started)  # only the fast-forward's own writes
    assert _git(root, "rev-parse", "HEAD") == ready.commit
    assert _git(root, "rev-parse", "HEAD^") == onto
    assert _git(root, "log", "-1", "--format=%s") == "autodev: 1.1 Add task.txt"
    assert (root / "task.txt").read_text() == "the task's file\n"
    assert _git(root, "status", "--porcelain") == ""


def test_a_landing_prepared_on_a_head_that_moved_since_is_replayed_again(tmp_path: Path) -> None:
    root, main, workspace, task, change = _task_in_a_worktree(tmp_path)

    async def land() -> tuple[Landing | None, Integrated | IntegrationConflict]:
        assert await main.watch()
        try:
            ready = await prepare_landing(main, workspace, task, change)
            # Another task lands between the preparation and the lock.
            (root / "third.txt").write_text("landed meanwhile\n")
            _git(root, "add", "third.txt")
            _git(root, *IDENTITY, "commit", "-qm", "a third task")
            return ready, await integrate(main, workspace, task, change, ready)
        finally:
            main.unwatch()

    ready, outcome = anyio.run(land)

    assert ready is not None and isinstance(outcome, Integrated) and outcome.commit != ready.commit
    assert _git(root, "rev-parse", "HEAD") == outcome.commit
    assert _git(root, "log", "-1", "--format=%s", "HEAD^") == "a third task"
    assert {"task.txt", "other.txt", "third.txt"} <= set(_git(root, "ls-files").split())
    assert _git(root, "status", "--porcelain") == ""


def test_a_conflict_met_while_preparing_is_reported_by_the_landing(tmp_path: Path) -> None:
    root, main, workspace, task, change = _task_in_a_worktree(tmp_path)
    (root / "task.txt").write_text("the same file, written by another task\n")
    _git(root, "add", "task.txt")
    _git(root, *IDENTITY, "commit", "-qm", "another task writes task.txt")
    head = _git(root, "rev-parse", "HEAD")

    async def land() -> tuple[Landing | None, Integrated | IntegrationConflict]:
        ready = await prepare_landing(main, workspace, task, change)
        return ready, await integrate(main, workspace, task, change, ready)

    ready, outcome = anyio.run(land)

    assert ready is None
    assert outcome == IntegrationConflict(head, ("task.txt",), change.commit)
    assert _git(root, "rev-parse", "HEAD") == head


def test_a_landing_names_its_commit_before_the_main_tree_moves_to_it(tmp_path: Path) -> None:
    """What waits for the landing (a worktree readied for the tasks it frees) can start beside the
    fast-forward: it is told the commit while the branch and the checkout are still at the old head."""
    root, main, workspace, task, change = _task_in_a_worktree(tmp_path)
    onto = _git(root, "rev-parse", "HEAD")
    told: list[tuple[str, str, bool]] = []

    def landing(commit: str) -> None:
        told.append((commit, _git(root, "rev-parse", "HEAD"), (root / "task.txt").exists()))

    async def land() -> Integrated | IntegrationConflict:
        return await integrate(main, workspace, task, change, landing=landing)

    outcome = anyio.run(land)

    assert isinstance(outcome, Integrated)
    assert told == [(outcome.commit, onto, False)]
    assert _git(root, "rev-parse", "HEAD") == outcome.commit and (root / "task.txt").exists()


def test_a_conflicting_landing_names_no_commit(tmp_path: Path) -> None:
    root, main, workspace, task, change = _task_in_a_worktree(tmp_path)
    (root / "task.txt").write_text("the main branch's own task.txt\n")
    _git(root, "add", "task.txt")
    _git(root, *IDENTITY, "commit", "-qm", "a conflicting file")
    told: list[str] = []

    async def land() -> Integrated | IntegrationConflict:
        return await integrate(main, workspace, task, change, landing=told.append)

    assert isinstance(anyio.run(land), IntegrationConflict)
    assert told == []
