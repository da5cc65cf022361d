"""Slice jobs end to end with the scripted adapter: a task above ``slice_above`` is split by the architect
into slices recorded in the ledger, the slices are coded and committed, and the task completes with them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from support.parallel import (
    ClaudeCodeScripted,
    Spec,
    WatchedAdapter,
    entries_for,
    git,
    git_repo,
    ledger_ops,
    orchestrator,
    plan_of,
    save_plan,
    script_of,
)

from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import AcceptanceCriterion, Plan
from autodev.state.verify import verify_state

SLICES = """Here are the slices.

### Task big.1: Write the first half
- Description: The parser.
- Files: src/t_big.1.py
- Model: haiku
- Effort: <1h
- Acceptance:
  - [ ] the first half works

### Task big.2: Write the second half
- Files: src/t_big.2.py
- Model: sonnet
- Effort: 1h
- Depends: big.1
- Acceptance:
  - [ ] the second half works
"""

TOO_BIG = SLICES.replace("- Effort: 1h", "- Effort: 5h")


def _plan() -> Plan:
    """``big`` (a day of work) before ``after``, which depends on it; ``small`` beside them."""
    plan = plan_of([Spec("big"), Spec("after", deps=("big",)), Spec("small")])
    plan.phases[0].tasks[0] = (
        plan.phases[0]
        .tasks[0]
        .model_copy(
            update={
                "effort": "1d",
                "model": "strong",
                "acceptance": [AcceptanceCriterion(description="both halves work")],
            }
        )
    )
    return plan


def _architect(*answers: str) -> dict[str, Any]:
    return {"role": "architect", "task_id": "big", "responses": [{"text": answer} for answer in answers]}


def _run(root: Path, adapter: WatchedAdapter, workers: int = 1, **overrides: Any) -> None:
    anyio.run(orchestrator(root, adapter, workers, **overrides).execute)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_task_above_slice_above_is_sliced_coded_in_its_slices_and_completed_with_them(
    tmp_path: Path, workers: int
) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, _plan())
    adapter = WatchedAdapter(script=script_of([_architect(SLICES), *entries_for()]))

    _run(root, adapter, workers)

    manager = PlanManager.open(root, readonly=True)
    statuses = {task.id: task.status for task in manager.tasks()}
    assert statuses == dict.fromkeys(["big.1", "big.2", "big", "after", "small"], "complete")
    big = manager.get_task("big")
    # No change of its own: its work is its slices' commits.
    assert big.commit is None
    assert manager.slices_of("big") == ["big.1", "big.2"]
    assert big.depends_on == ["big.1", "big.2"]
    first, second = manager.get_task("big.1"), manager.get_task("big.2")
    assert (first.parent, first.model, first.effort) == ("big", "fast", "<1h")
    assert (second.parent, second.model, second.depends_on) == ("big", "standard", ["big.1"])
    # The slices sit before their parent in its phase.
    assert [task.id for task in manager.plan.phases[0].tasks] == ["big.1", "big.2", "big", "after", "small"]
    # The architect sliced (once); nobody coded the big task itself; its dependent waited for both slices.
    calls = adapter.started
    assert calls.count(("big", "architect")) == 1
    assert ("big", "developer") not in calls
    developers = [task for task, role in calls if role == "developer"]
    assert developers.index("after") > developers.index("big.2") > developers.index("big.1")
    log = git(root, "log", "--format=%s")
    assert "big.1" in log and "big.2" in log
    ops = [entry["op"] for entry in ledger_ops(root)]
    assert ops.count("tasks_added") == 1 and ops.count("slices_done") == 1
    assert verify_state(root).ok


def test_the_slicing_architect_works_on_the_tasks_own_level(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    plan = _plan()
    plan.phases[0].tasks[0].model = "standard"
    save_plan(root, plan)
    adapter = ClaudeCodeScripted(script=script_of([_architect(SLICES), *entries_for()]))

    _run(root, adapter)

    assert [model for task, role, model in adapter.models if role == "architect"] == ["sonnet"]
    # Each slice's roles run on the slice's own level.
    assert {model for task, role, model in adapter.models if task == "big.1"} == {"haiku"}


def test_an_unusable_answer_is_asked_for_again_with_the_problem(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, _plan())
    adapter = WatchedAdapter(script=script_of([_architect(TOO_BIG, SLICES), *entries_for()]))
    prompts: list[str] = []
    execute = adapter.execute

    async def watched(inv: Any) -> Any:
        if inv.role == "architect":
            prompts.append(inv.prompt)
        return await execute(inv)

    adapter.execute = watched  # type: ignore[method-assign]

    _run(root, adapter)

    manager = PlanManager.open(root, readonly=True)
    assert manager.get_task("big").status == "complete"
    assert len(prompts) == 2
    assert "SLICE JOB" in prompts[0]
    assert "slice big.2 has Effort 5h, above 1h" in prompts[1]
    # Only the usable answer reached the plan.
    assert [entry["op"] for entry in ledger_ops(root)].count("tasks_added") == 1


def test_two_unusable_answers_block_the_task_and_a_retry_slices_it_afresh(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, _plan())
    reused = SLICES.replace("big.2", "small")  # an id the plan already has

    _run(root, WatchedAdapter(script=script_of([_architect(TOO_BIG, reused), *entries_for()])))

    manager = PlanManager.open(root, readonly=True)
    big = manager.get_task("big")
    assert big.status == "blocked"
    assert big.blocked_reason is not None and "slicing failed" in big.blocked_reason
    assert "duplicate task id 'small'" in big.blocked_reason
    assert manager.get_task("after").status == "blocked"
    assert manager.get_task("small").status == "complete"
    assert manager.slices_of("big") == []
    assert "tasks_added" not in [entry["op"] for entry in ledger_ops(root)]

    with PlanManager.open(root) as writer:
        writer.retry_blocked("big", retry_limit=3)
    _run(root, WatchedAdapter(script=script_of([_architect(SLICES), *entries_for()])))

    manager = PlanManager.open(root, readonly=True)
    assert {task.id: task.status for task in manager.tasks()} == dict.fromkeys(
        ["big.1", "big.2", "big", "after", "small"], "complete"
    )


def test_a_task_within_slice_above_is_coded_not_sliced(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, _plan())
    adapter = WatchedAdapter(script=script_of(entries_for()))

    one_lane = {"any": {"efforts": ["<1h", "1h", "5h", "1d"], "slices": True}}
    _run(root, adapter, slice_above="1d", lanes=one_lane)

    assert ("big", "developer") in adapter.started
    assert ("big", "architect") not in adapter.started
    assert PlanManager.open(root, readonly=True).get_task("big").status == "complete"


def test_with_lanes_the_slicing_lane_takes_the_slice_job(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, _plan())
    adapter = WatchedAdapter(script=script_of([_architect(SLICES), *entries_for()]))

    _run(root, adapter, 2, lanes_enabled=True)

    manager = PlanManager.open(root, readonly=True)
    assert all(task.status == "complete" for task in manager.tasks())
    assert manager.slices_of("big") == ["big.1", "big.2"]


def test_a_slice_job_asked_for_alone_is_sliced_and_nothing_more(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, _plan())
    adapter = WatchedAdapter(script=script_of([_architect(SLICES), *entries_for()]))

    anyio.run(lambda: orchestrator(root, adapter, 1).execute(task_id="big"))

    manager = PlanManager.open(root, readonly=True)
    assert manager.slices_of("big") == ["big.1", "big.2"]
    assert manager.get_task("big").status == "pending"
    assert adapter.started == [("big", "architect")]


def test_speculation_never_codes_a_slice_job(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    plan = plan_of([Spec("first"), Spec("big", deps=("first",))])
    plan.phases[0].tasks[1] = plan.phases[0].tasks[1].model_copy(update={"effort": "1d"})
    save_plan(root, plan)
    adapter = WatchedAdapter(script=script_of([_architect(SLICES), *entries_for(latency_s=0.2)]))

    _run(root, adapter, 2, speculative_execution_enabled=True)

    assert ("big", "developer") not in adapter.started
    assert PlanManager.open(root, readonly=True).get_task("big").status == "complete"


def test_with_phases_in_order_a_slice_may_not_wait_on_a_later_phase(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    plan = plan_of([Spec("big"), Spec("later", phase="2")])
    plan.phases[0].tasks[0] = plan.phases[0].tasks[0].model_copy(update={"effort": "1d"})
    save_plan(root, plan)
    waits_on_later = SLICES.replace("- Depends: big.1", "- Depends: big.1, later")
    prompts: list[str] = []
    adapter = WatchedAdapter(script=script_of([_architect(waits_on_later, SLICES), *entries_for()]))
    execute = adapter.execute

    async def watched(inv: Any) -> Any:
        if inv.role == "architect":
            prompts.append(inv.prompt)
        return await execute(inv)

    adapter.execute = watched  # type: ignore[method-assign]

    _run(root, adapter)

    assert "slice big.2 depends on later, a task of the later phase 2" in prompts[1]
    assert all(task.status == "complete" for task in PlanManager.open(root, readonly=True).tasks())
