"""A parallel run checks out its first task's worktree while the preflight runs (it waits for the
interpreter probe and takes the baseline), instead of after it at the first claim; that claim takes it, a
run stopped before its dispatcher took it over leaves none behind, and a run that must make its worktrees
later (a resumed task's, a setup command's environment) makes none early."""

from __future__ import annotations

import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.orchestration import planned

from autodev.orchestrator import Orchestrator
from autodev.orchestrator.execute.dispatcher import early_pool
from autodev.orchestrator.preflight import Preflight, PreflightError
from autodev.orchestrator.run_context import RunContext
from autodev.workspace import git as git_module

_PARALLEL = {"tournaments.execute_max_parallel_tasks": 2, "worktree_pool_enabled": True}


def _slow_interpreter(tmp_path: Path, delay_s: float) -> Path:
    """A project interpreter that answers the probe after ``delay_s``: a preflight that takes a while."""
    script = tmp_path / "bin" / "python"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\nsleep {delay_s}\nexec "{sys.executable}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _pooled(orch: Orchestrator) -> list[str]:
    return sorted(path.name for path in orch.paths.task_worktrees_dir.glob("pool-*"))


def _worktrees(root: Path) -> list[str]:
    listing = subprocess.run(
        ["git", "worktree", "list", "--porcelain"], cwd=root, check=True, capture_output=True, text=True
    ).stdout
    return [line.removeprefix("worktree ") for line in listing.splitlines() if line.startswith("worktree ")]


def test_the_first_tasks_worktree_is_checked_out_while_the_preflight_runs_and_then_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    interpreter = _slow_interpreter(tmp_path, delay_s=1.0)
    orch = planned(tmp_path, **_PARALLEL, **{"environment.python": str(interpreter)})
    at_the_preflights_end: list[list[str]] = []
    preflight = RunContext.preflight

    async def noted(session: RunContext) -> Preflight:
        found = await preflight(session)
        at_the_preflights_end.append(_pooled(orch))
        return found

    added: list[Sequence[str]] = []
    run_git_now = git_module.run_git_now

    def counted(args: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        if "worktree" in args and "add" in args:
            added.append(args)
        return run_git_now(args, **kwargs)

    monkeypatch.setattr(RunContext, "preflight", noted)
    monkeypatch.setattr(git_module, "run_git_now", counted)

    tasks = anyio.run(orch.execute)

    assert tasks and all(task.status == "complete" for task in tasks)
    assert at_the_preflights_end[0] == ["pool-0"], "the first worktree was not made during the preflight"
    # The first claim took the worktree made early: the pool made no more than it holds (two tasks at
    # once and the spare a landing readies), none twice.
    assert len(added) <= 3
    assert _pooled(orch) == []
    assert _worktrees(orch.repo_root) == [str(orch.repo_root.resolve())]


def test_a_preflight_that_stops_the_run_leaves_the_early_worktree_behind_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    orch = planned(tmp_path, **_PARALLEL)

    async def refusing_once_a_worktree_is_made(session: RunContext) -> Preflight:
        for _ in range(1000):
            if _pooled(orch):
                break
            await anyio.sleep(0.01)
        else:
            pytest.fail("no worktree was made while the preflight ran")
        raise PreflightError("preflight found 1 problem, so no agent was called: 1. a test problem")

    monkeypatch.setattr(RunContext, "preflight", refusing_once_a_worktree_is_made)

    with pytest.raises(PreflightError, match="a test problem"):
        anyio.run(orch.execute)

    assert _pooled(orch) == []
    assert _worktrees(orch.repo_root) == [str(orch.repo_root.resolve())]


def _made_early(orch: Orchestrator, only_task: str | None = None, *, in_flight: bool = False) -> bool:
    """Whether ``early_pool`` has the run make a worktree before its preflight."""

    async def early() -> bool:
        with orch._session():
            session = orch._context()
            if in_flight:
                first = session.plan_manager.next_pending_tasks(1)[0]
                session.plan_manager.update_task_status(first.id, "in_progress")
            return early_pool(session, only_task) is not None

    return anyio.run(early)


def test_a_fresh_parallel_run_makes_its_first_worktree_early(tmp_path: Path) -> None:
    assert _made_early(planned(tmp_path, **_PARALLEL))


@pytest.mark.parametrize(
    ("why", "config", "only_task", "in_flight"),
    [
        ("a single task asked for", {}, "1.1", False),
        (
            "a setup command, which runs in the project's environment",
            {"worktree_setup.command": ["true"]},
            None,
            False,
        ),
        ("a task in flight, whose worktree the dispatcher adopts first", {}, None, True),
        ("tasks in the main checkout", {"tournaments.execute_max_parallel_tasks": 1}, None, False),
        ("no pool", {"worktree_pool_enabled": False}, None, False),
    ],
)
def test_no_worktree_is_made_before_the_preflight_with(
    tmp_path: Path, why: str, config: dict[str, Any], only_task: str | None, in_flight: bool
) -> None:
    orch = planned(tmp_path, **{**_PARALLEL, **config})

    assert not _made_early(orch, only_task, in_flight=in_flight), why
