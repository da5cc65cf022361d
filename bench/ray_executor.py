"""The Ray executor against the local one: the same plan, the same parallelism, scripted agents with a fixed
latency (``docs/adr/0039``).

A plan of ``--tasks`` independent tasks (each writes its own file; QA gates off) runs once with the local
executor and once with ``executor = "ray"`` on a local Ray cluster of ``--workers`` CPUs (each task's flow
reserves one), both at parallelism ``--workers``. Only ``Orchestrator.execute()`` is timed, in a fresh
repository each. Reported: both makespans and their ratio (target: Ray at most 1.1 times local), the
head's ledger work per task in the Ray run (the relayed calls it answered and the milliseconds it spent
running them), the base bundles' size, and whether every task ended complete with its own commit (else
exit 1).

    python bench/ray_executor.py [--tasks 200] [--latency 2.0] [--workers 4] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from _scenario import WRITE_SCOPE, bench_config, git_repo, independent_plan, succeeding_script

from autodev.adapters.scripted import ScriptedAdapter
from autodev.logging import configure_quiet_logging
from autodev.orchestrator import Orchestrator
from autodev.orchestrator.execute.ray_executor import RayExecutor
from autodev.state.plan_manager import PlanManager


def _run(root: Path, tasks: int, latency_s: float, workers: int, executor: str) -> dict[str, Any]:
    git_repo(root)
    with PlanManager(root) as manager:
        manager.init_plan(independent_plan(tasks, per_phase=tasks))
    settings = {
        "tournaments.execute_max_parallel_tasks": workers,
        "ray.clone_cache_dir": str(root.parent / "cache"),
    }
    config = bench_config(root, executor=executor, **settings)
    adapter = ScriptedAdapter(script=succeeding_script(latency_s))
    orchestrator = Orchestrator(root, config=config, adapter=adapter, write_scope=WRITE_SCOPE)
    started = time.perf_counter()
    done = anyio.run(orchestrator.execute)
    elapsed = time.perf_counter() - started
    commits = subprocess.run(
        ["git", "rev-list", "--count", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    result: dict[str, Any] = {
        "makespan_s": round(elapsed, 2),
        "complete": sum(task.status == "complete" for task in done),
        "commits": int(commits) - 1,
    }
    unfinished = {
        task.id: f"{task.status}: {task.blocked_reason}" for task in done if task.status != "complete"
    }
    if unfinished:
        result["not_complete"] = unfinished
    if isinstance(orchestrator.executor, RayExecutor):
        ray_run = orchestrator.executor
        result["relayed_calls_per_task"] = round(ray_run.calls_served.total() / tasks, 1)
        # Round trips the workers waited for: deferred records travel with the next one.
        result["round_trips_per_task"] = round(ray_run.round_trips / tasks, 1)
        result["relayed_calls_by_method"] = dict(ray_run.calls_served.most_common())
        result["head_ledger_ms_per_task"] = round(ray_run.ledger_seconds / tasks * 1000, 2)
        result["head_merge_ms_per_task"] = round(ray_run.merge_seconds / tasks * 1000, 1)
        result["nodes"] = len(set(ray_run.nodes.values()))
        # The bundles the nodes' clone caches asked for (the first holds the whole history).
        result["base_bundles"] = len(ray_run.bundle_bytes)
        result["base_bundle_kb_median"] = round(statistics.median(ray_run.bundle_bytes or [0]) / 1024, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--latency", type=float, default=2.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="12 tasks, 0.5 s calls")
    args = parser.parse_args(argv)
    tasks, latency = (12, 0.5) if args.quick else (args.tasks, args.latency)
    configure_quiet_logging()
    try:
        import ray
    except ImportError:
        print(json.dumps({"skipped": "Ray is not installed: pip install 'autodev[ray]'"}))
        return 0
    # A cluster of this machine with one CPU per worker: each task's flow reserves one.
    ray.init(address="local", num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    try:
        # git may still be repacking a repository in the background (its own housekeeping after the run)
        # when the directory goes.
        with tempfile.TemporaryDirectory(prefix="autodev-bench-ray-", ignore_cleanup_errors=True) as scratch:
            local = _run(Path(scratch) / "local", tasks, latency, args.workers, "local")
            remote = _run(Path(scratch) / "ray", tasks, latency, args.workers, "ray")
    finally:
        ray.shutdown()
    ratio = remote["makespan_s"] / local["makespan_s"]
    report = {
        "tasks": tasks,
        "latency_s": latency,
        "workers": args.workers,
        "local": local,
        "ray": remote,
        "makespan_ratio": round(ratio, 3),
        "target_ratio": 1.1,
    }
    print(json.dumps(report, indent=2))
    ok = all(run["complete"] == tasks == run["commits"] for run in (local, remote))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
