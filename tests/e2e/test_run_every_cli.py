"""``autodev run --platform <cli>`` end to end for every real agent CLI: the pinned Claude Code, Codex and
Gemini CLI each play every role; OpenCode, which cannot start a read-only sandbox, plays the writers while
Claude Code plays the roles that only read (``read_only_platform``), as an OpenCode user sets it up.

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
from pathlib import Path

import pytest
from support.cli_contract import OPENCODE_MODEL
from support.model_server import ModelServer
from support.orchestration import git_log
from support.pipeline import (
    EXECUTABLES,
    INTENT,
    PRICES,
    ROLES,
    SHOUT,
    SHOUT_TESTS,
    autodev_in,
    cli_env,
    pipeline_scenarios,
    roles_served,
)

from autodev.cli.demo import prepare_demo
from autodev.state.plan_manager import PlanManager

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("platform", list(EXECUTABLES))
def test_run_through_each_real_cli_commits_the_scripted_change_with_every_gate_green(
    platform: str, agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, tmp_path: Path
) -> None:
    demo = prepare_demo(tmp_path / "project")
    root = demo.repo_root
    model_server.set_scenarios(pipeline_scenarios(platform, demo))
    env = cli_env(platform, agent_clis, model_server, cli_home, root)
    if platform == "opencode":
        claude = cli_env("claude_code", agent_clis, model_server, cli_home, root)
        env = {**claude, **env, "PATH": f"{env['PATH'].split(os.pathsep)[0]}{os.pathsep}{claude['PATH']}"}
    env = {key: value for key, value in env.items() if not key.startswith("AUTODEV_")}
    if platform == "opencode":
        env["AUTODEV_READ_ONLY_PLATFORM"] = "claude_code"
    # Prices for the models whose CLIs report no cost, as a user sets them (Claude Code prices its own).
    env["AUTODEV_PRICE_TABLE"] = PRICES
    # The scripted model writes to absolute paths in the main tree, so the task must work there: one task
    # at a time (with more, it would work in a worktree of its own and these writes would miss it).
    env["AUTODEV_TOURNAMENTS__EXECUTE_MAX_PARALLEL_TASKS"] = "1"

    proc = autodev_in(root, env, "run", "--platform", platform, INTENT)

    served = set(roles_served(model_server)) - {""}
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\nroles served: {sorted(served)}"
    assert served == set(ROLES)
    assert f"platform: {platform}" in proc.stdout
    if platform == "opencode":
        assert "read-only roles: claude_code (configured)" in proc.stdout
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
    # The contract names who implemented and who verified: OpenCode's change is reviewed by Claude Code, a
    # family of its own; a pinned CLI alone reviews its own change, which the contract shows as waived.
    contract = json.loads((evidence / "1.1-completion-1.json").read_text())
    family = {check["id"]: check for check in contract["checks"]}["verifier:family"]
    assert contract["implemented_on"] == platform
    if platform == "opencode":
        assert (contract["verdict"], family["status"], contract["verified_on"]) == (
            "verified",
            "pass",
            "claude_code",
        )
    else:
        assert (contract["verdict"], family["status"], contract["verified_on"]) == (
            "verified_with_waiver",
            "waived",
            platform,
        )
    manager = PlanManager.open(root, readonly=True)
    assert manager.get_task("1.1").status == "complete"
    # Every call is in the ledger with the model it ran on and its tokens; each CLI's cost is known here:
    # Claude Code's own, Codex's from the price table, OpenCode's and Gemini CLI's the same.
    calls = [entry.payload for entry in manager.usage_entries()]
    assert {call["role"] for call in calls} >= set(ROLES)
    assert all(call.get("model") and call.get("tokens_in") for call in calls), calls
    assert manager.unknown_cost_calls == 0 and manager.cost_usd_total > 0
    if platform == "opencode":
        models = {call["role"]: call["model"] for call in calls}
        assert models["developer"] == models["test_engineer"] == OPENCODE_MODEL
        assert not {models[role] for role in ("explorer", "architect", "reviewer")} & {OPENCODE_MODEL}
