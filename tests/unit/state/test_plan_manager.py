"""PlanManager: validated changes, snapshots rebuilt from the ledger, scheduling queries."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from support import make_plan
from support.cli import STATUS_KEYS

from autodev.errors import (
    AutodevError,
    InvalidTransitionError,
    LedgerCorruptError,
    PlanExistsError,
    PlanNotFoundError,
    PlanParseError,
    StateError,
    TaskNotFoundError,
)
from autodev.files import STAMP_SETTLED_NS
from autodev.state.evidence import read_evidence
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import ReviewEvidence, Task, TestEvidence


def _walk_to_complete(pm: PlanManager, task_id: str, commit: str | None = None) -> None:
    for status in ("in_progress", "coded", "auto_gated", "reviewed", "tested", "tournamented"):
        pm.update_task_status(task_id, status)
    if commit is None:
        pm.update_task_status(task_id, "complete")
    else:
        pm.update_task_status(task_id, "complete", commit=commit)


def test_init_and_transitions_survive_reopen(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(3), session_id="sess-1")
        _walk_to_complete(pm, "1.1")
        pm.update_task_status("1.2", "in_progress")
    with PlanManager(repo) as again:
        assert [t.status for t in again.tasks()] == ["complete", "in_progress", "pending"]
        assert again.session_id == "sess-1"


def test_illegal_transition_is_refused_and_nothing_is_recorded(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(2))
        head = pm.ledger_head
        with pytest.raises(InvalidTransitionError, match=r"task 1.1: cannot move from 'pending'"):
            pm.update_task_status("1.1", "complete")
        assert pm.ledger_head == head
        assert pm.get_task("1.1").status == "pending"


def test_unknown_task_and_missing_plan_are_typed_errors(repo: Path) -> None:
    with PlanManager(repo) as pm:
        with pytest.raises(PlanNotFoundError, match="autodev plan --from-markdown"):
            pm.get_task("1.1")
        pm.init_plan(make_plan(1))
        with pytest.raises(TaskNotFoundError, match=r"'9\.9'"):
            pm.update_task_status("9.9", "in_progress")


def test_invalid_plans_are_rejected_before_anything_is_written(repo: Path) -> None:
    plan = make_plan(2)
    plan.phases[0].tasks[1].depends_on = ["7.7"]
    with PlanManager(repo) as pm:
        with pytest.raises(PlanParseError, match=r"depends on '7.7'"):
            pm.init_plan(plan)
        assert pm.ledger_head.seq == 0
    cyclic = make_plan(2)
    cyclic.phases[0].tasks[0].depends_on = ["1.2"]
    cyclic.phases[0].tasks[1].depends_on = ["1.1"]
    with PlanManager(repo) as pm, pytest.raises(PlanParseError, match="cycle"):
        pm.init_plan(cyclic)


def test_replacing_a_started_plan_needs_replace(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(2))
        pm.init_plan(make_plan(3, plan_id="plan-second"))  # nothing started yet: allowed
        pm.update_task_status("1.1", "in_progress")
        with pytest.raises(PlanExistsError, match="--replace"):
            pm.init_plan(make_plan(1, plan_id="plan-third"))
        pm.init_plan(make_plan(1, plan_id="plan-third"), replace=True)
        assert pm.plan.plan_id == "plan-third"
        assert pm.get_task("1.1").status == "pending"


def test_retry_escalate_and_block_with_reason(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(4, chain=True))
        pm.update_task_status("1.1", "in_progress")
        assert pm.mark_task_retry("1.1") == 1
        assert pm.mark_task_retry("1.1") == 2
        pm.mark_escalated("1.1", "critic: wrong approach")
        pm.update_task_status("1.1", "blocked", reason="retries exhausted")
        blocked = pm.mark_blocked_descendants("1.1", "retries exhausted")
        assert blocked == ["1.2", "1.3", "1.4"]
        task = pm.get_task("1.1")
        assert (task.retry_count, task.escalated, task.blocked_reason) == (
            2,
            True,
            "retries exhausted",
        )
        assert pm.get_task("1.3").blocked_reason == "dependency 1.1 is blocked: retries exhausted"
        # Already blocked descendants are not blocked twice.
        assert pm.mark_blocked_descendants("1.1", "again") == []
        # Explicit resume clears the reason.
        pm.update_task_status("1.1", "in_progress")
        assert pm.get_task("1.1").blocked_reason is None


def test_revert_to_pending_is_its_own_op_and_idempotent(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(2))
        pm.update_task_status("1.2", "in_progress")
        pm.update_task_status("1.2", "coded")
        pm.mark_task_retry("1.2")
        pm.revert_task_to_pending("1.2", "parent 1.1 failed")
        task = pm.get_task("1.2")
        assert (task.status, task.retry_count) == ("pending", 0)
        head = pm.ledger_head.seq
        pm.revert_task_to_pending("1.2", "again")
        assert pm.ledger_head.seq == head
        ops = [entry.op for entry in pm.ledger.entries()]
        assert ops.count("task_reverted") == 1
        _walk_to_complete(pm, "1.1")
        with pytest.raises(StateError, match="complete"):
            pm.revert_task_to_pending("1.1", "no")


def test_next_pending_respects_dependencies_and_file_overlap(repo: Path) -> None:
    plan = make_plan(5)
    tasks = plan.phases[0].tasks
    tasks[1].files = ["shared.py"]
    tasks[2].files = ["shared.py", "c.py"]
    tasks[3].depends_on = ["1.1"]
    with PlanManager(repo) as pm:
        pm.init_plan(plan)
        assert [t.id for t in pm.next_pending_tasks(10)] == ["1.1", "1.2", "1.5"]
        assert [t.id for t in pm.next_pending_tasks(2)] == ["1.1", "1.2"]
        pm.update_task_status("1.2", "in_progress")
        assert [t.id for t in pm.next_pending_tasks(10, in_flight=["1.2"])] == ["1.1", "1.5"]
        _walk_to_complete(pm, "1.1")
        assert [t.id for t in pm.next_pending_tasks(10, in_flight=["1.2"])] == ["1.4", "1.5"]


def test_blocked_dependency_does_not_release_children(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(2, chain=True))
        pm.update_task_status("1.1", "blocked", reason="x")
        assert pm.next_pending_tasks(5) == []


def test_evidence_is_written_per_attempt_and_recorded(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(1))
        first = pm.record_evidence(
            ReviewEvidence(task_id="1.1", attempt=1, verdict="NEEDS_CHANGES", issues=["no tests"])
        )
        second = pm.record_evidence(ReviewEvidence(task_id="1.1", attempt=2, verdict="APPROVED"))
        patch = pm.record_patch("1.1", "diff --git a/x b/x\n")
        assert first.name == "1.1-review-1.json" and second.name == "1.1-review-2.json"
        assert read_evidence(first).verdict == "NEEDS_CHANGES"  # type: ignore[union-attr]
        assert patch.read_text().startswith("diff --git")
        refs = pm.evidence_for("1.1")
        assert [(r.kind, r.attempt) for r in refs] == [("review", 1), ("review", 2), ("patch", 1)]
        assert pm.get_task("1.1").evidence_bundle == ".autodev/evidence/1.1.patch"


def test_records_of_a_step_are_synced_with_the_step_s_change_not_each_on_its_own(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Evidence, patches and delegation decisions are written to the ledger at once but synced by the
    durable change that follows them in their step (a crash that loses them loses that change too, and a
    resumed run repeats the step); a status change is on disk, with everything before it, when it returns."""
    ledger = repo / ".autodev" / "ledger.jsonl"
    synced: list[int] = []
    real = os.fdatasync

    def counted(fd: int) -> None:
        synced.append(os.fstat(fd).st_size)
        real(fd)

    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(1))
        pm.update_task_status("1.1", "in_progress")
        monkeypatch.setattr("autodev.state.ledger.os.fdatasync", counted)
        pm.record_decision({"role": "developer"}, {"route": "in_process"})
        pm.record_evidence(TestEvidence(task_id="1.1", passed=1, failed=0, total=1))
        pm.record_patch("1.1", "diff --git a/x b/x\n", developer=True)
        assert synced == []
        written = ledger.stat().st_size
        pm.update_task_status("1.1", "coded")
        assert synced == [ledger.stat().st_size] and synced[0] > written
        pm.record_evidence(ReviewEvidence(task_id="1.1", attempt=1, verdict="APPROVED"))
        assert len(synced) == 1
    assert synced == [synced[0], ledger.stat().st_size]  # closing synced the last record
    with PlanManager(repo) as again:
        assert [ref.kind for ref in again.evidence_for("1.1")] == ["test", "developer_patch", "review"]


