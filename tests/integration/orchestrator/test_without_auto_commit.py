"""With ``auto_commit`` off the tasks' changes stay uncommitted in the main tree, one task after another:
each task's base is the tree the tasks before it left, so its diff, its review and a block concern its own
change only, and a blocked task never takes away what the tasks before it did."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from support.parallel import (
    Spec,
    WatchedAdapter,
    entries_for,
    git,
    git_repo,
    orchestrator,
    own_file,
    plan_of,
    save_plan,
    script_of,
)

from autodev.guardrails import BudgetExceededError
from autodev.state.plan_manager import PlanManager
from autodev.workspace.integration import base_ref, blocked_ref


def _run(root: Path, entries: list[dict[str, object]]) -> WatchedAdapter:
    adapter = WatchedAdapter(script=script_of(entries))
    anyio.run(orchestrator(root, adapter, 1, auto_commit=False, qa_retry_limit=1).execute)
    return adapter


def test_a_blocked_task_sets_aside_its_own_change_and_keeps_the_earlier_tasks_work(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2"), Spec("1.3")]))
    head = git(root, "rev-parse", "HEAD").strip()
    entries = entries_for()
    entries.append({"role": "reviewer", "task_id": "1.2", "text": "VERDICT: NEEDS_CHANGES\nISSUES:\n- no"})

    adapter = _run(root, entries)

    manager = PlanManager.open(root, readonly=True)
    assert {task.id: task.status for task in manager.tasks()} == {
        "1.1": "complete",
        "1.2": "blocked",
        "1.3": "complete",
    }
    assert git(root, "rev-parse", "HEAD").strip() == head  # nothing was committed
    # 1.1's and 1.3's changes are in the working tree; 1.2's is kept aside, and only 1.2's.
    assert (root / own_file("1.1")).read_text() == "VALUE = '1.1'\n"
    assert (root / own_file("1.3")).read_text() == "VALUE = '1.3'\n"
    assert not (root / own_file("1.2")).exists()
    kept = git(root, "rev-parse", blocked_ref("1.2")).strip()
    assert git(root, "diff", "--name-only", f"{kept}^", kept).split() == [own_file("1.2")]
    # Each reviewer saw its own task's change, not the uncommitted work before it (the other tasks' files
    # are named only in AutoDev's records of what they delivered, never in the diff to review).
    for call in adapter.calls:
        if call.role == "reviewer":
            others = {own_file(task) for task in ("1.1", "1.2", "1.3")} - {own_file(call.task_id or "")}
            assert f"diff --git a/{own_file(call.task_id or '')}" in call.prompt
            assert not any(f"diff --git a/{other}" in call.prompt for other in others), call.task_id
    assert git(root, "for-each-ref", "--format=%(refname)", "refs/autodev").split() == [blocked_ref("1.2")]


def test_a_task_stopped_on_uncommitted_work_resumes_from_the_same_base(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2")]))
    entries = [dict(entry, cost_usd=1.0) for entry in entries_for()]
    stop_in_12 = {"auto_commit": False, "guardrails.cost_budget_usd_per_plan": 4.0}
    with pytest.raises(BudgetExceededError):
        anyio.run(orchestrator(root, WatchedAdapter(script=script_of(entries)), 1, **stop_in_12).execute)
    stopped = PlanManager.open(root, readonly=True).get_task("1.2")
    assert stopped.status not in ("pending", "complete")
    assert git(root, "rev-parse", base_ref("1.2")).strip() == stopped.base_commit

    adapter = WatchedAdapter(script=script_of(entries))
    more = {"auto_commit": False, "guardrails.cost_budget_usd_per_plan": 100.0}
    anyio.run(orchestrator(root, adapter, 1, **more).execute)

    assert {task.status for task in PlanManager.open(root, readonly=True).tasks()} == {"complete"}
    patch = (root / ".autodev" / "evidence" / "1.2.patch").read_text()
    assert own_file("1.2") in patch and own_file("1.1") not in patch
    assert git(root, "for-each-ref", "refs/autodev") == ""
