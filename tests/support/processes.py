"""Checking that no process of a process group outlived its deadline or cancellation."""

from __future__ import annotations

from pathlib import Path

import anyio


def running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (nothing in this container reaps orphans)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] not in ("Z", "X")


def live_group_members(pgid: int) -> list[int]:
    """Processes in group ``pgid`` that are not zombies (nothing in this container reaps orphans)."""
    live: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses; the fields after the last ')' are fixed.
        state, _ppid, pgrp = stat[stat.rindex(")") + 2 :].split()[:3]
        if int(pgrp) == pgid and state not in ("Z", "X"):
            live.append(int(entry.name))
    return live


async def survivors(pgid: int) -> list[int]:
    """Live members of group ``pgid`` after up to 3 s for them to finish dying from a SIGKILL."""
    live = live_group_members(pgid)
    for _ in range(60):
        if not live:
            break
        await anyio.sleep(0.05)
        live = live_group_members(pgid)
    return live
