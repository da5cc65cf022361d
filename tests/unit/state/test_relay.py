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
    with head.transaction():  # as the Ray executor seeds a node
        replica.seed(pickle.loads(head.pickled_state()), head.ledger_head.seq)
    return replica


def _started(head: PlanManager, tmp_path: Path) -> RelayedPlanManager:
    """A two-task plan whose 1.1 the head started, and a worker's replica working on 1.1."""
    head.init_plan(make_plan(2))
    head.update_task_status("1.1", "in_progress", base_commit="a" * 40)
    return _replica(head, tmp_path / "worker", "1.1")


def test_a_relayed_flow_changes_the_heads_ledger_in_order_and_the_replica_follows(
    repo: Path, tmp_path: Path
) -> None:
    with PlanManager(repo) as head:
        replica = _started(head, tmp_path)

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
        replica = _started(head, tmp_path)
        # The head moved the task on (the replica's view is stale): the head's state decides.
        head.update_task_status("1.1", "blocked", reason="stopped by the user")
        before = head.ledger_head
        with pytest.raises(LedgerRelayError, match="cannot move from 'blocked'"):
            replica.update_task_status("1.1", "coded")
        assert head.ledger_head == before
        assert replica.get_task("1.1").status == "blocked"  # the reply brought the replica up to date


def test_a_worker_cannot_touch_another_task_or_the_plan(repo: Path, tmp_path: Path) -> None:
    with PlanManager(repo) as head:
        replica = _started(head, tmp_path)
        before = head.ledger_head
        with pytest.raises(LedgerRelayError, match=r"another task than 1\.1"):
            replica.update_task_status("1.2", "in_progress")
        with pytest.raises(LedgerRelayError, match=r"without evidence of task 1\.1"):
            replica.record_evidence(ReviewEvidence(task_id="1.2", attempt=1, verdict="APPROVED"))
        # Methods the module does not relay fail on the replica; they never reach the head.
        with pytest.raises(LedgerRelayError, match="'plan_approved'"):
            replica.approve_plan()
        refused = serve_call(head, LedgerCall("1.1", "skip_task", ("1.2",), {}, 0))
        assert refused.error is not None and "not a change" in refused.error[2]
        assert head.ledger_head == before


def _ops_after(manager: PlanManager, seq: int) -> list[str]:
    return [entry.op for entry in manager.entries_since(seq)]


def test_records_wait_for_the_next_change_and_reach_the_ledger_in_the_order_made(
    repo: Path, tmp_path: Path
) -> None:
    with PlanManager(repo) as head:
        replica = _started(head, tmp_path)
        wire: _Wire = replica._relay  # type: ignore[assignment]
        start = head.ledger_head.seq

        replica.record_node("1.1", "host/node")
        path = replica.record_evidence(ReviewEvidence(task_id="1.1", attempt=1, verdict="APPROVED"))
        replica.record_patch("1.1", "diff --git a/x b/x\n", attempt=1)
        # Not sent yet: the head has nothing, the evidence file is already where the flow reads it.
        assert head.ledger_head.seq == start and not wire.calls
        assert path.is_file()
        replica.update_task_status("1.1", "coded")
        replica.record_usage("1.1", "developer", tool_calls=1, seconds=0.5, cost_usd=0.1)

        # Two round trips; the records went first, in the order the flow made them.
        assert [call.method for call in wire.calls] == ["update_task_status", "record_usage"]
        assert [record.method for record in wire.calls[0].before] == [
            "record_node",
            "record_evidence",
            "record_patch",
        ]
        assert _ops_after(head, start) == [
            "task_node",
            "evidence_recorded",
            "evidence_recorded",
            "task_status",
            "usage_recorded",
        ]
        assert replica.state_copy() == head.state_copy()
        assert head.node_of("1.1") == "host/node"
    assert verify_state(repo).ok


def test_reading_what_a_record_changes_sends_it_first(repo: Path, tmp_path: Path) -> None:
    with PlanManager(repo) as head:
        replica = _started(head, tmp_path)
        replica.record_evidence(ReviewEvidence(task_id="1.1", attempt=1, verdict="APPROVED"))
        assert [ref.kind for ref in replica.evidence_for("1.1")] == ["review"]
        assert [ref.kind for ref in head.evidence_for("1.1")] == ["review"]
        replica.record_node("1.1", "host/node")
        assert replica.node_of("1.1") == "host/node" == head.node_of("1.1")
        replica.flush()  # nothing left: no call
        assert len(replica._relay.calls) == 2  # type: ignore[attr-defined]


def test_a_record_the_head_refuses_stops_the_call_that_carried_it(repo: Path, tmp_path: Path) -> None:
    with PlanManager(repo) as head:
        replica = _started(head, tmp_path)
        # The replica refuses another task's record at once, before it waits anywhere.
        with pytest.raises(LedgerRelayError, match=r"without evidence of task 1\.1"):
            replica.record_evidence(ReviewEvidence(task_id="1.2", attempt=1, verdict="APPROVED"))
        start = head.ledger_head.seq
        # A worker that sends one anyway: what came before it stands, it and the call do not happen.
        node = LedgerCall("1.1", "record_node", ("1.1", "host/node"), {}, start)
        foreign = LedgerCall("1.1", "record_node", ("1.2", "host/node"), {}, start)
        status = LedgerCall("1.1", "update_task_status", ("1.1", "coded"), {}, start, before=(node, foreign))
        reply = serve_call(head, status)
        assert reply.error is not None and reply.error[0] == "record_node"
        assert "another task" in reply.error[2]
        assert _ops_after(head, start) == ["task_node"]
        assert head.get_task("1.1").status == "in_progress"
        # A change that waits for the head cannot be smuggled in as a record.
        smuggled = LedgerCall("1.1", "update_task_status", ("1.1", "coded"), {}, start)
        usage = LedgerCall("1.1", "record_usage", ("1.1", "developer"), {}, start, before=(smuggled,))
        reply = serve_call(head, usage)
        assert reply.error is not None and "cannot travel ahead" in reply.error[2]
        assert head.get_task("1.1").status == "in_progress"


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
