"""Hypothesis: any sequence of PlanManager operations replays to exactly the live state."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import make_plan

from autodev.errors import AutodevError
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import ReviewEvidence
from autodev.state.transitions import TASK_TRANSITIONS
from autodev.state.vocabulary import TASK_STATUSES

TASK_IDS = ["1.1", "1.2", "1.3", "2.1", "2.2"]

operation = st.one_of(
    st.tuples(st.just("status"), st.sampled_from(TASK_IDS), st.sampled_from(TASK_STATUSES)),
    st.tuples(st.just("retry"), st.sampled_from(TASK_IDS), st.none()),
    st.tuples(st.just("escalate"), st.sampled_from(TASK_IDS), st.none()),
    st.tuples(st.just("revert"), st.sampled_from(TASK_IDS), st.none()),
    st.tuples(st.just("cascade"), st.sampled_from(TASK_IDS), st.none()),
    st.tuples(st.just("evidence"), st.sampled_from(TASK_IDS), st.none()),
)


def _run(pm: PlanManager, op: tuple[str, str, str | None]) -> None:
    kind, task_id, target = op
    if kind == "status":
        assert target is not None
        pm.update_task_status(task_id, target, reason="why" if target == "blocked" else None)  # type: ignore[arg-type]
    elif kind == "retry":
        pm.mark_task_retry(task_id)
    elif kind == "escalate":
        pm.mark_escalated(task_id, "critic said so")
    elif kind == "revert":
        pm.revert_task_to_pending(task_id, "rollback")
    elif kind == "cascade":
        pm.mark_blocked_descendants(task_id, "parent failed")
    else:
        attempt = pm.get_task(task_id).retry_count + 1
        pm.record_evidence(ReviewEvidence(task_id=task_id, attempt=attempt, verdict="APPROVED"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operation, max_size=40))
def test_replay_equals_live_state(ops: list[tuple[str, str, str | None]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with PlanManager(root) as pm:
            pm.init_plan(make_plan(3, phases=2, chain=True))
            for op in ops:
                before = pm.ledger_head
                try:
                    _run(pm, op)
                except AutodevError:
                    # A refused change must leave the ledger exactly as it was.
                    assert pm.ledger_head == before
            live = pm.state_copy()
            for task in pm.tasks():
                assert task.status in TASK_STATUSES
        replayed = PlanManager(root, readonly=True, use_snapshot=False)
        replayed.load()
        assert replayed.state_copy() == live
        from_snapshot = PlanManager.open(root, readonly=True)
        assert from_snapshot.snapshot_usable
        assert from_snapshot.state_copy() == live


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(TASK_STATUSES), min_size=1, max_size=30))
def test_status_walks_are_applied_only_along_allowed_edges(walk: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp, PlanManager(Path(tmp)) as pm:
        pm.init_plan(make_plan(1))
        current = "pending"
        for target in walk:
            allowed = target in TASK_TRANSITIONS[current]  # type: ignore[index]
            try:
                pm.update_task_status("1.1", target)  # type: ignore[arg-type]
            except AutodevError:
                assert not allowed
            else:
                assert allowed
                current = target
            assert pm.get_task("1.1").status == current
