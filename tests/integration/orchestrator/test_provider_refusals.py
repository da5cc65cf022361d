"""Refusals by the agent's provider cost no task attempt: rate limits and outages are asked again in place
after a back-off, a usage limit or a refused login pauses the run resumably, and refusals piling up across
tasks open the circuit breaker once for the whole run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from support.parallel import (
    Spec,
    WatchedAdapter,
    entries_for,
    git_repo,
    ledger_ops,
    orchestrator,
    plan_of,
    save_plan,
    script_of,
)

from autodev.errors import EnvironmentFaultError
from autodev.orchestrator.provider_guard import ProviderRefusedError
from autodev.state.plan_manager import PlanManager

FAST_BACKOFF = {"provider.retry_base_delay_s": 0.01, "provider.retry_max_delay_s": 0.05}


def _refused(kind: str, message: str, resets_at: str | None = None) -> dict[str, Any]:
    return {"fail": {"kind": kind, "message": message, "resets_at": resets_at}}


def _developer(task_id: str, *responses: dict[str, Any]) -> dict[str, Any]:
    done = {"text": "done", "edits": [{"path": "src/t_{task_id}.py", "content": "VALUE = '{task_id}'\n"}]}
    return {"role": "developer", "task_id": task_id, "responses": [*responses, done]}


def _ops(root: Path, name: str) -> list[dict[str, Any]]:
    return [op["payload"] for op in ledger_ops(root) if op["op"] == name]


def test_a_call_rate_limited_twice_is_asked_again_and_the_task_completes_at_its_first_attempt(
    tmp_path: Path,
) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1")]))
    limited = _refused(
        "rate_limited", "429 rate_limit_error: Number of requests has exceeded your rate limit"
    )
    entries = [*entries_for(), _developer("1.1", limited, limited)]
    adapter = WatchedAdapter(script=script_of(entries))

    anyio.run(orchestrator(root, adapter, 1, **FAST_BACKOFF).execute)

    task = PlanManager.open(root, readonly=True).get_task("1.1")
    assert (task.status, task.retry_count) == ("complete", 0)
    assert [(op["task_id"], op["kind"], op["retry"]) for op in _ops(root, "provider_backoff")] == [
        ("1.1", "rate_limited", 1),
        ("1.1", "rate_limited", 2),
    ]
    assert [role for task_id, role in adapter.started if task_id == "1.1"].count("developer") == 3
    # Every call made is counted, the refused ones too.
    assert PlanManager.open(root, readonly=True).usage_for("1.1").calls == 5


def test_a_usage_limit_pauses_the_run_and_resume_finishes_the_plan_with_nothing_repeated(
    tmp_path: Path,
) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2")]))
    used_up = _refused("usage_limit", "Claude AI usage limit reached|1893456000", "2030-01-01T00:00:00Z")
    entries = [*entries_for(), _developer("1.2", used_up)]

    with pytest.raises(ProviderRefusedError) as stopped:
        anyio.run(orchestrator(root, WatchedAdapter(script=script_of(entries)), 1, **FAST_BACKOFF).execute)

    assert stopped.value.exit_code == 3
    assert "usage limit" in stopped.value.message and "2030-01-01 00:00 UTC" in stopped.value.message
    assert "autodev resume" in stopped.value.message and "no attempt was counted" in stopped.value.message
    manager = PlanManager.open(root, readonly=True)
    assert manager.get_task("1.1").status == "complete"
    assert (manager.get_task("1.2").status, manager.get_task("1.2").retry_count) == ("in_progress", 0)
    assert [op["kind"] for op in _ops(root, "provider_paused")] == ["usage_limit"]

    adapter = WatchedAdapter(script=script_of(entries_for()))
    anyio.run(orchestrator(root, adapter, 1, **FAST_BACKOFF).execute)

    manager = PlanManager.open(root, readonly=True)
    assert {task.id: (task.status, task.retry_count) for task in manager.tasks()} == {
        "1.1": ("complete", 0),
        "1.2": ("complete", 0),
    }
    assert {task_id for task_id, _ in adapter.started} == {"1.2"}


def test_three_outages_across_two_parallel_tasks_open_the_breaker_once(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2")]))
    outage = _refused("provider_unavailable", "529 overloaded_error: Overloaded")
    entries = [*entries_for(), _developer("1.1", outage, outage), _developer("1.2", outage, outage)]
    slow = {**FAST_BACKOFF, "provider.retry_base_delay_s": 0.2, "provider.retry_max_delay_s": 0.4}

    with pytest.raises(ProviderRefusedError, match="circuit breaker"):
        anyio.run(orchestrator(root, WatchedAdapter(script=script_of(entries, 0.02)), 2, **slow).execute)

    assert len(_ops(root, "provider_paused")) == 1
    assert len(_ops(root, "provider_backoff")) == 2
    manager = PlanManager.open(root, readonly=True)
    assert {task.id: task.retry_count for task in manager.tasks()} == {"1.1": 0, "1.2": 0}
    assert all(task.status != "blocked" for task in manager.tasks())


def test_a_cli_that_never_comes_up_pauses_the_run_without_costing_an_attempt(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1")]))
    silent = _refused("cli_start_failed", "cursor-agent printed nothing for 600s after it started")
    entries = [*entries_for(), _developer("1.1", silent)]

    with pytest.raises(EnvironmentFaultError, match="printed nothing for 600s") as stopped:
        anyio.run(orchestrator(root, WatchedAdapter(script=script_of(entries)), 1).execute)

    assert stopped.value.exit_code == 3
    task = PlanManager.open(root, readonly=True).get_task("1.1")
    assert (task.status, task.retry_count) == ("in_progress", 0)


LONG_ISSUES = "VERDICT: NEEDS_CHANGES\nISSUES:\n" + "".join(
    f"- issue {n}: {'the helper must keep every character of its input ' * 20}\n" for n in range(12)
)


def _developer_prompts(adapter: WatchedAdapter, task_id: str) -> list[tuple[int, str]]:
    calls = [call for call in adapter.calls if call.role == "developer" and call.task_id == task_id]
    return [(call.attempt, call.prompt) for call in calls]


def test_a_prompt_too_long_for_the_model_is_asked_once_more_with_its_excerpts_cut(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1")]))
    overflow = _refused("context_overflow", "prompt is too long: 215000 tokens > 200000 maximum")
    rejected = {"role": "reviewer", "task_id": "1.1", "attempt": 1, "text": LONG_ISSUES}
    done = {"text": "done", "edits": [{"path": "src/t_1.1.py", "content": "VALUE = 1\n"}]}
    entries = [*entries_for(), rejected, _developer("1.1", done, overflow)]
    adapter = WatchedAdapter(script=script_of(entries))

    anyio.run(orchestrator(root, adapter, 1, **FAST_BACKOFF).execute)

    task = PlanManager.open(root, readonly=True).get_task("1.1")
    # Attempt 2 came from the review; the overflow cost no attempt.
    assert (task.status, task.retry_count) == ("complete", 1)
    prompts = _developer_prompts(adapter, "1.1")
    assert [attempt for attempt, _ in prompts] == [1, 2, 2]
    overflowed, cut = prompts[1][1], prompts[2][1]
    assert len(cut) < len(overflowed) - 4_000
    assert "TASK: 1.1" in cut and "characters cut" in cut
    (op,) = _ops(root, "prompt_cut")
    assert (op["task_id"], op["role"]) == ("1.1", "developer")
    assert op["chars_after"] < op["chars_before"]


def test_a_prompt_still_too_long_once_cut_is_the_steps_failure_with_the_reason(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1")]))
    overflow = _refused("context_overflow", "prompt is too long: 215000 tokens > 200000 maximum")
    adapter = WatchedAdapter(script=script_of([*entries_for(), _developer("1.1", overflow, overflow)]))

    anyio.run(orchestrator(root, adapter, 1, **FAST_BACKOFF).execute)

    task = PlanManager.open(root, readonly=True).get_task("1.1")
    assert (task.status, task.retry_count) == ("complete", 1)
    assert len(_ops(root, "prompt_cut")) == 1
    (retry,) = _ops(root, "task_retry")
    assert "prompt is too long" in str(retry)
