"""The orchestrator end to end on real git repositories, with scripted agents and the real QA tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.orchestration import config_for, costing, demo_project, git_log, orchestrator, run, script_with

from autodev.adapters.scripted import ScriptedAdapter
from autodev.guardrails import BudgetExceededError
from autodev.orchestrator import Orchestrator
from autodev.orchestrator.delegation_policy import DelegationDecision, DelegationHeldError, DelegationRequest
from autodev.orchestrator.execute.executor import LocalExecutor
from autodev.orchestrator.execute.task_flow import TaskContext
from autodev.orchestrator.preflight import PreflightError
from autodev.orchestrator.run_context import RunContext
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import Task
from autodev.workspace.git import GitError

# Gates that cost time without adding to what a test checks are switched off where they do not matter.
CLEAN_SLUG = '"""Slugs."""\n\n\ndef slugify(text: str) -> str:\n    """Slug."""\n    return text\n'
FAST_GATES = {"qa_gates.secretscan.enabled": False, "qa_gates.build.enabled": False}


def _evidence(root: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / ".autodev" / "evidence" / name).read_text())
    return data


def test_happy_path_with_one_review_retry_completes_commits_and_leaves_evidence(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    orch, adapter = orchestrator(setup.repo_root, setup.script)
    outcome = run(orch, setup.intent)
    assert [t.status for t in outcome.tasks] == ["complete", "complete"]
    assert git_log(setup.repo_root)[:2] == [
        "autodev: 1.2 Export slugify from the package",
        "autodev: 1.1 Implement slugify",
    ]
    root = setup.repo_root
    assert (root / "textutils" / "slug.py").exists() and (root / "tests" / "test_exports.py").exists()
    gates = _evidence(root, "1.1-gates-2.json")
    assert gates["passed"] is True
    assert {check["gate"] for check in gates["checks"]} == {"syntax", "lint", "build", "test", "secretscan"}
    test = _evidence(root, "1.2-test-1.json")
    assert (test["run_passed"], test["agrees"]) == (5, True)
    manager = PlanManager.open(root, readonly=True)
    assert manager.get_task("1.1").commit == outcome.tasks[0].commit
    assert [call.role for call in adapter.calls[:3]] == ["explorer", "domain_expert", "architect"]

    # The demo's reviewer rejects 1.1 once: the developer's second attempt carries the reviewer's issue.
    assert outcome.tasks[0].retry_count == 1
    developer_calls = [c for c in adapter.calls if c.role == "developer" and c.task_id == "1.1"]
    assert [c.attempt for c in developer_calls] == [1, 2]
    assert "THE PREVIOUS ATTEMPT FAILED" not in developer_calls[0].prompt
    assert "has no module docstring" in developer_calls[1].prompt
    assert _evidence(root, "1.1-review-1.json")["verdict"] == "NEEDS_CHANGES"


def test_gate_failing_until_exhaustion_escalates_and_blocks_dependents(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    broken = "import os\n\n\ndef slugify(text):\n    return text\n"  # F401: unused import, every attempt
    script = script_with(
        setup,
        {
            "role": "developer",
            "task_id": "1.1",
            "attempt": 1,
            "text": "done",
            "edits": [{"path": "textutils/slug.py", "content": broken}],
        },
        {
            "role": "developer",
            "task_id": "1.1",
            "attempt": 2,
            "text": "done again",
            "edits": [{"path": "textutils/slug.py", "content": broken + "\n"}],
        },
        {
            "role": "developer",
            "task_id": "1.1",
            "text": "and again",
            "edits": [{"path": "textutils/slug.py", "content": broken + "\n\n"}],
        },
    )
    orch, adapter = orchestrator(setup.repo_root, script, **FAST_GATES)
    outcome = run(orch, setup.intent)
    manager = PlanManager.open(setup.repo_root, readonly=True)
    task = manager.get_task("1.1")
    assert task.status == "blocked" and task.escalated and task.retry_count == 3
    assert "retries exhausted after 3 attempt(s): lint gate fail" in (task.blocked_reason or "")
    assert "critic: re-plan the task with smaller steps" in (task.blocked_reason or "")
    dependent = manager.get_task("1.2")
    assert dependent.status == "blocked"
    assert dependent.blocked_reason is not None and "dependency 1.1 is blocked" in dependent.blocked_reason
    assert [c.role for c in adapter.calls].count("critic_sounding_board") == 1
    critic = _evidence(setup.repo_root, "1.1-critic-4.json")
    assert critic["verdict"] == "NEEDS_REVISION"
    assert "F401" in " ".join(task.last_issues)
    assert [t.id for t in outcome.tasks] == ["1.1"]
    assert git_log(setup.repo_root) == ["textutils: initial version"]


@pytest.mark.parametrize(
    ("replacement", "expected"),
    [
        (
            {"role": "reviewer", "task_id": "1.1", "text": "Looks fine to me."},
            "has no 'VERDICT: APPROVED|NEEDS_CHANGES|REJECTED' line",
        ),
        (
            {"role": "test_engineer", "task_id": "1.1", "text": "All good, tests pass."},
            "has no 'RESULTS: passed=N failed=M total=T' line",
        ),
        (
            {"role": "developer", "task_id": "1.1", "attempt": 1, "text": "Implemented it."},
            "git shows no change against",
        ),
        (
            {
                "role": "test_engineer",
                "task_id": "1.1",
                "text": "RESULTS: passed=10 failed=0 total=10",
                "edits": [
                    {"path": "tests/test_slug.py", "content": "def test_one() -> None:\n    assert True\n"}
                ],
            },
            "it says passed=10 failed=0 total=10, but AutoDev's own run of the tests shows passed=2 "
            "failed=0 total=2",
        ),
    ],
    ids=["missing-verdict", "missing-results", "empty-diff", "claim-contradicted"],
)
def test_unproven_success_is_a_failure(tmp_path: Path, replacement: dict[str, object], expected: str) -> None:
    setup = demo_project(tmp_path)
    approving = {"role": "reviewer", "task_id": "1.1", "text": "VERDICT: APPROVED"}
    fixed = {
        "role": "developer",
        "task_id": "1.1",
        "attempt": 1,
        "text": "done",
        "edits": [
            {
                "path": "textutils/slug.py",
                "content": CLEAN_SLUG,
            }
        ],
    }
    extra = [
        r
        for r in (approving, fixed)
        if (r["role"], r.get("attempt")) != (replacement["role"], replacement.get("attempt"))
    ]
    script = script_with(setup, replacement, *extra)
    orch, _ = orchestrator(setup.repo_root, script, qa_retry_limit=1, **FAST_GATES)
    run(orch, setup.intent)
    task = PlanManager.open(setup.repo_root, readonly=True).get_task("1.1")
    assert task.status == "blocked"
    assert any(expected in issue for issue in task.last_issues), task.last_issues


def test_a_gate_whose_tool_is_missing_stops_the_run_before_any_agent_call_unless_skipped(
    tmp_path: Path,
) -> None:
    setup = demo_project(tmp_path)
    missing = {"qa_gates.lint.command": ["no-such-linter-xyz", "{files}"], **FAST_GATES}
    orch, adapter = orchestrator(setup.repo_root, setup.script, qa_retry_limit=1, **missing)
    with pytest.raises(PreflightError, match=r"\(1\) lint gate: no-such-linter-xyz not found; provide it"):
        run(orch, setup.intent)
    # Found before anything was paid for: no agent call, no attempt, nothing in the ledger.
    assert adapter.calls == []
    ledger = setup.repo_root / ".autodev" / "ledger.jsonl"
    assert not ledger.exists() or ledger.read_bytes() == b""

    other = demo_project(tmp_path / "second")
    skip = {**missing, "qa_gates.on_missing_tool": "skip"}
    orch, _ = orchestrator(other.repo_root, other.script, **skip)
    outcome = run(orch, other.intent)
    assert [t.status for t in outcome.tasks] == ["complete", "complete"]
    lint = next(c for c in _evidence(other.repo_root, "1.2-gates-1.json")["checks"] if c["gate"] == "lint")
    assert lint["status"] == "skipped" and lint["skipped_by"] == "config:on_missing_tool=skip"


def test_tool_call_guardrail_blocks_the_task(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    script = script_with(
        setup,
        {
            "role": "developer",
            "task_id": "1.1",
            "attempt": 1,
            "text": "busy",
            "tool_calls": 50,
            "edits": [{"path": "textutils/slug.py", "content": "X = 1\n"}],
        },
    )
    orch, _ = orchestrator(setup.repo_root, script, **{"guardrails.max_tool_calls_per_task": 10})
    run(orch, setup.intent)
    manager = PlanManager.open(setup.repo_root, readonly=True)
    task = manager.get_task("1.1")
    assert task.status == "blocked"
    assert task.blocked_reason is not None and "guardrail" in task.blocked_reason
    assert "max_tool_calls_per_task" in task.blocked_reason
    assert manager.get_task("1.2").status == "blocked"


def test_cost_budget_suspends_and_resume_continues(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    script = costing(setup.script, 0.1)
    orch, _ = orchestrator(
        setup.repo_root, script, **{"guardrails.cost_budget_usd_per_plan": 0.5}, **FAST_GATES
    )
    with pytest.raises(BudgetExceededError, match=r"budget reached: \$0\.50 of \$0\.50") as info:
        run(orch, setup.intent)
    assert info.value.exit_code == 3
    manager = PlanManager.open(setup.repo_root, readonly=True)
    assert manager.cost_usd_total == pytest.approx(0.5)
    assert manager.get_task("1.1").status != "blocked"

    orch, _ = orchestrator(
        setup.repo_root, script, **{"guardrails.cost_budget_usd_per_plan": 100.0}, **FAST_GATES
    )
    tasks = anyio.run(orch.resume)
    assert [t.status for t in tasks] == ["complete", "complete"]
    resumed = PlanManager.open(setup.repo_root, readonly=True)
    assert resumed.cost_usd_total > 0.5  # the total survived the stop and kept counting
    assert git_log(setup.repo_root)[0] == "autodev: 1.2 Export slugify from the package"


def test_loop_detection_blocks_with_loop_detected(tmp_path: Path) -> None:
    # No progress: the developer writes the same change on every attempt, and the reviewer answers it with
    # the same words; the same answers to the same questions are a loop.
    setup = demo_project(tmp_path)
    first = next(e for e in setup.script.entries if e.role == "developer" and e.attempt == 1)
    edits = [edit.model_dump() for edit in first.edits]
    # The demo scripts attempts 1 and 2 apart: each attempt (and any later one) now writes the same.
    stuck = [
        {"role": "developer", "task_id": "1.1", "text": first.text, "edits": edits, **attempt}
        for attempt in ({"attempt": 1}, {"attempt": 2}, {})
    ]
    same = {
        "role": "reviewer",
        "task_id": "1.1",
        "text": "VERDICT: NEEDS_CHANGES\nISSUES:\n- still not right",
    }
    script = script_with(setup, same, *stuck)
    orch, _ = orchestrator(
        setup.repo_root, script, qa_retry_limit=5, **{"guardrails.loop_detection_threshold": 2}, **FAST_GATES
    )
    run(orch, setup.intent)
    task = PlanManager.open(setup.repo_root, readonly=True).get_task("1.1")
    assert task.status == "blocked"
    assert task.blocked_reason is not None and task.blocked_reason.startswith("loop_detected")


def test_uncommitted_user_changes_are_refused_before_any_task(tmp_path: Path) -> None:
    from autodev.orchestrator.execute.task_flow import WorkingTreeDirtyError

    setup = demo_project(tmp_path)
    (setup.repo_root / "README.md").write_text("# edited by the user\n")
    orch, adapter = orchestrator(setup.repo_root, setup.script)
    with pytest.raises(WorkingTreeDirtyError, match="commit or stash"):
        run(orch, setup.intent)
    assert adapter.calls == []  # refused before any agent was paid


class _HoldTheReviewer:
    """A policy that lets everything run but the reviewer's calls, and counts what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def decide(self, request: DelegationRequest) -> DelegationDecision:
        self.asked.append((request.task_id, request.role))
        if request.role == "reviewer":
            return DelegationDecision("require_approval", "reviews need a person today")
        return DelegationDecision("execute")


