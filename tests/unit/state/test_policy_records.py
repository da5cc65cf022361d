"""The delegation policy's records in the ledger: declarations, approval requests and worker grants replay
exactly, survive a reopen (and a lost snapshot), and a new plan starts a new run without them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import make_plan

from autodev.errors import StateError
from autodev.state.ledger import Ledger
from autodev.state.paths import AutodevPaths
from autodev.state.plan_manager import PlanManager
from autodev.state.policy_records import ScopeDeclaration, WorkerGrant


def _grant(task_id: str, tier: str = "strong") -> WorkerGrant:
    return WorkerGrant(task_id=task_id, tier=tier, write_mode="isolated", owned_paths=["src/**"], units=4)


def test_declarations_approvals_and_grants_survive_a_reopen_without_the_snapshot(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(3), write_scope=ScopeDeclaration(source="intent", patterns=["src/**"]))
        assert pm.declare_write_scope("command_line", ["docs/**"])
        assert not pm.declare_write_scope("command_line", ["docs/**"])  # recorded once
        first = pm.request_approval(
            ["tests/b.py", "tests/a.py"], ["1.1"], "owned_path_provenance_required", "r"
        )
        again = pm.request_approval(
            ["tests/a.py", "tests/b.py"], ["1.2"], "owned_path_provenance_required", "r"
        )
        assert (first.id, again.id) == ("A1", "A1")
        assert again.task_ids == ["1.1", "1.2"]
        pm.resolve_approval("A1", accepted=True)
        pm.update_task_status("1.1", "in_progress")
        pm.record_decision({"role": "developer"}, {"route": "spawn"}, _grant("1.1"))
    (repo / ".autodev" / "plan.json").unlink()
    with PlanManager(repo) as reopened:
        assert [(d.source, d.patterns) for d in reopened.write_scopes] == [
            ("intent", ["src/**"]),
            ("command_line", ["docs/**"]),
        ]
        (record,) = reopened.approvals
        assert (record.status, record.scope) == ("accepted", ["tests/a.py", "tests/b.py"])
        assert record.resolved_at is not None
        assert set(reopened.workers) == {"1.1"}


def test_a_grant_ends_when_its_task_finishes_or_goes_back_to_pending(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(2))
        for task_id in ("1.1", "1.2"):
            pm.update_task_status(task_id, "in_progress")
            pm.record_decision({}, {"route": "spawn"}, _grant(task_id))
        pm.update_task_status("1.1", "blocked", reason="x")
        assert set(pm.workers) == {"1.2"}
        pm.revert_task_to_pending("1.2", "interrupted")
        assert pm.workers == {}


def test_an_answered_or_unknown_request_cannot_be_answered(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(1))
        pm.request_approval(["src/**"], ["1.1"], "owned_path_provenance_required", "r")
        pm.resolve_approval("A1", accepted=False)
        head = pm.ledger_head
        with pytest.raises(StateError, match="declined already"):
            pm.resolve_approval("A1", accepted=True)
        with pytest.raises(StateError, match=r"no approval request 'A7' \(requests: A1\)"):
            pm.resolve_approval("A7", accepted=True)
        assert pm.ledger_head == head
        # A declined request is not asked again, nor does a new task join it.
        assert pm.request_approval(["src/**"], ["1.2"], "x", "y").task_ids == ["1.1"]


def test_a_new_plan_starts_a_new_run_without_declarations_or_approvals(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(1), write_scope=ScopeDeclaration(source="intent", patterns=["src/**"]))
        pm.request_approval(["docs/**"], ["1.1"], "owned_path_provenance_required", "r")
        pm.init_plan(make_plan(2), replace=True)
        assert pm.write_scopes == [] and pm.approvals == []


def test_status_names_the_tasks_waiting_on_a_person_and_their_dependents_across_phases(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(
            make_plan(2, phases=2, chain=True), write_scope=ScopeDeclaration(source="intent", patterns=["**"])
        )
        pm.request_approval(["docs/**"], ["1.2"], "owned_path_provenance_required", "r")
        policy = pm.status()["policy"]
        assert policy["write_scope"] == ["**"]
        assert policy["blocked_on_human"] == [
            {"task_id": "1.2", "approval": "A1", "since": None},
            {"task_id": "2.1", "approval": "A1", "since": None},
            {"task_id": "2.2", "approval": "A1", "since": None},
        ]
        pm.resolve_approval("A1", accepted=True)
        policy = pm.status()["policy"]
        assert policy["blocked_on_human"] == []
        assert policy["write_scope"] == ["**", "docs/**"]


def test_a_run_holds_the_dependents_of_a_waiting_task_and_the_answer_releases_them(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(2, phases=2, chain=True))
        pm.request_approval(["docs/**"], ["1.2"], "owned_path_provenance_required", "r")
        # The waiting task itself is not held; its dependents in the next phase are, once.
        assert pm.block_on_human("A1", ["1.2"]) == ["2.1", "2.2"]
        assert pm.block_on_human("A1", ["1.2"]) == []
        pm.mark_waiting(["A1"], waiting=True)
        pm.mark_waiting(["A1"], waiting=True)  # already waiting: no second op
        (record,) = pm.approvals
        assert record.waiting_since is not None
        held = pm.status()["policy"]["blocked_on_human"]
        assert [(item["task_id"], item["since"] is not None) for item in held] == [
            ("1.2", False),
            ("2.1", True),
            ("2.2", True),
        ]
        assert pm.human_blocked_seconds("2.1") >= 0
        pm.resolve_approval("A1", accepted=True)
        assert pm.blocked_on_human == {}
        (record,) = pm.approvals
        assert record.waiting_since is None  # leaving the wait moved it
    ops = [entry.op for entry in _entries(repo)]
    assert ops.count("approval_waiting") == 2
    assert ops.count("tasks_blocked_on_human") == ops.count("tasks_released_by_human") == 1
    released = next(entry for entry in _entries(repo) if entry.op == "tasks_released_by_human")
    assert released.payload["resolution"] == "accepted"
    assert [item["id"] for item in released.payload["tasks"]] == ["2.1", "2.2"]
    (repo / ".autodev" / "plan.json").unlink()
    with PlanManager(repo) as reopened:
        assert reopened.blocked_on_human == {}
        assert reopened.human_blocked_seconds("2.1") == released.payload["tasks"][0]["blocked_s"]


def test_holds_survive_a_reopen_and_a_timed_out_wait_releases_them(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(3, chain=True))
        pm.request_approval(["docs/**"], ["1.1"], "owned_path_provenance_required", "r")
        pm.block_on_human("A1", ["1.1"])
    (repo / ".autodev" / "plan.json").unlink()
    with PlanManager(repo) as reopened:
        assert {task_id: hold.approval_id for task_id, hold in reopened.blocked_on_human.items()} == {
            "1.2": "A1",
            "1.3": "A1",
        }
        assert reopened.release_from_human("A1", "timed_out") == ["1.2", "1.3"]
        assert reopened.blocked_on_human == {}
        (record,) = reopened.approvals
        assert record.status == "pending"  # unanswered: the request stays, stale for its tasks


def _entries(repo: Path) -> list[Any]:
    ledger = Ledger(AutodevPaths(repo).ledger, readonly=True)
    ledger.open(repair=False)
    try:
        return list(ledger.entries())
    finally:
        ledger.close()


def test_status_says_whether_a_task_in_flight_runs_or_waits_and_for_what(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(3))
        for task_id in ("1.1", "1.2", "1.3"):
            pm.update_task_status(task_id, "in_progress")
        developer = {"role": "developer", "family": "developer:src"}
        pm.record_decision(
            {**developer, "task_id": "1.1"}, {"route": "spawn", "reason": "within_budget"}, _grant("1.1")
        )
        pm.record_decision(
            {**developer, "task_id": "1.2"}, {"route": "queue", "reason": "strong_worker_limit"}
        )
        in_flight = {item["id"]: item for item in pm.status()["in_flight"]}
    assert (in_flight["1.1"]["lifecycle"], in_flight["1.1"]["family"]) == ("running", "developer:src")
    assert in_flight["1.1"]["waiting"] is None
    assert in_flight["1.2"]["lifecycle"] == "queued"
    assert in_flight["1.2"]["waiting"] == "a worker: strong_worker_limit"
    # No decision about it yet: running, family unknown.
    assert (in_flight["1.3"]["lifecycle"], in_flight["1.3"]["family"]) == ("running", None)
    (repo / ".autodev" / "plan.json").unlink()
    with PlanManager(repo) as reopened:
        assert reopened.status()["in_flight"][1]["lifecycle"] == "queued"
