"""Registrations of the processes AutoDev starts in sessions of their own (agent CLIs, QA tools).

Such a child does not die with AutoDev: a SIGKILL to AutoDev's process group never reaches it. So each one is
registered in ``.autodev/children/`` while it runs (pid and start time), and the next process to take the run
lock stops whatever a killed run left registered before it does anything else.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from autodev.errors import StateError
from autodev.files import MAX_PID_FILE_BYTES, led_by, read_bounded

__all__ = ["process_start_ticks", "reap_orphans", "register_child"]


def process_start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22): tells a pid from its
    reuse. None where it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2 :].split()[19]


def register_child(children_dir: Path, pid: int) -> Path | None:
    """Record ``pid`` (the leader of its own process group); returns the file to remove once it is reaped."""
    started = process_start_ticks(pid)
    if started is None:
        return None
    try:
        children_dir.mkdir(parents=True, exist_ok=True)
        path = children_dir / str(pid)
        path.write_text(f"{pid} {started}\n", encoding="ascii")
    except OSError:
        return None  # best effort: a full disk must not stop the call itself
    return path


def reap_orphans(children_dir: Path) -> list[int]:
    """Stop the process groups a killed AutoDev left registered in ``children_dir``; return their pids.

    Only a process whose start time still matches its registration is signalled, so a reused pid is never
    hit. Call it while holding the run lock (no live run can own these children).
    """
    try:
        entries = list(children_dir.iterdir())
    except OSError:
        return []
    stopped: list[int] = []
    for entry in entries:
        try:
            data = read_bounded(
                entry,
                limit=MAX_PID_FILE_BYTES,
                what="a child process registration",
                follow_symlinks=False,
                error=led_by(entry, StateError),
            )
            pid_text, started = data.decode("ascii").split()
            pid = int(pid_text)
        except (OSError, ValueError, StateError):
            pid, started = -1, ""
        if pid > 0 and process_start_ticks(pid) == started:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            stopped.append(pid)
        with contextlib.suppress(OSError):
            entry.unlink()
    return stopped
