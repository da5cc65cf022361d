"""The run's automatic retry: a task that used up its attempts gets one more, a tier higher, once per run.

Scripted agents, real git and the real QA tools: the developer's change fails the lint gate until the
attempt the retry grants, so only that attempt can complete the task.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from support.orchestration import demo_project, orchestrator, script_with

from autodev.state.ledger import Ledger
from autodev.state.paths import AutodevPaths
from autodev.state.plan_manager import PlanManager

FAST_GATES = {"qa_gates.secretscan.enabled": False, "qa_gates.build.enabled": False}
BROKEN = "import os\n\n\ndef slugify(text):\n    return text\n"  # F401 (unused import)


def _failing_then_fixed(setup: Any) -> Any:
    """The demo's script with 1.1's developer failing the lint gate on attempts 1 and 2, then writing the
    change the reviewer approves."""
    fixed = next(
        e for e in setup.script.entries if e.role == "developer" and e.task_id == "1.1" and e.attempt == 2
    )
    return script_with(
        setup,
        *(
            {
                "role": "developer",
                "task_id": "1.1",
                "attempt": attempt,
                "text": "done",
                "edits": [{"path": "textutils/slug.py", "content": BROKEN + "\n" * attempt}],
            }
            for attempt in (1, 2)
        ),
        {**fixed.model_dump(exclude_defaults=True), "attempt": 3},
        {"role": "reviewer", "task_id": "1.1", "text": "VERDICT: APPROVED\nISSUES:\n- none"},
    )


def _decisions(root: Path) -> list[dict[str, Any]]:
    ledger = Ledger(AutodevPaths(root).ledger, readonly=True)
    ledger.open(repair=False)
    try:
        return [
            entry.payload
            for entry in ledger.entries()
            if entry.op == "delegation_decided" and entry.payload["inputs"].get("retries_exhausted")
        ]
    finally:
        ledger.close()


def _planned(setup: Any, **overrides: Any) -> Any:
    orch, adapter = orchestrator(setup.repo_root, _failing_then_fixed(setup), **overrides, **FAST_GATES)
    anyio.run(lambda: orch.plan(setup.intent))
    return orch, adapter


def test_a_standard_task_out_of_attempts_gets_one_more_at_strong_and_completes(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    orch, adapter = _planned(setup, qa_retry_limit=2)
    with PlanManager.open(setup.repo_root) as plans:
        plans.set_task_model("1.1", "standard")
    tasks = {task.id: task for task in anyio.run(orch.execute)}
    assert tasks["1.1"].status == "complete"
    assert tasks["1.2"].status == "complete"
    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        task = plans.get_task("1.1")
        assert (task.model, task.automatic_retries, task.retry_count) == ("strong", 1, 2)
        assert plans.automatic_retries_used == 1
    developer = [c.attempt for c in adapter.calls if c.role == "developer" and c.task_id == "1.1"]
    assert developer == [1, 2, 3]
    assert "critic_sounding_board" not in {c.role for c in adapter.calls}
    (decision,) = _decisions(setup.repo_root)
    assert decision["decision"]["route"] == "spawn"
    assert decision["decision"]["reason"] == "automatic_retry"
    assert decision["decision"]["escalate_to"] == "strong"
    # The worker's grant moved to the new tier (it counts against the strong-worker limit).
    assert decision["grant"]["tier"] == "strong"


def test_without_automatic_retries_left_the_task_is_blocked_by_the_critic(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    orch, adapter = _planned(setup, qa_retry_limit=2, **{"policy.automatic_retries": 0})
    with PlanManager.open(setup.repo_root) as plans:
        plans.set_task_model("1.1", "standard")
    anyio.run(orch.execute)
    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        task = plans.get_task("1.1")
        assert task.status == "blocked" and task.escalated
        assert (task.model, task.automatic_retries) == ("standard", 0)
    assert [c.attempt for c in adapter.calls if c.role == "developer" and c.task_id == "1.1"] == [1, 2]
    (decision,) = _decisions(setup.repo_root)
    assert decision["decision"]["route"] == "reject"
    assert decision["decision"]["reason"] == "retry_budget_exhausted"


def test_a_strong_task_out_of_attempts_is_terminal(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    orch, adapter = _planned(setup, qa_retry_limit=2)
    anyio.run(orch.execute)
    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        assert plans.get_task("1.1").status == "blocked"
        assert plans.automatic_retries_used == 0
    assert [c.attempt for c in adapter.calls if c.role == "developer" and c.task_id == "1.1"] == [1, 2]
    (decision,) = _decisions(setup.repo_root)
    assert decision["decision"]["reason"] == "escalation_terminal"


def test_the_retry_budget_is_the_runs_and_survives_a_new_process(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    orch, _ = _planned(setup, qa_retry_limit=2)
    with PlanManager.open(setup.repo_root) as plans:
        plans.set_task_model("1.1", "standard")
        # Another task of this run was retried automatically already (a process before this one).
        plans.set_task_model("1.2", "fast")
        plans.grant_automatic_retry("1.2", "standard", "an earlier process")
    anyio.run(orch.execute)
    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        assert plans.get_task("1.1").status == "blocked"
        assert plans.automatic_retries_used == 1
    (decision,) = _decisions(setup.repo_root)
    assert decision["decision"]["reason"] == "retry_budget_exhausted"
    assert decision["inputs"]["automatic_retries_used"] == 1
