"""``autodev run --platform claude_code`` end to end: the real, pinned Claude Code CLI plays every role.

Its model is the local scripted model server. Each role's prompt carries the envelope line ``AGENT: <role>``,
which selects the role's scenario: the planning roles and the reviewer answer with text (the demo's texts,
and a one-task plan), the developer and the test engineer first call Claude Code's Write tool and then
answer. Everything else is real: the ``autodev`` executable, git, the QA gates and the ledger.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.agent_clis import isolated_env
from support.cli_contract import claude_env
from support.model_server import ModelServer, Scenario
from support.orchestration import git_log

from autodev.cli.demo import prepare_demo
from autodev.state.plan_manager import PlanManager

pytestmark = pytest.mark.slow

AUTODEV = Path(sys.executable).with_name("autodev")
INTENT = "Add a shout(text) helper to textutils: the text upper-cased, with an exclamation mark."
PLAN = """# Plan: Add a shout helper to textutils

## Phase 1: Shout
Add the helper with its tests.

### Task 1.1: Add shout
- Description: Add shout(text) to textutils/shout.py, returning the text upper-cased with "!" appended.
- Files: textutils/shout.py, tests/test_shout.py
- Acceptance:
  - [ ] shout("hi") == "HI!"
"""
SHOUT = '''"""Raising one's voice."""


def shout(text: str) -> str:
    """``text`` upper-cased, with an exclamation mark."""
    return text.upper() + "!"
'''
SHOUT_TESTS = """from textutils.shout import shout


def test_shout_upper_cases_and_exclaims() -> None:
    assert shout("hi") == "HI!"
"""
ROLES = ("explorer", "domain_expert", "architect", "developer", "reviewer", "test_engineer")


def marker(role: str) -> str:
    return f"AGENT: {role}"


def test_run_through_claude_code_commits_the_scripted_change_with_every_gate_green(
    agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, tmp_path: Path
) -> None:
    demo = prepare_demo(tmp_path / "project")
    root = demo.repo_root
    demo_texts = {entry.role: entry.text for entry in demo.script.entries if entry.task_id is None}
    # Only a role's own prompt holds its `AGENT:` line; the writing roles come first all the same, so that
    # a prompt quoting another role's envelope could never make a writer answer as someone else.
    model_server.set_scenarios(
        [
            Scenario(
                marker=marker("test_engineer"),
                text="Added tests/test_shout.py.\nRESULTS: passed=2 failed=0 total=2",
                write_path=str(root / "tests" / "test_shout.py"),
                write_content=SHOUT_TESTS,
            ),
            Scenario(
                marker=marker("developer"),
                text="Implemented shout in textutils/shout.py.",
                write_path=str(root / "textutils" / "shout.py"),
                write_content=SHOUT,
            ),
            Scenario(marker=marker("reviewer"), text="VERDICT: APPROVED\nISSUES:\n- none"),
            Scenario(marker=marker("architect"), text=PLAN),
            Scenario(marker=marker("domain_expert"), text=demo_texts["domain_expert"]),
            Scenario(marker=marker("explorer"), text=demo_texts["explorer"]),
        ]
    )
    env = isolated_env(
        cli_home,
        root,
        PATH=f"{agent_clis['claude'].parent}{os.pathsep}{os.environ['PATH']}",
        **claude_env(model_server.url),
    )
    env = {key: value for key, value in env.items() if not key.startswith("AUTODEV_")}
    # The scripted model writes to absolute paths in the main tree, so the task must work there: one task
    # at a time (with more, it would work in a worktree of its own and these writes would miss it).
    env["AUTODEV_TOURNAMENTS__EXECUTE_MAX_PARALLEL_TASKS"] = "1"

    proc = subprocess.run(
        [str(AUTODEV), "-C", str(root), "run", "--platform", "claude_code", INTENT],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
        stdin=subprocess.DEVNULL,
    )

    served = {role for role in ROLES for r in model_server.requests if marker(role) in json.dumps(r.body)}
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\nroles served: {sorted(served)}"
    assert served == set(ROLES)
    assert "platform: claude_code" in proc.stdout
    assert (root / "textutils" / "shout.py").read_text() == SHOUT
    assert (root / "tests" / "test_shout.py").read_text() == SHOUT_TESTS
    assert git_log(root) == ["autodev: 1.1 Add shout", "textutils: initial version"]
    committed = subprocess.run(
        ["git", "show", "--name-only", "--format=", "HEAD"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert sorted(committed) == ["tests/test_shout.py", "textutils/shout.py"]

    evidence = root / ".autodev" / "evidence"
    gates = json.loads((evidence / "1.1-gates-1.json").read_text())
    assert gates["passed"] is True
    assert {check["gate"]: check["status"] for check in gates["checks"]} == {
        "syntax": "pass",
        "lint": "pass",
        "build": "pass",
        "test": "pass",
        "secretscan": "pass",
    }
    tests = json.loads((evidence / "1.1-test-1.json").read_text())
    assert (tests["passed"], tests["run_passed"], tests["agrees"]) == (2, 2, True)
    manager = PlanManager.open(root, readonly=True)
    assert manager.get_task("1.1").status == "complete"
    assert manager.cost_usd_total > 0
