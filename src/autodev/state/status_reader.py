"""A fast read-only path to the status object of ``autodev status --json``.

``read_status`` answers from ``plan.json`` when it is verified and up to date with the ledger, without
building pydantic models; otherwise it replays through a read-only ``PlanManager``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autodev.errors import LedgerCorruptError
from autodev.state.activity import progress_summary
from autodev.state.ledger import Ledger
from autodev.state.paths import AutodevPaths
from autodev.state.snapshot import decode_snapshot, read_snapshot_bytes
from autodev.state.status import status_from_state, waiting_for

__all__ = ["read_status"]


def read_status(repo_root: Path) -> dict[str, Any]:
    """The status object for ``repo_root``, read-only (safe beside a running writer)."""
    status = _read_state_status(repo_root)
    status.setdefault("waiting_for", waiting_for(AutodevPaths(repo_root)))
    # What each task in flight did last, from its agent's own event stream (None: nothing recorded).
    suspended = status["waiting_for"]
    for task in status["in_flight"]:
        task["progress"] = progress_summary(repo_root, task["id"]) or task.get("progress")
        if suspended is not None and suspended.get("task_id") == task["id"]:
            task["lifecycle"] = "waiting"
            task["waiting"] = f"an inline answer: the {suspended.get('role', 'agent')} step"
    return status


def _read_state_status(repo_root: Path) -> dict[str, Any]:
    paths = AutodevPaths(repo_root)
    ledger = Ledger(paths.ledger, readonly=True)
    head = ledger.open()
    try:
        snapshot = decode_snapshot(read_snapshot_bytes(paths.snapshot))
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
    # Only when plan.json lags behind the ledger: ``autodev status`` starts without pydantic otherwise.
    from autodev.state.plan_manager import PlanManager

    return PlanManager.open(repo_root, readonly=True).status()