def test_snapshot_missing_stale_or_corrupt_is_rebuilt_from_the_ledger(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(3))
        pm.record_evidence(TestEvidence(task_id="1.1", passed=1, failed=0, total=1))
        pm.update_task_status("1.1", "in_progress")
    expected = PlanManager.open(repo, readonly=True).state_copy()
    snapshot = repo / ".autodev" / "plan.json"

    snapshot.unlink()
    assert PlanManager.open(repo, readonly=True).state_copy() == expected

    with PlanManager(repo):
        pass  # a writable open rewrites the missing snapshot
    assert snapshot.exists()
    data = json.loads(snapshot.read_text())
    assert data["ledger_seq"] == 3

    snapshot.write_text(snapshot.read_text().replace('"in_progress"', '"complete"'))
    reopened = PlanManager.open(repo, readonly=True)
    assert not reopened.snapshot_usable
    assert reopened.state_copy() == expected

    snapshot.write_text("{ not json")
    assert PlanManager.open(repo, readonly=True).state_copy() == expected


def test_stale_snapshot_is_used_and_the_tail_replayed(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(2))
    stale = (repo / ".autodev" / "plan.json").read_bytes()
    with PlanManager(repo) as pm:
        pm.update_task_status("1.1", "in_progress")
        pm.update_task_status("1.1", "coded")
    (repo / ".autodev" / "plan.json").write_bytes(stale)
    reader = PlanManager.open(repo, readonly=True)
    assert reader.snapshot_usable and reader.snapshot_seq == 1
    assert reader.get_task("1.1").status == "coded"


