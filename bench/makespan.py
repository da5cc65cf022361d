"""Execute-phase makespan: a seeded DAG of tasks, scripted agents with a fixed latency, several parallelisms.

All tasks sit in one phase (so a per-phase dispatcher can use the whole width), each writes its own file (so
file overlap never serializes two tasks) and depends on 0-2 earlier tasks drawn at random (seeded); the
critical path is reported with the figures. Every agent call (developer, reviewer, test engineer)
sleeps ``--latency`` seconds; QA gates are off, recorded as skipped by the configuration, so what a run
measures is agent latency plus the orchestrator's own work.

For each parallelism (``tournaments.execute_max_parallel_tasks``), in a fresh repository, only
``Orchestrator.execute()`` is timed. The ideal makespan is ``max(critical path, total work / parallelism)``
where a task's work is its agent calls (counted by the adapter, retries included) times the latency;
``efficiency`` is ideal / measured. Two more figures explain it: ``greedy_schedule_s`` is the makespan of
the same dispatch policy with zero orchestration cost (what the DAG's shape allows that policy: 60 equal
tasks at 8 at once need 8 rounds where the ideal counts 7.5), and ``efficiency_vs_sequential`` uses, as
each task's work, its measured duration in the parallelism-1 run (orchestration included), which isolates
how well running tasks at once scales from what each task costs. Every task must end complete with its file
committed, else the exit code is 1.

``chain`` follows the tasks that set the makespan, as the run went (from the task that finished last, back
through the finish each start came after: a dependency's, or the one that freed a slot), and splits its
time above their agent calls: until its first task started, between a finish and the start after it, and
within the tasks.

Each parallelism runs ``--runs`` times (default 5); the run of median efficiency is reported in full, with
the median, minimum and maximum efficiency over all of them. ``machine`` in a run says what the machine's
processor, file system and process starts cost just before and just after it (``bench/_machine.py``): on
a shared machine, whether two runs can be compared.

    python bench/makespan.py [--tasks 60] [--latency 0.5] [--parallelism 1,4,8] [--runs 5] [--seed 1]
                             [--quick]
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from _machine import machine_costs
from _scenario import bench_config, git_repo, succeeding_script
from overhead import counting

from autodev.adapters.base import AgentInvocation, AgentResult
from autodev.adapters.scripted import ScriptedAdapter
from autodev.logging import configure_quiet_logging
from autodev.orchestrator import Orchestrator
from autodev.orchestrator.events import ProgressEvent
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import Phase, Plan, Task
from autodev.workspace import git as git_module

QUICK_TASKS = 12
QUICK_LATENCY_S = 0.1


class CountingAdapter(ScriptedAdapter):
    """The scripted adapter, also recording the most calls it ever had in flight at once."""

    def __init__(self, latency_s: float) -> None:
        super().__init__(script=succeeding_script(latency_s))
        self.in_flight = 0
        self.max_in_flight = 0

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await super().execute(inv)
        finally:
            self.in_flight -= 1


def task_file(task_id: str) -> str:
    # The path the developer of succeeding_script() writes, so each task owns exactly the file it declares.
    return f"src/mod_{task_id}.py"


def dag_plan(n_tasks: int, seed: int) -> Plan:
    """``n_tasks`` in one phase; each depends on 0, 1 or 2 earlier tasks (weights 1:2:1) drawn uniformly
    from all earlier ones: the usual random-DAG model, whose critical path the seed decides."""
    rng = random.Random(seed)
    ids = [f"1.{i + 1}" for i in range(n_tasks)]
    tasks: list[Task] = []
    for index, task_id in enumerate(ids):
        count = min(index, rng.choice((0, 1, 1, 2)))
        deps = sorted(rng.sample(ids[:index], count), key=ids.index)
        tasks.append(
            Task(
                id=task_id,
                phase_id="1",
                title=f"Task {task_id}",
                description="Write one module.",
                files=[task_file(task_id)],
                depends_on=deps,
            )
        )
    return Plan(
        plan_id=f"plan-makespan-{n_tasks}-{seed}",
        spec_hash="bench",
        title=f"{n_tasks}-task random DAG, seed {seed}",
        phases=[Phase(id="1", title="Phase 1", tasks=tasks)],
        created_at="2026-01-01T00:00:00+00:00",
        updated_at="2026-01-01T00:00:00+00:00",
    )


def critical_path(tasks: Sequence[Task], work: dict[str, float]) -> tuple[float, int]:
    """The longest dependency chain by work: (its work, its number of tasks). ``tasks`` in plan order."""
    best: dict[str, tuple[float, int]] = {}
    for task in tasks:  # dependencies come earlier in plan order, so they are already known
        head = max((best[dep] for dep in task.depends_on), default=(0.0, 0))
        best[task.id] = (head[0] + work[task.id], head[1] + 1)
    return max(best.values())


def dispatch_order(tasks: Sequence[Task], parallelism: int) -> list[str]:
    """The order the dispatcher offers ready tasks in: heads of the longest dependency chains first, plan
    order with one worker."""
    order = [task.id for task in tasks]
    if parallelism > 1:
        chain: dict[str, int] = {}
        for task in reversed(tasks):  # dependents come later in this plan
            dependents = [chain[other.id] for other in tasks if task.id in other.depends_on]
            chain[task.id] = 1 + max(dependents, default=0)
        order.sort(key=lambda task_id: -chain[task_id])  # stable: ties keep plan order
    return order


def greedy_makespan(tasks: Sequence[Task], work: dict[str, float], parallelism: int) -> float:
    """The makespan of the dispatcher's policy if the orchestrator cost nothing: ``parallelism`` at once,
    ready tasks offered in ``dispatch_order``."""
    order = dispatch_order(tasks, parallelism)
    deps = {task.id: set(task.depends_on) for task in tasks}
    now, done, running, pending = 0.0, set[str](), list[tuple[float, str]](), list(order)
    while pending or running:
        ready = [tid for tid in pending if deps[tid] <= done]
        while ready and len(running) < parallelism:
            task_id = ready.pop(0)
            pending.remove(task_id)
            heapq.heappush(running, (now + work[task_id], task_id))
        now, finished = heapq.heappop(running)
        done.add(finished)
    return now


def sequential_efficiency(tasks: Sequence[Task], runs: dict[str, dict[str, Any]]) -> None:
    """Add ``efficiency_vs_sequential``: the same bound, with each task's work measured as its duration in
    the one-at-a-time run (orchestration included), i.e. how well parallelism itself scales."""
    sequential = runs.get("1", {}).get("_durations")
    if not sequential or any(task.id not in sequential for task in tasks):
        return
    total = sum(sequential.values())
    path, _ = critical_path(tasks, sequential)
    for parallelism, run in runs.items():
        ideal = max(path, total / int(parallelism))
        run["ideal_vs_sequential_s"] = round(ideal, 3)
        run["efficiency_vs_sequential"] = round(ideal / run["measured_s"], 3)


def realized_chain(
    started: dict[str, float], finished: dict[str, float], work: dict[str, float], t0: float
) -> dict[str, Any]:
    """The chain of tasks that set the makespan, as it ran: from the task that finished last, back through
    the finish each start came after (a dependency's, or the one that freed a slot), the latest before it.
    Its time above its tasks' agent work splits into ``start_ms`` (from ``execute()`` to the chain's first
    start), ``waits_ms`` (from a finish to the start after it: the dispatch and the working copy) and
    ``in_task_ms`` (a task's time beyond its agent calls)."""
    links: list[str] = []
    current: str | None = max(finished, key=finished.__getitem__, default=None)
    while current is not None:
        links.append(current)
        start = started[current]
        before = [task_id for task_id, end in finished.items() if end <= start]
        current = max(before, key=finished.__getitem__) if before else None
    links.reverse()
    if not links:
        return {}
    waits = [started[child] - finished[parent] for parent, child in itertools.pairwise(links)]
    in_task = [finished[task_id] - started[task_id] - work[task_id] for task_id in links]
    return {
        "tasks": len(links),
        "start_ms": round((started[links[0]] - t0) * 1000, 1),
        "waits_ms": round(sum(waits) * 1000, 1),
        "in_task_ms": round(sum(in_task) * 1000, 1),
        "median_wait_ms": round(statistics.median(waits) * 1000, 1) if waits else 0.0,
        "median_in_task_ms": round(statistics.median(in_task) * 1000, 1),
    }


def committed_files(root: Path) -> set[str]:
    listing = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", "HEAD"], cwd=root, check=True, capture_output=True, text=True
    )
    return set(listing.stdout.splitlines())