def test_the_delegation_policy_is_asked_before_every_call_and_a_held_call_waits_resumably(
    tmp_path: Path,
) -> None:
    setup = demo_project(tmp_path)
    policy = _HoldTheReviewer()
    adapter = ScriptedAdapter(script=setup.script)
    config = config_for(setup.repo_root, **FAST_GATES)
    orch = Orchestrator(setup.repo_root, config=config, adapter=adapter, delegation_policy=policy)

    with pytest.raises(DelegationHeldError, match=r"reviewer of 1.1 run \(require approval: reviews need"):
        run(orch, setup.intent)

    assert policy.asked[:3] == [("plan", "explorer"), ("plan", "domain_expert"), ("plan", "architect")]
    assert policy.asked[-2:] == [("1.1", "developer"), ("1.1", "reviewer")]
    assert policy.asked.count(("1.1", "reviewer")) == 1  # the stopping run started the task no second time
    manager = PlanManager.open(setup.repo_root, readonly=True)
    assert manager.get_task("1.1").status == "auto_gated"  # nothing counted: the review step waits
    assert manager.get_task("1.1").retry_count == 0
    resumed = Orchestrator(setup.repo_root, config=config, adapter=ScriptedAdapter(script=setup.script))
    tasks = anyio.run(resumed.resume)
    assert [task.status for task in tasks] == ["complete", "complete"]


