"""The status object: the fast snapshot path and the replay path give the same answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support import make_plan

from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import Task
from autodev.state.status import status_from_state
from autodev.state.status_reader import read_status
from autodev.state.vocabulary import TASK_STATUSES, TaskStatus

# A task in flight no policy decision has been recorded for, and no developer run yet.
RUNNING = {"family": None, "lifecycle": "running", "waiting": None, "repository": None}


def test_no_ledger_means_an_empty_status(repo: Path) -> None:
    data = read_status(repo)
    assert data["plan"] is None and data["tasks"] == [] and data["totals"]["total"] == 0
    assert not (repo / ".autodev").exists()  # reading never creates state


def test_fast_path_and_replay_agree_whether_or_not_the_snapshot_is_current(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(4, chain=True), session_id="sess-x")
        pm.update_task_status("1.1", "in_progress")
    current = read_status(repo)  # snapshot is current: answered without replay
    assert current == PlanManager.open(repo, readonly=True).status()
    assert current["tasks"][0]["status"] == "in_progress"

    writer = PlanManager.open(repo)
    writer.update_task_status("1.1", "coded")  # no checkpoint: snapshot is now one entry behind
    behind = read_status(repo)
    assert behind["tasks"][0]["status"] == "coded"
    assert behind == PlanManager.open(repo, readonly=True).status()
    writer.close()


def _state(tasks: list[Task]) -> dict[str, Any]:
    plan = make_plan(1)
    plan.phases[0].tasks = tasks
    return {"plan": plan.model_dump(mode="json"), "session_id": "sess-p"}


def _task(task_id: str, status: TaskStatus = "pending", *, deps: tuple[str, ...] = (), **fields: Any) -> Task:
    return Task(id=task_id, phase_id="1", title=task_id, status=status, depends_on=list(deps), **fields)


def _by_id(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {task["id"]: task for task in data["tasks"]}


def test_a_pending_task_waits_on_its_unfinished_dependencies_sorted() -> None:
    data = status_from_state(
        _state(
            [
                _task("1.3", "in_progress"),
                _task("1.1", "complete"),
                _task("1.2", "skipped"),
                _task("1.4", "blocked"),
                _task("1.5", deps=("1.4", "1.1", "1.3", "1.2")),
            ]
        )
    )
    assert _by_id(data)["1.5"]["waiting_on"] == ["1.3", "1.4"]


def test_with_its_dependencies_done_a_pending_task_waits_on_the_in_flight_holders_of_its_files() -> None:
    data = status_from_state(
        _state(
            [
                _task("1.1", "complete", files=["a.py"]),
                _task("1.2", "coded", files=["a.py", "b.py"], worktree=".autodev/task-worktrees/task-1.2"),
                _task("1.3", "tournamented", files=["c.py"]),
                _task("1.4", "complete", files=["b.py"]),  # done tasks hold nothing
                _task("1.5", deps=("1.1",), files=["c.py", "b.py", "a.py"]),
                _task("1.6", files=["b.py"], deps=("1.7",)),  # an unfinished dependency comes first
                _task("1.7"),
            ]
        )
    )
    tasks = _by_id(data)
    assert tasks["1.5"]["waiting_on"] == ["1.2", "1.3"]
    assert tasks["1.6"]["waiting_on"] == ["1.7"]


def test_a_ready_pending_task_waits_on_nothing_and_only_pending_tasks_say_so() -> None:
    data = status_from_state(
        _state(
            [
                _task("1.1", "complete", files=["a.py"]),
                _task("1.2", "in_progress", files=["b.py"]),
                _task("1.3", deps=("1.1",), files=["a.py", "c.py"]),
            ]
        )
    )
    tasks = _by_id(data)
    assert tasks["1.3"]["waiting_on"] == []
    assert "waiting_on" not in tasks["1.1"] and "waiting_on" not in tasks["1.2"]


def test_in_flight_tasks_are_listed_in_plan_order_with_their_worktrees_and_counted() -> None:
    worktree = ".autodev/task-worktrees/task-1.4"
    data = status_from_state(
        _state(
            [
                _task("1.4", "reviewed", worktree=worktree),
                _task("1.1", "complete"),
                _task("1.2", "in_progress"),
                _task("1.3"),
                _task("1.5", "blocked"),
            ]
        )
    )
    assert data["in_flight"] == [
        {
            "id": "1.4",
            "status": "reviewed",
            "worktree": worktree,
            "checkout": worktree or ".",
            "node": None,
            "step": "test_engineer",
            "retry_count": 0,
            "progress": None,
            **RUNNING,
        },
        {
            "id": "1.2",
            "status": "in_progress",
            "worktree": None,
            "checkout": ".",
            "node": None,
            "step": "developer",
            "retry_count": 0,
            "progress": None,
            **RUNNING,
        },
    ]
    assert data["totals"]["in_flight"] == 2
    assert data["totals"]["total"] == 5
    assert sum(data["totals"][name] for name in TASK_STATUSES) == 5
    assert [task["worktree"] for task in data["tasks"]] == [worktree, None, None, None, None]


def test_an_empty_status_has_no_in_flight_tasks() -> None:
    data = status_from_state({})
    assert data["in_flight"] == [] and data["totals"]["in_flight"] == 0


def test_a_snapshot_from_before_worktrees_reads_like_replay() -> None:
    state = _state([_task("1.1", "in_progress"), _task("1.2")])
    for task in state["plan"]["phases"][0]["tasks"]:
        del task["worktree"]
    data = status_from_state(state)
    assert [task["worktree"] for task in data["tasks"]] == [None, None]
    assert data["in_flight"] == [
        {
            "id": "1.1",
            "status": "in_progress",
            "worktree": None,
            "checkout": ".",
            "node": None,
            "step": "developer",
            "retry_count": 0,
            "progress": None,
            **RUNNING,
        }
    ]


def test_the_worktree_reaches_status_through_the_fast_path_and_replay(repo: Path) -> None:
    worktree = ".autodev/task-worktrees/task-1.1"
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(2), session_id="sess-w")
        pm.update_task_status("1.1", "in_progress", worktree=worktree)
    data = read_status(repo)
    assert data == PlanManager.open(repo, readonly=True).status()
    assert data["tasks"][0]["worktree"] == worktree
    assert data["in_flight"] == [
        {
            "id": "1.1",
            "status": "in_progress",
            "worktree": worktree,
            "checkout": worktree or ".",
            "node": None,
            "step": "developer",
            "retry_count": 0,
            "progress": None,
            **RUNNING,
        }
    ]
    assert data["tasks"][1]["waiting_on"] == []
