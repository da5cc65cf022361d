"""`autodev clean`: what a crashed run left behind goes, and nothing recorded is touched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.cli import RunCli

from autodev.cli.demo import prepare_demo
from autodev.state.children import register_child
from autodev.state.paths import AutodevPaths
from autodev.state.plan_manager import PlanManager


def test_clean_removes_stale_git_locks_children_and_temp_files(run_cli: RunCli, tmp_path: Path) -> None:
    setup = prepare_demo(tmp_path / "project")
    root = setup.repo_root
    plan = tmp_path / "plan.md"
    plan.write_text("# Plan: p\n\n## Phase 1: x\n\n### Task 1.1: t\n- Files: a.py\n")
    assert run_cli("-C", str(root), "plan", "--from-markdown", str(plan)).code == 0
    ledger_before = (root / ".autodev" / "ledger.jsonl").read_bytes()
    # What a git killed inside `git add` or `git commit` leaves behind.
    branch = subprocess.run(
        ["git", "symbolic-ref", "HEAD"], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()
    stale = [root / ".git" / "index.lock", root / ".git" / "HEAD.lock", root / ".git" / f"{branch}.lock"]
    for lock in stale:
        lock.parent.mkdir(parents=True, exist_ok=True)
        lock.write_text("")
    dead_temp = root / ".autodev" / "evidence" / ".1.1-review-1.json.999999.tmp"
    dead_temp.parent.mkdir(parents=True, exist_ok=True)
    dead_temp.write_text("{")
    # A child a killed run left registered: a real process in its own session.
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    assert register_child(AutodevPaths(root).children_dir, orphan.pid) is not None
    try:
        result = run_cli("-C", str(root), "clean")
        assert result.code == 0, result.err
        assert orphan.wait(timeout=10) != 0  # it was killed, not left to finish
        assert "Stopped 1 leftover process(es)" in result.out
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()
    assert not [lock for lock in stale if lock.exists()]
    assert not dead_temp.exists()
    assert (root / ".autodev" / "ledger.jsonl").read_bytes() == ledger_before
    assert PlanManager.open(root, readonly=True).plan.title == "p"