def test_snapshot_ahead_of_the_ledger_means_lost_entries(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(1))
        pm.update_task_status("1.1", "in_progress")
    ledger = repo / ".autodev" / "ledger.jsonl"
    ledger.write_bytes(ledger.read_bytes().splitlines(keepends=True)[0])
    with pytest.raises(LedgerCorruptError, match="entries were lost"):
        PlanManager.open(repo, readonly=True)


def test_readonly_manager_sees_writer_progress_and_cannot_write(repo: Path) -> None:
    with PlanManager(repo) as writer:
        writer.init_plan(make_plan(2))
        reader = PlanManager.open(repo, readonly=True)
        writer.update_task_status("1.2", "in_progress")
        reader.refresh()
        assert reader.get_task("1.2").status == "in_progress"
        with pytest.raises(StateError, match="read-only"):
            reader.update_task_status("1.1", "in_progress")


def test_two_managers_in_one_process_interleave_without_losing_ops(repo: Path) -> None:
    first = PlanManager.open(repo)
    first.init_plan(make_plan(2))
    second = PlanManager.open(repo)
    first.update_task_status("1.1", "in_progress")
    second.update_task_status("1.2", "in_progress")  # syncs the first's op before appending
    first.update_task_status("1.2", "coded")  # sees the second's op
    first.close()
    second.close()
    final = PlanManager.open(repo, readonly=True)
    assert [t.status for t in final.tasks()] == ["in_progress", "coded"]


