"""Write scopes and approvals through the orchestrator, with scripted agents and real git.

Only the user's own words authorize a write: the intent's ``Write scope:`` line, ``--write-scope``, or an
approval they accepted. A run whose tasks write elsewhere stops before any agent starts (exit 3) with one
approval request, continues once it is accepted, never launches a declined one, and blocks a writer that
wrote outside its scope, naming the paths.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from support.orchestration import config_for, demo_project, git_log, script_with
from support.parallel import policy_for

from autodev.adapters.scripted import ScriptedAdapter
from autodev.cli.demo import DEMO_INTENT
from autodev.errors import EXIT_SUSPENDED
from autodev.orchestrator import Orchestrator
from autodev.orchestrator.delegation_policy import DelegationHeldError
from autodev.orchestrator.run_policy import replay_log
from autodev.policy.scope import ScopeError
from autodev.state.plan_manager import PlanManager

UNSCOPED_INTENT = DEMO_INTENT.split("\nWrite scope:")[0]
TASK_COMMITS = {"autodev: 1.1 Implement slugify", "autodev: 1.2 Export slugify from the package"}


def _developer_calls(adapter: ScriptedAdapter) -> list[str]:
    return [call.task_id for call in adapter.calls if call.role == "developer"]


def _orchestrator(root: Path, adapter: ScriptedAdapter, **overrides: object) -> Orchestrator:
    return Orchestrator(root, config=config_for(root, **overrides), adapter=adapter)


def test_an_intent_without_a_scope_stops_before_any_writer_with_one_approval_request(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    adapter = ScriptedAdapter(script=setup.script)
    with pytest.raises(DelegationHeldError, match=r"A1: .*autodev approve --scope A1") as held:
        anyio.run(lambda: _orchestrator(setup.repo_root, adapter).run(UNSCOPED_INTENT))
    assert held.value.exit_code == EXIT_SUSPENDED
    assert _developer_calls(adapter) == []  # nothing was started for the tasks
    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        (request,) = plans.approvals
        assert plans.workers == {}
    assert request.status == "pending"
    assert request.task_ids == ["1.1", "1.2"]
    assert request.scope == sorted(
        ["textutils/slug.py", "tests/test_slug.py", "textutils/__init__.py", "tests/test_exports.py"]
    )
    assert request.reason == "owned_path_provenance_required"

    # Resuming without an answer asks again: the same request, not a second one.
    with pytest.raises(DelegationHeldError, match="A1"):
        anyio.run(lambda: _orchestrator(setup.repo_root, adapter).resume())
    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        assert [record.id for record in plans.approvals] == ["A1"]

    # Accepting authorizes exactly that scope; the resume carries the plan out.
    orchestrator = _orchestrator(setup.repo_root, adapter)
    accepted = orchestrator.resolve_approval("A1", accepted=True)
    assert accepted.status == "accepted"
    tasks = anyio.run(lambda: _orchestrator(setup.repo_root, adapter).resume())
    assert {task.status for task in tasks} == {"complete"}
    assert set(git_log(setup.repo_root)) >= TASK_COMMITS


def test_a_declined_scope_never_launches_its_tasks(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    adapter = ScriptedAdapter(script=setup.script)
    with pytest.raises(DelegationHeldError):
        anyio.run(lambda: _orchestrator(setup.repo_root, adapter).run(UNSCOPED_INTENT))
    _orchestrator(setup.repo_root, adapter).resolve_approval("A1", accepted=False)
    anyio.run(lambda: _orchestrator(setup.repo_root, adapter).resume())
    assert _developer_calls(adapter) == []
    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        assert {task.id: task.status for task in plans.tasks()} == {"1.1": "blocked", "1.2": "blocked"}
        assert "approval_declined" in (plans.get_task("1.1").blocked_reason or "")
    with pytest.raises(Exception, match="declined already"):
        _orchestrator(setup.repo_root, adapter).resolve_approval("A1", accepted=True)


def test_a_scope_covering_some_tasks_runs_them_and_waits_for_the_rest(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    adapter = ScriptedAdapter(script=setup.script)
    intent = f"{UNSCOPED_INTENT}\nWrite scope: textutils/slug.py, tests/test_slug.py"
    with pytest.raises(
        DelegationHeldError, match=r"A1: tests/test_exports.py, textutils/__init__.py \(for 1.2\)"
    ):
        anyio.run(lambda: _orchestrator(setup.repo_root, adapter).run(intent))
    assert set(_developer_calls(adapter)) == {"1.1"}
    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        assert plans.get_task("1.1").status == "complete"
        assert plans.get_task("1.2").status == "pending"


def test_a_developer_writing_outside_the_scope_is_blocked_with_the_paths(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    original = next(e for e in setup.script.entries if e.role == "developer" and e.task_id == "1.1")
    stray = original.model_dump(exclude_defaults=True)
    stray["edits"] = [*stray.get("edits", []), {"path": "setup_extra.py", "content": "print('hi')\n"}]
    script = script_with(setup, stray)
    adapter = ScriptedAdapter(script=script)
    tasks = anyio.run(lambda: _orchestrator(setup.repo_root, adapter).run(DEMO_INTENT)).tasks
    statuses = {task.id: task.status for task in tasks}
    assert statuses["1.1"] == "blocked"
    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        reason = plans.get_task("1.1").blocked_reason or ""
    assert "outside_write_scope" in reason
    assert "setup_extra.py" in reason
    assert "autodev: 1.1 Implement slugify" not in git_log(setup.repo_root)


def test_a_scope_naming_a_missing_directory_is_refused_with_the_ledger_untouched(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    adapter = ScriptedAdapter(script=setup.script)
    with pytest.raises(ScopeError, match="does not exist"):
        anyio.run(
            lambda: _orchestrator(setup.repo_root, adapter).run(f"{UNSCOPED_INTENT}\nWrite scope: nowhere/**")
        )
    assert not (setup.repo_root / ".autodev" / "ledger.jsonl").exists()
    assert adapter.calls == []


def test_the_run_logs_every_decision_and_an_unchanged_policy_replays_them_exactly(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    adapter = ScriptedAdapter(script=setup.script)
    anyio.run(lambda: _orchestrator(setup.repo_root, adapter).run(DEMO_INTENT))
    report = replay_log(setup.repo_root)
    assert report.decisions == len(adapter.calls)
    assert report.exact_matches == report.decisions
    assert report.invalid == [] and report.legacy_skipped == 0
    assert report.recorded_routes["spawn"] == 2  # one worker per task, however many calls it makes

    candidate = tmp_path / "candidate.json"
    candidate.write_text(json.dumps({"max_strong_workers": 0}))
    lowered = replay_log(setup.repo_root, candidate)
    assert lowered.exact_matches == report.decisions - 2
    assert lowered.transitions == {"spawn:within_budget -> reject:budget_exhausted": 2}
    assert lowered.replayed_units == 0 and report.recorded_units == 8


def test_a_malformed_or_unknown_version_record_is_invalid_not_evidence(tmp_path: Path) -> None:
    from autodev.config.schema import PolicySettings
    from autodev.policy.replay import LoggedDecision, replay

    good = {
        "inputs": {
            "role": "reviewer",
            "task_id": "1",
            "family": "reviewer:x",
            "write_mode": "read_only",
            "tier": "fast",
        },
        "decision": {"route": "execute", "reason": "read_only"},
    }
    future = {"inputs": {**good["inputs"], "version": 99}, "decision": good["decision"]}
    records = [
        LoggedDecision(seq=1, op="usage_recorded", payload={}),
        LoggedDecision(
            seq=2, op="delegation_decided", payload={**good, "inputs": {**good["inputs"], "version": 1}}
        ),
        LoggedDecision(seq=3, op="delegation_decided", payload=future),
        LoggedDecision(seq=4, op="delegation_decided", payload={"decision": {}}),
        LoggedDecision(seq=5, op="usage_recorded", payload={}),
    ]
    report = replay(records, PolicySettings())
    assert (report.decisions, report.exact_matches, report.legacy_skipped) == (1, 1, 1)
    assert [invalid.seq for invalid in report.invalid] == [3, 4]


def test_strong_workers_wait_for_each_other_and_the_plan_still_completes(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    adapter = ScriptedAdapter(script=setup.script)
    overrides = {"tournaments.execute_max_parallel_tasks": 2, **policy_for(2), "policy.max_strong_workers": 1}
    tasks = anyio.run(lambda: _orchestrator(setup.repo_root, adapter, **overrides).run(DEMO_INTENT)).tasks
    assert {task.status for task in tasks} == {"complete"}
    decided = [
        json.loads(line)
        for line in (setup.repo_root / ".autodev" / "ledger.jsonl").read_text().splitlines()
        if '"delegation_decided"' in line
    ]
    grants_held = 0
    for entry in decided:
        if entry["payload"]["decision"]["route"] == "spawn":
            strong = [w for w in entry["payload"]["inputs"]["active_workers"] if w["tier"] == "strong"]
            assert strong == []  # no strong worker was under way when another was granted
            grants_held += 1
    assert grants_held == 2


def test_a_reviewer_that_edits_files_fails_its_guard_and_its_edit_is_undone(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    meddling = {
        "role": "reviewer",
        "task_id": "1.2",
        "responses": [
            {
                "text": "VERDICT: APPROVED\nISSUES:\n- none\n",
                "edits": [
                    {"path": "textutils/__init__.py", "content": "# rewritten by the reviewer\n"},
                    {"path": "REVIEW_NOTES.md", "content": "notes\n"},
                ],
            },
            {"text": "VERDICT: APPROVED\nISSUES:\n- none\n"},
        ],
    }
    adapter = ScriptedAdapter(script=script_with(setup, meddling))
    tasks = anyio.run(lambda: _orchestrator(setup.repo_root, adapter).run(DEMO_INTENT)).tasks
    assert {task.id: task.status for task in tasks} == {"1.1": "complete", "1.2": "complete"}
    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        task = plans.get_task("1.2")
    assert task.retry_count == 1
    assert any("may only read" in issue and "REVIEW_NOTES.md" in issue for issue in task.last_issues)
    assert not (setup.repo_root / "REVIEW_NOTES.md").exists()
    assert "rewritten by the reviewer" not in (setup.repo_root / "textutils" / "__init__.py").read_text()


def test_a_planner_that_edits_the_checkout_stops_the_run_naming_the_files(tmp_path: Path) -> None:
    from autodev.orchestrator.integrity import RepositoryChangedError

    setup = demo_project(tmp_path)
    explorer = next(e for e in setup.script.entries if e.role == "explorer").model_dump(exclude_defaults=True)
    explorer["edits"] = [{"path": "textutils/explored.py", "content": "# the explorer was here\n"}]
    adapter = ScriptedAdapter(script=script_with(setup, explorer))
    with pytest.raises(RepositoryChangedError, match=r"the explorer may only read.*textutils/explored.py"):
        anyio.run(lambda: _orchestrator(setup.repo_root, adapter).run(DEMO_INTENT))
    # The user puts it back; the explorer's step was not recorded, so the resume asks it again.
    (setup.repo_root / "textutils" / "explored.py").unlink()
    again = ScriptedAdapter(script=setup.script)
    tasks = anyio.run(lambda: _orchestrator(setup.repo_root, again).resume())
    assert {task.status for task in tasks} == {"complete"}
    assert [call.role for call in again.calls][:1] == ["explorer"]
