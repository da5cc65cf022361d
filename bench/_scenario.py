"""Shared benchmark set-up: a git repository, a synthetic plan, scripted agents that always succeed."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from autodev.adapters.scripted import Script, ScriptedAdapter
from autodev.config import AutodevConfig, load_config
from autodev.orchestrator import Orchestrator
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import Phase, Plan, Task

GATES_OFF = {f"qa_gates.{gate}.enabled": False for gate in ("syntax", "lint", "build", "test", "secretscan")}


def git_repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "initial"]):
        subprocess.run(
            ["git", "-c", "user.name=bench", "-c", "user.email=bench@invalid", *args],
            cwd=root,
            check=True,
            capture_output=True,
        )
    return root


def independent_plan(n_tasks: int, per_phase: int = 100) -> Plan:
    phases = []
    for start in range(0, n_tasks, per_phase):
        phase_id = str(start // per_phase + 1)
        tasks = [
            Task(
                id=f"{phase_id}.{i + 1}",
                phase_id=phase_id,
                title=f"Task {phase_id}.{i + 1}",
                description="Write one module.",
                files=[f"src/mod_{phase_id}_{i + 1}.py"],
            )
            for i in range(min(per_phase, n_tasks - start))
        ]
        phases.append(Phase(id=phase_id, title=f"Phase {phase_id}", tasks=tasks))
    return Plan(
        plan_id=f"plan-bench-{n_tasks}",
        spec_hash="bench",
        title=f"{n_tasks} independent tasks",
        phases=phases,
        created_at="2026-01-01T00:00:00+00:00",
        updated_at="2026-01-01T00:00:00+00:00",
    )


def succeeding_script(latency_s: float = 0.0, **reported: Any) -> Script:
    """Every role succeeds at once; the developer writes one file named after its task. ``reported``: what
    every call reports besides (``tokens_in``, ``cost_usd``, ...)."""
    entry: dict[str, Any] = {"latency_s": latency_s, **reported} if latency_s else dict(reported)
    return Script.model_validate(
        {
            "entries": [
                {
                    "role": "developer",
                    "text": "done {task_id}",
                    "edits": [{"path": "src/mod_{task_id}.py", "content": "VALUE = '{task_id}'\n"}],
                    **entry,
                },
                {"role": "reviewer", "text": "VERDICT: APPROVED", **entry},
                {"role": "test_engineer", "text": "RESULTS: passed=0 failed=0 total=0", **entry},
            ]
        }
    )


# The benchmarks time orchestration at a given parallelism: the delegation policy decides and logs every
# call as in any run, but its worker budget must not be what limits the parallelism.
UNBOUNDED_POLICY = {"policy.max_workers": 64, "policy.max_strong_workers": 64, "policy.capability_units": 256}
# Every benchmark plan writes anywhere in its generated repository.
WRITE_SCOPE = "**"


def bench_config(root: Path, **overrides: Any) -> AutodevConfig:
    return load_config(
        root,
        env={},
        overrides={
            "platform": "scripted",
            "tournaments.plan.enabled": False,
            **GATES_OFF,
            **UNBOUNDED_POLICY,
            **overrides,
        },
    )


def saved_plan_orchestrator(root: Path, n_tasks: int, latency_s: float = 0.0) -> Orchestrator:
    with PlanManager(root) as manager:
        manager.init_plan(independent_plan(n_tasks))
    adapter = ScriptedAdapter(script=succeeding_script(latency_s))
    return Orchestrator(root, config=bench_config(root), adapter=adapter, write_scope=WRITE_SCOPE)
