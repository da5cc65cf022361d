"""CLI start-up: `autodev --help`, and `autodev status --json` and the `autodev status` table on a
5,000-task plan (fresh processes, medians; Python caches the bytecode, as an installed package has it).

python bench/cli_startup.py [--runs 11]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _scenario import independent_plan

from autodev.logging import configure_quiet_logging
from autodev.state.plan_manager import PlanManager


def _autodev() -> list[str]:
    exe = Path(sys.executable).with_name("autodev")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "autodev"]


def installed_environment() -> dict[str, str]:
    """This process's environment, except that Python may cache bytecode: an installed package has its
    modules compiled, so a start measured in a shell with ``PYTHONDONTWRITEBYTECODE`` set (and AutoDev
    installed editable) would pay compiling them every time, which no user's start does."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def wall(argv: list[str], runs: int) -> list[float]:
    """``runs`` wall times of ``argv``, after one more run that is not counted (it caches the bytecode)."""
    samples = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=installed_environment())
        samples.append(time.perf_counter() - start)
    return samples[1:]


def summary(samples: list[float]) -> dict[str, float]:
    return {
        "median_ms": round(statistics.median(samples) * 1000, 1),
        "min_ms": round(min(samples) * 1000, 1),
        "max_ms": round(max(samples) * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    configure_quiet_logging()
    result: dict[str, object] = {"benchmark": "cli_startup", "runs": args.runs}
    result["python_startup"] = summary(wall([sys.executable, "-c", "pass"], args.runs))
    result["help"] = summary(wall([*_autodev(), "--help"], args.runs))
    with tempfile.TemporaryDirectory() as tmp:
        with PlanManager(Path(tmp)) as manager:
            manager.init_plan(independent_plan(5_000))
            for task in manager.tasks()[:500]:
                manager.update_task_status(task.id, "in_progress")
        result["status_json_5000"] = summary(wall([*_autodev(), "-C", tmp, "status", "--json"], args.runs))
        result["status_table_5000"] = summary(wall([*_autodev(), "-C", tmp, "status"], args.runs))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
