"""``autodev run --platform <cli>`` end to end for every real agent CLI: the pinned Claude Code, Codex,
OpenCode and Gemini CLI each play every role.

Their model is the local scripted model server, set up the way a user sets up each CLI (an API key and base
URL in the environment, Codex's provider in its ``config.toml``, OpenCode's in its user config with its
default model there, so that AutoDev passes none). Each role's prompt carries the envelope line
``AGENT: <role>``, which selects the role's scenario: the planning roles and the reviewer answer with text
(the demo's texts, and a one-task plan), the developer and the test engineer first call the CLI's own write
tool and then answer. Everything else is real: the ``autodev`` executable, git, the QA gates and the ledger.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.agent_clis import isolated_env
from support.cli_contract import (
    CODEX_MODEL,
    GEMINI_MODEL,
    OPENCODE_MODEL,
    claude_env,
    opencode_env,
    opencode_user_config,
)
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


def _cli_env(
    platform: str, clis: dict[str, Path], server: ModelServer, home: Path, root: Path
) -> dict[str, str]:
    """The environment (and the config files in ``home``) a user of ``platform`` would have, pointed at
    ``server``, with the CLI's own executable first on PATH."""
    path = {"PATH": f"{clis[EXECUTABLES[platform]].parent}{os.pathsep}{os.environ['PATH']}"}
    if platform == "claude_code":
        return isolated_env(home, root, **path, **claude_env(server.url))
    if platform == "codex":
        codex_home = home / ".codex"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(
            'model_provider = "mock"\n\n[model_providers.mock]\nname = "mock"\n'
            f'base_url = "{server.url}/v1"\nwire_api = "responses"\nenv_key = "MOCK_API_KEY"\n'
        )
        return isolated_env(home, root, **path, CODEX_HOME=str(codex_home), MOCK_API_KEY="test-key")
    if platform == "opencode":
        config_file = home / "opencode.json"
        user_config = {**opencode_user_config(server, permissive=False), "model": OPENCODE_MODEL}
        config_file.write_text(json.dumps(user_config))
        return {**opencode_env(home, root, config_file), **path}
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    trust = {"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}}}
    settings.write_text(json.dumps(trust))
    return isolated_env(home, root, **path, GEMINI_API_KEY="test-key", GOOGLE_GEMINI_BASE_URL=server.url)


PRICES = (
    f'{{"{CODEX_MODEL}" = {{input_per_mtok = 2.0, output_per_mtok = 8.0}}, '
    f'"{OPENCODE_MODEL}" = {{input_per_mtok = 1.0, output_per_mtok = 2.0}}, '
    f'"{GEMINI_MODEL}" = {{input_per_mtok = 1.0, output_per_mtok = 2.0}}}}'
)
EXECUTABLES = {"claude_code": "claude", "codex": "codex", "opencode": "opencode", "gemini": "gemini"}
# OpenCode's write tool takes a path relative to its directory; the others are given absolute ones.
ABSOLUTE_PATHS = {"claude_code": True, "codex": True, "opencode": False, "gemini": True}


@pytest.mark.parametrize("platform", list(EXECUTABLES))
def test_run_through_each_real_cli_commits_the_scripted_change_with_every_gate_green(
    platform: str, agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, tmp_path: Path
) -> None:
    demo = prepare_demo(tmp_path / "project")
    root = demo.repo_root
    demo_texts = {entry.role: entry.text for entry in demo.script.entries if entry.task_id is None}

    def where(relative: str) -> str:
        return str(root / relative) if ABSOLUTE_PATHS[platform] else relative

    # Only a role's own prompt holds its `AGENT:` line; the writing roles come first all the same, so that
    # a prompt quoting another role's envelope could never make a writer answer as someone else.
    model_server.set_scenarios(
        [
            Scenario(
                marker=marker("test_engineer"),
                text="Added tests/test_shout.py.\nRESULTS: passed=2 failed=0 total=2",
                write_path=where("tests/test_shout.py"),
                write_content=SHOUT_TESTS,
            ),
            Scenario(
                marker=marker("developer"),
                text="Implemented shout in textutils/shout.py.",
                write_path=where("textutils/shout.py"),
                write_content=SHOUT,
            ),
            Scenario(marker=marker("reviewer"), text="VERDICT: APPROVED\nISSUES:\n- none"),
            Scenario(marker=marker("architect"), text=PLAN),
            Scenario(marker=marker("domain_expert"), text=demo_texts["domain_expert"]),
            Scenario(marker=marker("explorer"), text=demo_texts["explorer"]),
        ]
    )
    env = _cli_env(platform, agent_clis, model_server, cli_home, root)
    env = {key: value for key, value in env.items() if not key.startswith("AUTODEV_")}
    # Prices for the models whose CLIs report no cost, as a user sets them (Claude Code prices its own).
    env["AUTODEV_PRICE_TABLE"] = PRICES
    # The scripted model writes to absolute paths in the main tree, so the task must work there: one task
    # at a time (with more, it would work in a worktree of its own and these writes would miss it).
    env["AUTODEV_TOURNAMENTS__EXECUTE_MAX_PARALLEL_TASKS"] = "1"

    proc = subprocess.run(
        [str(AUTODEV), "-C", str(root), "run", "--platform", platform, INTENT],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )

    served = {role for role in ROLES for r in model_server.requests if marker(role) in json.dumps(r.body)}
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\nroles served: {sorted(served)}"
    assert served == set(ROLES)
    assert f"platform: {platform}" in proc.stdout
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
    # Every call is in the ledger with the model it ran on and its tokens; each CLI's cost is known here:
    # Claude Code's own, Codex's from the price table, OpenCode's and Gemini CLI's the same.
    calls = [entry.payload for entry in manager.usage_entries()]
    assert {call["role"] for call in calls} >= set(ROLES)
    assert all(call.get("model") and call.get("tokens_in") for call in calls), calls
    assert manager.unknown_cost_calls == 0 and manager.cost_usd_total > 0