def measure(plan: Plan, latency_s: float, parallelism: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = git_repo(Path(tmp) / "repo")
        with PlanManager(root) as manager:
            manager.init_plan(plan)
        adapter = CountingAdapter(latency_s)
        config = bench_config(root, **{"tournaments.execute_max_parallel_tasks": parallelism})
        started_at: dict[str, float] = {}
        finished_at: dict[str, float] = {}
        durations: dict[str, float] = {}

        def listener(event: ProgressEvent) -> None:
            if event.task_id is None:
                return
            if event.kind == "task_started":
                started_at[event.task_id] = time.perf_counter()
            elif event.kind == "task_finished" and event.task_id in started_at:
                finished_at[event.task_id] = time.perf_counter()
                durations[event.task_id] = finished_at[event.task_id] - started_at[event.task_id]

        orchestrator = Orchestrator(root, config=config, adapter=adapter, listener=listener, write_scope="**")

        began: list[float] = []

        async def timed_execute() -> float:
            began.append(time.perf_counter())
            await orchestrator.execute()
            return time.perf_counter() - began[0]

        machine = {"before": machine_costs(Path(tmp))}
        # Every git process the run starts, by command: a count the machine's noise does not blur.
        commands: Counter[str] = Counter()
        original_git = git_module.run_git_now
        git_module.run_git_now = counting(original_git, commands, {})
        try:
            measured = anyio.run(timed_execute)
        finally:
            git_module.run_git_now = original_git
        machine["after"] = machine_costs(Path(tmp))

        final = PlanManager.open(root, readonly=True).plan.iter_tasks()
        committed = committed_files(root)
        problems = [
            f"{t.id}: {t.status}" + (f" ({t.blocked_reason})" if t.blocked_reason else "")
            for t in final
            if t.status != "complete"
        ]
        problems += [
            f"{t.id}: {task_file(t.id)} is not in HEAD" for t in final if task_file(t.id) not in committed
        ]

    calls = Counter(call.task_id for call in adapter.calls)
    work = {task.id: calls[task.id] * latency_s for task in plan.iter_tasks()}
    total_work = sum(work.values())
    path_work, path_tasks = critical_path(plan.iter_tasks(), work)
    ideal = max(path_work, total_work / parallelism)
    per_task = [calls[task.id] for task in plan.iter_tasks()]
    return {
        "measured_s": round(measured, 3),
        "ideal_s": round(ideal, 3),
        "efficiency": round(ideal / measured, 3),
        "total_work_s": round(total_work, 3),
        "critical_path_s": round(path_work, 3),
        "critical_path_tasks": path_tasks,
        "agent_calls": len(adapter.calls),
        "calls_per_task": {"min": min(per_task), "max": max(per_task)},
        # Calls for no task of the plan: they take time the ideal does not count.
        "other_calls": sum(n for task_id, n in calls.items() if task_id not in work),
        # How many agent calls really overlapped: shows whether the parallelism setting took effect.
        "max_concurrent_calls": adapter.max_in_flight,
        # The same dispatch order with zero orchestration cost: what the DAG's shape alone allows.
        "greedy_schedule_s": round(greedy_makespan(plan.iter_tasks(), work, parallelism), 3),
        # Where the makespan's time above the agents' went, along the chain that set it.
        "chain": realized_chain(started_at, finished_at, work, began[0]),
        "git_processes_per_task": round(sum(commands.values()) / len(work), 2),
        "git_commands_per_task": {
            name: round(count / len(work), 2) for name, count in commands.most_common()
        },
        "machine": machine,
        "problems": problems,
        "_durations": durations,
    }


def median_run(repeated: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median efficiency, with the spread over all runs and every run's problems."""
    ordered = sorted(repeated, key=lambda run: run["efficiency"])
    chosen = dict(ordered[(len(ordered) - 1) // 2])
    efficiencies = [run["efficiency"] for run in ordered]
    chosen["efficiency_over_runs"] = {
        "runs": len(ordered),
        "median": round(statistics.median(efficiencies), 3),
        "min": efficiencies[0],
        "max": efficiencies[-1],
        "all": [run["efficiency"] for run in repeated],
    }
    chosen["problems"] = [problem for run in repeated for problem in run["problems"]]
    return chosen


def parallelisms(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected integers of 1 or more, got {text!r}")
    return values


def add_workload_arguments(parser: argparse.ArgumentParser, *, parallelism: list[int], runs: int) -> None:
    """The workload's options (this benchmark's, and the floor's in ``bench/makespan_floor.py``)."""
    parser.add_argument("--tasks", type=int, default=None, help="tasks in the DAG (default 60)")
    parser.add_argument("--latency", type=float, default=None, help="seconds per agent call (default 0.5)")
    example = ",".join(map(str, parallelism))
    parser.add_argument("--parallelism", type=parallelisms, default=parallelism, help=f"e.g. {example}")
    parser.add_argument(
        "--runs", type=int, default=None, help=f"runs per parallelism (default {runs}, quick 1)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="12 tasks, 0.1 s latency: a sanity run")


def workload_sizes(
    parser: argparse.ArgumentParser, args: argparse.Namespace, *, runs: int
) -> tuple[int, float, int]:
    """The tasks, the latency and the runs per parallelism ``args`` ask for (``--quick`` shrinks them)."""
    n_tasks = args.tasks if args.tasks is not None else (QUICK_TASKS if args.quick else 60)
    latency = args.latency if args.latency is not None else (QUICK_LATENCY_S if args.quick else 0.5)
    repeats = args.runs if args.runs is not None else (1 if args.quick else runs)
    if n_tasks < 1 or latency < 0 or repeats < 1:
        parser.error("need --tasks >= 1, --latency >= 0 and --runs >= 1")
    return n_tasks, latency, repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_workload_arguments(parser, parallelism=[1, 4, 8], runs=5)
    args = parser.parse_args()
    n_tasks, latency, repeats = workload_sizes(parser, args, runs=5)
    configure_quiet_logging()
    plan = dag_plan(n_tasks, args.seed)
    runs: dict[str, dict[str, Any]] = {}
    for parallelism in args.parallelism:
        print(f"parallelism {parallelism} ...", file=sys.stderr, flush=True)
        runs[str(parallelism)] = median_run([measure(plan, latency, parallelism) for _ in range(repeats)])
    tasks = plan.iter_tasks()
    sequential_efficiency(tasks, runs)
    for run in runs.values():
        run.pop("_durations")
    print(
        json.dumps(
            {
                "benchmark": "makespan",
                "seed": args.seed,
                "tasks": n_tasks,
                "edges": sum(len(task.depends_on) for task in tasks),
                "latency_s": latency,
                "runs": runs,
            },
            indent=2,
        )
    )
    failed = {p: run["problems"] for p, run in runs.items() if run["problems"]}
    if failed:
        for parallelism, problems in failed.items():
            print(
                f"parallelism {parallelism}: {len(problems)} problem(s), e.g. {problems[0]}",
                file=sys.stderr,
            )
        sys.exit(1)


if __name__ == "__main__":
    main()
