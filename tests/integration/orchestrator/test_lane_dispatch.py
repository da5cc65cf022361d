"""With ``lanes_enabled`` the execute phase starts tasks by lanes: each lane's pick order, each lane's
concurrency, the lanes taking turns, a lane with nothing to pick falling back."""

from __future__ import annotations

from pathlib import Path

import anyio
from support.parallel import (
    Spec,
    WatchedAdapter,
    entries_for,
    git_repo,
    orchestrator,
    plan_of,
    save_plan,
    script_of,
)

from autodev.adapters.base import AgentInvocation, AgentResult
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import Plan

# Three small tasks and two slow ones; the slow s2 waits on the small f3, so the fast lane (unblock first)
# starts f3 first, and the slow lane (priority first) starts the urgent s1 first.
SIZES = {
    "f1": ("<1h", "P1"),
    "f2": ("<1h", "P2"),
    "f3": ("<1h", "P3"),
    "s1": ("1h", "P0"),
    "s2": ("1h", None),
}


def _sized_plan() -> Plan:
    plan = plan_of([Spec("f1"), Spec("f2"), Spec("f3"), Spec("s1"), Spec("s2", deps=("f3",))])
    tasks = [
        task.model_copy(update={"effort": SIZES[task.id][0], "priority": SIZES[task.id][1]})
        for task in plan.phases[0].tasks
    ]
    plan.phases[0].tasks = tasks
    return plan


def test_each_lane_runs_its_own_pick_order_within_its_concurrency(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, _sized_plan())
    adapter = WatchedAdapter(script=script_of(entries_for(), latency_s=0.05), gather=2)

    anyio.run(orchestrator(root, adapter, 3, lanes_enabled=True).execute)

    manager = PlanManager.open(root, readonly=True)
    assert {task.id: task.status for task in manager.tasks()} == dict.fromkeys(SIZES, "complete")
    started = list(dict.fromkeys(task for task, role in adapter.started if role == "developer"))
    # The lanes take turns: f3 (fast, unblocks s2) and s1 (slow, P0) first.
    assert started[:2] in (["f3", "s1"], ["s1", "f3"])
    # One task per lane at a time, although three workers were free: never two fast or two slow tasks.
    for pair in adapter.overlaps:
        assert {task[0] for task in pair} == {"f", "s"}, pair
    assert adapter.max_tasks_at_once == 2


def test_a_lane_with_nothing_to_pick_takes_its_fallbacks_work(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    plan = plan_of([Spec("f1"), Spec("f2")])
    plan.phases[0].tasks = [task.model_copy(update={"effort": "<1h"}) for task in plan.phases[0].tasks]
    save_plan(root, plan)
    adapter = WatchedAdapter(script=script_of(entries_for(), latency_s=0.05), gather=2)

    anyio.run(orchestrator(root, adapter, 2, lanes_enabled=True).execute)

    # The slow lane has no work of its own and falls back to fast: both small tasks run at once.
    assert adapter.max_tasks_at_once == 2


def test_with_lanes_the_developer_is_told_its_lane_and_model(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, _sized_plan())
    prompts: dict[str, str] = {}
    adapter = WatchedAdapter(script=script_of(entries_for()))
    execute = adapter.execute

    async def watched(inv: AgentInvocation) -> AgentResult:
        if inv.role == "developer":
            prompts.setdefault(inv.task_id or "", inv.prompt)
        return await execute(inv)

    adapter.execute = watched  # type: ignore[method-assign]

    anyio.run(orchestrator(root, adapter, 2, lanes_enabled=True).execute)

    assert "  lane: fast" in prompts["f1"] and "  model: opus" in prompts["f1"]
    assert "  lane: slow" in prompts["s1"]
