"""The inline platform through the installed ``autodev`` executable: suspend, answer the file, resume, repeat.

A small "agent" in this module plays whoever reads the delegation files: it takes the task, role, attempt
and working directory from the front matter, makes the demo script's edits for that call and writes the
response JSON with the script's text. Everything else is the real product in subprocesses: the plan and
execute phases, git, the QA gates and the ledger.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.cli import WHOLE_REPOSITORY_SCOPE, Run, with_write_scope
from support.orchestration import git_log

from autodev.adapters.scripted import Script, ScriptResponse
from autodev.cli.demo import DemoSetup, prepare_demo
from autodev.state.plan_manager import PlanManager

pytestmark = pytest.mark.slow

AUTODEV = Path(sys.executable).with_name("autodev")
MAX_ROUNDS = 40
COST_PER_ANSWER = 0.25  # exact in binary, so the ledger's total can be compared exactly
# Every agent call of the demo, in order: the reviewer rejects 1.1 once, so its developer works twice.
DEMO_CALLS = [
    ("plan", "explorer", 1),
    ("plan", "domain_expert", 1),
    ("plan", "architect", 1),
    ("1.1", "developer", 1),
    ("1.1", "reviewer", 1),
    ("1.1", "developer", 2),
    ("1.1", "reviewer", 2),
    ("1.1", "test_engineer", 2),
    ("1.2", "developer", 1),
    ("1.2", "reviewer", 1),
    ("1.2", "test_engineer", 1),
]


@dataclass(frozen=True, slots=True)
class Delegation:
    """A pending delegation as its front matter describes it."""

    path: Path
    task_id: str
    role: str
    attempt: int
    cwd: Path
    response_path: Path


def autodev(root: Path, *args: str, env: dict[str, str] | None = None) -> Run:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("AUTODEV_")}
    proc = subprocess.run(
        [str(AUTODEV), "-C", str(root), *with_write_scope(args, WHOLE_REPOSITORY_SCOPE)],
        cwd=root.parent,
        env={**clean, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def pending_delegation(result: Run, root: Path) -> Delegation:
    """The delegation a suspended command printed: it must be the newest one and name the printed answer."""
    assert result.code == 3, result.out + result.err
    instructions = re.search(r"^\s*instructions:\s*(\S+)$", result.out, re.MULTILINE)
    answer_to = re.search(r"^\s*answer to:\s*(\S+)$", result.out, re.MULTILINE)
    assert instructions and answer_to, result.out
    assert "autodev resume" in result.out
    path = Path(instructions.group(1))
    newest = max((root / ".autodev" / "delegations").glob("*.md"), key=lambda p: p.stat().st_mtime_ns)
    assert path == newest
    front = front_matter(path.read_text(encoding="utf-8"))
    delegation = Delegation(
        path=path,
        task_id=front["task_id"],
        role=front["role"],
        attempt=front["attempt"],
        cwd=Path(front["cwd"]),
        response_path=Path(front["response_path"]),
    )
    assert delegation.response_path == Path(answer_to.group(1))
    return delegation


def front_matter(text: str) -> dict[str, Any]:
    """The ``key: <JSON value>`` lines between the two ``---`` lines that open a delegation file."""
    lines = text.splitlines()
    assert lines[0] == "---", text[:200]
    end = lines.index("---", 1)
    return {key: json.loads(value) for key, _, value in (line.partition(": ") for line in lines[1:end])}


def scripted_response(script: Script, delegation: Delegation) -> ScriptResponse:
    """The script's answer for this call: the most specific entry; a sequence is read by attempt."""
    matching = [
        entry
        for entry in script.entries
        if entry.role == delegation.role
        and entry.task_id in (None, delegation.task_id)
        and entry.attempt in (None, delegation.attempt)
    ]
    assert matching, f"the demo script does not answer {delegation}"
    sequence = max(matching, key=lambda entry: entry.specificity).sequence()
    return sequence[min(delegation.attempt, len(sequence)) - 1]


def answer(script: Script, delegation: Delegation) -> None:
    """Do the delegated work as the demo script says, in the delegation's cwd, and write the response."""
    response = scripted_response(script, delegation)
    for edit in response.edits:
        assert edit.content is not None, "the demo script only writes files"
        target = delegation.cwd / edit.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(edit.content, encoding="utf-8")
    body = {
        "text": response.text,
        "success": True,
        "tool_calls": len(response.edits),
        "cost_usd": COST_PER_ANSWER,
    }
    delegation.response_path.write_text(json.dumps(body), encoding="utf-8")


def assert_one_line_error(result: Run, code: int) -> None:
    assert result.code == code, result
    assert result.err.startswith("error: "), result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert "Traceback" not in result.err


@pytest.fixture
def demo(tmp_path: Path) -> DemoSetup:
    return prepare_demo(tmp_path / "project")