def test_status_object_matches_the_seed_shape(repo: Path) -> None:
    with PlanManager(repo) as pm:
        empty = pm.status()
        assert empty["plan"] is None and empty["totals"]["total"] == 0
        pm.init_plan(make_plan(3), session_id="sess-abc")
        pm.update_task_status("1.1", "in_progress")
        data = pm.status()
    # What the CLI adds (missing_commits) is not the state's.
    assert set(data) == STATUS_KEYS - {"missing_commits"}
    assert set(data["plan"]) == {
        "plan_id",
        "spec_hash",
        "phases",
        "title",
        "created_at",
        "updated_at",
    }
    assert data["plan"]["phases"] == 1
    assert data["session_id"] == "sess-abc"
    assert [t["id"] for t in data["tasks"]] == ["1.1", "1.2", "1.3"]
    assert data["tasks"][0]["status"] == "in_progress"
    assert data["totals"]["pending"] == 2
    assert data["totals"]["in_progress"] == 1
    assert data["totals"]["total"] == 3
    json.dumps(data)


def test_state_dir_is_git_ignored(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(1))
    assert (repo / ".autodev" / ".gitignore").read_text().splitlines()[-1] == "*"


def test_cost_accumulates_in_the_ledger_and_survives_reopen(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.start_plan_phase("spec-1")
        pm.record_cost("plan", "architect", 0.25)
        pm.init_plan(make_plan(2))
        pm.record_cost("1.1", "developer", 0.5)
        assert pm.record_cost("1.2", "reviewer", 0.125) == 0.875
        with pytest.raises(StateError, match="negative"):
            pm.record_cost("1.1", "developer", -1.0)
    again = PlanManager.open(repo, readonly=True)
    assert again.cost_usd_total == 0.875
    assert again.cost_usd_for("1.1") == 0.5 and again.cost_usd_for("plan") == 0.25
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(1, plan_id="plan-next"), replace=True)
        assert pm.cost_usd_total == 0.0  # budgets are per plan


def test_plan_approval_is_recorded_once_and_reset_by_a_new_plan(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(1))
        assert not pm.plan_approved
        pm.approve_plan()
        head = pm.ledger_head.seq
        pm.approve_plan()
        assert pm.plan_approved and pm.ledger_head.seq == head
    assert PlanManager.open(repo, readonly=True).plan_approved
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(2, plan_id="plan-other"))
        assert not pm.plan_approved


def test_execution_facts_are_recorded_and_replayed(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(1))
        pm.update_task_status("1.1", "in_progress", base_commit="abc123")
        pm.update_task_status("1.1", "coded")
        pm.mark_task_retry("1.1", ["lint: E501 line too long", "test: 1 failed"])
        pm.update_task_status("1.1", "in_progress")
    replay = PlanManager(repo, readonly=True, use_snapshot=False)
    replay.load()
    task = replay.get_task("1.1")
    assert task.base_commit == "abc123"
    assert task.last_issues == ["lint: E501 line too long", "test: 1 failed"]
    assert task.retry_count == 1


def test_plan_phase_progress_survives_and_is_cleared_by_the_plan(repo: Path) -> None:
    from autodev.state.schemas import ExploreEvidence

    with PlanManager(repo) as pm:
        pm.start_plan_phase("spec-a")
        path = pm.record_evidence(ExploreEvidence(task_id="plan", findings="the repo has a cli"))
        pm.record_plan_step("explorer", path)
        pm.start_plan_phase("spec-a")  # same spec: progress kept
    reopened = PlanManager.open(repo, readonly=True)
    progress = reopened.plan_phase
    assert progress is not None and progress.spec_hash == "spec-a"
    assert progress.steps["explorer"].path == ".autodev/evidence/plan-explore-1.json"
    with PlanManager(repo) as pm:
        pm.start_plan_phase("spec-b")  # another intent: a fresh phase
        assert pm.plan_phase is not None and pm.plan_phase.steps == {}
        with pytest.raises(StateError, match="was not recorded"):
            pm.record_plan_step("explorer", repo / "elsewhere.json")
        pm.init_plan(make_plan(1))
        assert pm.plan_phase is None


