"""Ways out of ``blocked`` and around a task, and faults no developer can fix: through the ledger, on real
git repositories with scripted agents and the real gates."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from support.orchestration import demo_project, git_log, orchestrator, run
from support.projects import TRIPLE, git, mini_project, one_task_script

from autodev.adapters.scripted import Script
from autodev.errors import AutodevError, EnvironmentFaultError, InvalidTransitionError
from autodev.orchestrator import ProgressEvent
from autodev.state.plan_manager import PlanManager
from autodev.state.status_reader import read_status

FAST = {"qa_gates.build.enabled": False, "qa_gates.secretscan.enabled": False}
REJECT = "VERDICT: NEEDS_CHANGES\nISSUES:\n- not yet (attempt {attempt})\n"


def _task(root: Path, task_id: str) -> Any:
    return PlanManager.open(root, readonly=True).get_task(task_id)


def test_a_blocked_task_is_retried_continues_from_its_last_change_and_brings_its_dependents_back(
    tmp_path: Path,
) -> None:
    setup = demo_project(tmp_path)
    root = setup.repo_root
    rejecting = [entry.model_dump(exclude_defaults=True) for entry in setup.script.entries]
    for entry in rejecting:
        if entry["role"] == "reviewer" and entry.get("task_id") == "1.1":
            entry.pop("responses", None)
            entry["text"] = REJECT
    orch, _ = orchestrator(root, Script.model_validate({"entries": rejecting}), qa_retry_limit=2, **FAST)
    run(orch, setup.intent)
    blocked = _task(root, "1.1")
    assert blocked.status == "blocked" and _task(root, "1.2").blocked_by == "1.1"
    # Its last change left the main tree (the next task must not start on it) but is kept in a ref.
    assert git(root, "status", "--porcelain") == ""
    assert "textutils/slug.py" in git(root, "show", "--stat", "refs/autodev/blocked/1.1")

    approving = [
        {**entry, "text": "VERDICT: APPROVED\nISSUES:\n"} if entry["role"] == "reviewer" else entry
        for entry in rejecting
    ]
    again, adapter = orchestrator(
        root, Script.model_validate({"entries": approving}), qa_retry_limit=2, **FAST
    )
    retried = again.retry("1.1")
    assert (retried.status, retried.retry_count, retried.escalated) == ("in_progress", 1, False)
    assert _task(root, "1.2").status == "pending"
    tasks = anyio.run(again.resume)

    assert [task.status for task in tasks] == ["complete", "complete"]
    # The developer continued from the kept change, with the reviewer's last issue in front of it.
    developer = next(call for call in adapter.calls if call.role == "developer" and call.task_id == "1.1")
    assert "not yet (attempt 2)" in developer.prompt
    assert git_log(root)[:2] == [
        "autodev: 1.2 Export slugify from the package",
        "autodev: 1.1 Implement slugify",
    ]
    assert git(root, "for-each-ref", "refs/autodev/blocked/") == ""


def test_retry_refuses_what_the_state_machine_forbids_with_one_line(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    orch, _ = orchestrator(setup.repo_root, setup.script, qa_retry_limit=1, **FAST)
    run(orch, setup.intent)  # the demo reviewer rejects 1.1 once: with one attempt, 1.1 is blocked

    with pytest.raises(AutodevError) as dependent:
        orch.retry("1.2")
    assert dependent.value.message == (
        "task 1.2 is blocked because task 1.1 is; retry 1.1 "
        "(the tasks blocked because of it come back with it)"
    )
    orch.retry("1.1", reset_attempts=True)
    with pytest.raises(InvalidTransitionError) as not_blocked:
        orch.retry("1.1")
    assert "only a blocked task can be retried" in not_blocked.value.message
    assert not_blocked.value.exit_code == 2
    assert _task(setup.repo_root, "1.1").retry_count == 0


def test_skip_lets_dependents_run_unless_configured_otherwise(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    plan_only = demo_project(tmp_path / "second")
    for root, satisfies in ((setup.repo_root, True), (plan_only.repo_root, False)):
        orch, _ = orchestrator(root, setup.script, skipped_dependency_satisfies=satisfies, **FAST)
        anyio.run(orch.plan, setup.intent)
        blocked = orch.skip("1.1")
        assert _task(root, "1.1").status == "skipped"
        assert blocked == ([] if satisfies else ["1.2"])

    with pytest.raises(InvalidTransitionError) as twice:
        orch.skip("1.1")
    assert "only a pending task can be skipped" in twice.value.message
    # With the default, 1.2 may start at once; it runs (here without 1.1's module, so it fails its gates).
    waiting = {task["id"]: task.get("waiting_on") for task in read_status(setup.repo_root)["tasks"]}
    assert waiting == {"1.1": None, "1.2": []}
    orch_ok, _ = orchestrator(setup.repo_root, setup.script, qa_retry_limit=1, **FAST)
    tasks = anyio.run(orch_ok.execute)
    assert [task.id for task in tasks] == ["1.2"]


def test_a_gate_tool_that_disappears_mid_run_stops_it_resumably_at_no_attempt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = mini_project(tmp_path / "mini")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    linter = bin_dir / "house-lint"
    linter.write_text("#!/bin/sh\nexit 0\n")
    linter.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    settings = {"qa_gates.lint.command": ["house-lint", "{files}"], **FAST}
    orch, _ = orchestrator(root, one_task_script(), **settings)
    original = orch.listener

    def uninstall_when_the_developer_starts(event: ProgressEvent) -> None:
        if event.kind == "step_started" and event.step == "develop" and linter.exists():
            shutil.move(linter, tmp_path / "house-lint.saved")  # the tool is gone after the preflight
        if original is not None:
            original(event)

    orch.listener = uninstall_when_the_developer_starts
    with pytest.raises(EnvironmentFaultError) as stopped:
        run(orch, "add triple")

    assert "the QA gates cannot run here (lint gate: house-lint: not found" in stopped.value.message
    assert "no attempt was counted" in stopped.value.message
    task = _task(root, "1.1")
    assert (task.status, task.retry_count) == ("coded", 0)

    shutil.move(tmp_path / "house-lint.saved", linter)
    resumed, _ = orchestrator(root, one_task_script(), **settings)
    tasks = anyio.run(resumed.resume)
    assert [(t.status, t.retry_count) for t in tasks] == [("complete", 0)]
    assert (root / "mini" / "core.py").read_text() == TRIPLE


def test_resume_runs_the_preflight_again_before_any_agent_call(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini")
    orch, _ = orchestrator(root, one_task_script(), **FAST)
    anyio.run(lambda: orch.plan("add triple"))
    ledger = (root / ".autodev" / "ledger.jsonl").read_bytes()

    broken, adapter = orchestrator(
        root, one_task_script(), **{**FAST, "qa_gates.lint.command": ["gone-lint-xyz"]}
    )
    with pytest.raises(AutodevError, match="lint gate: gone-lint-xyz not found"):
        anyio.run(broken.resume)

    assert adapter.calls == []
    assert (root / ".autodev" / "ledger.jsonl").read_bytes() == ledger


def test_the_python_api_writes_the_clis_structured_log(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini")
    structlog.reset_defaults()  # as in a script that never configured logging
    try:
        orch, _ = orchestrator(root, one_task_script(), **FAST)
        run(orch, "add triple")
    finally:
        from autodev.logging import configure_quiet_logging

        configure_quiet_logging()
    lines = (root / ".autodev" / "logs" / "autodev.jsonl").read_text().splitlines()
    events = [json.loads(line)["event"] for line in lines]
    assert "preflight.ok" in events and "execute_phase.task_complete" in events


def test_a_resume_with_a_tasks_change_in_the_main_tree_takes_the_baseline_of_the_clean_base(
    tmp_path: Path,
) -> None:
    # One task at a time works in the main tree. A budget stop right after the developer's call leaves its
    # half-finished change there (here: code that does not even import), and the baseline cache is gone.
    root = mini_project(tmp_path / "mini")
    broken = {
        "role": "developer",
        "attempt": 1,
        "cost_usd": 1.0,
        "edits": [{"path": "mini/core.py", "content": "def (\n"}],
    }
    one_at_a_time = {"tournaments.execute_max_parallel_tasks": 1, **FAST}
    orch, _ = orchestrator(
        root,
        one_task_script(extra_entries=(broken,)),
        **one_at_a_time,
        **{"guardrails.cost_budget_usd_per_plan": 0.5},
    )
    with pytest.raises(AutodevError, match="budget"):
        run(orch, "add triple")
    assert git(root, "status", "--porcelain").strip() == "M mini/core.py"
    shutil.rmtree(root / ".autodev" / "baseline")

    resumed, _ = orchestrator(root, one_task_script(), **one_at_a_time)
    tasks = anyio.run(resumed.resume)

    # The base commit's tests were taken on the base, not on the task's broken change: nothing stopped the
    # resume, and nothing of the task's change became a "pre-existing" failure.
    assert [task.status for task in tasks] == ["complete"]
    base_tree = git(root, "rev-parse", "HEAD~1^{tree}").strip()
    (cached,) = (root / ".autodev" / "baseline").glob(f"{base_tree}-*.json")
    baseline = json.loads(cached.read_text())
    assert baseline["taken_in"] == "a fresh worktree (the main checkout holds a task's change)"
    assert [(gate["gate"], gate["status"], gate["findings"]) for gate in baseline["gates"]] == [
        ("test", "pass", [])
    ]
