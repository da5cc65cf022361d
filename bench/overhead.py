"""Orchestrator overhead: N independent tasks, zero-latency scripted agents, QA gates off.

Prints JSON, one entry per plan size: the time per task (median of the intervals between consecutive task
completions in the ledger, which with zero-latency agents is the orchestrator's own work per task at the
run's parallelism), the same median over the first and the last tenth of the run and their ratio (flat in
plan size means a ratio near 1), ledger ops per task, the cost of one state transition (median
``update_task_status`` inside the run), the git processes AutoDev started per task (in all, and for each
command started at least once a task on average), and the time per task of the check that every commit
recorded as landed is still on the branch (``AgentWatch.check_landed``, after every agent call), the file
syncs AutoDev's own process asked for per task (``os.fsync`` and ``os.fdatasync``: evidence files, their
directory, durable ledger appends), the files and directories it created per task (each a new inode, which
some file systems make expensive: "The files a task creates" in docs/performance.md) and the processor
time per task, AutoDev's process and its git processes apart. The counts and those times are what a change
to the per-task work can be judged by on a machine whose speed drifts between runs; ``machine`` says how
far it drifted: what creating a file, syncing an append and starting git cost in the run's directory, just
before the run and just after it (``bench/_machine.py``). ``--repo-files`` first commits a generated tree
of that many files (nested directories of 20 files, like a real source tree), to show what the size of the
repository costs.
``--syncs off`` turns those syncs into no-ops for the run, to measure what the durability costs: a
measurement only (a crash of the machine may then lose what the ledger says is durable), never a way to run.

    python bench/overhead.py [--tasks 100,1000,5000] [--repo-files 0] [--workers N] [--pool on|off]
        [--tracking on|off] [--syncs on|off]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import anyio

sys.path.insert(0, str(Path(__file__).parent))
import _machine
from _scenario import bench_config, git_repo, independent_plan, succeeding_script

from autodev.adapters.scripted import ScriptedAdapter
from autodev.logging import configure_quiet_logging
from autodev.orchestrator import Orchestrator
from autodev.orchestrator.integrity import AgentWatch
from autodev.state.plan_manager import PlanManager
from autodev.workspace import git as git_module

P = ParamSpec("P")
R = TypeVar("R")

FILES_PER_DIRECTORY = 20
DIRECTORIES_PER_LEVEL = 10


def timing(function: Callable[P, R], timings: list[float]) -> Callable[P, R]:
    """``function`` with the same signature, appending the seconds of every call to ``timings``."""

    def timed(*args: P.args, **kwargs: P.kwargs) -> R:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            timings.append(time.perf_counter() - start)

    return timed


def counting(function: Callable[P, R], commands: Counter[str], seconds: dict[str, float]) -> Callable[P, R]:
    """``run_git_now`` with the same signature, counting each git command it starts by name and adding up
    the seconds each name's processes took, from start to exit."""

    def counted(*args: P.args, **kwargs: P.kwargs) -> R:
        arguments = args[0] if args else kwargs["args"]
        assert isinstance(arguments, Sequence)
        words = [str(word) for word in arguments]  # past git's own options (``-c name=value``)
        name = next((word for word in words if not word.startswith("-") and "=" not in word), "?")
        commands[name] += 1
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - start

    return counted


def counted_sync(sync: Callable[P, None], calls: list[int], *, skip: bool) -> Callable[P, None]:
    """``os.fsync`` or ``os.fdatasync``, adding 1 to ``calls[0]`` for every call; with ``skip``, the call is
    counted and not made."""

    def counted(*args: P.args, **kwargs: P.kwargs) -> None:
        calls[0] += 1
        if not skip:
            sync(*args, **kwargs)

    return counted


class NewFiles:
    """Counts the files and directories this process creates (not the ones it opens or replaces) while
    ``counting`` is on, whichever call creates them (``os.open``, ``open``, ``Path.write_text``,
    ``os.mkdir``): through an audit hook, which Python runs before each of those calls."""

    def __init__(self) -> None:
        self.created = 0
        self.counting = False
        sys.addaudithook(self._heard)

    def _heard(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.counting:
            return
        if event == "open":
            path, _mode, flags = args
            creates = isinstance(flags, int) and flags & os.O_CREAT
        elif event == "os.mkdir":
            path, creates = args[0], True
        else:
            return
        # A name that exists already is opened or refused, not made: only a new one costs an inode.
        if creates and isinstance(path, str | bytes | os.PathLike) and not os.path.lexists(path):
            self.created += 1


_NEW_FILES: NewFiles | None = None


def new_files() -> NewFiles:
    """The process's one ``NewFiles`` (an audit hook cannot be removed again, so it is added once)."""
    global _NEW_FILES
    if _NEW_FILES is None:
        _NEW_FILES = NewFiles()
    return _NEW_FILES


def processor_seconds() -> tuple[float, float]:
    """User and system time so far of this process (all its threads) and of its children waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def timing_async(
    function: Callable[P, Coroutine[Any, Any, R]], timings: list[float]
) -> Callable[P, Coroutine[Any, Any, R]]:
    """An async ``function`` with the same signature, appending the seconds of every call to ``timings``."""

    async def timed(*args: P.args, **kwargs: P.kwargs) -> R:
        start = time.perf_counter()
        try:
            return await function(*args, **kwargs)
        finally:
            timings.append(time.perf_counter() - start)

    return timed


def generated_tree(root: Path, n_files: int) -> None:
    """``n_files`` small modules in ``lib/d0/d3/d7/m12.py``-like directories, committed in one commit."""
    for index in range(n_files):
        directory, number = divmod(index, FILES_PER_DIRECTORY)
        parts = []
        for _ in range(3):
            directory, part = divmod(directory, DIRECTORIES_PER_LEVEL)
            parts.append(f"d{part}")
        path = root.joinpath("lib", f"g{directory}", *reversed(parts), f"m{number}.py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"VALUE = {index}\n")
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@invalid"]
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, capture_output=True)
    subprocess.run(["git", *identity, "commit", "-qm", "tree"], cwd=root, check=True, capture_output=True)


def tenth_mean(intervals: Sequence[float], last: bool) -> float:
    """Seconds per task over the first or last tenth of the run: its span over its task count.

    A span, not a median of intervals: with several tasks at once, completions come in bunches and the
    median interval would count the short gaps inside a bunch and hide the long ones between bunches.
    """
    size = max(1, len(intervals) // 10)
    return statistics.fmean(intervals[-size:] if last else intervals[:size])


def measure(
    n_tasks: int, repo_files: int, overrides: dict[str, Any], *, syncs: bool = True
) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        root = git_repo(Path(tmp) / "repo")
        if repo_files:
            generated_tree(root, repo_files)
        with PlanManager(root) as manager:
            manager.init_plan(independent_plan(n_tasks))
        orchestrator = Orchestrator(
            root,
            config=bench_config(root, **overrides),
            adapter=ScriptedAdapter(script=succeeding_script()),
            write_scope="**",
        )
        # Before the syncs are counted: the probe's own are not AutoDev's.
        machine = {"before": _machine.machine_costs(Path(tmp))}
        timings: list[float] = []
        landed_checks: list[float] = []
        commands: Counter[str] = Counter()
        git_seconds: dict[str, float] = {}
        original = PlanManager.update_task_status
        original_check = AgentWatch.check_landed
        original_git = git_module.run_git_now
        original_syncs = os.fsync, os.fdatasync
        sync_calls = [0]
        created = new_files()
        created_before = created.created
        PlanManager.update_task_status = timing(original, timings)  # type: ignore[method-assign]
        AgentWatch.check_landed = timing_async(original_check, landed_checks)  # type: ignore[method-assign]
        git_module.run_git_now = counting(original_git, commands, git_seconds)
        os.fsync = counted_sync(os.fsync, sync_calls, skip=not syncs)
        os.fdatasync = counted_sync(os.fdatasync, sync_calls, skip=not syncs)
        try:
            started, started_at = time.perf_counter(), datetime.now(UTC)
            own_before, children_before = processor_seconds()
            created.counting = True
            tasks = anyio.run(orchestrator.execute)
            wall = time.perf_counter() - started
            own_after, children_after = processor_seconds()
        finally:
            created.counting = False
            PlanManager.update_task_status = original  # type: ignore[method-assign]
            AgentWatch.check_landed = original_check  # type: ignore[method-assign]
            git_module.run_git_now = original_git
            os.fsync, os.fdatasync = original_syncs
        machine["after"] = _machine.machine_costs(Path(tmp))
        assert all(task.status == "complete" for task in tasks), "every task must complete"
        manager = PlanManager.open(root, readonly=True)
        entries = list(manager.ledger.entries())
        completed_at = [
            datetime.fromisoformat(e.ts)
            for e in entries
            if e.op == "task_status" and e.payload["to"] == "complete"
        ]
        per_task = [(b - a).total_seconds() for a, b in itertools.pairwise(completed_at)]
        first, last = tenth_mean(per_task, last=False), tenth_mean(per_task, last=True)
        return {
            "tasks": n_tasks,
            "repo_files": repo_files,
            "wall_s": round(wall, 3),
            "first_task_done_s": round((completed_at[0] - started_at).total_seconds(), 3),
            "per_task_ms": round(statistics.fmean(per_task) * 1000, 2),
            "per_task_ms_median_interval": round(statistics.median(per_task) * 1000, 2),
            "first_tenth_ms": round(first * 1000, 2),
            "last_tenth_ms": round(last * 1000, 2),
            "last_over_first": round(last / first, 3),
            "transition_ms_median": round(statistics.median(timings) * 1000, 3),
            "transition_ms_p95": round(statistics.quantiles(timings, n=20)[-1] * 1000, 3),
            "ledger_ops_per_task": round(len(entries) / n_tasks, 1),
            "git_processes_per_task": round(sum(commands.values()) / n_tasks, 2),
            "git_commands_per_task": {
                name: round(count / n_tasks, 2) for name, count in commands.most_common() if count >= n_tasks
            },
            "git_ms_per_task": {
                name: round(git_seconds[name] * 1000 / n_tasks, 2)
                for name, count in commands.most_common()
                if count >= n_tasks
            },
            "landed_check_ms_per_task": round(sum(landed_checks) * 1000 / n_tasks, 3),
            "syncs_per_task": round(sync_calls[0] / n_tasks, 2),
            "syncs": "on" if syncs else "off (a measurement only)",
            "files_created_per_task": round((created.created - created_before) / n_tasks, 2),
            "cpu_ms_per_task": {
                "autodev": round((own_after - own_before) * 1000 / n_tasks, 1),
                "git": round((children_after - children_before) * 1000 / n_tasks, 1),
            },
            "machine": machine,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="100,1000,5000", help="comma-separated plan sizes")
    parser.add_argument("--repo-files", type=int, default=0)
    parser.add_argument("--workers", type=int, default=None, help="tasks at once (default: the machine's)")
    parser.add_argument("--pool", choices=("on", "off"), default=None, help="default: the configuration's")
    parser.add_argument(
        "--tracking", choices=("on", "off"), default=None, help="default: the configuration's"
    )
    parser.add_argument(
        "--syncs",
        choices=("on", "off"),
        default="on",
        help="off: AutoDev's fsyncs become no-ops, to measure what durability costs (never a way to run)",
    )
    args = parser.parse_args()
    configure_quiet_logging()
    overrides: dict[str, Any] = {}
    if args.workers is not None:
        overrides["tournaments.execute_max_parallel_tasks"] = args.workers
    if args.pool is not None:
        overrides["worktree_pool_enabled"] = args.pool == "on"
    if args.tracking is not None:
        overrides["change_tracking_enabled"] = args.tracking == "on"
    sizes = [int(size) for size in args.tasks.split(",")]
    runs = [measure(size, args.repo_files, overrides, syncs=args.syncs == "on") for size in sizes]
    print(json.dumps({"benchmark": "overhead", "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
