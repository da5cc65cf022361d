"""Helpers for the parallel execute phase: a git repository, plans from a compact spec, watched agents."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from autodev.adapters.base import AgentInvocation, AgentResult
from autodev.adapters.scripted import Script, ScriptedAdapter
from autodev.config import AutodevConfig, load_config
from autodev.orchestrator import Orchestrator
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import Phase, Plan, Task
from autodev.workspace.git import GitRepo
from autodev.workspace.worktree_pool import WorktreePool

GATHER_DEADLINE_S = 20.0
GATES_OFF = {f"qa_gates.{gate}.enabled": False for gate in ("syntax", "lint", "build", "test", "secretscan")}


def git(root: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@invalid", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    )
    return result.stdout


def index_format(copy: Path) -> str:
    """The format git keeps ``copy``'s index in: "split" (a shared base file and the changes), or "whole"."""
    return "split" if git(copy, "rev-parse", "--shared-index-path").strip() else "whole"


def commit_everything(root: Path, message: str) -> str:
    """Commit every change in ``root``; the new HEAD."""
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD").strip()


def own_home(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No configuration or attributes file of the user's applies to git: ``home`` (made here) is the
    test's own until the test ends."""
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)


async def recycled_copy(repo: Path) -> tuple[GitRepo, Path, str]:
    """A task's worktree as most tasks get one: a pool of one in ``repo``, a first task claimed and released
    through it, and the second one's claim at HEAD. The main repository's GitRepo, the worktree and the
    base."""
    main = GitRepo(repo)
    pool = WorktreePool(repo, repo / ".autodev" / "worktrees", 1, main_git=main)
    await pool.cold_start()
    base = git(repo, "rev-parse", "HEAD").strip()
    worktree = await pool.claim("1.1", base)
    await pool.release(worktree)
    worktree = await pool.claim("1.2", base)
    return main, worktree.path, base


def git_repo(root: Path, files: Mapping[str, str] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    for path, content in (files or {"README.md": "project\n"}).items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    return root


@dataclass(frozen=True, slots=True)
class Spec:
    """One task: its phase, dependencies and declared files (default: its own ``src/t_<id>.py``)."""

    task_id: str
    phase: str = "1"
    deps: tuple[str, ...] = ()
    files: tuple[str, ...] | None = None


def plan_of(specs: Sequence[Spec]) -> Plan:
    phases: dict[str, list[Task]] = {}
    for spec in specs:
        files = list(spec.files) if spec.files is not None else [own_file(spec.task_id)]
        phases.setdefault(spec.phase, []).append(
            Task(
                id=spec.task_id,
                phase_id=spec.phase,
                title=f"Task {spec.task_id}",
                description=f"Write {spec.task_id}.",
                files=files,
                depends_on=list(spec.deps),
            )
        )
    return Plan(
        plan_id="plan-parallel",
        spec_hash="spec",
        title="parallel",
        phases=[Phase(id=pid, title=f"Phase {pid}", tasks=tasks) for pid, tasks in phases.items()],
        created_at="2026-01-01T00:00:00+00:00",
        updated_at="2026-01-01T00:00:00+00:00",
    )


def own_file(task_id: str) -> str:
    return f"src/t_{task_id}.py"


def save_plan(root: Path, plan: Plan) -> None:
    with PlanManager.open(root) as manager:
        manager.init_plan(plan)


def entries_for(
    latency_s: float = 0.0, *, developer_edits: Sequence[Mapping[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Every role succeeds; the developer writes the task's own file (or ``developer_edits``)."""
    edits = developer_edits or [
        {"path": "src/t_{task_id}.py", "content": "VALUE = '{task_id}'\n"},
    ]
    return [
        {"role": "developer", "text": "done {task_id}", "edits": list(edits)},
        {"role": "reviewer", "text": "VERDICT: APPROVED"},
        {"role": "test_engineer", "text": "RESULTS: passed=0 failed=0 total=0"},
        {"role": "critic_sounding_board", "text": "VERDICT: NEEDS_REVISION\nRECOMMENDATION: re-plan"},
    ]


def script_of(entries: Sequence[Mapping[str, Any]], latency_s: float = 0.0) -> Script:
    return Script.model_validate({"latency_s": latency_s, "entries": list(entries)})


class WatchedAdapter(ScriptedAdapter):
    """The scripted adapter, recording which tasks were in an agent call at the same time.

    With ``gather=n`` the first agent calls wait until ``n`` tasks are in a call at once (or
    ``GATHER_DEADLINE_S`` passed), once per run: a test that expects ``n`` tasks at once then does not
    depend on a loaded machine starting them within the script's latency. An orchestrator that never
    runs ``n`` at once still shows fewer, only later.
    """

    def __init__(self, *, script: Script, raise_for: Sequence[str] = (), gather: int = 0) -> None:
        super().__init__(script=script)
        self.active: set[str] = set()
        self.max_tasks_at_once = 0
        self.overlaps: set[frozenset[str]] = set()
        self.started: list[tuple[str, str]] = []
        self.raise_for = set(raise_for)
        self.gather = gather
        self._gathered: anyio.Event | None = None

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        task = inv.task_id or "plan"
        if task in self.raise_for and inv.role == "developer":
            raise RuntimeError(f"agent for {task} crashed")
        self.started.append((task, inv.role))
        for other in self.active - {task}:
            self.overlaps.add(frozenset({task, other}))
        self.active.add(task)
        self.max_tasks_at_once = max(self.max_tasks_at_once, len(self.active))
        try:
            await self._wait_for_the_others()
            return await super().execute(inv)
        finally:
            self.active.discard(task)

    async def _wait_for_the_others(self) -> None:
        if self._gathered is None:
            self._gathered = anyio.Event()
        if self._gathered.is_set() or len(self.active) >= self.gather:
            self._gathered.set()
            return
        with anyio.move_on_after(GATHER_DEADLINE_S):
            await self._gathered.wait()
        # A deadline that passed ends the gathering for everyone: the test then sees what really ran.
        self._gathered.set()


class ClaudeCodeScripted(WatchedAdapter):
    """Scripted answers under Claude Code's name, so that tiers resolve to Claude Code's model names."""

    name = "claude_code"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.models: list[tuple[str, str, str | None]] = []

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        self.models.append((inv.task_id or "", inv.role, inv.model))
        return await super().execute(inv)


def config(root: Path, workers: int, **overrides: Any) -> AutodevConfig:
    values: dict[str, Any] = {
        "platform": "scripted",
        "tournaments.execute_max_parallel_tasks": workers,
        **policy_for(workers),
        **GATES_OFF,
        **overrides,
    }
    return load_config(root, env={}, overrides=values)


def policy_for(workers: int) -> dict[str, int]:
    """Delegation-policy limits that let ``workers`` strong tasks run at once (the tests of parallel
    execution are not about the policy's budgets)."""
    return {
        "policy.max_workers": workers,
        "policy.max_strong_workers": workers,
        "policy.capability_units": 4 * workers,
    }


def orchestrator(root: Path, adapter: ScriptedAdapter, workers: int, **overrides: Any) -> Orchestrator:
    return Orchestrator(root, config=config(root, workers, **overrides), adapter=adapter, write_scope="**")


def ledger_ops(root: Path) -> list[dict[str, Any]]:
    lines = (root / ".autodev" / "ledger.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]