def test_dropped_plan_steps_stay_dropped_after_a_reopen(repo: Path) -> None:
    from autodev.state.schemas import ArchitectEvidence, ExploreEvidence

    with PlanManager(repo) as pm:
        pm.start_plan_phase("spec-a")
        pm.record_plan_step("explorer", pm.record_evidence(ExploreEvidence(task_id="plan", findings="f")))
        pm.record_plan_step(
            "architect", pm.record_evidence(ArchitectEvidence(task_id="plan", output_text="x"))
        )
        head = pm.ledger_head.seq
        pm.drop_plan_steps(["architect", "architect-retry"])
        pm.drop_plan_steps(["architect-retry"])  # nothing recorded under it: nothing appended
        assert pm.ledger_head.seq == head + 1
    for use_snapshot in (True, False):
        reopened = PlanManager(repo, readonly=True, use_snapshot=use_snapshot)
        reopened.load()
        assert reopened.plan_phase is not None
        assert sorted(reopened.plan_phase.steps) == ["explorer"]


def test_counts_by_status_follow_every_transition_and_count_a_task_once(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(3))
        assert pm.count_with_status("pending") == 3
        pm.update_task_status("1.1", "in_progress")
        pm.update_task_status("1.2", "in_progress")
        pm.update_task_status("1.2", "coded")
        assert pm.count_with_status("pending", "in_progress", "coded") == 3
        assert pm.count_with_status("in_progress", "in_progress") == 1
        pm.update_task_status("1.1", "blocked", reason="x")
        assert (pm.count_with_status("pending"), pm.count_with_status("blocked")) == (1, 1)
        assert pm.count_with_status("complete") == len(pm.task_ids_with_status("complete")) == 0


def test_retry_back_to_developer_is_one_atomic_op(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(1))
        pm.update_task_status("1.1", "in_progress")
        pm.update_task_status("1.1", "coded")
        head = pm.ledger_head.seq
        assert pm.mark_task_retry("1.1", ["ruff: F401"], back_to_developer=True) == 1
        assert pm.ledger_head.seq == head + 1
        task = pm.get_task("1.1")
        assert (task.status, task.retry_count, task.last_issues) == ("in_progress", 1, ["ruff: F401"])
        assert pm.task_ids_with_status("in_progress") == ["1.1"]
        pm.update_task_status("1.1", "blocked", reason="x")
        with pytest.raises(InvalidTransitionError):
            pm.update_task_status("1.1", "coded")


@pytest.mark.parametrize("use_snapshot", [True, False])
def test_landed_commits_follow_the_ledger_and_survive_reopen(repo: Path, use_snapshot: bool) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(3))
        assert pm.landed_commits() == {}
        for status in ("in_progress", "coded", "auto_gated", "reviewed", "tested", "tournamented"):
            pm.update_task_status("1.2", status)
        pm.update_task_status("1.2", "complete", commit="c0ffee")
        _walk_to_complete(pm, "1.1")  # complete without a commit (auto_commit off)
        landed = pm.landed_commits()
        assert landed == {"1.2": "c0ffee"}
        with pytest.raises(TypeError):
            landed["1.3"] = "not recorded"  # type: ignore[index]  # read-only: nobody changes the record
        assert pm.landed_commits() is landed  # the same listing while nothing landed
        _walk_to_complete(pm, "1.3", commit="beef")
        assert pm.landed_commits() is not landed
        assert landed == {"1.2": "c0ffee"}  # a listing handed out stays as it was
        assert pm.landed_commits() == {"1.2": "c0ffee", "1.3": "beef"}
    with PlanManager(repo, use_snapshot=use_snapshot) as again:
        assert again.landed_commits() == {"1.2": "c0ffee", "1.3": "beef"}
        again.init_plan(make_plan(2), replace=True)
        assert again.landed_commits() == {}


# --- tasks added to a plan: slices of a task, tasks of their own ----------------------------------------


def _new(task_id: str, *deps: str) -> Task:
    return Task(id=task_id, phase_id="ignored", title=f"Slice {task_id}", depends_on=list(deps))


