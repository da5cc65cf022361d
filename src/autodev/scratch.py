"""Temporary directories named for the process that owns them, and the removal of those a killed one left.

AutoDev keeps throw-away files in the system's temp directory: a scratch directory of index files per
process (``autodev-index-``), one per gate run (``autodev-qa-``) and one per checked tool
(``autodev-check-``). Each is removed when its owner is done, by an exit handler or a ``with`` block.
Nothing runs after SIGKILL or the OOM killer, so the name of each carries its owner's pid and start time,
and a later process removes those whose owner is gone.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

from autodev.state.children import process_start_ticks

__all__ = ["ABANDONED_AFTER_S", "PREFIXES", "owned_prefix", "remove_abandoned"]

PREFIXES = ("autodev-index-", "autodev-qa-", "autodev-check-")
# A directory this long untouched, of a process that is gone, is abandoned. The wait spares a live process
# that this one cannot see (another pid namespace sharing the temp directory): its directories are touched
# as it works, and the wait is longer than any gate may run.
ABANDONED_AFTER_S = 24 * 3600.0


def owned_prefix(prefix: str) -> str:
    """``prefix`` (one of ``PREFIXES``) followed by this process's pid and start time, for ``mkdtemp``."""
    return f"{prefix}{os.getpid()}-{process_start_ticks(os.getpid()) or 0}-"


def remove_abandoned(*, now: float | None = None) -> list[Path]:
    """Remove the directories of ``PREFIXES``, of this user, whose owner is gone (or whose pid now names a
    process started at another time) and which nothing touched for ``ABANDONED_AFTER_S``; the ones removed.
    Without ``/proc`` to tell a live process from a dead one, nothing is removed."""
    if process_start_ticks(os.getpid()) is None:
        return []
    now = time.time() if now is None else now
    try:
        entries = list(os.scandir(tempfile.gettempdir()))
    except OSError:
        return []
    removed: list[Path] = []
    for entry in entries:
        prefix = next((prefix for prefix in PREFIXES if entry.name.startswith(prefix)), None)
        if prefix is None:
            continue
        pid, _, rest = entry.name.removeprefix(prefix).partition("-")
        started = rest.partition("-")[0]
        try:
            found = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if (
            (pid.isdigit() and process_start_ticks(int(pid)) == started)
            or not stat.S_ISDIR(found.st_mode)
            or found.st_uid != os.getuid()
            or now - found.st_mtime < ABANDONED_AFTER_S
        ):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed
