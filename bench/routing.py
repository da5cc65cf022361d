"""Model routing and lanes: what a Model line per task saves, and what two lanes gain in makespan.

**Cost.** A 60-task plan (seeded) whose tasks are marked like an architect following the Model criteria
would: 40% haiku, 30% sonnet, 30% opus. The scripted agents answer under Claude Code's name, so each task's
roles run on that platform's model for the task's level, and every call reports the same token counts
(``--tokens-in``, ``--tokens-out``) with no cost: AutoDev prices them with ``price_table``, here Anthropic's
published list prices per million tokens as of 2026-12 (Opus 5.5 $4 / $20, Sonnet 5.5 $2 / $10, Haiku 5.5
$0.10 / $0.50 for prompts up to 100k tokens). The same plan runs again with every task on opus. Reported:
both totals from the ledger and their ratio (target: at most 0.5), and whether every task completed in both.

**Makespan.** A plan whose small tasks unblock large ones: a chain that alternates small and large tasks
(S1 → C1 → S2 → C2 ...), beside large "filler" tasks each waited on by two quick tasks of the slow lane.
Large tasks' developers take ``--large`` seconds, small ones and the fillers' quick dependents ``--small``.
It runs with two workers in both layouts: one lane holding every effort (``priority`` order, concurrency
2) against the default-like two lanes (fast: ``<1h``, unblock first, falling back to slow; slow: ``1h``,
priority first; concurrency 1 each). The single queue takes the fillers first (more tasks wait on them); the
two lanes clear the chain's small tasks as they come and, as a fast-lane task waits on it, the chain's next
large task before the fillers. Reported: both makespans (median of ``--runs``) and the speed-up (target: at
least 1.3), and whether every task completed.

    python bench/routing.py [--tasks 60] [--seed 1] [--runs 3] [--large 1.0] [--small 0.05] [--quick]

Prints one JSON object; exits 1 when a task did not complete.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))
from _scenario import bench_config, git_repo, succeeding_script

from autodev.adapters._cli import cost_from_tokens
from autodev.adapters.base import AgentInvocation, AgentResult
from autodev.adapters.scripted import Script, ScriptedAdapter
from autodev.config import AutodevConfig
from autodev.logging import configure_quiet_logging
from autodev.orchestrator import Orchestrator
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import Effort, ModelTier, Phase, Plan, Task

# Anthropic's list prices, dollars per million tokens (see the module docstring), under the model names the
# claude_code tiers map to.
PRICES = {
    "opus": {"input_per_mtok": 4.0, "output_per_mtok": 20.0},
    "sonnet": {"input_per_mtok": 2.0, "output_per_mtok": 10.0},
    "haiku": {"input_per_mtok": 0.10, "output_per_mtok": 0.50},
}
PRICED = AutodevConfig.model_validate({"price_table": PRICES})
SHARES: tuple[tuple[ModelTier, float], ...] = (("fast", 0.4), ("standard", 0.3), ("strong", 0.3))


class ClaudeNamedScript(ScriptedAdapter):
    """Scripted answers under Claude Code's name (tiers resolve to its model names), priced from ``prices``
    as a CLI adapter prices the tokens its CLI reports, the developer of each task sleeping that task's
    latency."""

    name = "claude_code"

    def __init__(
        self, script: Script, prices: AutodevConfig, latency: dict[str, float] | None = None
    ) -> None:
        super().__init__(script=script)
        self.prices = prices
        self.latency = latency or {}

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        if inv.role == "developer" and inv.task_id in self.latency:
            await anyio.sleep(self.latency[inv.task_id])
        result = await super().execute(inv)
        cost = cost_from_tokens(
            self.prices, result.model, tokens_in=result.tokens_in, tokens_out=result.tokens_out
        )
        return result.model_copy(update={"cost_usd": cost})


def _script(tokens_in: int, tokens_out: int) -> Script:
    return succeeding_script(cost_usd=None, tokens_in=tokens_in, tokens_out=tokens_out)


def _plan(plan_id: str, tasks: list[Task]) -> Plan:
    return Plan(
        plan_id=plan_id,
        spec_hash="bench",
        title=plan_id,
        phases=[Phase(id="1", title="Phase 1", tasks=tasks)],
        created_at="2026-01-01T00:00:00+00:00",
        updated_at="2026-01-01T00:00:00+00:00",
    )


def _task(
    task_id: str, *, deps: tuple[str, ...] = (), model: ModelTier | None = None, effort: Effort | None = None
) -> Task:
    return Task(
        id=task_id,
        phase_id="1",
        title=f"Task {task_id}",
        description="Write one module.",
        files=[f"src/mod_{task_id}.py"],
        depends_on=list(deps),
        model=model,
        effort=effort,
    )


def routed_plan(n_tasks: int, seed: int) -> Plan:
    """``n_tasks`` independent tasks, their Model levels in ``SHARES`` proportions, shuffled (seeded)."""
    tiers: list[ModelTier] = []
    for tier, share in SHARES:
        tiers += [tier] * round(n_tasks * share)
    tiers = (tiers + ["strong"] * n_tasks)[:n_tasks]
    random.Random(seed).shuffle(tiers)
    return _plan("plan-routing", [_task(f"t{n + 1}", model=tier) for n, tier in enumerate(tiers)])


def _run(root: Path, plan: Plan, adapter: ScriptedAdapter, **overrides: Any) -> tuple[float, PlanManager]:
    with PlanManager(root) as manager:
        manager.init_plan(plan)
    config = bench_config(root, **overrides)
    orchestrator = Orchestrator(root, config=config, adapter=adapter, write_scope="**")
    started = time.perf_counter()
    anyio.run(orchestrator.execute)
    return time.perf_counter() - started, PlanManager.open(root, readonly=True)


def cost_figures(n_tasks: int, seed: int, tokens_in: int, tokens_out: int) -> dict[str, Any]:
    routed = routed_plan(n_tasks, seed)
    everything_strong = routed.model_copy(deep=True)
    for task in everything_strong.phases[0].tasks:
        task.model = "strong"
    totals: dict[str, float] = {}
    complete: dict[str, bool] = {}
    for label, plan in (("routed", routed), ("all_strong", everything_strong)):
        with tempfile.TemporaryDirectory(prefix=f"autodev-routing-{label}-") as tmp:
            _, manager = _run(
                git_repo(Path(tmp)),
                plan,
                ClaudeNamedScript(_script(tokens_in, tokens_out), PRICED),
            )
            totals[label] = manager.cost_usd_total + manager.estimated_cost_usd
            complete[label] = all(task.status == "complete" for task in manager.tasks())
    counts = {tier: sum(task.model == tier for task in routed.iter_tasks()) for tier, _ in SHARES}
    return {
        "tasks": n_tasks,
        "levels": {"haiku": counts["fast"], "sonnet": counts["standard"], "opus": counts["strong"]},
        "routed_usd": round(totals["routed"], 4),
        "all_strong_usd": round(totals["all_strong"], 4),
        "ratio": round(totals["routed"] / totals["all_strong"], 3) if totals["all_strong"] else None,
        "target_ratio_max": 0.5,
        "all_complete": all(complete.values()),
    }


def unblocking_plan(chain: int, fillers: int) -> tuple[Plan, dict[str, str]]:
    """The makespan DAG of the module docstring; each task's kind (large, small, quick)."""
    tasks: list[Task] = []
    kinds: dict[str, str] = {}
    previous: str | None = None
    for n in range(1, chain + 1):
        small, large = f"s{n}", f"c{n}"
        tasks.append(_task(small, deps=(previous,) if previous else (), effort="<1h"))
        tasks.append(_task(large, deps=(small,), effort="1h"))
        kinds[small], kinds[large] = "small", "large"
        previous = large
    for n in range(1, fillers + 1):
        filler = f"f{n}"
        tasks.append(_task(filler, effort="1h"))
        kinds[filler] = "large"
        for leaf in ("a", "b"):
            tasks.append(_task(f"{filler}{leaf}", deps=(filler,), effort="1h"))
            kinds[f"{filler}{leaf}"] = "small"
    return _plan("plan-unblocking", tasks), kinds


ONE_LANE = {"every": {"efforts": ["<1h", "1h"], "order": "priority", "concurrency": 2, "slices": True}}
TWO_LANES = {
    "fast": {"efforts": ["<1h"], "order": "unblock", "concurrency": 1, "slices": True, "fallback": "slow"},
    "slow": {"efforts": ["1h"], "order": "priority", "concurrency": 1},
}


def makespan_figures(chain: int, fillers: int, large_s: float, small_s: float, runs: int) -> dict[str, Any]:
    plan, kinds = unblocking_plan(chain, fillers)
    latency = {task_id: large_s if kind == "large" else small_s for task_id, kind in kinds.items()}
    spans: dict[str, list[float]] = {"one_lane": [], "two_lanes": []}
    complete = True
    for _ in range(runs):
        for label, lanes in (("one_lane", ONE_LANE), ("two_lanes", TWO_LANES)):
            with tempfile.TemporaryDirectory(prefix=f"autodev-lanes-{label}-") as tmp:
                elapsed, manager = _run(
                    git_repo(Path(tmp)),
                    plan,
                    ClaudeNamedScript(_script(0, 0), PRICED, latency),
                    lanes=lanes,
                    lanes_enabled=True,
                    **{"tournaments.execute_max_parallel_tasks": 2},
                )
                spans[label].append(elapsed)
                complete = complete and all(task.status == "complete" for task in manager.tasks())
    one, two = statistics.median(spans["one_lane"]), statistics.median(spans["two_lanes"])
    return {
        "tasks": len(plan.iter_tasks()),
        "workers": 2,
        "large_s": large_s,
        "small_s": small_s,
        "one_lane_s": round(one, 3),
        "two_lanes_s": round(two, 3),
        "runs_one_lane_s": [round(span, 3) for span in spans["one_lane"]],
        "runs_two_lanes_s": [round(span, 3) for span in spans["two_lanes"]],
        "speedup": round(one / two, 3),
        "target_speedup_min": 1.3,
        "all_complete": complete,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--tasks", type=int, default=60)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens-in", type=int, default=40_000)
    parser.add_argument("--tokens-out", type=int, default=4_000)
    parser.add_argument("--large", type=float, default=1.0, help="A large task's developer call, seconds.")
    parser.add_argument("--small", type=float, default=0.05, help="A small task's developer call, seconds.")
    parser.add_argument("--quick", action="store_true", help="12 tasks, one makespan run (a smoke test).")
    args = parser.parse_args(argv)
    configure_quiet_logging()
    tasks, runs = (12, 1) if args.quick else (args.tasks, args.runs)
    result: dict[str, Any] = {
        "benchmark": "routing",
        "cost": cost_figures(tasks, args.seed, args.tokens_in, args.tokens_out),
        "makespan": makespan_figures(4, 2 if args.quick else 4, args.large, args.small, runs),
    }
    print(json.dumps(result, indent=2))
    return 0 if result["cost"]["all_complete"] and result["makespan"]["all_complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
