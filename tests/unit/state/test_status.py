"""The status object: the fast snapshot path and the replay path give the same answer."""

from __future__ import annotations

from pathlib import Path

from support import make_plan

from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import TASK_STATUSES
from autodev.state.status import TASK_STATUS_NAMES, read_status


def test_status_names_follow_the_schema() -> None:
    assert TASK_STATUS_NAMES == TASK_STATUSES


def test_no_ledger_means_an_empty_status(repo: Path) -> None:
    data = read_status(repo)
    assert data["plan"] is None and data["tasks"] == [] and data["totals"]["total"] == 0
    assert not (repo / ".autodev").exists()  # reading never creates state


def test_fast_path_and_replay_agree_whether_or_not_the_snapshot_is_current(repo: Path) -> None:
    with PlanManager(repo) as pm:
        pm.init_plan(make_plan(4, chain=True), session_id="sess-x")
        pm.update_task_status("1.1", "in_progress")
    current = read_status(repo)  # snapshot is current: answered without replay
    assert current == PlanManager.open(repo, readonly=True).status()
    assert current["tasks"][0]["status"] == "in_progress"

    writer = PlanManager.open(repo)
    writer.update_task_status("1.1", "coded")  # no checkpoint: snapshot is now one entry behind
    behind = read_status(repo)
    assert behind["tasks"][0]["status"] == "coded"
    assert behind == PlanManager.open(repo, readonly=True).status()
    writer.close()
