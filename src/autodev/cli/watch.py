"""``autodev watch`` (and ``status --watch``): follow a run from another terminal.

It polls, read-only: the status object (``read_status``: the snapshot and the ledger, opened read-only) and
the ledger's new lines (``Ledger.sync`` on a read-only ledger), and takes no lock of any kind, so it can
neither slow nor stop the run it watches. It shows the tasks in flight with their step, how long they have
been at it and what they wait for, what each agent did last, the recent events and the running cost, and it
ends when the run ends: when the run lock's owner (``.autodev/session.owner``) is gone, or names a process
that is no longer an ``autodev``.
"""

from __future__ import annotations

import os
import time
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from autodev.cli.text import terminal_text
from autodev.state.children import process_start_ticks
from autodev.state.claims import process_running
from autodev.state.ledger import Ledger, LedgerEntry
from autodev.state.paths import AutodevPaths
from autodev.state.status_reader import read_status

__all__ = ["run_is_live", "watch"]

_RECENT = 8
# Ops worth a line among the recent events, and how each reads.
_EVENTS = {
    "task_status": lambda p: f"{p['task_id']}: {p['from']} -> {p['to']}",
    "task_retry": lambda p: (
        f"{p['task_id']}: attempt {int(p['retry_count'])} failed: {(p.get('issues') or ['-'])[0]}"
    ),
    "evidence_recorded": lambda p: f"{p['task_id']}: {p['kind']} recorded",
    "tasks_blocked": lambda p: f"blocked: {', '.join(item['id'] for item in p['tasks'])}",
    "approval_requested": lambda p: f"approval {p.get('id', '')} requested",
    "adoption_pending": lambda p: f"{p['task_id']}: waits for adoption",
}


def _process_started_at(pid: int) -> float | None:
    """When ``pid`` started (seconds since the epoch), from ``/proc``; None where that cannot be read."""
    ticks = process_start_ticks(pid)
    if ticks is None:
        return None
    try:
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text(encoding="ascii").splitlines()
            if line.startswith("btime ")
        )
        return boot + int(ticks) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def run_is_live(paths: AutodevPaths) -> bool:
    """Whether a run holds the repository's run lock, judged from its owner file without touching the lock: a
    run that ended removed the file; one that was killed left a pid that is gone, is no autodev now, or is
    an autodev that started after the file was written (the pid was given again)."""
    owner = paths.state_dir / "session.owner"
    try:
        pid = int(owner.read_text(encoding="ascii").strip())
        written = owner.stat().st_mtime
    except (OSError, ValueError):
        return False
    if not process_running(pid):
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc here: a live pid is all there is to go by
    started = _process_started_at(pid)
    # Start times count in clock ticks (1/100 s) from a boot time in whole seconds: allow for both.
    return b"autodev" in command and (started is None or started <= written + 2.0)


def _event_line(entry: LedgerEntry) -> str | None:
    render = _EVENTS.get(entry.op)
    if render is None:
        return None
    try:
        text = render(entry.payload)
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return f"{entry.ts[11:19]}  {terminal_text(text)[:160]}"


class _Follower:
    """What the ledger said lately: recent events and when each task's current step began."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.recent: deque[str] = deque(maxlen=_RECENT)
        self.step_since: dict[str, datetime] = {}
        head = ledger.head.seq
        self._take(list(ledger.entries(after_seq=max(0, head - 500))))

    def poll(self) -> None:
        self._take(self.ledger.sync())

    def _take(self, entries: list[LedgerEntry]) -> None:
        for entry in entries:
            if entry.op in ("task_status", "task_retry") and "task_id" in entry.payload:
                self.step_since[str(entry.payload["task_id"])] = datetime.fromisoformat(entry.ts)
            line = _event_line(entry)
            if line is not None:
                self.recent.append(line)


def _view(data: dict[str, Any], follower: _Follower, live: bool) -> Group:
    plan = data.get("plan") or {}
    totals = data.get("totals") or {}
    cost = data.get("cost") or {}
    title = terminal_text(plan.get("title") or "no plan")
    done = f"{totals.get('complete', 0)}/{totals.get('total', 0)} complete"
    header = Text(
        f"{title} · {done} · {totals.get('blocked', 0)} blocked · {totals.get('in_flight', 0)} in flight · "
        f"cost ${float(cost.get('usd') or 0.0):.4f} · {'running' if live else 'no run going'}",
        style="bold",
    )
    now = datetime.now(UTC)
    table = Table(title="In flight", expand=True)
    for column in ("task", "step", "for", "state", "last activity"):
        table.add_column(column)
    for task in data.get("in_flight") or []:
        since = follower.step_since.get(task["id"])
        elapsed = f"{(now - since).total_seconds():.0f} s" if since is not None else "-"
        state = task.get("waiting") or task.get("lifecycle") or "running"
        table.add_row(
            task["id"],
            task.get("step") or "-",
            elapsed,
            terminal_text(str(state))[:60],
            terminal_text(task.get("progress") or "")[:80],
        )
    events = Text("\n".join(follower.recent) or "(none yet)")
    return Group(header, table, Text("Recent events", style="bold"), events)


def watch(repo_root: Path, console: Console, *, interval_s: float = 1.0) -> dict[str, Any]:
    """Follow the run in ``repo_root`` until it ends (at once when none is going); the last status seen."""
    paths = AutodevPaths(repo_root)
    ledger = Ledger(paths.ledger, readonly=True)
    ledger.open()
    try:
        follower = _Follower(ledger)
        data = read_status(repo_root)
        live = run_is_live(paths)
        with Live(_view(data, follower, live), console=console, refresh_per_second=4) as screen:
            while live:
                time.sleep(interval_s)
                follower.poll()
                data = read_status(repo_root)
                live = run_is_live(paths)
                screen.update(_view(data, follower, live))
        console.line()
        return data
    finally:
        ledger.close()
