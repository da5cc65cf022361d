"""What the machine's processor, file system and process starts cost at the moment a benchmark runs.

On a shared machine these drift, and the benchmarks' figures with them: in one afternoon the same Python
work took 8 ms and 16 ms a few seconds apart, and creating a file in the temporary directory 0.02 ms at one
hour and 0.8 ms of processor time at another (a task of ``bench/overhead.py`` creates about 27 files in
AutoDev's own process, its ``files_created_per_task``: evidence, the agent calls' records, git's lock files
and objects; its git processes create more). Reported beside a run's figures, these say whether two runs met
the same machine: a run is compared with another only where they agree.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["machine_costs"]


def machine_costs(directory: Path, *, samples: int = 50) -> dict[str, float]:
    """Medians, in milliseconds, of what a task does most often: ``python_ms`` a fixed piece of Python
    work (encoding and decoding JSON, as the ledger and the evidence do), and in a scratch directory made
    in ``directory`` (removed after) ``create_ms`` creating a new file (an evidence file, git's lock file
    or object), ``sync_ms`` appending a line to a file and syncing it (a durable ledger record), ``git_ms``
    starting git and waiting for it (``git --version``)."""
    worked: list[float] = []
    for _ in range(max(samples // 5, 1)):
        started = time.perf_counter()
        _python_work()
        worked.append(time.perf_counter() - started)
    scratch = Path(tempfile.mkdtemp(prefix="machine-", dir=directory))
    try:
        created: list[float] = []
        for n in range(samples):
            started = time.perf_counter()
            os.close(os.open(scratch / f"file-{n}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            created.append(time.perf_counter() - started)
        synced: list[float] = []
        fd = os.open(scratch / "appended", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for n in range(samples):
                started = time.perf_counter()
                os.write(fd, b"%d %s\n" % (n, b"x" * 200))
                os.fdatasync(fd)
                synced.append(time.perf_counter() - started)
        finally:
            os.close(fd)
        started_git: list[float] = []
        for _ in range(max(samples // 5, 1)):
            started = time.perf_counter()
            subprocess.run(["git", "--version"], check=True, capture_output=True)
            started_git.append(time.perf_counter() - started)
    finally:
        shutil.rmtree(scratch)
    return {
        "python_ms": _median_ms(worked),
        "create_ms": _median_ms(created),
        "sync_ms": _median_ms(synced),
        "git_ms": _median_ms(started_git),
    }


def _python_work() -> None:
    records = {f"key-{n}": [n, str(n), {"value": n}] for n in range(2000)}
    for _ in range(5):
        json.loads(json.dumps(records))


def _median_ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 3)
