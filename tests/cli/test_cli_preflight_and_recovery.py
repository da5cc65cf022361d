"""The preflight, ``doctor``, ``retry`` and ``skip`` through the installed executable, as users meet them."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from support.cli import Run, RunCli
from support.projects import mini_project, one_task_script

pytestmark = pytest.mark.slow


def _one_line_error(result: Run, code: int) -> str:
    assert result.code == code, result
    assert result.err.startswith("error: ") and len(result.err.strip().splitlines()) == 1, result.err
    assert "Traceback" not in result.err
    return result.err


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "script.json"
    path.write_text(one_task_script().model_dump_json(exclude_defaults=True))
    return path


def test_a_run_that_would_lack_tools_stops_before_any_agent_call_listing_every_piece(
    run_cli: RunCli, tmp_path: Path
) -> None:
    root = mini_project(tmp_path / "mini")
    config = root / ".autodev" / "config.toml"
    config.parent.mkdir()
    config.write_text(
        '[qa_gates.lint]\ncommand = ["no-such-linter-xyz", "{files}"]\n\n'
        '[qa_gates.secretscan]\ncommand = ["no-such-scanner-xyz"]\n'
    )

    result = run_cli(
        "-C", str(root), "run", "--platform", "scripted", "--script", str(_script(tmp_path)), "x"
    )

    message = _one_line_error(result, 2)
    assert "preflight found 2 problems, so no agent was called" in message
    assert "(1) lint gate: no-such-linter-xyz not found; provide it, set qa_gates.lint.command" in message
    assert "(2) secretscan gate: no-such-scanner-xyz not found" in message
    assert (
        not (root / ".autodev" / "ledger.jsonl").exists()
        or (root / ".autodev" / "ledger.jsonl").stat().st_size == 0
    )

    doctor = run_cli("-C", str(root), "doctor")
    flat = " ".join(doctor.out.split())
    assert "The gates could not run here (a run stops before any agent call):" in flat
    assert "- lint gate: no-such-linter-xyz not found" in flat
    # How the project's environment was found, step by step: the shell's VIRTUAL_ENV won.
    assert re.search(r"repo_venv\s*│\s*no\s*│\s*no \.venv or venv", doctor.out)
    assert re.search(r"virtual_env\s*│\s*chosen", doctor.out)


def test_retry_and_skip_from_the_command_line(run_cli: RunCli, tmp_path: Path) -> None:
    root = mini_project(tmp_path / "mini")
    plan = tmp_path / "plan.md"
    plan.write_text(
        "# Plan: Two\n\n## Phase 1: P\n\n### Task 1.1: A\n- Files: a.py\n\n### Task 1.2: B\n- Files: b.py\n"
        "- Depends: 1.1\n"
    )
    assert run_cli("-C", str(root), "plan", "--from-markdown", str(plan)).code == 0

    refused = run_cli("-C", str(root), "retry", "1.1")
    assert "task 1.1: cannot move from 'pending' to 'in_progress' (only a blocked task can be retried)" in (
        _one_line_error(refused, 2)
    )
    unknown = run_cli("-C", str(root), "skip", "9.9")
    assert "task '9.9' is not in the plan" in _one_line_error(unknown, 2)

    skipped = run_cli("-C", str(root), "skip", "1.1")
    assert skipped.code == 0 and "Task 1.1 is skipped." in skipped.out
    again = run_cli("-C", str(root), "skip", "1.1")
    assert "only a pending task can be skipped" in _one_line_error(again, 2)
    status = json.loads(run_cli("-C", str(root), "status", "--json").out)
    assert {task["id"]: task["status"] for task in status["tasks"]} == {"1.1": "skipped", "1.2": "pending"}


def test_a_reader_that_leaves_early_does_not_stop_or_hang_the_run(autodev_exe: Path, tmp_path: Path) -> None:
    # `autodev demo | head`: the display's output has nowhere to go after a few lines; the run goes on.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTODEV_")}
    demo = tmp_path / "demo"
    proc = subprocess.Popen(
        [str(autodev_exe), "demo", "--dir", str(demo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert proc.stdout is not None
    for _ in range(12):
        proc.stdout.readline()
    proc.stdout.close()

    assert proc.wait(timeout=120) == 0
    status = json.loads(
        subprocess.run(
            [str(autodev_exe), "-C", str(demo), "status", "--json"],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout
    )
    assert {task["status"] for task in status["tasks"]} == {"complete"}
    # Each task's proof: in status, and from `autodev proof`, bound to the base its change was made on.
    assert {task["proof"]["verdict"] for task in status["tasks"]} == {"verified"}
    shown = subprocess.run(
        [str(autodev_exe), "-C", str(demo), "proof", "1.1"], capture_output=True, text=True, env=env
    )
    contract = json.loads(
        subprocess.run(
            [str(autodev_exe), "-C", str(demo), "proof", "1.1", "--json"],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout
    )
    parent = subprocess.run(
        ["git", "log", "-1", "--format=%P", "--grep=^autodev: 1.1 "],
        cwd=demo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert contract["base_commit"] == parent
    assert shown.returncode == 0
    assert shown.stdout.startswith(f"Task 1.1, attempt {contract['attempt']}: verified (revision ")
    assert f"  made on base {parent[:12]} for branch {contract['branch']}\n" in shown.stdout
    assert "  implemented on scripted, reviewed on scripted\n" in shown.stdout
