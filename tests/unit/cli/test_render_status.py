"""The human ``autodev status`` view: in-flight tasks with their worktrees, and what pending tasks wait on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import make_plan

from autodev.cli.render import print_status
from autodev.state.schemas import Task
from autodev.state.status import status_from_state
from autodev.state.vocabulary import TaskStatus

WORKTREE = ".autodev/task-worktrees/task-1.2"


def _status(tasks: list[Task]) -> dict[str, Any]:
    plan = make_plan(1)
    plan.phases[0].tasks = tasks
    return status_from_state({"plan": plan.model_dump(mode="json"), "session_id": "sess-r"})


def _task(task_id: str, status: TaskStatus = "pending", **fields: Any) -> Task:
    return Task(id=task_id, phase_id="1", title=f"Title {task_id}", status=status, **fields)


def _printed(data: dict[str, Any], capsys: pytest.CaptureFixture[str], *, show_all: bool = False) -> str:
    print_status(data, Path("/repo"), show_all=show_all)
    return capsys.readouterr().out


def test_in_flight_tasks_show_their_step_and_worktree(capsys: pytest.CaptureFixture[str]) -> None:
    data = _status(
        [
            _task("1.1", "in_progress", files=["a.py"]),
            _task("1.2", "auto_gated", files=["b.py"], worktree=WORKTREE),
            _task("1.3"),
        ]
    )
    out = _printed(data, capsys)
    in_flight = out[out.index("In flight") :]
    assert "1.2" in in_flight and "auto_gated" in in_flight and WORKTREE in in_flight
    assert "1.1" in in_flight and "(main tree)" in in_flight
    assert "3 tasks (2 in flight): 1 pending, 1 in_progress, 1 auto_gated" in out


def test_in_flight_tasks_of_a_ray_run_show_their_node(capsys: pytest.CaptureFixture[str]) -> None:
    plan = make_plan(1)
    plan.phases[0].tasks = [
        _task("1.1", "coded", files=["a.py"], worktree=WORKTREE),
        _task("1.2", "in_progress", files=["b.py"]),
    ]
    state = {"plan": plan.model_dump(mode="json"), "nodes": {"1.1": "worker-7/3fa2c1d0"}}
    data = status_from_state(state)
    assert [item["node"] for item in data["in_flight"]] == ["worker-7/3fa2c1d0", None]
    out = _printed(data, capsys)
    in_flight = out[out.index("In flight") :]
    assert "Node" in in_flight and "worker-7/3fa2c1d0" in in_flight and "(here)" in in_flight
    # Without a node anywhere (the local executor) there is no such column.
    assert "Node" not in _printed(_status([_task("1.1", "coded", files=["a.py"])]), capsys)


def test_pending_tasks_say_what_they_wait_on(capsys: pytest.CaptureFixture[str]) -> None:
    data = _status(
        [
            _task("1.1", "coded", files=["a.py"], worktree=WORKTREE),
            _task("1.2", depends_on=["1.1"]),
            _task("1.3", files=["a.py"]),
            _task("1.4", files=["z.py"]),
        ]
    )
    out = _printed(data, capsys)
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith("│ 1.")}
    assert "waits on 1.1" in rows["1.2"] and "waits on 1.1" in rows["1.3"]
    assert "waits on" not in rows["1.4"] and "waits on" not in rows["1.1"]
    assert "Pending: 1 ready to start, 2 waiting; most waited on: 1.1 (2)" in out


def test_a_huge_plan_summarises_its_waiting_tasks_and_caps_long_waiting_lists(
    capsys: pytest.CaptureFixture[str],
) -> None:
    hub = [_task(f"1.{i}", "in_progress", files=[f"hub{i}.py"]) for i in range(1, 9)]
    waiting = [
        _task(f"2.{i}", files=["hub1.py"], depends_on=[] if i % 2 else [f"1.{d}" for d in range(1, 9)])
        for i in range(1, 301)
    ]
    out = _printed(_status([*hub, *waiting]), capsys)
    assert "waits on 1.1, 1.2, 1.3, 1.4, 1.5 (+3 more)" in out
    assert "Pending: 0 ready to start, 300 waiting; most waited on: 1.1 (300), " in out
    # The summary is one line, not a second list of the waiting tasks.
    assert out.count("│ 2.299 ") == 0
    assert _printed(_status([*hub, *waiting]), capsys, show_all=True).count("│ 2.299 ") == 1


def _phased(*phases: list[Task]) -> dict[str, Any]:
    plan = make_plan(1, phases=len(phases))
    for phase, tasks in zip(plan.phases, phases, strict=True):
        phase.tasks = [task.model_copy(update={"phase_id": phase.id}) for task in tasks]
    return status_from_state({"plan": plan.model_dump(mode="json"), "session_id": "sess-r"})


def test_by_default_finished_phases_are_one_line_and_only_what_needs_a_look_is_listed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    done = [[_task(f"{p}.{i}", "complete") for i in range(1, 41)] for p in (1, 2)]
    current = [
        _task("3.1", "complete"),
        _task("3.2", "blocked", blocked_reason="the reviewer gave up"),
        _task("3.3", "reviewed", files=["c.py"]),
        *(_task(f"3.{i}") for i in range(4, 40)),
    ]
    later = [[_task(f"{p}.{i}") for i in range(1, 31)] for p in (4, 5, 6)]
    out = _printed(_phased(*done, current, *later), capsys)

    assert "Phases 1-2: 80 task(s), all complete" in out
    assert "Phases 4-6: 90 task(s), all pending" in out
    assert "Phase 3: 39 task(s): 36 pending, 1 reviewed, 1 complete, 1 blocked" in out
    rows = {line.split()[1] for line in out.splitlines() if line.startswith("│ ")}
    assert "3.2" in rows and "the reviewer gave up" in out  # blocked: always listed
    assert "3.3" in rows  # in flight: listed with its step in the in-flight table
    assert {f"3.{i}" for i in range(4, 14)} <= rows and "3.14" not in rows  # the next pending ones
    assert not rows & {"1.1", "2.40", "4.1"}
    assert "116 more task(s) not listed; `autodev status --all` lists every task" in out
    everything = _printed(_phased(*done, current, *later), capsys, show_all=True)
    assert all(f"│ {task_id} " in everything for task_id in ("1.1", "2.40", "3.39", "6.30"))
