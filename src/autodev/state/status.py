"""The status object of ``autodev status --json`` (seed 001, section 11.3), and a fast read-only path to it.

``read_status`` answers from ``plan.json`` when it is verified and up to date with the ledger, without
building pydantic models; otherwise it replays through a read-only ``PlanManager``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autodev.errors import LedgerCorruptError
from autodev.state.ledger import Ledger
from autodev.state.paths import AutodevPaths
from autodev.state.snapshot import decode_snapshot

__all__ = ["TASK_STATUS_NAMES", "read_status", "status_from_state"]

# The ten statuses in FSM order (kept in sync with schemas.TASK_STATUSES by a test).
TASK_STATUS_NAMES = (
    "pending",
    "in_progress",
    "coded",
    "auto_gated",
    "reviewed",
    "tested",
    "tournamented",
    "complete",
    "blocked",
    "skipped",
)


def status_from_state(state: dict[str, Any]) -> dict[str, Any]:
    """Build the status object from a JSON-mode dump of ``PlanState``."""
    totals: dict[str, int] = dict.fromkeys(TASK_STATUS_NAMES, 0)
    plan = state.get("plan")
    if plan is None:
        totals["total"] = 0
        return {"plan": None, "session_id": state.get("session_id"), "tasks": [], "totals": totals}
    tasks = [task for phase in plan["phases"] for task in phase["tasks"]]
    for task in tasks:
        totals[task["status"]] += 1
    totals["total"] = len(tasks)
    return {
        "plan": {
            "plan_id": plan["plan_id"],
            "spec_hash": plan["spec_hash"],
            "phases": len(plan["phases"]),
            "title": plan["title"],
            "created_at": plan["created_at"],
            "updated_at": plan["updated_at"],
        },
        "session_id": state.get("session_id"),
        "tasks": tasks,
        "totals": totals,
    }


def read_status(repo_root: Path) -> dict[str, Any]:
    """The status object for ``repo_root``, read-only (safe beside a running writer)."""
    paths = AutodevPaths(repo_root)
    ledger = Ledger(paths.ledger, readonly=True)
    head = ledger.open()
    try:
        snapshot = decode_snapshot(paths.snapshot.read_bytes())
    except (OSError, ValueError):
        snapshot = None
    if snapshot is not None and snapshot.ledger_seq > head.seq:
        raise LedgerCorruptError(
            f"plan.json reflects entry {snapshot.ledger_seq} but the ledger ends at entry {head.seq} "
            "(entries were lost)",
            path=str(paths.ledger),
        )
    if head.seq == 0:
        return status_from_state({})
    if (
        snapshot is not None
        and snapshot.ledger_seq == head.seq
        and snapshot.ledger_hash == head.hash
        and snapshot.ledger_offset == head.offset
    ):
        return status_from_state(json.loads(snapshot.state_bytes))
    from autodev.state.plan_manager import PlanManager

    return PlanManager.open(repo_root, readonly=True).status()
