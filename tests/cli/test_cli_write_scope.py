"""Write scopes end to end through the installed executable: a cold-start intent asks for approval (exit 3),
`autodev approvals` lists the request, `autodev approve --scope` and `autodev resume` finish the run, and the
decision log replays exactly; a bad scope is a one-line error with the ledger untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import RunCli
from support.orchestration import git_log

from autodev.cli.demo import DemoSetup

pytestmark = pytest.mark.slow

TASK_COMMITS = ["autodev: 1.2 Export slugify from the package", "autodev: 1.1 Implement slugify"]


def _unscoped(demo: DemoSetup) -> str:
    return demo.intent.split("\nWrite scope:")[0]


def test_a_cold_start_intent_waits_for_one_approval_then_resume_completes(
    run_cli: RunCli, demo: DemoSetup, agents: list[str]
) -> None:
    root = str(demo.repo_root)
    held = run_cli("-C", root, "run", *agents, _unscoped(demo), write_scope=None)
    assert held.code == 3, held.out + held.err
    assert "Traceback" not in held.err
    assert held.err.count("\n") == 1 and "autodev approve --scope A1" in held.err

    listed = run_cli("-C", root, "approvals", "--json")
    assert listed.code == 0, listed.err
    (request,) = json.loads(listed.out)
    assert (request["id"], request["status"], request["task_ids"]) == ("A1", "pending", ["1.1", "1.2"])
    assert "A1\tpending" in run_cli("-C", root, "approvals").out
    policy = json.loads(run_cli("-C", root, "status", "--json").out)["policy"]
    assert [(a["id"], a["status"]) for a in policy["approvals"]] == [("A1", "pending")]
    assert policy["write_scope"] == [] and policy["workers"] == []
    assert policy["blocked_on_human"] == [
        {"task_id": "1.1", "approval": "A1", "since": None},
        {"task_id": "1.2", "approval": "A1", "since": None},
    ]
    shown = run_cli("-C", root, "status").out
    assert "Waiting for approval A1" in shown and "autodev approve --scope A1" in shown

    accepted = run_cli("-C", root, "approve", "--scope", "A1")
    assert accepted.code == 0, accepted.err
    assert "Accepted A1" in accepted.out

    resumed = run_cli("-C", root, "resume", *agents)
    assert resumed.code == 0, resumed.out + resumed.err
    assert git_log(demo.repo_root)[:2] == TASK_COMMITS

    replay = run_cli("-C", root, "policy", "replay", "--json")
    assert replay.code == 0, replay.err
    report = json.loads(replay.out)
    assert report["decisions"] > 0 and report["exact_matches"] == report["decisions"]
    assert report["invalid"] == []


def test_a_declined_request_blocks_its_tasks_without_starting_them(
    run_cli: RunCli, demo: DemoSetup, agents: list[str]
) -> None:
    root = str(demo.repo_root)
    assert run_cli("-C", root, "run", *agents, _unscoped(demo), write_scope=None).code == 3
    declined = run_cli("-C", root, "decline", "A1")
    assert declined.code == 0, declined.err
    resumed = run_cli("-C", root, "resume", *agents)
    assert resumed.code != 0
    status = json.loads(run_cli("-C", root, "status", "--json").out)
    assert {task["id"]: task["status"] for task in status["tasks"]} == {"1.1": "blocked", "1.2": "blocked"}
    evidence = demo.repo_root / ".autodev" / "evidence"
    assert (
        not any(path.name.startswith("1.1.developer") for path in evidence.glob("*"))
        if evidence.exists()
        else True
    )


def test_execute_write_scope_declares_the_scope_for_a_plan_file_without_one(
    run_cli: RunCli, demo: DemoSetup, agents: list[str], tmp_path: Path
) -> None:
    root = str(demo.repo_root)
    # The plan the demo's architect writes, saved by hand: no `Write scope:` line in it.
    plan = next(e for e in demo.script.entries if e.role == "architect")
    plan_file = tmp_path / "plan.md"
    plan_file.write_text(plan.text, encoding="utf-8")
    assert run_cli("-C", root, "plan", "--from-markdown", str(plan_file)).code == 0
    ran = run_cli("-C", root, "execute", "--write-scope", "textutils/**, tests/**", *agents)
    assert ran.code == 0, ran.out + ran.err
    assert git_log(demo.repo_root)[:2] == TASK_COMMITS


def test_a_plan_file_declares_its_own_scope(
    run_cli: RunCli, demo: DemoSetup, agents: list[str], tmp_path: Path
) -> None:
    root = str(demo.repo_root)
    plan = next(e for e in demo.script.entries if e.role == "architect")
    plan_file = tmp_path / "plan.md"
    plan_file.write_text(f"Write scope: textutils/**; tests/**\n\n{plan.text}", encoding="utf-8")
    assert run_cli("-C", root, "plan", "--from-markdown", str(plan_file)).code == 0
    ran = run_cli("-C", root, "execute", *agents, write_scope=None)
    assert ran.code == 0, ran.out + ran.err


@pytest.mark.parametrize(
    ("scope", "problem"),
    [
        ("/etc/**", "repository-relative"),
        ("nowhere/**", "does not exist"),
        ("src/../..", "leaves its directory"),
    ],
)
def test_a_bad_scope_is_one_line_exit_2_and_the_ledger_untouched(
    run_cli: RunCli, demo: DemoSetup, agents: list[str], scope: str, problem: str
) -> None:
    root = str(demo.repo_root)
    result = run_cli("-C", root, "run", *agents, f"{_unscoped(demo)}\nWrite scope: {scope}", write_scope=None)
    assert result.code == 2, result.out + result.err
    assert result.err.startswith("error: ") and result.err.count("\n") == 1 and problem in result.err
    assert not (demo.repo_root / ".autodev" / "ledger.jsonl").exists()
    unknown = run_cli("-C", root, "approve", "--scope", "A9")
    assert unknown.code == 2 and unknown.err.startswith("error: ")