class _CountingExecutor(LocalExecutor):
    """Runs the flow as the local executor does, noting where each task ran and from which base."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, Path, str | None]] = []
        self.local = LocalExecutor()

    async def run_task(self, session: RunContext, task_id: str, context: TaskContext) -> Task:
        base = session.plan_manager.get_task(task_id).base_commit
        self.ran.append((task_id, context.workspace.root, base))
        return await self.local.run_task(session, task_id, context)


def test_every_task_flow_runs_through_the_executor_from_its_base_commit(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    executor = _CountingExecutor()
    adapter = ScriptedAdapter(script=setup.script)
    config = config_for(setup.repo_root, **FAST_GATES)
    orch = Orchestrator(setup.repo_root, config=config, adapter=adapter, executor=executor)

    outcome = run(orch, setup.intent)

    assert [task.status for task in outcome.tasks] == ["complete", "complete"]
    assert [task_id for task_id, _, _ in executor.ran] == ["1.1", "1.2"]
    first_commit = outcome.tasks[0].commit
    assert executor.ran[1][2] == first_commit  # 1.2 starts where 1.1 landed
    task_trees = setup.repo_root / ".autodev" / "task-worktrees"
    assert all(root == setup.repo_root or root.is_relative_to(task_trees) for _, root, _ in executor.ran)


class _CutShortByTheStop(LocalExecutor):
    """Task 1.2's flow: a git call the stop of the run cuts short (as a Ctrl-C kills a git being started)."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.local = LocalExecutor()

    async def run_task(self, session: RunContext, task_id: str, context: TaskContext) -> Task:
        if task_id != "1.2":
            return await self.local.run_task(session, task_id, context)
        self.started.set()
        with anyio.CancelScope(shield=True):  # git runs to its end in a thread whatever is cancelled
            await anyio.sleep(0.2)
        raise GitError("git status --porcelain -z failed: exit code -2")


def test_a_call_cut_short_by_the_runs_stop_blocks_no_task(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    executor = _CutShortByTheStop()
    config = config_for(setup.repo_root, **FAST_GATES)
    orch = Orchestrator(
        setup.repo_root, config=config, adapter=ScriptedAdapter(script=setup.script), executor=executor
    )

    async def interrupted() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(orch.run, setup.intent)
            await executor.started.wait()
            group.cancel_scope.cancel()

    anyio.run(interrupted)

    task = PlanManager.open(setup.repo_root, readonly=True).get_task("1.2")
    assert task.status == "in_progress" and task.blocked_reason is None
