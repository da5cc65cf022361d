"""A writer's claim is never the record; the repository is. Scripted agents, real git and QA tools: a
developer that lists a file it never touched and leaves out one it did has both recorded as risks, the
gates check git's files, the reviewer is shown git's record, and status carries it; a developer that claims
a change git does not show fails with ``evidence_mismatch``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from support.orchestration import demo_project, orchestrator, script_with

from autodev.state.plan_manager import PlanManager

FAST_GATES = {"qa_gates.secretscan.enabled": False, "qa_gates.build.enabled": False}
HELPER = '"""Helpers."""\n\n\ndef helper() -> int:\n    """One."""\n    return 1\n'


def _evidence(root: Path, name: str) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((root / ".autodev" / "evidence" / name).read_text())
    return record


def test_claimed_and_unreported_files_are_risks_and_the_record_is_gits(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    developer = next(
        e for e in setup.script.entries if e.role == "developer" and e.task_id == "1.2"
    ).model_dump(exclude_defaults=True)
    developer["text"] = "Exported slugify.\nCHANGED:\n- textutils/__init__.py\n- textutils/ghost.py\n"
    developer["edits"] = [*developer["edits"], {"path": "textutils/helpers.py", "content": HELPER}]
    orch, adapter = orchestrator(setup.repo_root, script_with(setup, developer), **FAST_GATES)

    anyio.run(lambda: orch.run(setup.intent))

    evidence = _evidence(setup.repo_root, "1.2-developer-1.json")
    assert sorted(evidence["files_changed"]) == ["textutils/__init__.py", "textutils/helpers.py"]
    assert evidence["claimed_files"] == ["textutils/__init__.py", "textutils/ghost.py"]
    assert evidence["risks"] == [
        "claimed_not_changed: textutils/ghost.py",
        "changed_not_claimed: textutils/helpers.py",
    ]
    facts = evidence["repository"]
    assert facts["checkout"] and facts["base_commit"] and facts["head"]
    assert {stat["path"] for stat in facts["diffstat"]} == set(evidence["files_changed"])
    assert facts["insertions"] > 0 and facts["commits_since_base"] == 0
    # The gates checked git's files, not the claim.
    gates = _evidence(setup.repo_root, "1.2-gates-1.json")
    assert "textutils/ghost.py" not in json.dumps(gates)
    # The reviewer was shown AutoDev's record, risks included.
    review = next(call for call in adapter.calls if call.role == "reviewer" and call.task_id == "1.2")
    assert "AUTODEV'S RECORD OF THE CHANGE (from git, not from the developer): 2 file(s)" in review.prompt
    assert "- claimed_not_changed: textutils/ghost.py" in review.prompt
    # The ledger keeps the summary status shows for a task in flight.
    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        (ref,) = [r for r in plans.evidence_for("1.2") if r.kind == "developer"]
    assert ref.summary is not None and ref.summary["files"] == 2 and len(ref.summary["risks"]) == 2


def test_a_claimed_change_that_git_does_not_show_is_an_evidence_mismatch(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    claims = [
        {
            "role": "developer",
            "task_id": "1.2",
            "attempt": attempt,
            "text": "Exported slugify.\nCHANGED:\n- textutils/__init__.py",
        }
        for attempt in (1, 2, 3)
    ]
    orch, _ = orchestrator(setup.repo_root, script_with(setup, *claims), qa_retry_limit=2, **FAST_GATES)

    anyio.run(lambda: orch.run(setup.intent))

    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        task = plans.get_task("1.2")
    assert task.status == "blocked"
    assert "evidence_mismatch" in json.dumps(task.model_dump())
    assert "it listed textutils/__init__.py as changed" in json.dumps(task.model_dump())
