"""Area maps in a run, with the scripted adapter on a real repository: a stale map gets a refresh task
through the ledger, the developer and the explorer are given the maps, and a map's test recipe is the test
gate's command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
from support.parallel import (
    GATES_OFF,
    Spec,
    WatchedAdapter,
    commit_everything,
    entries_for,
    git_repo,
    ledger_ops,
    orchestrator,
    plan_of,
    save_plan,
    script_of,
)

from autodev.adapters.base import AgentInvocation, AgentResult
from autodev.state.evidence import read_evidence
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import GateEvidence
from autodev.state.verify import verify_state

NOTES = """# Notes

## Areas

### Core
- Code map: `double`
- Test recipe: `{python} -c "print('core recipe ran')"`
- Paths: src/core.py src/t_a.py

### Docs
- Code map: `Usage`
- Paths: README.md
"""

# The developer of task "a" drops `double` from src/core.py: the Core map's anchor is gone.
DROPS_THE_ANCHOR = {
    "role": "developer",
    "task_id": "a",
    "edits": [{"path": "src/core.py", "content": "def twice(x):\n    return 2 * x\n"}],
}


class Prompts(WatchedAdapter):
    """The scripted adapter, keeping each call's prompt."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prompts: dict[tuple[str, str], str] = {}

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        self.prompts.setdefault((inv.task_id or "plan", inv.role), inv.prompt)
        return await super().execute(inv)


def _repo(tmp_path: Path, python: str = "python3") -> Path:
    root = git_repo(
        tmp_path / "repo", {"src/core.py": "def double(x):\n    return 2 * x\n", "README.md": "Usage\n"}
    )
    (root / "AGENTS.md").write_text(NOTES.format(python=python))
    commit_everything(root, "notes")
    return root


def _run(root: Path, adapter: WatchedAdapter, **overrides: Any) -> None:
    anyio.run(orchestrator(root, adapter, 1, **overrides).execute)


def test_a_stale_area_map_gets_one_refresh_task_through_the_ledger(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    save_plan(root, plan_of([Spec("a", files=("src/core.py",)), Spec("b", deps=("a",))]))
    adapter = WatchedAdapter(script=script_of([DROPS_THE_ANCHOR, *entries_for()]))

    _run(root, adapter)

    manager = PlanManager.open(root, readonly=True)
    refresh = manager.get_task("t-map-core")
    assert (refresh.model, refresh.effort, refresh.priority, refresh.files) == (
        "standard",
        "<1h",
        "P2",
        ["AGENTS.md"],
    )
    assert refresh.title == "Refresh Core area map"
    assert "autodev areas --mark core" in refresh.description
    assert refresh.acceptance[0].description == "`autodev areas core` shows the area not stale"
    # Added once, after a landed, although the map stayed stale through b and the refresh itself (whose
    # scripted developer did not fix it): one open refresh at a time, and a refresh asks for no other.
    assert [task.id for task in manager.tasks()] == ["a", "b", "t-map-core"]
    assert all(task.status == "complete" for task in manager.tasks())
    (added,) = [op["payload"] for op in ledger_ops(root) if op["op"] == "tasks_added"]
    assert added["by"] == "autodev" and "missing anchors: `double`" in added["reason"]
    assert verify_state(root).ok


def test_a_refresh_id_already_used_is_never_reused(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    plan = plan_of([Spec("t-map-core", files=("AGENTS.md",)), Spec("a", files=("src/core.py",))])
    save_plan(root, plan)
    with PlanManager.open(root) as manager:
        manager.skip_task("t-map-core")

    _run(root, WatchedAdapter(script=script_of([DROPS_THE_ANCHOR, *entries_for()])))

    manager = PlanManager.open(root, readonly=True)
    assert [task.id for task in manager.tasks()] == ["t-map-core", "a", "t-map-core-2"]


def test_a_map_that_stays_fresh_adds_nothing_and_without_maps_nothing_happens(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    save_plan(root, plan_of([Spec("a"), Spec("b")]))

    _run(root, WatchedAdapter(script=script_of(entries_for())))

    assert [task.id for task in PlanManager.open(root, readonly=True).tasks()] == ["a", "b"]
    assert "tasks_added" not in [op["op"] for op in ledger_ops(root)]


def test_the_developer_is_given_the_maps_of_its_files_only(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    save_plan(root, plan_of([Spec("a", files=("src/core.py",)), Spec("b", files=("src/other.py",))]))
    adapter = Prompts(script=script_of(entries_for()))

    _run(root, adapter)

    with_map = adapter.prompts[("a", "developer")]
    assert "AREA MAPS (from AGENTS.md)" in with_map and "- Core:" in with_map and "- Docs:" not in with_map
    assert "AREA MAPS" not in adapter.prompts[("b", "developer")]


def test_the_explorer_is_given_every_map(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    plan = "# Plan: P\n## Phase 1: One\n### Task 1.1: Do it\n- Files: src/core.py\n"
    adapter = Prompts(
        script=script_of(
            [
                {"role": "explorer", "text": "found things"},
                {"role": "domain_expert", "text": "advice"},
                {"role": "architect", "text": plan},
            ]
        )
    )
    anyio.run(orchestrator(root, adapter, 1).plan, "do it")

    explorer = adapter.prompts[("plan", "explorer")]
    assert "- Core:" in explorer and "- Docs:" in explorer


def test_an_areas_test_recipe_is_the_test_gates_command_unless_one_is_configured(tmp_path: Path) -> None:
    root = _repo(tmp_path, python=sys.executable)
    save_plan(root, plan_of([Spec("a", files=("src/t_a.py",)), Spec("b", files=("src/t_b.py",))]))
    gates = {**GATES_OFF, "qa_gates.test.enabled": True}

    _run(root, WatchedAdapter(script=script_of(entries_for())), **gates)

    manager = PlanManager.open(root, readonly=True)
    assert all(task.status == "complete" for task in manager.tasks())
    assert _test_argv(root, manager, "a")[-1] == "print('core recipe ran')"
    # b's file is in no area: the gate runs the detected test command, not the recipe.
    assert "print('core recipe ran')" not in _test_argv(root, manager, "b")


def _test_argv(root: Path, manager: PlanManager, task_id: str) -> list[str]:
    (ref,) = [ref for ref in manager.evidence_for(task_id) if ref.kind == "gates"]
    evidence = read_evidence(root / ref.path)
    assert isinstance(evidence, GateEvidence)
    (check,) = [check for check in evidence.checks if check.gate == "test"]
    return check.runs[0].argv if check.runs else []
