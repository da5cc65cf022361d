"""Ledger scaling: is one status transition's cost independent of the plan's size?

Prints JSON: the median and p95 cost of one ``PlanManager.update_task_status`` (lock, ledger append with
fdatasync, apply) on plans of 10, 100, 1,000 and 5,000 tasks, the 5,000/10 ratio, and the wall time of
``autodev status --json`` on the 5,000-task plan (a fresh process each run, median of the runs).

    python bench/ledger_scaling.py [--transitions 300] [--status-runs 7]
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

from autodev.logging import configure_quiet_logging
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import Phase, Plan, Task

SIZES = (10, 100, 1_000, 5_000)
WALK = ("in_progress", "coded", "auto_gated", "reviewed", "tested", "tournamented", "complete")


def build_plan(n_tasks: int) -> Plan:
    per_phase = 100
    phases = []
    for p in range(0, n_tasks, per_phase):
        phase_id = str(p // per_phase + 1)
        tasks = [
            Task(
                id=f"{phase_id}.{i + 1}",
                phase_id=phase_id,
                title=f"Task {phase_id}.{i + 1}",
                description="Implement the thing described in the spec, with tests.",
                files=[f"src/pkg/module_{p + i}.py", f"tests/test_module_{p + i}.py"],
            )
            for i in range(min(per_phase, n_tasks - p))
        ]
        phases.append(Phase(id=phase_id, title=f"Phase {phase_id}", tasks=tasks))
    return Plan(
        plan_id=f"plan-bench-{n_tasks}",
        spec_hash="bench",
        title=f"Benchmark plan with {n_tasks} tasks",
        phases=phases,
        created_at="2026-01-01T00:00:00+00:00",
        updated_at="2026-01-01T00:00:00+00:00",
    )


def time_transitions(root: Path, n_tasks: int, transitions: int) -> list[float]:
    plan = build_plan(n_tasks)
    task_ids = [task.id for task in plan.iter_tasks()]
    samples: list[float] = []
    with PlanManager(root) as manager:
        manager.init_plan(plan)
        done = 0
        for step in WALK:
            for task_id in task_ids:
                if done >= transitions:
                    return samples
                start = time.perf_counter()
                manager.update_task_status(task_id, step)  # type: ignore[arg-type]
                samples.append(time.perf_counter() - start)
                done += 1
    return samples


def time_status(root: Path, runs: int) -> list[float]:
    exe = Path(sys.executable).with_name("autodev")
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "autodev"]
    argv += ["-C", str(root), "status", "--json"]
    samples = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        samples.append(time.perf_counter() - start)
    return samples[1:]  # the first run warms the page cache


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transitions", type=int, default=300)
    parser.add_argument("--status-runs", type=int, default=7)
    args = parser.parse_args()
    configure_quiet_logging()
    result: dict[str, object] = {"benchmark": "ledger_scaling", "python": sys.version.split()[0]}
    medians: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            root = Path(tmp) / f"plan-{size}"
            root.mkdir()
            samples = time_transitions(root, size, args.transitions)
            medians[size] = statistics.median(samples)
            result[f"transition_ms_{size}"] = {
                "median": round(medians[size] * 1000, 4),
                "p95": round(statistics.quantiles(samples, n=20)[-1] * 1000, 4),
                "samples": len(samples),
            }
        result["ratio_5000_vs_10"] = round(medians[5_000] / medians[10], 3)
        status_samples = time_status(Path(tmp) / "plan-5000", args.status_runs)
        result["status_json_ms_5000"] = {
            "median": round(statistics.median(status_samples) * 1000, 1),
            "min": round(min(status_samples) * 1000, 1),
            "max": round(max(status_samples) * 1000, 1),
            "runs": len(status_samples),
        }
        result["ledger_bytes_5000"] = os.path.getsize(Path(tmp) / "plan-5000/.autodev/ledger.jsonl")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
