"""The completion contract: acceptance criteria that name a command are run by AutoDev itself, argv without
a shell, programs allowlisted; anything else is refused and recorded blocked, and the task is blocked until
the criterion is fixed or the check waived for that exact revision. Scripted agents, real git, real pytest."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.orchestration import Recorder, config_for, demo_project, script_with

from autodev.adapters.scripted import Script, ScriptedAdapter
from autodev.cli.demo import DemoSetup
from autodev.errors import AutodevError
from autodev.orchestrator import Orchestrator
from autodev.orchestrator.execute.completion import command_of, completion_verdict
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import RequiredCheck, RequiredCheckStatus

FAST_GATES = {"qa_gates.secretscan.enabled": False, "qa_gates.build.enabled": False}


def _planned(
    tmp_path: Path, *criteria: str, script: Script | None = None, setup: DemoSetup | None = None
) -> tuple[Any, Orchestrator, ScriptedAdapter]:
    """The demo (or ``setup``) with task 1.1's plan carrying ``criteria`` besides its own, saved from
    markdown, played by ``script`` (the demo's by default)."""
    setup = setup or demo_project(tmp_path)
    architect = next(e for e in setup.script.entries if e.role == "architect")
    extra = "".join(f"  - [ ] {criterion}\n" for criterion in criteria)
    plan = architect.text.replace(
        '  - [ ] slugify("Crème brûlée") == "creme-brulee"\n',
        f'  - [ ] slugify("Crème brûlée") == "creme-brulee"\n{extra}',
    )
    assert extra in plan
    plan_file = tmp_path / "plan.md"
    plan_file.write_text(plan, encoding="utf-8")
    adapter = ScriptedAdapter(script=script or setup.script)
    orch = Orchestrator(
        setup.repo_root,
        config=config_for(setup.repo_root, **FAST_GATES),
        adapter=adapter,
        listener=Recorder(),
        write_scope="**",
    )
    orch.plan_from_markdown(plan_file)
    return setup, orch, adapter


def test_a_criterion_naming_a_command_is_run_by_autodev_and_proves_the_task(tmp_path: Path) -> None:
    setup, orch, _ = _planned(tmp_path, "`pytest tests/test_slug.py -q` passes")

    tasks = anyio.run(orch.execute)

    assert {task.status for task in tasks} == {"complete"}
    contract = orch.proof("1.1")
    assert contract is not None and contract.verdict == "verified"
    checks = {check.id: check for check in contract.checks}
    command = checks["command:3"]
    assert command.status == "pass" and command.exit_code == 0
    assert command.argv[1:4] == ["-m", "pytest", "tests/test_slug.py"]  # the project's interpreter
    assert command.output_sha256 and "passed" in command.output_excerpt
    assert checks["semantic:1"].status == "settled" and checks["gate:test"].status == "pass"
    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        (ref,) = [r for r in plans.evidence_for("1.1") if r.kind == "completion"]
    assert ref.summary is not None and ref.summary["verdict"] == "verified"


def test_shell_syntax_and_unlisted_programs_are_refused_the_task_blocked_until_waived(tmp_path: Path) -> None:
    marker = tmp_path / "still-here"
    marker.write_text("x")
    setup, orch, _ = _planned(
        tmp_path, f"`pytest; rm -rf {marker}` passes", "`curl http://127.0.0.1:9/` works"
    )

    anyio.run(orch.execute)

    assert marker.exists()  # nothing ran through a shell
    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        task = plans.get_task("1.1")
    assert task.status == "blocked"
    reason = task.blocked_reason or ""
    assert (
        "completion: blocked" in reason
        and "shell syntax" in reason
        and "'curl' is not an allowed program" in reason
    )
    assert "autodev waive 1.1 command:3" in reason
    contract = orch.proof("1.1")
    assert contract is not None
    assert {c.id: c.status for c in contract.checks if c.kind == "command"} == {
        "command:3": "blocked",
        "command:4": "blocked",
    }

    # A check that could run is never waivable; an unknown one is named.
    with pytest.raises(AutodevError, match="not blocked"):
        orch.waive("1.1", "gate:test", "no")
    with pytest.raises(AutodevError, match="no check 'command:9'"):
        orch.waive("1.1", "command:9", "no")
    orch.waive("1.1", "command:3", "the shell line was a typo")
    orch.waive("1.1", "command:4", "no network here")
    orch.retry("1.1")
    anyio.run(orch.execute)

    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        assert plans.get_task("1.1").status == "complete"
        assert plans.waived_checks("1.1", contract.revision) == {"command:3", "command:4"}
        assert plans.waived_checks("1.1", "another-revision") == frozenset()
    after = orch.proof("1.1")
    assert after is not None and after.verdict == "verified_with_waiver"


def test_a_failing_command_requests_changes_with_its_output(tmp_path: Path) -> None:
    setup, orch, adapter = _planned(tmp_path, "`pytest tests/test_nothing_here.py -q` passes")
    with PlanManager.open(setup.repo_root) as plans:
        plans.set_task_model("1.1", "strong")

    anyio.run(orch.execute)

    with PlanManager.open(setup.repo_root, readonly=True) as plans:
        task = plans.get_task("1.1")
    assert task.status == "blocked"
    developer_prompts = [
        call.prompt for call in adapter.calls if call.role == "developer" and call.task_id == "1.1"
    ]
    assert any(
        "completion check command:3" in prompt and "test_nothing_here" in prompt
        for prompt in developer_prompts[1:]
    )
    contract = orch.proof("1.1")
    assert contract is not None and contract.verdict == "changes_requested"


def test_the_verdict_follows_the_checks() -> None:
    def check(status: RequiredCheckStatus) -> RequiredCheck:
        return RequiredCheck(id=status, kind="command", description="c", status=status)

    assert completion_verdict([check("pass"), check("settled")]) == "verified"
    assert completion_verdict([check("pass"), check("waived")]) == "verified_with_waiver"
    assert completion_verdict([check("fail"), check("waived")]) == "changes_requested"
    assert completion_verdict([check("fail"), check("blocked")]) == "blocked"
    assert completion_verdict([check("pass")], timed_out=True) == "timed_out"
    assert command_of("`pytest -q` passes") == "pytest -q"
    assert command_of("`make check` exits 0.") == "make check"
    assert command_of('slugify("a") == "a"') is None
    assert command_of("`autodev areas core` shows the area not stale") is None


def test_a_reviewer_approving_each_new_change_in_the_same_words_is_no_loop(tmp_path: Path) -> None:
    """Attempts 1 and 2 fail only their acceptance command, so the reviewer approves three changes with the
    same reply: the same answer to a new question, which must not block the task as a loop."""
    setup = demo_project(tmp_path)
    root = setup.repo_root
    (root / "tests" / "check_slug.py").write_text(
        "from textutils import slug\n\n\ndef test_the_slug_length_is_bounded() -> None:\n"
        "    assert slug.MAX_LENGTH == 80\n"
    )
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@invalid", "commit", "-qm", "an acceptance check"],
        cwd=root,
        check=True,
    )
    fixed = (
        next(entry for entry in setup.script.entries if entry.role == "developer" and entry.attempt == 2)
        .edits[0]
        .content
    )
    changed = "Implemented slugify.\nCHANGED:\n- textutils/slug.py"
    script = script_with(
        setup,
        *(
            {
                "role": "developer",
                "task_id": "1.1",
                "attempt": attempt,
                "text": f"Attempt {attempt}. {changed}",
                "edits": [{"path": "textutils/slug.py", "content": content}],
            }
            for attempt, content in ((1, fixed), (2, fixed), (3, f"{fixed}\nMAX_LENGTH = 80\n"))
        ),
        {"role": "reviewer", "task_id": "1.1", "text": "VERDICT: APPROVED\nISSUES:\n- none"},
    )
    _, orch, adapter = _planned(
        tmp_path, "`pytest tests/check_slug.py -q` passes", script=script, setup=setup
    )

    anyio.run(orch.execute)

    with PlanManager.open(root, readonly=True) as plans:
        task = plans.get_task("1.1")
    assert (task.status, task.retry_count) == ("complete", 2), task.blocked_reason
    assert [call.role for call in adapter.calls if call.task_id == "1.1"].count("reviewer") == 3
