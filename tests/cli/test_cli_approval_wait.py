"""Approvals pause, they do not fail: a run waiting for an answer (``--wait``) takes it from another terminal
and goes on in the same process; the tasks that depend on a waiting one are held (recorded, with since when)
and released by the answer; an answer that never comes blocks the waiting tasks at the deadline, naming the
request. The installed executable throughout, scripted agents, real git and QA tools."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from support.cli import RunCli, clean_env
from support.orchestration import git_log

from autodev.cli.demo import DemoSetup
from autodev.state.ledger import Ledger
from autodev.state.paths import AutodevPaths

pytestmark = pytest.mark.slow

# 1.2's files, so that only 1.1 (textutils/slug.py, tests/test_slug.py) waits for an approval and 1.2, which
# depends on it, is held.
SCOPE = "textutils/__init__.py, tests/test_exports.py"


def _start_waiting_run(
    autodev_exe: Path, demo: DemoSetup, agents: list[str], **env: str
) -> subprocess.Popen[str]:
    intent = demo.intent.split("\nWrite scope:")[0]
    return subprocess.Popen(
        [
            str(autodev_exe),
            "-C",
            str(demo.repo_root),
            "run",
            "--wait",
            "--write-scope",
            SCOPE,
            *agents,
            intent,
        ],
        env={**clean_env(), **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _policy_once_waiting(run_cli: RunCli, root: str, run: subprocess.Popen[str]) -> dict[str, Any]:
    """The status's policy once the run waits for A1 (its ``waiting_since`` set)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert run.poll() is None, run.communicate()
        shown = run_cli("-C", root, "status", "--json")
        if shown.code == 0:
            policy: dict[str, Any] = json.loads(shown.out)["policy"]
            if any(a["id"] == "A1" and a["waiting_since"] for a in policy["approvals"]):
                return policy
        time.sleep(0.2)
    raise AssertionError("the run never started waiting for A1")


def _ops(root: Path) -> list[tuple[str, dict[str, Any]]]:
    ledger = Ledger(AutodevPaths(root).ledger, readonly=True)
    ledger.open(repair=False)
    try:
        return [(entry.op, entry.payload) for entry in ledger.entries()]
    finally:
        ledger.close()


def test_a_waiting_run_takes_the_answer_from_another_terminal_and_completes(
    run_cli: RunCli, autodev_exe: Path, demo: DemoSetup, agents: list[str]
) -> None:
    root = str(demo.repo_root)
    run = _start_waiting_run(autodev_exe, demo, agents)
    try:
        policy = _policy_once_waiting(run_cli, root, run)
        held = {item["task_id"]: item for item in policy["blocked_on_human"]}
        assert set(held) == {"1.1", "1.2"}
        assert held["1.2"]["since"] is not None  # held by the run, recorded
        assert held["1.1"]["since"] is None  # waiting itself, not held

        answered = run_cli("-C", root, "approve", "--scope", "A1")
        assert answered.code == 0, answered.err
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, out + err
    assert "waiting up to" in out + err
    assert git_log(demo.repo_root)[:2] == [
        "autodev: 1.2 Export slugify from the package",
        "autodev: 1.1 Implement slugify",
    ]
    ops = _ops(demo.repo_root)
    waits = [payload["waiting"] for op, payload in ops if op == "approval_waiting"]
    assert waits == [True, False]
    (blocked,) = [payload for op, payload in ops if op == "tasks_blocked_on_human"]
    assert blocked == {"approval_id": "A1", "tasks": ["1.2"]}
    (released,) = [payload for op, payload in ops if op == "tasks_released_by_human"]
    assert released["resolution"] == "accepted" and released["tasks"][0]["blocked_s"] > 0
    status = json.loads(run_cli("-C", root, "status", "--json").out)["policy"]
    assert status["approvals"][0]["waiting_since"] is None and status["blocked_on_human"] == []


def test_an_unanswered_request_blocks_its_tasks_at_the_deadline_and_a_late_answer_launches_nothing(
    run_cli: RunCli, autodev_exe: Path, demo: DemoSetup, agents: list[str]
) -> None:
    root = str(demo.repo_root)
    run = _start_waiting_run(autodev_exe, demo, agents, AUTODEV_POLICY__WORKER_APPROVAL_TIMEOUT_S="1.5")
    out, err = run.communicate(timeout=120)
    assert run.returncode not in (0, 3), out + err
    status = json.loads(run_cli("-C", root, "status", "--json").out)
    tasks = {task["id"]: task for task in status["tasks"]}
    assert tasks["1.1"]["status"] == tasks["1.2"]["status"] == "blocked"
    reason = tasks["1.1"]["blocked_reason"]
    assert "approval_timeout" in reason and "A1" in reason and "autodev retry 1.1" in reason
    ops = _ops(demo.repo_root)
    (released,) = [payload for op, payload in ops if op == "tasks_released_by_human"]
    assert released["resolution"] == "timed_out"
    assert [payload["waiting"] for op, payload in ops if op == "approval_waiting"] == [True, False]
    assert not any(op == "delegation_decided" and p["inputs"]["task_id"] == "1.1" for op, p in ops)

    # Answered late, the request authorizes its scope but starts nothing by itself...
    assert run_cli("-C", root, "approve", "--scope", "A1").code == 0
    resumed = run_cli("-C", root, "resume", *agents)
    assert resumed.code != 0
    assert json.loads(run_cli("-C", root, "status", "--json").out)["tasks"][0]["status"] == "blocked"
    # ...until the user retries the task: then the scope covers it and the run completes.
    assert run_cli("-C", root, "retry", "1.1").code == 0
    finished = run_cli("-C", root, "resume", *agents)
    assert finished.code == 0, finished.out + finished.err
    assert len(git_log(demo.repo_root)) >= 3


def test_a_declined_answer_blocks_the_waiting_task_and_what_it_held(
    run_cli: RunCli, autodev_exe: Path, demo: DemoSetup, agents: list[str]
) -> None:
    root = str(demo.repo_root)
    run = _start_waiting_run(autodev_exe, demo, agents)
    try:
        _policy_once_waiting(run_cli, root, run)
        assert run_cli("-C", root, "decline", "A1").code == 0
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode not in (0, 3), out + err
    tasks = {t["id"]: t for t in json.loads(run_cli("-C", root, "status", "--json").out)["tasks"]}
    assert "approval_declined" in tasks["1.1"]["blocked_reason"]
    assert tasks["1.2"]["status"] == "blocked"
    (released,) = [payload for op, payload in _ops(demo.repo_root) if op == "tasks_released_by_human"]
    assert released["resolution"] == "declined"


def test_without_wait_the_run_pauses_at_once_and_records_no_wait(
    run_cli: RunCli, demo: DemoSetup, agents: list[str]
) -> None:
    root = str(demo.repo_root)
    intent = demo.intent.split("\nWrite scope:")[0]
    held = run_cli("-C", root, "run", *agents, intent, write_scope=SCOPE)
    assert held.code == 3, held.out + held.err
    assert not any(op == "approval_waiting" for op, _ in _ops(demo.repo_root))
    assert os.path.exists(AutodevPaths(demo.repo_root).ledger)