def test_inline_run_answered_file_by_file_completes_every_task(demo: DemoSetup) -> None:
    root = demo.repo_root
    result = autodev(root, "run", "--platform", "inline", demo.intent)
    assert "platform: inline" in result.out
    answered: list[tuple[str, str, int]] = []
    for _ in range(MAX_ROUNDS):
        if result.code == 0:
            break
        delegation = pending_delegation(result, root)
        assert delegation.cwd == root
        answer(demo.script, delegation)
        answered.append((delegation.task_id, delegation.role, delegation.attempt))
        result = autodev(root, "resume")
    else:
        pytest.fail(f"still suspended after {MAX_ROUNDS} answers: {answered}")

    assert answered == DEMO_CALLS
    assert "2 complete, 0 blocked, 1 retries" in result.out
    status = json.loads(autodev(root, "status", "--json").out)
    assert {task["id"]: task["status"] for task in status["tasks"]} == {"1.1": "complete", "1.2": "complete"}
    assert status["totals"]["complete"] == status["totals"]["total"] == 2
    assert git_log(root) == [
        "autodev: 1.2 Export slugify from the package",
        "autodev: 1.1 Implement slugify",
        "textutils: initial version",
    ]
    verify = autodev(root, "ledger", "verify")
    assert verify.code == 0, verify.out + verify.err
    state = root / ".autodev"
    assert not (state / "inline-state.json").exists()
    assert list((state / "responses").iterdir()) == []
    assert len(list((state / "evidence" / "inline").glob("*.json"))) == len(DEMO_CALLS)
    assert PlanManager.open(root, readonly=True).cost_usd_total == COST_PER_ANSWER * len(DEMO_CALLS)


def test_resume_waits_for_a_missing_answer_and_rejects_a_malformed_one_until_it_is_fixed(
    demo: DemoSetup,
) -> None:
    root = demo.repo_root
    delegation = pending_delegation(autodev(root, "run", "--platform", "inline", demo.intent), root)
    assert (delegation.task_id, delegation.role) == ("plan", "explorer")

    early = autodev(root, "resume")
    assert_one_line_error(early, 3)
    assert f"waiting for {delegation.response_path}" in early.err

    ledger = root / ".autodev" / "ledger.jsonl"
    before = ledger.read_bytes()
    delegation.response_path.write_text('{"txt": "x"}', encoding="utf-8")
    malformed = autodev(root, "resume")
    after_malformed = ledger.read_bytes()
    assert_one_line_error(malformed, 2)
    assert str(delegation.response_path) in malformed.err
    assert "field 'txt': is not allowed" in malformed.err
    assert "field 'text': is required" in malformed.err
    assert delegation.response_path.exists()  # left in place, to be fixed there

    answer(demo.script, delegation)
    fixed = autodev(root, "resume")
    following = pending_delegation(fixed, root)
    assert (following.task_id, following.role) == ("plan", "domain_expert")
    assert not delegation.response_path.exists()
    findings = json.loads((root / ".autodev" / "evidence" / "plan-explore-1.json").read_text())
    assert findings["findings"].startswith("textutils is a small package")
    # Compared last, so that everything above is checked even while this fails.
    assert after_malformed == before, "a resume refused for a malformed response appended to the ledger"


def test_resume_after_an_inline_suspend_stays_inline_with_an_agent_cli_on_path(
    demo: DemoSetup, tmp_path: Path
) -> None:
    # Inline mode is how a host agent (Claude Code, say) drives AutoDev, so its CLI is usually on PATH.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    called = tmp_path / "claude-was-called"
    fake = bin_dir / "claude"
    fake.write_text(f"#!/bin/sh\ntouch {called}\nexit 1\n")
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    root = demo.repo_root

    delegation = pending_delegation(autodev(root, "run", "--platform", "inline", demo.intent, env=env), root)
    answer(demo.script, delegation)
    resumed = autodev(root, "resume", env=env)

    following = pending_delegation(resumed, root)
    assert (following.task_id, following.role) == ("plan", "domain_expert")
    assert not called.exists()


def test_tool_call_limits_add_up_across_inline_resumes(demo: DemoSetup) -> None:
    # Every answer reports two tool calls; a task may make three. Each answer comes in a new process.
    root = demo.repo_root
    env = {"AUTODEV_GUARDRAILS__MAX_TOOL_CALLS_PER_TASK": "3"}
    result = autodev(root, "run", "--platform", "inline", demo.intent, env=env)
    answered: list[tuple[str, str]] = []
    for _ in range(MAX_ROUNDS):
        if result.code != 3:
            break
        delegation = pending_delegation(result, root)
        answer(demo.script, delegation)
        body = json.loads(delegation.response_path.read_text(encoding="utf-8"))
        delegation.response_path.write_text(json.dumps({**body, "tool_calls": 2}), encoding="utf-8")
        answered.append((delegation.task_id, delegation.role))
        result = autodev(root, "resume", env=env)

    assert result.code == 1, result.out + result.err
    # The developer's two calls and the reviewer's two made four: over the limit, though no single
    # process saw more than two.
    assert answered[3:5] == [("1.1", "developer"), ("1.1", "reviewer")]
    task = PlanManager.open(root, readonly=True).get_task("1.1")
    assert task.status == "blocked"
    assert "4 tool calls, over the limit of 3" in (task.blocked_reason or "")
    assert PlanManager.open(root, readonly=True).usage_for("1.1").tool_calls == 4


