"""Structural checks every plan must pass before it is saved: ids, uniqueness, and an acyclic DAG."""

from __future__ import annotations

import re
from collections.abc import Iterable

from autodev.errors import PlanParseError, quote
from autodev.state.schemas import Plan, Task

__all__ = ["ID_PATTERN", "RESERVED_TASK_IDS", "check_id", "validate_dag", "validate_plan"]

# Ids become parts of file names (evidence/<task>-<kind>-<n>.json), so they stay file-name safe.
ID_PATTERN = re.compile(r"[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*")
ID_MAX_LENGTH = 40
# Plan-phase delegations use "plan" as their task id (inline adapter file names).
RESERVED_TASK_IDS = frozenset({"plan"})


def check_id(kind: str, value: str, *, line: int | None = None, source: str | None = None) -> None:
    """Raise ``PlanParseError`` unless ``value`` is a valid phase or task id."""
    if len(value) > ID_MAX_LENGTH or not ID_PATTERN.fullmatch(value):
        raise PlanParseError(
            f"invalid {kind} id {quote(value)}: use letters, digits and single '.', '_' or '-' between them "
            f"(at most {ID_MAX_LENGTH} characters), e.g. '1.2'",
            line=line,
            source=source,
        )
    if kind == "task" and value.lower() in RESERVED_TASK_IDS:
        raise PlanParseError(
            f"task id {quote(value)} is reserved for the plan phase; choose another id",
            line=line,
            source=source,
        )


def validate_dag(tasks: Iterable[Task], *, source: str | None = None) -> None:
    """Every dependency names a task of the plan, no task depends on itself, and there is no cycle."""
    by_id = {task.id: task for task in tasks}
    for task in by_id.values():
        for dep in task.depends_on:
            if dep == task.id:
                raise PlanParseError(f"task {task.id} depends on itself", source=source)
            if dep not in by_id:
                raise PlanParseError(
                    f"task {task.id} depends on {quote(dep)}, which is not a task of this plan",
                    source=source,
                )
    cycle = _find_cycle(by_id)
    if cycle:
        raise PlanParseError(
            "dependency cycle: " + " -> ".join(cycle) + "; remove one of these Depends entries",
            source=source,
        )


def _find_cycle(by_id: dict[str, Task]) -> list[str]:
    """A cycle as a closed list of ids (first == last), or [] — iterative DFS, deterministic order."""
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(by_id, white)
    for root in sorted(by_id):
        if color[root] != white:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = [root]
        color[root] = grey
        while stack:
            node, index = stack[-1]
            deps = sorted(by_id[node].depends_on)
            if index < len(deps):
                stack[-1] = (node, index + 1)
                dep = deps[index]
                if color[dep] == grey:
                    return [*path[path.index(dep) :], dep]
                if color[dep] == white:
                    color[dep] = grey
                    stack.append((dep, 0))
                    path.append(dep)
            else:
                color[node] = black
                stack.pop()
                path.pop()
    return []


def validate_plan(plan: Plan, *, source: str | None = None) -> None:
    """Ids valid and unique, every task in its phase, and a valid dependency graph."""
    if not plan.phases:
        raise PlanParseError("no phases found", source=source)
    # Compared ignoring case: ids become file names, and "A" and "a" collide on case-insensitive file systems.
    phase_ids: set[str] = set()
    task_ids: set[str] = set()
    for phase in plan.phases:
        check_id("phase", phase.id, source=source)
        if phase.id.lower() in phase_ids:
            raise PlanParseError(f"duplicate phase id {quote(phase.id)}", source=source)
        phase_ids.add(phase.id.lower())
        if not phase.tasks:
            raise PlanParseError(f"phase {phase.id} has no tasks", source=source)
        for task in phase.tasks:
            check_id("task", task.id, source=source)
            if task.id.lower() in task_ids:
                raise PlanParseError(
                    f"duplicate task id {quote(task.id)} (ids are compared ignoring case)", source=source
                )
            if task.phase_id != phase.id:
                raise PlanParseError(
                    f"task {task.id} says phase {quote(task.phase_id)} but sits in phase {quote(phase.id)}",
                    source=source,
                )
            task_ids.add(task.id.lower())
    validate_dag(plan.iter_tasks(), source=source)
