"""The provider's refusals through a real agent CLI and the ``autodev`` executable: the pinned Claude Code
against the local model server answering with Anthropic's own refusal bodies.

Claude Code's own retries are turned off (``CLAUDE_CODE_MAX_RETRIES=0``: it would retry a 429 for minutes and
report the same refusal at the end), so every refusal the server sends reaches AutoDev.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.model_server import ModelServer, Scenario
from support.orchestration import git_log
from support.pipeline import INTENT, SHOUT, autodev_in, cli_env, marker, pipeline_scenarios, roles_served

from autodev.cli.demo import DemoSetup, prepare_demo
from autodev.state.plan_manager import PlanManager

pytestmark = pytest.mark.slow

TWO_TASKS = """# Plan: Two helpers

## Phase 1: Helpers
Two independent helpers.

### Task 1.1: Add shout
- Description: Add shout(text) to textutils/shout.py.
- Files: textutils/shout.py

### Task 1.2: Add whisper
- Description: Add whisper(text) to textutils/whisper.py.
- Files: textutils/whisper.py
"""


def _env(
    agent_clis: dict[str, Path], server: ModelServer, home: Path, root: Path, **autodev: str
) -> dict[str, str]:
    """Claude Code set up against ``server`` with its own retries off, AutoDev's back-off short, and one
    task at a time (the scripted writes go to the main tree); ``autodev`` adds ``AUTODEV_*`` settings."""
    env = cli_env("claude_code", agent_clis, server, home, root)
    env = {key: value for key, value in env.items() if not key.startswith("AUTODEV_")}
    env["CLAUDE_CODE_MAX_RETRIES"] = "0"
    env["AUTODEV_TOURNAMENTS__EXECUTE_MAX_PARALLEL_TASKS"] = "1"
    env["AUTODEV_PROVIDER__RETRY_BASE_DELAY_S"] = "0.2"
    env["AUTODEV_PROVIDER__RETRY_MAX_DELAY_S"] = "1"
    env.update({f"AUTODEV_{key.upper()}": value for key, value in autodev.items()})
    return env


def _save_two_tasks(root: Path, env: dict[str, str], tmp_path: Path) -> None:
    """Save ``TWO_TASKS`` as the plan, as a user does: no agent is asked."""
    plan = tmp_path / "plan.md"
    plan.write_text(TWO_TASKS)
    saved = autodev_in(root, env, "plan", "--from-markdown", str(plan))
    assert saved.returncode == 0, saved.stderr


def _ops(root: Path, name: str) -> list[dict[str, Any]]:
    lines = (root / ".autodev" / "ledger.jsonl").read_text().splitlines()
    return [entry["payload"] for entry in map(json.loads, lines) if entry["op"] == name]


def _refusing_developer(demo: DemoSetup, refusal: str, refusals: int | None) -> Scenario:
    return Scenario(
        marker=marker("developer"),
        refusal=refusal,  # type: ignore[arg-type]
        refusals=refusals,
        text="Implemented shout in textutils/shout.py.",
        write_path=str(demo.repo_root / "textutils" / "shout.py"),
        write_content=SHOUT,
    )


@pytest.fixture
def demo(tmp_path: Path) -> DemoSetup:
    return prepare_demo(tmp_path / "project")


def test_a_429_twice_then_an_answer_completes_the_task_at_its_first_attempt(
    agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, demo: DemoSetup
) -> None:
    root = demo.repo_root
    developer = _refusing_developer(demo, "rate_limited", 2)
    model_server.set_scenarios(pipeline_scenarios("claude_code", demo, developer=developer))

    env = _env(agent_clis, model_server, cli_home, root)
    proc = autodev_in(root, env, "run", "--platform", "claude_code", INTENT)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    task = PlanManager.open(root, readonly=True).get_task("1.1")
    assert (task.status, task.retry_count) == ("complete", 0)
    backoffs = _ops(root, "provider_backoff")
    assert [(op["role"], op["kind"], op["retry"]) for op in backoffs] == [
        ("developer", "rate_limited", 1),
        ("developer", "rate_limited", 2),
    ]
    assert "rate limit" in backoffs[0]["message"]
    assert roles_served(model_server).count("developer") >= 3


def test_a_usage_limit_stops_with_exit_3_and_resume_after_recovery_repeats_nothing(
    agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, demo: DemoSetup
) -> None:
    root = demo.repo_root
    env = _env(agent_clis, model_server, cli_home, root)
    developer = _refusing_developer(demo, "usage_limit", None)
    model_server.set_scenarios(pipeline_scenarios("claude_code", demo, developer=developer))

    stopped = autodev_in(root, env, "run", "--platform", "claude_code", INTENT)

    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    assert "Traceback" not in stopped.stderr
    (line,) = stopped.stderr.strip().splitlines()
    assert "usage limit" in line and "balance is too low" in line and "autodev resume" in line
    (paused,) = _ops(root, "provider_paused")
    assert (paused["role"], paused["kind"], paused["circuit_breaker"]) == ("developer", "usage_limit", False)
    task = PlanManager.open(root, readonly=True).get_task("1.1")
    assert task.retry_count == 0 and task.status != "blocked"

    served_before = len(model_server.requests)
    model_server.set_scenarios(pipeline_scenarios("claude_code", demo))
    resumed = autodev_in(root, env, "resume", "--platform", "claude_code")

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = [role for role in roles_served(model_server)[served_before:] if role]
    # The plan phase is not asked again, and the developer is asked once more, at the same attempt.
    assert after[0] == "developer"
    assert not {"explorer", "domain_expert", "architect"} & set(after)
    task = PlanManager.open(root, readonly=True).get_task("1.1")
    assert (task.status, task.retry_count) == ("complete", 0)
    assert git_log(root) == ["autodev: 1.1 Add shout", "textutils: initial version"]


def test_with_wait_a_usage_limit_is_waited_out_with_a_countdown_and_the_run_completes(
    agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, demo: DemoSetup
) -> None:
    root = demo.repo_root
    env = _env(agent_clis, model_server, cli_home, root, provider__wait_without_reset_s="2")
    developer = _refusing_developer(demo, "usage_limit", 1)
    model_server.set_scenarios(pipeline_scenarios("claude_code", demo, developer=developer))

    proc = autodev_in(root, env, "run", "--wait", "--platform", "claude_code", INTENT)

    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "waiting 2s for the provider (usage limit)" in proc.stdout
    assert len(_ops(root, "provider_paused")) == 1
    task = PlanManager.open(root, readonly=True).get_task("1.1")
    assert (task.status, task.retry_count) == ("complete", 0)


def test_a_refused_login_is_not_waited_for(
    agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, demo: DemoSetup, tmp_path: Path
) -> None:
    root = demo.repo_root
    env = _env(agent_clis, model_server, cli_home, root)
    _save_two_tasks(root, env, tmp_path)
    # The health check's probe passes; the developer's own call is refused.
    model_server.set_scenarios([Scenario(marker=marker("developer"), refusal="auth_failed")])

    proc = autodev_in(root, env, "execute", "--wait", "--platform", "claude_code")

    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "waiting" not in proc.stdout
    assert "log the agent CLI in again" in proc.stderr


def test_three_outages_across_two_parallel_tasks_trip_the_breaker_once(
    agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, demo: DemoSetup, tmp_path: Path
) -> None:
    root = demo.repo_root
    env = _env(
        agent_clis,
        model_server,
        cli_home,
        root,
        tournaments__execute_max_parallel_tasks="2",
        policy__max_strong_workers="2",
    )
    _save_two_tasks(root, env, tmp_path)
    model_server.set_scenarios([Scenario(marker=marker("developer"), refusal="unavailable")])

    proc = autodev_in(root, env, "execute", "--platform", "claude_code")

    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "circuit breaker" in proc.stderr
    paused = _ops(root, "provider_paused")
    assert [op["circuit_breaker"] for op in paused] == [True]
    backoffs = _ops(root, "provider_backoff")
    # Two refusals were waited out (one per task, or both in one), the third opened the breaker.
    assert len(backoffs) == 2
    assert {op["task_id"] for op in [*backoffs, *paused]} == {"1.1", "1.2"}
    manager = PlanManager.open(root, readonly=True)
    assert [manager.get_task(task).retry_count for task in ("1.1", "1.2")] == [0, 0]
