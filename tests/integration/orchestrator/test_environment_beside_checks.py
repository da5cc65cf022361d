"""The project's environment is found beside a command's first checks: the interpreter probe (over 100 ms
through a version manager's shim) starts with them, is asked once however many steps need it, and is
stopped when a check refuses the run, whose error stays its own. The execute phase reads the base's
freshness while its preflight waits for that answer, and their errors come in the order they did when one
followed the other."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

import anyio
import pytest
from support.orchestration import demo_project, orchestrator, planned

from autodev.config.schema import EnvironmentSettings
from autodev.orchestrator import base_check, core
from autodev.orchestrator.checkout import require_clean_tree
from autodev.orchestrator.execute.task_flow import WorkingTreeDirtyError
from autodev.orchestrator.preflight import PreflightError
from autodev.orchestrator.run_context import RunContext
from autodev.qa import environment
from autodev.workspace.base_freshness import BaseFreshness
from autodev.workspace.git import GitError


def _interpreter(tmp_path: Path, *, delay_s: float) -> tuple[Path, Path]:
    """A project interpreter that notes each start (its pid, one line) and answers after ``delay_s``."""
    starts = tmp_path / "probe-starts"
    script = tmp_path / "bin" / "python"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\necho $$ >> "{starts}"\nsleep {delay_s}\nexec "{sys.executable}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, starts


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_refused_start_raises_its_own_error_and_stops_the_probe_it_started_beside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = demo_project(tmp_path)
    interpreter, starts = _interpreter(tmp_path, delay_s=60)
    orch, _ = orchestrator(setup.repo_root, setup.script, **{"environment.python": str(interpreter)})
    (setup.repo_root / "notes.txt").write_text("the user's own work\n")

    async def once_the_probe_runs(session: RunContext) -> None:
        # The probe starts beside the first checks: the checkout's check would wait for it in vain.
        for _ in range(1000):
            if starts.exists():
                break
            await anyio.sleep(0.01)
        else:
            pytest.fail("the probe did not start before the checkout was checked")
        await require_clean_tree(session)

    monkeypatch.setattr(core, "require_clean_tree", once_the_probe_runs)

    with pytest.raises(WorkingTreeDirtyError, match="has uncommitted changes"):
        anyio.run(orch.execute)

    pid = int(starts.read_text().split()[0])
    assert not _alive(pid), "the probe outlived the command that started it"
    assert (setup.repo_root / "notes.txt").read_text() == "the user's own work\n"


def test_a_run_asks_the_project_s_interpreter_once_while_its_steps_wait_for_the_answer(
    tmp_path: Path,
) -> None:
    setup = demo_project(tmp_path)
    interpreter, starts = _interpreter(tmp_path, delay_s=0.5)
    orch, _ = orchestrator(setup.repo_root, setup.script, **{"environment.python": str(interpreter)})

    outcome = anyio.run(orch.run, setup.intent)

    assert outcome.tasks and all(task.status == "complete" for task in outcome.tasks)
    assert len(starts.read_text().split()) == 1


def test_a_caller_waiting_for_a_search_that_failed_searches_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = demo_project(tmp_path)
    orch, _ = orchestrator(setup.repo_root, setup.script)
    searches: list[str] = []
    resolve = environment.resolve_environment

    async def failing_once(root: Path, settings: object) -> environment.EnvironmentResolution:
        searches.append("search")
        if len(searches) == 1:
            await anyio.sleep(0.2)
            raise OSError("the first search failed")
        return await resolve(root, orch.config.environment)

    monkeypatch.setattr("autodev.orchestrator.run_context.resolve_environment", failing_once)

    async def two_callers() -> environment.EnvironmentResolution:
        with orch._session():
            session = orch._context()
            async with anyio.create_task_group() as group:
                group.start_soon(session.find_environment_early)
                await anyio.sleep(0.05)  # the early search is under way
                found = await session.project_environment()
            return found

    found = anyio.run(two_callers)

    assert searches == ["search", "search"]
    assert found.environment is not None and found.problem is None


# Where the execute phase's entry finds the read it starts beside its preflight.
_READ_BASE = "autodev.orchestrator.execute.entry.read_base_before_writers"


def test_the_bases_freshness_is_read_while_the_preflight_waits_for_the_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    interpreter, _ = _interpreter(tmp_path, delay_s=1.0)
    orch = planned(tmp_path, **{"environment.python": str(interpreter)})
    moments: dict[str, float] = {}
    read = base_check.read_base_before_writers
    resolve = environment.resolve_environment

    async def timed_read(session: RunContext) -> BaseFreshness:
        found = await read(session)
        moments["base read"] = time.monotonic()
        return found

    async def timed_resolve(root: Path, settings: EnvironmentSettings) -> environment.EnvironmentResolution:
        found = await resolve(root, settings)
        moments["environment found"] = time.monotonic()
        return found

    monkeypatch.setattr(_READ_BASE, timed_read)
    monkeypatch.setattr("autodev.orchestrator.run_context.resolve_environment", timed_resolve)

    tasks = anyio.run(orch.execute)

    assert tasks and all(task.status == "complete" for task in tasks)
    assert moments["base read"] < moments["environment found"]


def test_a_preflight_problem_is_raised_before_what_the_base_read_raised_and_stops_that_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    orch = planned(tmp_path, **{"environment.python": str(tmp_path / "no-such-python")})
    reads: list[str] = []

    async def read_then_fail(session: RunContext) -> BaseFreshness:
        reads.append("started")
        await anyio.sleep(30)  # the preflight's refusal stops it long before
        raise AssertionError("the read outlived the preflight's refusal")

    monkeypatch.setattr(_READ_BASE, read_then_fail)

    with pytest.raises(PreflightError, match="the project's environment"):
        anyio.run(orch.execute)

    assert reads == ["started"]


def test_what_the_base_read_raised_is_raised_as_itself_once_the_preflight_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    orch = planned(tmp_path)

    async def failing_read(session: RunContext) -> BaseFreshness:
        raise GitError("git could not read the base")

    monkeypatch.setattr(_READ_BASE, failing_read)

    with pytest.raises(GitError, match="could not read the base"):
        anyio.run(orch.execute)
