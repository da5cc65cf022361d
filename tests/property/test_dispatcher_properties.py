"""Hypothesis over random DAGs run by the parallel dispatcher on real git, against the sequential run."""

from __future__ import annotations

import itertools
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.parallel import Spec, entries_for, git, git_repo, orchestrator, plan_of, save_plan, script_of

from autodev.adapters.scripted import ScriptedAdapter
from autodev.orchestrator.events import ProgressEvent
from autodev.state.plan_manager import PlanManager

_FILES = ("a.py", "b.py", "c.py", "d.py")
_counter = itertools.count()


@st.composite
def dags(draw: st.DrawFn) -> tuple[list[Spec], set[str]]:
    """Up to 7 tasks in 1-2 phases; each depends on some earlier tasks and declares 1-2 of 4 files."""
    count = draw(st.integers(2, 7))
    split = draw(st.integers(1, count))
    specs: list[Spec] = []
    for index in range(count):
        task_id = f"t{index}"
        earlier = [spec.task_id for spec in specs]
        deps = draw(st.lists(st.sampled_from(earlier), max_size=2, unique=True)) if earlier else []
        files = draw(st.lists(st.sampled_from(_FILES), min_size=1, max_size=2, unique=True))
        specs.append(Spec(task_id, phase="1" if index < split else "2", deps=tuple(deps), files=tuple(files)))
    failing = set(draw(st.lists(st.sampled_from([s.task_id for s in specs]), max_size=2, unique=True)))
    return specs, failing


class Checker:
    """A progress listener that checks the scheduling invariants at every task start."""

    def __init__(self, specs: list[Spec]) -> None:
        self.by_id = {spec.task_id: spec for spec in specs}
        self.in_flight: set[str] = set()
        self.finished: set[str] = set()
        self.violations: list[str] = []

    def __call__(self, event: ProgressEvent) -> None:
        if event.task_id is None:
            return
        if event.kind == "task_started":
            spec = self.by_id[event.task_id]
            early = [dep for dep in spec.deps if dep not in self.finished]
            if early:
                self.violations.append(f"{spec.task_id} started before {early}")
            for other in self.in_flight:
                shared = set(spec.files or ()) & set(self.by_id[other].files or ())
                if shared:
                    self.violations.append(f"{spec.task_id} and {other} both hold {shared}")
            self.in_flight.add(event.task_id)
        elif event.kind == "task_finished":
            self.in_flight.discard(event.task_id)
            self.finished.add(event.task_id)


def _entries(specs: list[Spec], failing: set[str]) -> list[dict[str, Any]]:
    entries = entries_for(developer_edits=[{"path": "out/{task_id}.txt", "content": "{task_id}\n"}])
    for spec in specs:
        # Each task also appends a line of its own to one declared file: file overlap matters for real.
        edits = [
            {"path": "out/{task_id}.txt", "content": "{task_id}\n"},
            {
                "path": (spec.files or ("a.py",))[0].replace(".py", f"_{spec.task_id}.py"),
                "content": "X = 1\n",
            },
        ]
        entry: dict[str, Any] = {"role": "developer", "task_id": spec.task_id, "text": "done", "edits": edits}
        if spec.task_id in failing:
            entry = {
                "role": "developer",
                "task_id": spec.task_id,
                "fail": {"kind": "is_error", "message": "no"},
            }
        entries.append(entry)
    return entries


def _run(root: Path, specs: list[Spec], failing: set[str], workers: int) -> Checker:
    git_repo(root)
    save_plan(root, plan_of(specs))
    checker = Checker(specs)
    orch = orchestrator(
        root,
        ScriptedAdapter(script=script_of(_entries(specs, failing))),
        workers,
        qa_retry_limit=1,
        cross_phase_parallelism_enabled=bool(next(_counter) % 2),
    )
    orch.listener = checker
    anyio.run(orch.execute)
    return checker


def _descendants(specs: list[Spec], roots: set[str]) -> set[str]:
    found = set(roots)
    for spec in specs:  # specs are topologically ordered: deps always come earlier
        if found.intersection(spec.deps):
            found.add(spec.task_id)
    return found


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(dags())
def test_random_dags_respect_dependencies_and_files_and_match_the_sequential_tree(
    case: tuple[list[Spec], set[str]],
) -> None:
    specs, failing = case
    with TemporaryDirectory(prefix="autodev-dag-") as tmp:
        parallel = _run(Path(tmp) / "parallel", specs, failing, workers=3)
        assert parallel.violations == []
        manager = PlanManager.open(Path(tmp) / "parallel", readonly=True)
        statuses = {task.id: task.status for task in manager.tasks()}
        doomed = _descendants(specs, failing)
        assert {tid for tid, status in statuses.items() if status == "blocked"} == doomed
        assert {tid for tid, status in statuses.items() if status == "complete"} == set(statuses) - doomed
        if failing:
            return
        _run(Path(tmp) / "sequential", specs, failing, workers=1)
        trees = [git(Path(tmp) / name, "rev-parse", "HEAD^{tree}") for name in ("parallel", "sequential")]
        assert trees[0] == trees[1]
