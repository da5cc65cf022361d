"""The relayed plan manager: a remote worker's replica changes state only through the head's ledger.

The transport here is a plain function that calls ``serve_call`` on a real head ``PlanManager`` (the
Ray executor puts an actor between the two; ``tests/integration/ray`` runs that).
"""

from __future__ import annotations

import ast
import inspect
import pickle
import textwrap
from pathlib import Path

import pytest
from support import make_plan

from autodev.state.evidence import read_evidence
from autodev.state.plan_manager import PlanManager
from autodev.state.relay import (
    RELAYED_METHODS,
    LedgerCall,
    LedgerRelayError,
    LedgerReply,
    RelayedPlanManager,
    serve_call,
)
from autodev.state.schemas import ReviewEvidence
from autodev.state.verify import verify_state


class _Wire:
    """Calls the head directly, keeping every call and reply (each pickled both ways, as Ray does)."""

    def __init__(self, head: PlanManager) -> None:
        self.head = head
        self.calls: list[LedgerCall] = []

    def __call__(self, call: LedgerCall) -> LedgerReply:
        call = pickle.loads(pickle.dumps(call))
        self.calls.append(call)
        reply: LedgerReply = pickle.loads(pickle.dumps(serve_call(self.head, call)))
        return reply


def _replica(head: PlanManager, worker_root: Path, task_id: str, **kwargs: object) -> RelayedPlanManager:
    wire = _Wire(head)
    replica = RelayedPlanManager(worker_root, task_id, wire, **kwargs)  # type: ignore[arg-type]
    with head.transaction():
        replica.seed(head.state_copy(), head.ledger_head.seq)
    return replica


def test_a_relayed_flow_changes_the_heads_ledger_in_order_and_the_replica_follows(
    repo: Path, tmp_path: Path
) -> None:
    with PlanManager(repo) as head:
        head.init_plan(make_plan(2))
        head.update_task_status("1.1", "in_progress", base_commit="a" * 40)
        replica = _replica(head, tmp_path / "worker", "1.1")

        # Another task moves on the head meanwhile; the replica learns it with its next change.
        head.update_task_status("1.2", "in_progress", base_commit="b" * 40)
        replica.update_task_status("1.1", "coded")
        path = replica.record_evidence(ReviewEvidence(task_id="1.1", attempt=1, verdict="APPROVED"))
        replica.update_task_status("1.1", "auto_gated")
        replica.record_usage("1.1", "developer", tool_calls=3, seconds=1.5, cost_usd=0.25)

        assert head.get_task("1.1").status == "auto_gated"
        assert replica.get_task("1.1").status == "auto_gated"
        assert replica.get_task("1.2").status == "in_progress"
        assert replica.replica_seq == head.ledger_head.seq
        assert replica.state_copy() == head.state_copy()
        assert replica.cost_usd_total == head.cost_usd_total == 0.25
        # The evidence is the head's file, mirrored at the same place in the worker's copy.
        assert path == tmp_path / "worker" / ".autodev" / "evidence" / "1.1-review-1.json"
        assert read_evidence(path) == read_evidence(repo / ".autodev" / "evidence" / "1.1-review-1.json")
    # Nothing but the head wrote a ledger, and it verifies.
    assert not (tmp_path / "worker" / ".autodev" / "ledger.jsonl").exists()
    assert verify_state(repo).ok


def test_the_head_checks_each_change_against_its_own_state(repo: Path, tmp_path: Path) -> None:
    with PlanManager(repo) as head:
        head.init_plan(make_plan(2))
        head.update_task_status("1.1", "in_progress", base_commit="a" * 40)
        replica = _replica(head, tmp_path / "worker", "1.1")
        # The head moved the task on (the replica's view is stale): the head's state decides.
        head.update_task_status("1.1", "blocked", reason="stopped by the user")
        before = head.ledger_head
        with pytest.raises(LedgerRelayError, match="cannot move from 'blocked'"):
            replica.update_task_status("1.1", "coded")
        assert head.ledger_head == before
        assert replica.get_task("1.1").status == "blocked"  # the reply brought the replica up to date


def test_a_worker_cannot_touch_another_task_or_the_plan(repo: Path, tmp_path: Path) -> None:
    with PlanManager(repo) as head:
        head.init_plan(make_plan(2))
        head.update_task_status("1.1", "in_progress", base_commit="a" * 40)
        replica = _replica(head, tmp_path / "worker", "1.1")
        before = head.ledger_head
        with pytest.raises(LedgerRelayError, match=r"another task than 1\.1"):
            replica.update_task_status("1.2", "in_progress")
        with pytest.raises(LedgerRelayError, match=r"without evidence of task 1\.1"):
            replica.record_evidence(ReviewEvidence(task_id="1.2", attempt=1, verdict="APPROVED"))
        # Methods the module does not relay fail on the replica; they never reach the head.
        with pytest.raises(LedgerRelayError, match="'plan_approved'"):
            replica.approve_plan()
        refused = serve_call(head, LedgerCall("1.1", "skip_task", ("1.2",), {}, 0))
        assert refused.error is not None and "not a change" in refused.error[1]
        assert head.ledger_head == before


def test_every_state_changing_method_is_relayed_or_refused() -> None:
    """A new ``PlanManager`` method that appends must be thought about: relayed, or listed here as the
    head's own (the replica refuses it)."""
    heads_own = {
        "init_plan",
        "record_session",
        "revert_task_to_pending",
        "retry_blocked",
        "skip_task",
        "add_tasks",
        "complete_sliced",
        "approve_plan",
        "start_plan_phase",
        "record_plan_step",
        "drop_plan_steps",
        "record_phase_baseline",
        "record_phase_checkpoint",
        "record_baseline",
        "declare_write_scope",
        "resolve_approval",
        "waive_check",
        "hold_for_adoption",
        "record_base_check",
        "mark_waiting",
        "block_on_human",
        "release_from_human",
        "_release_from_human",
    }
    appending = set()
    for name, member in inspect.getmembers(PlanManager, inspect.isfunction):
        source = textwrap.dedent(inspect.getsource(member))
        calls = {
            node.func.attr
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        }
        if "_append" in calls and name != "_append":
            appending.add(name)
    assert appending, "the source scan found no appending method"
    assert appending <= RELAYED_METHODS | heads_own, appending - RELAYED_METHODS - heads_own
    assert all(callable(getattr(PlanManager, name, None)) for name in RELAYED_METHODS)
    assert not RELAYED_METHODS & heads_own
