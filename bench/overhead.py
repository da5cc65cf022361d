"""Orchestrator overhead: N independent tasks, zero-latency scripted agents, QA gates off.

Prints JSON: wall time per task (median over the run's tasks, from the ledger's timestamps), ledger ops
per task, and the cost of one state transition (median ``update_task_status`` inside the run, measured by
timing the PlanManager calls the run makes). What remains per task is git: a diff and a commit per task.

    python bench/overhead.py [--tasks 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import ParamSpec, TypeVar

import anyio

sys.path.insert(0, str(Path(__file__).parent))
import itertools

from _scenario import git_repo, saved_plan_orchestrator

from autodev.logging import configure_quiet_logging
from autodev.state.plan_manager import PlanManager

P = ParamSpec("P")
R = TypeVar("R")


def timing(function: Callable[P, R], timings: list[float]) -> Callable[P, R]:
    """``function`` with the same signature, appending the seconds of every call to ``timings``."""

    def timed(*args: P.args, **kwargs: P.kwargs) -> R:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            timings.append(time.perf_counter() - start)

    return timed


def measure(n_tasks: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        root = git_repo(Path(tmp) / "repo")
        orchestrator = saved_plan_orchestrator(root, n_tasks)
        timings: list[float] = []
        original = PlanManager.update_task_status
        PlanManager.update_task_status = timing(original, timings)  # type: ignore[method-assign]
        try:
            started = time.perf_counter()
            tasks = anyio.run(orchestrator.execute)
            wall = time.perf_counter() - started
        finally:
            PlanManager.update_task_status = original  # type: ignore[method-assign]
        assert all(task.status == "complete" for task in tasks), "every task must complete"
        manager = PlanManager.open(root, readonly=True)
        entries = list(manager.ledger.entries())
        completed_at = [
            datetime.fromisoformat(e.ts)
            for e in entries
            if e.op == "task_status" and e.payload["to"] == "complete"
        ]
        per_task = [(b - a).total_seconds() for a, b in itertools.pairwise(completed_at)]
        return {
            "benchmark": "overhead",
            "tasks": n_tasks,
            "wall_s": round(wall, 3),
            "per_task_ms_median": round(statistics.median(per_task) * 1000, 2),
            "transition_ms_median": round(statistics.median(timings) * 1000, 3),
            "transition_ms_p95": round(statistics.quantiles(timings, n=20)[-1] * 1000, 3),
            "transitions": len(timings),
            "ledger_ops_per_task": round(len(entries) / n_tasks, 1),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    args = parser.parse_args()
    configure_quiet_logging()
    print(json.dumps(measure(args.tasks), indent=2))


if __name__ == "__main__":
    main()
