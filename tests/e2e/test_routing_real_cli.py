"""Slice jobs and area maps through a real agent CLI and the ``autodev`` executable: the pinned Claude Code,
against the local model server, plays the architect that slices a day-long task and then every role of its
slice; and the explorer and the developer receive the project's area maps."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.model_server import ModelServer, Scenario
from support.orchestration import git_log
from support.pipeline import INTENT, SHOUT, SHOUT_TESTS, autodev_in, cli_env, marker, pipeline_scenarios

from autodev.cli.demo import prepare_demo
from autodev.state.plan_manager import PlanManager

pytestmark = pytest.mark.slow

BIG = """# Plan: Add a shout helper to textutils

## Phase 1: Shout

### Task 1.1: Add shout, done properly
- Description: Add shout(text) to textutils/shout.py with its tests.
- Files: textutils/shout.py, tests/test_shout.py
- Effort: 1d
- Acceptance:
  - [ ] shout("hi") == "HI!"
"""

SLICE = """### Task 1.1.1: Add shout with its tests
- Description: Add shout(text) to textutils/shout.py and tests/test_shout.py.
- Files: textutils/shout.py, tests/test_shout.py
- Model: haiku
- Effort: 1h
- Acceptance:
  - [ ] shout("hi") == "HI!"
"""


def test_a_real_cli_architect_slices_the_task_and_its_slice_lands(
    agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, tmp_path: Path
) -> None:
    demo = prepare_demo(tmp_path / "project")
    root = demo.repo_root
    # The slicing call is the architect's with the SLICE JOB line: answered before the architect's plan.
    model_server.set_scenarios(
        [Scenario(marker="SLICE JOB", text=SLICE), *pipeline_scenarios("claude_code", demo)]
    )
    env = cli_env("claude_code", agent_clis, model_server, cli_home, root)
    env = {key: value for key, value in env.items() if not key.startswith("AUTODEV_")}
    env["AUTODEV_TOURNAMENTS__EXECUTE_MAX_PARALLEL_TASKS"] = "1"
    plan = tmp_path / "plan.md"
    plan.write_text(BIG)
    assert autodev_in(root, env, "plan", "--from-markdown", str(plan)).returncode == 0

    proc = autodev_in(root, env, "execute", "--platform", "claude_code")

    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert "sliced into 1.1.1" in proc.stdout
    manager = PlanManager.open(root, readonly=True)
    assert {task.id: task.status for task in manager.tasks()} == {"1.1.1": "complete", "1.1": "complete"}
    assert manager.get_task("1.1.1").parent == "1.1"
    assert (root / "textutils" / "shout.py").read_text() == SHOUT
    assert (root / "tests" / "test_shout.py").read_text() == SHOUT_TESTS
    assert git_log(root) == ["autodev: 1.1.1 Add shout with its tests", "textutils: initial version"]
    # The slice ran on its own level: haiku, Claude Code's model for it; the architect on the task's, opus.
    slicing = [request for request in model_server.requests if "SLICE JOB" in json.dumps(request.body)]
    developing = [
        request for request in model_server.requests if marker("developer") in json.dumps(request.body)
    ]
    assert slicing and all("opus" in str(request.body.get("model")) for request in slicing)
    assert developing and all("haiku" in str(request.body.get("model")) for request in developing)


def test_a_real_cli_explorer_and_developer_are_given_the_area_maps(
    agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, tmp_path: Path
) -> None:
    demo = prepare_demo(tmp_path / "project")
    root = demo.repo_root
    (root / "AGENTS.md").write_text(
        "# Notes\n\n## Areas\n\n### Text helpers\n- Code map: `textutils`\n- Paths: textutils tests\n"
    )
    subprocess.run(["git", "add", "AGENTS.md"], cwd=root, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@invalid", "commit", "-qm", "notes"],
        cwd=root,
        check=True,
    )
    model_server.set_scenarios(pipeline_scenarios("claude_code", demo))
    env = cli_env("claude_code", agent_clis, model_server, cli_home, root)
    env = {key: value for key, value in env.items() if not key.startswith("AUTODEV_")}
    env["AUTODEV_TOURNAMENTS__EXECUTE_MAX_PARALLEL_TASKS"] = "1"

    proc = autodev_in(root, env, "run", "--platform", "claude_code", INTENT)

    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    for role in ("explorer", "developer"):
        bodies = [json.dumps(r.body) for r in model_server.requests if marker(role) in json.dumps(r.body)]
        assert bodies and all("AREA MAPS (from AGENTS.md)" in body for body in bodies), role
    reviewer = [json.dumps(r.body) for r in model_server.requests if marker("reviewer") in json.dumps(r.body)]
    assert reviewer and not any("AREA MAPS" in body for body in reviewer)


@pytest.mark.parametrize("platform", ["claude_code", "codex"])
def test_a_developers_retry_continues_its_session(
    platform: str, agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, tmp_path: Path
) -> None:
    demo = prepare_demo(tmp_path / "project")
    root = demo.repo_root
    # The first review asks for a change; the second (the reviewer's prompt then recalls its issues) approves.
    model_server.set_scenarios(
        [
            Scenario(marker="The issues you raised then", text="VERDICT: APPROVED\nISSUES:\n- none"),
            Scenario(marker=marker("reviewer"), text="VERDICT: NEEDS_CHANGES\nISSUES:\n- add a docstring"),
            *[s for s in pipeline_scenarios(platform, demo) if s.marker != marker("reviewer")],
        ]
    )
    env = cli_env(platform, agent_clis, model_server, cli_home, root)
    env = {key: value for key, value in env.items() if not key.startswith("AUTODEV_")}
    env["AUTODEV_TOURNAMENTS__EXECUTE_MAX_PARALLEL_TASKS"] = "1"

    proc = autodev_in(root, env, "run", "--platform", platform, INTENT)

    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    decisions = [
        json.loads(line)["payload"]
        for line in (root / ".autodev" / "ledger.jsonl").read_text().splitlines()
        if '"delegation_decided"' in line
    ]
    developer = [d for d in decisions if d["inputs"]["role"] == "developer"]
    assert [d["decision"]["route"] for d in developer] == ["spawn", "resume_worker"]
    first_session = developer[1]["decision"]["resume_session"]
    manager = PlanManager.open(root, readonly=True)
    first_attempt = next(
        ref for ref in manager.evidence_for("1.1") if ref.kind == "developer" and ref.attempt == 1
    )
    recorded = json.loads((root / first_attempt.path).read_text())
    assert first_session == recorded["session_id"]
    # The second attempt's request holds the first attempt's conversation: the session was continued.
    retried = [
        json.dumps(r.body)
        for r in model_server.requests
        if "THE PREVIOUS ATTEMPT FAILED" in json.dumps(r.body)
    ]
    assert retried and all(body.count(marker("developer")) >= 2 for body in retried)
