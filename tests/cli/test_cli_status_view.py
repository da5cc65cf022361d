"""``autodev status`` as a person sees it on a terminal: the short view, and ``--all`` through the pager when
the terminal is too small for every task."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
from pathlib import Path

from support.cli import AUTODEV, autodev, clean_env
from support.projects import mini_project


def _plan_of(tasks: int) -> str:
    lines = ["# Plan: Many small helpers", "", "## Phase 1: Helpers", ""]
    for index in range(1, tasks + 1):
        lines += [
            f"### Task 1.{index}: Helper {index}",
            f"- Description: Add helper {index}.",
            f"- Files: mini/helper_{index}.py",
            "- Acceptance:",
            f"  - [ ] helper_{index} exists",
            "",
        ]
    return "\n".join(lines)


def _on_a_terminal(repo: Path, *args: str, rows: int, env: dict[str, str]) -> None:
    """Run ``autodev`` with a pseudo-terminal of ``rows`` lines as its stdin, stdout and stderr."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, 120, 0, 0))
    try:
        with subprocess.Popen(
            [str(AUTODEV), "-C", str(repo), *args], stdin=follower, stdout=follower, stderr=follower, env=env
        ) as process:
            os.close(follower)
            while True:  # drain the terminal, or a full one would stop the process
                try:
                    if not os.read(leader, 65536):
                        break
                except OSError:
                    break
            assert process.wait(timeout=60) == 0
    finally:
        os.close(leader)


def test_all_tasks_go_through_the_pager_when_the_terminal_is_too_small(tmp_path: Path) -> None:
    repo = mini_project(tmp_path / "repo")
    plan = tmp_path / "plan.md"
    plan.write_text(_plan_of(30))
    assert autodev(repo, "plan", "--from-markdown", str(plan)).code == 0
    paged = tmp_path / "paged.txt"
    env = {**clean_env(), "PAGER": f"cat > {paged}", "MANPAGER": f"cat > {paged}", "TERM": "xterm"}

    _on_a_terminal(repo, "status", rows=12, env=env)
    assert not paged.exists()  # the short view fits: no pager

    _on_a_terminal(repo, "status", "--all", rows=12, env=env)
    text = paged.read_text()
    assert all(f"1.{index} " in text for index in range(1, 31))
    piped = autodev(repo, "status", "--all")  # not a terminal: printed as it is, no pager
    assert piped.code == 0 and "Helper 30" in piped.out
    short = autodev(repo, "status")
    assert "Helper 10" in short.out and "Helper 11" not in short.out
    assert "20 more task(s) not listed; `autodev status --all` lists every task" in short.out
