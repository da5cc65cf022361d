"""Whole runs on projects built like real ones: a strict config, an environment outside the repository,
tests failing before any task, no tests at all, a test engineer's lint error, a reviewer that forgets its
verdict. Scripted agents; git, the gates, pytest and ruff are real."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.orchestration import git_log, orchestrator, run
from support.projects import TRIPLE, TRIPLE_TESTS, git, make_venv, mini_project, one_task_script

from autodev.errors import EXIT_SUSPENDED, EnvironmentFaultError
from autodev.orchestrator.preflight import PreflightError
from autodev.state.plan_manager import PlanManager
from autodev.state.status_reader import read_status

FAST = {"qa_gates.build.enabled": False}
BROKEN_TEST = "def test_broken() -> None:\n    assert 1 == 2, 'broken before any task'\n"


def _evidence(root: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((root / ".autodev" / "evidence" / name).read_text())
    return data


def _check(evidence: dict[str, Any], gate: str) -> dict[str, Any]:
    return next(check for check in evidence["checks"] if check["gate"] == gate)


def _prompts(adapter: Any, role: str) -> list[str]:
    return [call.prompt for call in adapter.calls if call.role == role]


def test_a_strict_project_in_an_outside_environment_runs_there_and_lint_never_rewrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = mini_project(tmp_path / "mini")
    python = make_venv(tmp_path / "envs" / "mini")
    monkeypatch.setenv("VIRTUAL_ENV", str(python.parent.parent))
    unused_import = "import os\n\n" + TRIPLE
    script = one_task_script(
        developer=(),
        extra_entries=(
            {
                "role": "developer",
                "attempt": 1,
                "edits": [{"path": "mini/core.py", "content": unused_import}],
            },
            {"role": "developer", "attempt": 2, "edits": [{"path": "mini/core.py", "content": TRIPLE}]},
        ),
    )
    orch, adapter = orchestrator(root, script)

    outcome = run(orch, "add triple")

    assert [task.status for task in outcome.tasks] == ["complete"]
    first = _evidence(root, "1.1-gates-1.json")
    # The project's environment, named in the evidence with the exact interpreter of every command.
    assert first["interpreter"] == str(python)
    assert first["environment"].startswith(f"VIRTUAL_ENV={python.parent.parent}: {python}")
    assert _check(first, "test")["runs"][0]["argv"][:3] == [str(python), "-m", "pytest"]
    # fix = true in the project: the gate reported the unused import and left the file as written.
    lint = _check(first, "lint")
    assert lint["status"] == "fail" and lint["findings"] == [
        "mini/core.py:1:8: F401 `os` imported but unused"
    ]
    assert lint["changed_files"] == []
    developer_second = _prompts(adapter, "developer")[1]
    assert "F401 `os` imported but unused" in developer_second
    # filterwarnings = ["error"] and the suite's pytest plugins: the project's tests still ran.
    assert _check(_evidence(root, "1.1-gates-2.json"), "test")["counts"]["passed"] == 1


def test_a_test_failing_on_the_base_commit_is_listed_and_never_blamed(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini", {"tests/test_broken.py": BROKEN_TEST})
    # The test engineer reports the run as it is: the base's failing test fails in it too.
    script = one_task_script(results="RESULTS: passed=2 failed=1 total=3")
    orch, adapter = orchestrator(root, script, **FAST)

    outcome = run(orch, "add triple")

    assert [(task.status, task.retry_count) for task in outcome.tasks] == [("complete", 0)]
    test = _check(_evidence(root, "1.1-gates-1.json"), "test")
    assert test["status"] == "pass" and test["findings"] == []
    assert test["preexisting"] == [
        "tests.test_broken::test_broken: failed: AssertionError: broken before any task"
    ]
    status = read_status(root)
    assert status["baseline"]["gates"][0]["findings"] == test["preexisting"]
    # The developer was told beforehand, in the words the gate uses.
    prompt = _prompts(adapter, "developer")[0]
    assert "Tests: 2 ran on the base commit" in prompt
    assert "1 of them fail there already and are not blamed on your change" in prompt


def test_a_change_that_breaks_another_test_is_blamed_for_that_one_only(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini", {"tests/test_broken.py": BROKEN_TEST})
    breaking = TRIPLE.replace("return 2 * x", "return 2 * x + 1")
    script = one_task_script(developer=({"path": "mini/core.py", "content": breaking},))
    orch, _ = orchestrator(root, script, qa_retry_limit=1, **FAST)

    run(orch, "add triple")

    task = PlanManager.open(root, readonly=True).get_task("1.1")
    assert task.status == "blocked"
    test = _check(_evidence(root, "1.1-gates-1.json"), "test")
    assert test["status"] == "fail"
    assert [finding.split(": ")[0] for finding in test["findings"]] == ["tests.test_core::test_double"]
    assert len(test["preexisting"]) == 1 and test["preexisting"][0].startswith(
        "tests.test_broken::test_broken"
    )
    assert "1 new failing test(s) (1 more fail on the base commit" in task.last_issues[0]


def test_a_base_whose_tests_cannot_run_stops_before_any_agent_call(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini", {"tests/test_import.py": "import no_such_module_xyz\n"})
    orch, adapter = orchestrator(root, one_task_script(), **FAST)

    with pytest.raises(PreflightError) as stopped:
        run(orch, "add triple")

    assert "the test gate (python) cannot run on the base commit" in stopped.value.message
    assert "test collection failed (tests.test_import): pytest ran no test" in stopped.value.message
    assert adapter.calls == []
    assert not (root / ".autodev" / "ledger.jsonl").exists() or (
        (root / ".autodev" / "ledger.jsonl").read_bytes() == b""
    )


def test_a_repository_without_tests_records_no_tests_and_the_developer_is_told(tmp_path: Path) -> None:
    no_tests = '[project]\nname = "mini"\nversion = "0.1.0"\n\n[tool.ruff]\nfix = true\n'
    root = mini_project(tmp_path / "mini", {"pyproject.toml": no_tests}, drop=("tests/test_core.py",))
    script = one_task_script(tests=(), results="RESULTS: passed=0 failed=0 total=0")
    orch, adapter = orchestrator(root, script, **FAST)

    outcome = run(orch, "add triple")

    assert [task.status for task in outcome.tasks] == ["complete"]
    gates = _evidence(root, "1.1-gates-1.json")
    assert gates["passed"] is True
    assert _check(gates, "test")["status"] == "no_tests"
    assert _evidence(root, "1.1-test-1.json")["run_status"] == "no_tests"
    assert "this repository has no tests" in _prompts(adapter, "developer")[0]
    assert "does not fail your change" in _prompts(adapter, "developer")[0]


def test_the_test_engineers_files_are_gated_and_the_patch_is_exactly_the_commit(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini")
    sloppy = "import os\n\n" + TRIPLE_TESTS
    helper = {"path": "tests/helpers.py", "content": "HELPER = 1\n"}
    script = one_task_script(
        test_responses=(
            {
                "text": "RESULTS: passed=2 failed=0 total=2",
                "edits": [{"path": "tests/test_triple.py", "content": sloppy}, helper],
            },
            {
                "text": "Removed the unused import.\nRESULTS: passed=2 failed=0 total=2",
                "edits": [{"path": "tests/test_triple.py", "content": TRIPLE_TESTS}],
            },
        )
    )
    orch, adapter = orchestrator(root, script, **FAST)

    outcome = run(orch, "add triple")

    (task,) = outcome.tasks
    assert (task.status, task.retry_count) == ("complete", 0)
    assert len(_prompts(adapter, "developer")) == 1  # the test engineer's mistake never went to the developer
    evidence = _evidence(root, "1.1-test-1.json")
    assert evidence["repair_of"] is not None and "F401 `os` imported but unused" in evidence["repair_of"]
    assert evidence["problem"] is None
    assert evidence["outside_task_files"] == ["tests/helpers.py"]
    repair_prompt = _prompts(adapter, "test_engineer")[1]
    assert "YOUR PREVIOUS REPLY COULD NOT BE USED" in repair_prompt and "F401" in repair_prompt
    # What is committed is what was checked; the patch is the commit, the developer's own diff beside it.
    committed = git(
        root, "diff", f"{task.base_commit}..{task.commit}", "--binary", "--full-index", "--no-renames"
    )
    assert (root / ".autodev" / "evidence" / "1.1.patch").read_text() == committed
    developer_patch = (root / ".autodev" / "evidence" / "1.1.developer.patch").read_text()
    assert "mini/core.py" in developer_patch and "tests/test_triple.py" not in developer_patch
    assert "tests/helpers.py" in committed and "import os" not in committed


def test_a_reviewer_that_forgets_its_verdict_once_gets_one_repair_turn(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini")
    script = one_task_script(reviewer=("The change looks right to me.", "VERDICT: APPROVED\nISSUES:\n"))
    orch, adapter = orchestrator(root, script, **FAST)

    outcome = run(orch, "add triple")

    assert [(task.status, task.retry_count) for task in outcome.tasks] == [("complete", 0)]
    assert len(_prompts(adapter, "developer")) == 1
    reviews = _prompts(adapter, "reviewer")
    assert len(reviews) == 2 and "YOUR PREVIOUS REPLY COULD NOT BE USED: it has no 'VERDICT:" in reviews[1]
    review = _evidence(root, "1.1-review-1.json")
    assert review["verdict"] == "APPROVED"
    assert review["previous_output"] == "The change looks right to me."


def test_a_reviewer_that_never_gives_a_verdict_is_retried_as_the_reviewer_not_the_developer(
    tmp_path: Path,
) -> None:
    root = mini_project(tmp_path / "mini")
    script = one_task_script(reviewer=("Looks fine (attempt {attempt}).",))
    orch, adapter = orchestrator(root, script, qa_retry_limit=2, **FAST)

    run(orch, "add triple")

    task = PlanManager.open(root, readonly=True).get_task("1.1")
    assert task.status == "blocked" and task.retry_count == 2
    assert task.last_issues_for == "reviewer"
    assert len(_prompts(adapter, "developer")) == 1
    assert len(_prompts(adapter, "reviewer")) == 4  # two attempts, each with its repair turn
    assert "also after a repair turn" in task.last_issues[0]


def test_a_test_engineer_miscount_is_repaired_with_the_real_counts(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini")
    script = one_task_script(
        test_replies=("RESULTS: passed=9 failed=0 total=9", "Recounted.\nRESULTS: passed=2 failed=0 total=2")
    )
    orch, adapter = orchestrator(root, script, **FAST)

    outcome = run(orch, "add triple")

    assert [(task.status, task.retry_count) for task in outcome.tasks] == [("complete", 0)]
    first, second = _prompts(adapter, "test_engineer")
    # Told up front which run its counts must match, and on the repair what that run showed.
    assert "HOW YOUR COUNTS ARE CHECKED" in first and " -m pytest -q -p no:cacheprovider" in first
    shown = (
        "it says passed=9 failed=0 total=9, but AutoDev's own run of the tests shows passed=2 "
        "failed=0 total=2"
    )
    assert shown in second
    assert _evidence(root, "1.1-test-1.json")["agrees"] is True


def test_an_agent_cli_that_cannot_start_stops_the_run_resumably_at_no_attempt(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini")
    missing = {
        "role": "developer",
        "task_id": "1.1",
        "fail": {"kind": "cli_missing", "message": "claude: not found"},
    }
    orch, _ = orchestrator(root, one_task_script(extra_entries=(missing,)), **FAST)

    with pytest.raises(EnvironmentFaultError) as stopped:
        run(orch, "add triple")

    assert stopped.value.exit_code == EXIT_SUSPENDED
    assert "the developer agent cannot be started (claude: not found)" in stopped.value.message
    task = PlanManager.open(root, readonly=True).get_task("1.1")
    assert (task.status, task.retry_count) == ("in_progress", 0)

    fixed, _ = orchestrator(root, one_task_script(), **FAST)
    tasks = anyio.run(fixed.resume)
    assert [(t.status, t.retry_count) for t in tasks] == [("complete", 0)]
    assert git_log(root)[0] == "autodev: 1.1 Add triple"


def test_what_the_plan_phase_learned_reaches_every_role_of_every_task(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini")
    explorer = (
        "mini keeps one function per concern in mini/core.py.\nLESSON: mini's tests import from mini.core\n"
    )
    orch, adapter = orchestrator(root, one_task_script(explorer=explorer), **FAST)

    run(orch, "add triple")

    for role in ("developer", "reviewer", "test_engineer"):
        prompt = _prompts(adapter, role)[0]
        assert "From the explorer's findings (evidence plan-explore-1.json):" in prompt, role
        assert "mini keeps one function per concern" in prompt
        assert "From the domain expert's notes on arithmetic (evidence plan-domain_expert-1.json)" in prompt
        assert "The project's code runs in VIRTUAL_ENV=" in prompt
    # The explorer's LESSON: line was kept and offered to the task's roles.
    assert "- mini's tests import from mini.core" in _prompts(adapter, "developer")[0]


def test_a_reviewer_on_a_later_attempt_sees_its_own_issues_and_what_changed_since(tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini")
    rejected = "VERDICT: NEEDS_CHANGES\nISSUES:\n- mini/core.py: triple needs a docstring - add one\n"
    documented = TRIPLE.replace("    return 3 * x", '    """Three times x."""\n    return 3 * x')
    script = one_task_script(
        developer=(),
        reviewer=(rejected, "VERDICT: APPROVED\nISSUES:\n"),
        extra_entries=(
            {"role": "developer", "attempt": 1, "edits": [{"path": "mini/core.py", "content": TRIPLE}]},
            {"role": "developer", "attempt": 2, "edits": [{"path": "mini/core.py", "content": documented}]},
        ),
    )
    orch, adapter = orchestrator(root, script, **FAST)

    run(orch, "add triple")

    second = _prompts(adapter, "reviewer")[1]
    assert "YOUR LAST REVIEW OF THIS TASK (attempt 1) SAID NEEDS_CHANGES." in second
    assert "- mini/core.py: triple needs a docstring - add one" in second
    since = second.split("WHAT CHANGED SINCE THAT REVIEW:", 1)[1]
    assert '+    """Three times x."""' in since and "+def triple" not in since
