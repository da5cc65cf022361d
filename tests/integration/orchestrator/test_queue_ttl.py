"""A writer's wait in the policy's queue has a time to live (``policy.queue_ttl_s``): past it, its task is
blocked (``queue_expired``, recorded and retryable) instead of waiting on; unset, it waits as long as the run.
Scripted agents that take their time, real git."""

from __future__ import annotations

from pathlib import Path

import anyio
from support.parallel import (
    Spec,
    WatchedAdapter,
    entries_for,
    git_repo,
    ledger_ops,
    orchestrator,
    plan_of,
    save_plan,
    script_of,
)

from autodev.state.plan_manager import PlanManager


def _two_strong_tasks(tmp_path: Path, **overrides: object) -> tuple[Path, WatchedAdapter]:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2")]))
    adapter = WatchedAdapter(script=script_of(entries_for(), latency_s=1.0))
    # Both tasks are strong (the default); one strong worker at a time makes the second one queue.
    orch = orchestrator(root, adapter, 2, **{"policy.max_strong_workers": 1, **overrides})
    anyio.run(orch.execute)
    return root, adapter


def test_a_writer_queued_past_its_time_to_live_is_blocked_with_the_reason(tmp_path: Path) -> None:
    root, adapter = _two_strong_tasks(tmp_path, **{"policy.queue_ttl_s": 0.5})

    with PlanManager.open(root, readonly=True) as plans:
        statuses = {task.id: task.status for task in plans.tasks()}
        expired = next(task for task in plans.tasks() if task.status == "blocked")
    assert sorted(statuses.values()) == ["blocked", "complete"]
    assert "queue_expired" in (expired.blocked_reason or "")
    assert "strong_worker_limit" in (expired.blocked_reason or "")
    assert f"autodev retry {expired.id}" in (expired.blocked_reason or "")
    # It never started writing: no developer call, and the decision that ended its wait is logged.
    assert (expired.id, "developer") not in adapter.started
    decided = [
        op["payload"]
        for op in ledger_ops(root)
        if op["op"] == "delegation_decided" and op["payload"]["inputs"]["task_id"] == expired.id
    ]
    assert [d["decision"]["route"] for d in decided] == ["queue", "reject"]
    assert decided[-1]["decision"]["reason"] == "queue_expired"
    assert decided[-1]["inputs"]["queued_s"] >= 0.5


def test_without_a_time_to_live_the_queued_writer_waits_its_turn(tmp_path: Path) -> None:
    root, _ = _two_strong_tasks(tmp_path)

    with PlanManager.open(root, readonly=True) as plans:
        assert {task.status for task in plans.tasks()} == {"complete"}
    routes = [
        op["payload"]["decision"]["route"]
        for op in ledger_ops(root)
        if op["op"] == "delegation_decided" and op["payload"]["inputs"]["role"] == "developer"
    ]
    assert "queue" in routes and "reject" not in routes
