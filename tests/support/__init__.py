"""Helpers shared by the test suite (importable because pytest puts tests/ on sys.path)."""

from __future__ import annotations

from autodev.state.schemas import Phase, Plan, Task


def make_plan(
    n_tasks: int = 5,
    *,
    phases: int = 1,
    chain: bool = False,
    files: bool = True,
    plan_id: str = "plan-test",
) -> Plan:
    """A plan of ``n_tasks`` per phase; ``chain`` makes each task depend on the one before it."""
    phase_models = []
    previous: str | None = None
    for p in range(1, phases + 1):
        tasks = []
        for i in range(1, n_tasks + 1):
            task_id = f"{p}.{i}"
            tasks.append(
                Task(
                    id=task_id,
                    phase_id=str(p),
                    title=f"Task {task_id}",
                    description=f"Do thing {task_id}",
                    files=[f"src/mod_{p}_{i}.py"] if files else [],
                    depends_on=[previous] if chain and previous else [],
                )
            )
            previous = task_id
        phase_models.append(Phase(id=str(p), title=f"Phase {p}", tasks=tasks))
    return Plan(
        plan_id=plan_id,
        spec_hash="spec",
        title="Test plan",
        phases=phase_models,
        created_at="2026-01-01T00:00:00+00:00",
        updated_at="2026-01-01T00:00:00+00:00",
    )