def test_slices_go_before_their_parent_which_waits_on_them_and_survive_reopen(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(3))
        ids = pm.add_tasks(
            [_new("1.2.1"), _new("1.2.2", "1.2.1")],
            phase_id="1",
            parent="1.2",
            by="architect",
            reason="too big",
        )
        assert ids == ["1.2.1", "1.2.2"]
    with PlanManager(repo, readonly=True) as again:
        assert [task.id for task in again.tasks()] == ["1.1", "1.2.1", "1.2.2", "1.2", "1.3"]
        assert again.get_task("1.2").depends_on == ["1.2.1", "1.2.2"]
        assert again.get_task("1.2.2").parent == "1.2"
        assert again.get_task("1.2.1").phase_id == "1"
        assert again.slices_of("1.2") == ["1.2.1", "1.2.2"]
        # The parent waits on its slices: only the first slice (and the other tasks) may start.
        assert [task.id for task in again.next_pending_tasks(10)] == ["1.1", "1.2.1", "1.3"]


def test_tasks_of_their_own_go_to_the_end_of_their_phase(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(2, phases=2))
        pm.add_tasks([_new("t-map-core", "1.1")], phase_id="1", by="autodev", reason="area map stale")
        assert [task.id for task in pm.plan.phases[0].tasks] == ["1.1", "1.2", "t-map-core"]
        assert pm.get_task("t-map-core").parent is None


@pytest.mark.parametrize(
    ("tasks", "message"),
    [
        ([_new("1.3")], "duplicate task id '1.3'"),
        ([_new("1.2.1", "9.9")], "depends on '9.9', which is not a task of this plan"),
        ([_new("1.2.1", "1.2")], "dependency cycle"),
        ([_new("1.2.1", "1.3")], "dependency cycle"),  # 1.3 depends on 1.2, which waits on the slice
        ([_new("bad id")], "invalid task id"),
    ],
)
def test_tasks_that_would_break_the_plan_are_refused_and_nothing_is_recorded(
    repo: Path, tasks: list[Task], message: str
) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(3, chain=True))
        head = pm.ledger_head
        with pytest.raises(PlanParseError, match=message):
            pm.add_tasks(tasks, phase_id="1", parent="1.2", by="architect", reason="")
        assert pm.ledger_head == head
        assert pm.slices_of("1.2") == []


def test_only_a_pending_task_can_be_sliced(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(2))
        pm.update_task_status("1.1", "in_progress")
        with pytest.raises(AutodevError, match="only a pending task can be sliced"):
            pm.add_tasks([_new("1.1.1")], phase_id="1", parent="1.1", by="architect", reason="")


def test_a_sliced_task_completes_once_every_slice_is_done(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(2))
        pm.add_tasks([_new("1.1.1"), _new("1.1.2")], phase_id="1", parent="1.1", by="architect", reason="")
        _walk_to_complete(pm, "1.1.1")
        head = pm.ledger_head
        with pytest.raises(AutodevError, match=r"slices that are not done: 1\.1\.2"):
            pm.complete_sliced("1.1")
        assert pm.ledger_head == head
        pm.skip_task("1.1.2")
        pm.complete_sliced("1.1")
        with pytest.raises(AutodevError, match="not a sliced task"):
            pm.complete_sliced("1.2")
    with PlanManager(repo, readonly=True) as again:
        assert again.get_task("1.1").status == "complete"
        assert again.get_task("1.1").commit is None


def test_a_gitignore_removed_during_a_run_is_back_at_the_next_state_change(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(2))
        changed = os.stat(pm.paths.state_dir).st_ctime_ns
        while time.time_ns() - changed <= STAMP_SETTLED_NS:  # past the keeper's trust horizon
            time.sleep(0.02)
        pm.update_task_status("1.1", "in_progress")
        pm.update_task_status("1.1", "coded")  # the state directory's stamp is trusted from here
        (repo / ".autodev" / ".gitignore").unlink()
        pm.update_task_status("1.1", "auto_gated")
        assert (repo / ".autodev" / ".gitignore").read_text().splitlines()[-1] == "*"
