"""Cross-family verification: while a completion contract is checked, the reviewer who settles its semantic
checks runs on another agent CLI family than the developer's, and the contract says who did what, on which
base. Without another family, ``completion.cross_family`` decides: ``warn`` accepts with a waiver the proof
shows, ``require_approval`` blocks the task until the user waives the check for that exact revision.

The developer is scripted behind Claude Code's name (a family without the CLI); the verifier is the real
Cursor adapter driving a fake ``cursor-agent`` executable; real git and the real QA tools.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
from support.fake_cursor import fake_cursor_env, install_fake_cursor, logged_calls
from support.orchestration import ClaudeLike, Recorder, config_for, demo_project

from autodev.adapters.cursor import CursorAdapter
from autodev.config import AutodevConfig
from autodev.orchestrator import Orchestrator
from autodev.state.plan_manager import PlanManager
from autodev.state.status_reader import read_status

FAST_GATES = {"qa_gates.secretscan.enabled": False, "qa_gates.build.enabled": False}


def _orchestrator(
    tmp_path: Path, verify_adapter: CursorAdapter | None = None, overrides: dict[str, Any] | None = None
) -> tuple[Any, Orchestrator, ClaudeLike]:
    setup = demo_project(tmp_path)
    developer = ClaudeLike(script=setup.script)
    orch = Orchestrator(
        setup.repo_root,
        config=config_for(setup.repo_root, **FAST_GATES, **(overrides or {})),
        adapter=developer,
        verify_adapter=verify_adapter,
        listener=Recorder(),
        write_scope="**",
    )
    return setup, orch, developer


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()


def _parent_of_commit(root: Path, subject_start: str) -> str:
    """The parent of the commit whose subject starts with ``subject_start``: what its change was made on."""
    for line in _git(root, "log", "--format=%P %s").splitlines():
        parent, subject = line.split(" ", 1)
        if subject.startswith(subject_start):
            return parent
    raise AssertionError(f"no commit {subject_start!r}")


def test_the_reviewer_runs_on_another_family_and_the_proof_binds_who_did_what(tmp_path: Path) -> None:
    log = tmp_path / "cursor.log"
    cursor = CursorAdapter(
        repo_root=tmp_path,
        config=AutodevConfig(),
        executable=str(install_fake_cursor(tmp_path / "bin")),
        env=fake_cursor_env(log, {"text": "VERDICT: APPROVED"}),
    )
    setup, orch, developer = _orchestrator(tmp_path, cursor)

    tasks = anyio.run(lambda: orch.run(setup.intent)).tasks

    assert [task.status for task in tasks] == ["complete"] * len(tasks)
    assert "reviewer" not in {call.role for call in developer.calls}
    assert {"developer", "test_engineer", "architect"} <= {call.role for call in developer.calls}
    # The health check, then one review per task, all on the fake Cursor in ask mode (read-only).
    reviews = logged_calls(log)
    assert len(reviews) == 1 + len(tasks)
    assert all("ask" in call["argv"] for call in reviews[1:])
    contract = orch.proof("1.1")
    assert contract is not None and contract.verdict == "verified"
    family = {check.id: check for check in contract.checks}["verifier:family"]
    assert (family.status, family.reason) == ("pass", "reviewed on cursor")
    assert (contract.implemented_on, contract.verified_on) == ("claude_code", "cursor")
    assert contract.base_commit == _parent_of_commit(setup.repo_root, "autodev: 1.1 ")
    assert contract.branch == _git(setup.repo_root, "branch", "--show-current")
    assert contract.run_session == orch.session_id
    status = read_status(setup.repo_root)
    proof = next(task for task in status["tasks"] if task["id"] == "1.1")["proof"]
    assert proof["verdict"] == "verified" and proof["verified_on"] == "cursor"
    assert proof["checks"]["pass"][-1] == "verifier:family"
    assert json.loads(json.dumps(status)) == status


def test_without_another_family_warn_completes_with_the_waiver_in_the_proof(tmp_path: Path) -> None:
    setup, orch, developer = _orchestrator(tmp_path)

    tasks = anyio.run(lambda: orch.run(setup.intent)).tasks

    assert [task.status for task in tasks] == ["complete"] * len(tasks)
    assert "reviewer" in {call.role for call in developer.calls}
    contract = orch.proof("1.1")
    assert contract is not None and contract.verdict == "verified_with_waiver"
    family = {check.id: check for check in contract.checks}["verifier:family"]
    assert family.status == "waived"
    assert family.reason == "reviewed on claude_code too; completion.cross_family = warn accepts that"


def test_require_approval_blocks_until_the_check_is_waived_for_that_revision(tmp_path: Path) -> None:
    setup, orch, _ = _orchestrator(tmp_path, overrides={"completion.cross_family": "require_approval"})

    anyio.run(lambda: orch.run(setup.intent))

    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        task = plans.get_task("1.1")
    assert task.status == "blocked"
    assert "autodev waive 1.1 verifier:family" in (task.blocked_reason or "")
    blocked = orch.proof("1.1")
    assert blocked is not None and blocked.verdict == "blocked"

    orch.waive("1.1", "verifier:family", "reviewed by hand on another model")
    orch.retry("1.1")
    anyio.run(orch.execute)

    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        assert plans.get_task("1.1").status == "complete"
    after = orch.proof("1.1")
    assert after is not None and after.verdict == "verified_with_waiver"
    assert after.revision == blocked.revision
