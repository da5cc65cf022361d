"""The CLI as a user meets it: exit codes, one-line errors, no tracebacks, state left intact."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from support.cli import STATUS_KEYS, Run, RunCli

from autodev._version import __version__

GOOD_PLAN = textwrap.dedent(
    """\
    # Plan: Demo plan

    ## Phase 1: Build
    ### Task 1.1: Write the module
    - Description: Create the module.
    - Files: src/mod.py
    - Acceptance:
      - [ ] it imports

    ### Task 1.2: Test the module
    - Files: tests/test_mod.py
    - Depends: 1.1
    """
)


def _write(repo: Path, name: str, text: str) -> Path:
    path = repo / name
    path.write_text(text)
    return path


def _assert_clean_error(result: Run, code: int = 2) -> None:
    assert result.code == code, result
    assert result.err.startswith("error: "), result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
    assert "Traceback" not in result.err


def test_version_and_python_dash_m(run_cli: RunCli, repo: Path) -> None:
    result = run_cli("--version")
    assert result.code == 0 and __version__ in result.out
    proc = subprocess.run(
        [sys.executable, "-m", "autodev", "--version"], capture_output=True, text=True, cwd=repo
    )
    assert proc.returncode == 0 and __version__ in proc.stdout


@pytest.mark.parametrize(
    "command",
    [[], ["init"], ["plan"], ["status"], ["ledger"], ["ledger", "verify"], ["config"], ["config", "show"]],
)
def test_every_command_has_help(run_cli: RunCli, command: list[str]) -> None:
    result = run_cli(*command, "--help")
    assert result.code == 0, result.err
    assert "Usage: autodev" in result.out
    if command not in (["ledger"], ["config"]):
        assert "Exit codes" in result.out


def test_plan_then_status_table_and_json(run_cli: RunCli, repo: Path) -> None:
    plan_file = _write(repo, "plan.md", GOOD_PLAN)
    saved = run_cli("plan", "--from-markdown", str(plan_file))
    assert saved.code == 0, saved.err
    assert "2 task(s)" in saved.out

    table = run_cli("status")
    assert table.code == 0
    assert "Demo plan" in table.out and "1.1" in table.out and "pending" in table.out

    as_json = run_cli("status", "--json")
    data = json.loads(as_json.out)
    assert set(data) == STATUS_KEYS
    assert data["missing_commits"] == []
    assert data["plan"]["title"] == "Demo plan" and data["plan"]["phases"] == 1
    assert data["session_id"].startswith("sess-")
    assert [t["id"] for t in data["tasks"]] == ["1.1", "1.2"]
    assert data["tasks"][1]["depends_on"] == ["1.1"]
    assert data["totals"]["pending"] == 2 and data["totals"]["total"] == 2


def test_status_without_a_plan_creates_nothing(run_cli: RunCli, repo: Path) -> None:
    result = run_cli("status")
    assert result.code == 0 and "No plan yet" in result.out
    assert json.loads(run_cli("status", "--json").out)["plan"] is None
    assert not (repo / ".autodev").exists()


def test_malformed_plan_is_one_line_with_line_number_and_ledger_untouched(
    run_cli: RunCli, repo: Path
) -> None:
    _write(repo, "good.md", GOOD_PLAN)
    assert run_cli("plan", "--from-markdown", "good.md").code == 0
    ledger = repo / ".autodev" / "ledger.jsonl"
    before = ledger.read_bytes()
    bad = _write(repo, "bad.md", "# Plan: x\n\n### Task 1.1: orphan\n")
    result = run_cli("plan", "--from-markdown", str(bad))
    _assert_clean_error(result)
    assert "line 3" in result.err and len(result.err.strip().splitlines()) == 1
    assert ledger.read_bytes() == before


def test_plan_paths_that_escape_the_repo_are_rejected(run_cli: RunCli, repo: Path) -> None:
    outside = repo.parent / "outside"
    outside.mkdir()
    (repo / "link").symlink_to(outside)
    for files in ("../etc/passwd", "/etc/passwd", "link/secret.py"):
        plan = GOOD_PLAN.replace("src/mod.py", files)
        result = run_cli("plan", "--from-markdown", str(_write(repo, "p.md", plan)))
        _assert_clean_error(result)
        assert "the repository" in result.err and files in result.err, result.err
    assert not (repo / ".autodev" / "ledger.jsonl").exists()


def test_missing_plan_file_is_a_clean_error(run_cli: RunCli) -> None:
    result = run_cli("plan", "--from-markdown", "nope.md")
    _assert_clean_error(result)
    assert "nope.md" in result.err


def test_replacing_a_plan_with_work_needs_replace(run_cli: RunCli, repo: Path) -> None:
    from autodev.state.plan_manager import PlanManager

    _write(repo, "plan.md", GOOD_PLAN)
    assert run_cli("plan", "--from-markdown", "plan.md").code == 0
    with PlanManager(repo) as manager:
        manager.update_task_status("1.1", "in_progress")
    again = run_cli("plan", "--from-markdown", "plan.md")
    _assert_clean_error(again)
    assert "--replace" in again.err
    assert run_cli("plan", "--from-markdown", "plan.md", "--replace").code == 0


def test_init_writes_every_default_and_refuses_to_overwrite(run_cli: RunCli, repo: Path) -> None:
    first = run_cli("init")
    assert first.code == 0
    config = repo / ".autodev" / "config.toml"
    text = config.read_text()
    assert "qa_retry_limit" in text and "max_tool_calls_per_task" in text
    second = run_cli("init")
    _assert_clean_error(second)
    assert "--force" in second.err
    assert run_cli("init", "--force").code == 0


def test_config_show_names_sources_and_bad_config_is_exit_2(run_cli: RunCli, repo: Path) -> None:
    result = run_cli("config", "show", env={"AUTODEV_QA_RETRY_LIMIT": "5"})
    assert result.code == 0, result.err
    row = next(line for line in result.out.splitlines() if "qa_retry_limit" in line)
    assert "5" in row and "AUTODEV_QA_RETRY_LIMIT" in row
    as_json = json.loads(run_cli("config", "show", "--json").out)
    assert as_json["qa_retry_limit"] == 3

    (repo / ".autodev").mkdir()
    (repo / ".autodev" / "config.toml").write_text('platform = "claud"\n')
    bad = run_cli("config", "show")
    _assert_clean_error(bad)
    assert "platform" in bad.err and "config.toml" in bad.err and "claude_code" in bad.err


def test_ledger_verify_reports_ok_then_names_a_tampered_line(run_cli: RunCli, repo: Path) -> None:
    _write(repo, "plan.md", GOOD_PLAN)
    run_cli("plan", "--from-markdown", "plan.md")
    ok = run_cli("ledger", "verify")
    assert ok.code == 0, ok.err
    assert "1 entries" in ok.out and "head:" in ok.out
    ledger = repo / ".autodev" / "ledger.jsonl"
    ledger.write_text(ledger.read_text().replace("Demo plan", "Demo PLAN"))
    broken = run_cli("ledger", "verify")
    _assert_clean_error(broken)
    assert "line 1" in broken.err and "hash mismatch" in broken.err
    # Every other command refuses too, without touching the ledger.
    before = ledger.read_bytes()
    _assert_clean_error(run_cli("status"))
    _assert_clean_error(run_cli("plan", "--from-markdown", "plan.md", "--replace"))
    assert ledger.read_bytes() == before


def test_ledger_verify_catches_modified_evidence(run_cli: RunCli, repo: Path) -> None:
    from autodev.state.plan_manager import PlanManager
    from autodev.state.schemas import ReviewEvidence

    _write(repo, "plan.md", GOOD_PLAN)
    run_cli("plan", "--from-markdown", "plan.md")
    with PlanManager(repo) as manager:
        path = manager.record_evidence(ReviewEvidence(task_id="1.1", verdict="REJECTED"))
    path.write_text(path.read_text().replace("REJECTED", "APPROVED"))
    result = run_cli("ledger", "verify")
    assert result.code == 1
    assert "modified after it was recorded" in result.out


def test_a_held_lock_names_the_holder_pid(run_cli: RunCli, repo: Path) -> None:
    _write(repo, "plan.md", GOOD_PLAN)
    assert run_cli("plan", "--from-markdown", "plan.md").code == 0
    holder_code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from autodev.state.paths import AutodevPaths
        from autodev.state.session_lock import SessionLock
        with SessionLock(AutodevPaths(Path({str(repo)!r}))):
            print("held", flush=True)
            time.sleep(30)
        """
    )
    holder = subprocess.Popen([sys.executable, "-c", holder_code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        result = run_cli(
            "plan", "--from-markdown", "plan.md", "--replace", env={"AUTODEV_LOCK_TIMEOUT_S": "0.5"}
        )
        assert time.monotonic() - started < 20
        _assert_clean_error(result)
        assert f"process {holder.pid}" in result.err
        # status is read-only and works while the lock is held.
        assert run_cli("status", "--json").code == 0
    finally:
        holder.kill()
        holder.communicate()
    # The kernel released the killed holder's lock: the next writer gets it.
    assert run_cli("plan", "--from-markdown", "plan.md", "--replace").code == 0


@pytest.mark.parametrize(
    ("references", "message"),
    [
        ("E1", "evidence E1 is foreign: ledger entry 1 is not an accepted result of this plan"),
        ("E4096", "evidence E4096 does not exist: the ledger ends at entry"),
        ("E2,x", "evidence reference 'x' is malformed"),
    ],
)
def test_an_evidence_reference_that_cannot_be_used_is_one_line_and_the_ledger_untouched(
    run_cli: RunCli, repo: Path, references: str, message: str
) -> None:
    _planned_repository(run_cli, repo)
    ledger = repo / ".autodev" / "ledger.jsonl"
    before = ledger.read_bytes()

    result = run_cli("execute", "--platform", "inline", "--evidence", references)

    assert result.code == 2, result
    assert result.err.startswith("error: ") and len(result.err.strip().splitlines()) == 1, result.err
    assert message in result.err and "Traceback" not in result.err
    assert ledger.read_bytes() == before


@pytest.mark.parametrize("command", [["adopt", "1.1"], ["discard", "1.1"], ["adopt", "9.9"]])
def test_adopt_or_discard_without_a_waiting_change_is_one_line_and_the_ledger_untouched(
    run_cli: RunCli, repo: Path, command: list[str]
) -> None:
    _planned_repository(run_cli, repo)
    ledger = repo / ".autodev" / "ledger.jsonl"
    before = ledger.read_bytes()

    result = run_cli(*command, write_scope=None)

    assert result.code == 2, result
    assert result.err.startswith("error: ") and len(result.err.strip().splitlines()) == 1, result.err
    expected = "no change waiting for adoption" if command[1] == "1.1" else "9.9"
    assert expected in result.err and "Traceback" not in result.err
    assert ledger.read_bytes() == before


def _planned_repository(run_cli: RunCli, repo: Path) -> None:
    """``repo`` as a git repository with one commit and the demo plan saved."""
    identity = ["-c", "user.name=t", "-c", "user.email=t@invalid"]
    for args in (["init", "-q"], [*identity, "commit", "-q", "--allow-empty", "-m", "initial"]):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    assert run_cli("plan", "--from-markdown", str(_write(repo, "plan.md", GOOD_PLAN))).code == 0