def test_status_during_an_inline_suspend_says_which_delegation_waits_and_where_its_answer_goes(
    demo: DemoSetup,
) -> None:
    root = demo.repo_root
    delegation = pending_delegation(autodev(root, "run", "--platform", "inline", demo.intent), root)

    data = json.loads(autodev(root, "status", "--json").out)
    text = autodev(root, "status").out

    assert data["waiting_for"] == {
        "task_id": "plan",
        "role": "explorer",
        "step": "explore",
        "delegation": str(delegation.path),
        "response": str(delegation.response_path),
    }
    flat = " ".join(text.split())
    assert "Waiting for the explorer answer of plan (step explore)" in flat
    assert f"write the answer to {delegation.response_path}" in flat


def test_what_the_answering_session_did_to_git_meanwhile_is_named_at_resume(demo: DemoSetup) -> None:
    root = demo.repo_root
    delegation = pending_delegation(autodev(root, "run", "--platform", "inline", demo.intent), root)
    answer(demo.script, delegation)
    hook = root / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\nexit 0\n")
    subprocess.run(["git", "-C", str(root), "tag", "planted"], check=True)

    stopped = autodev(root, "resume")

    assert_one_line_error(stopped, 3)
    assert "the explorer" in stopped.err
    assert ".git/hooks/pre-commit added" in stopped.err and "refs/tags/planted" in stopped.err
    assert hook.exists()  # nothing put back: it may have been the user
    following = pending_delegation(autodev(root, "resume"), root)  # named once; the user has looked
    assert (following.task_id, following.role) == ("plan", "domain_expert")


def test_a_malformed_answer_is_refused_under_execute_as_under_resume_and_blocks_nothing(
    demo: DemoSetup, tmp_path: Path
) -> None:
    root = demo.repo_root
    plan = tmp_path / "plan.md"
    plan.write_text(next(entry.text for entry in demo.script.entries if entry.role == "architect"))
    assert autodev(root, "plan", "--from-markdown", str(plan)).code == 0
    delegation = pending_delegation(autodev(root, "execute", "--platform", "inline"), root)
    assert (delegation.task_id, delegation.role) == ("1.1", "developer")
    delegation.response_path.write_text('{"txt": "x"}', encoding="utf-8")

    refused = autodev(root, "execute", "--platform", "inline")

    assert_one_line_error(refused, 2)
    assert str(delegation.response_path) in refused.err
    status = json.loads(autodev(root, "status", "--json").out)
    assert {task["id"]: task["status"] for task in status["tasks"]}["1.1"] == "in_progress"
    answer(demo.script, delegation)
    following = pending_delegation(autodev(root, "resume"), root)
    assert (following.task_id, following.role) == ("1.1", "reviewer")


def test_an_architect_retry_answered_inline_is_the_plan_the_run_goes_on_with(demo: DemoSetup) -> None:
    root = demo.repo_root
    result = autodev(root, "run", "--platform", "inline", demo.intent)
    for role in ("explorer", "domain_expert"):
        delegation = pending_delegation(result, root)
        assert (delegation.role, delegation.attempt) == (role, 1)
        answer(demo.script, delegation)
        result = autodev(root, "resume")
    first = pending_delegation(result, root)
    assert (first.task_id, first.role, first.attempt) == ("plan", "architect", 1)
    first.response_path.write_text(json.dumps({"text": "I would rather not plan."}), encoding="utf-8")

    retry = pending_delegation(autodev(root, "resume"), root)
    assert (retry.task_id, retry.role, retry.attempt) == ("plan", "architect", 2)
    assert "I would rather not plan." in retry.path.read_text(encoding="utf-8")
    answer(demo.script, retry)
    following = pending_delegation(autodev(root, "resume"), root)

    assert (following.task_id, following.role, following.attempt) == ("1.1", "developer", 1)
    archived = sorted(
        path.name for path in (root / ".autodev" / "evidence" / "inline").glob("plan-architect*")
    )
    assert archived == ["plan-architect-1.json", "plan-architect-2.json"]
    manager = PlanManager.open(root, readonly=True)
    assert [task.id for task in manager.tasks()] == ["1.1", "1.2"]
