"""Peak memory of a whole run: a 1,000-task plan executed with scripted agents (gates off), in a child
process.

Prints JSON with the child's peak RSS (from the kernel's accounting of the finished process) and its wall
time.

    python bench/memory.py [--tasks 1000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import sys, anyio
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from _scenario import git_repo, saved_plan_orchestrator
from autodev.logging import configure_quiet_logging
configure_quiet_logging()
root = git_repo(Path(sys.argv[1]))
orchestrator = saved_plan_orchestrator(root, int(sys.argv[2]))
tasks = anyio.run(orchestrator.execute)
assert all(task.status == "complete" for task in tasks), "every task must complete"
print(len(tasks))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD,
                str(Path(tmp) / "repo"),
                str(args.tasks),
                str(Path(__file__).parent),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(
        json.dumps(
            {
                "benchmark": "memory",
                "tasks": int(done.stdout.strip()),
                "peak_rss_mb": round(peak_kib / 1024, 1),
                "wall_s": round(wall, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
