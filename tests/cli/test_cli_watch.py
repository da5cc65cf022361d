"""``autodev watch`` in a pseudo-terminal, following a running demo from another process: it redraws the tasks
in flight and the recent events while the run goes, never stops or slows it, and ends when the run ends."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from pathlib import Path

import pytest
from support.cli import clean_env

from autodev.cli.demo import DemoSetup

pytestmark = pytest.mark.slow


def _read_until_exit(process: subprocess.Popen[bytes], master: int, deadline_s: float) -> bytes:
    output = b""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other end closed: the watcher is gone
                break
            if not chunk:
                break
            output += chunk
        elif process.poll() is not None:
            break
    return output


def test_watch_follows_a_running_demo_in_a_terminal_and_ends_with_it(
    autodev_exe: Path, demo: DemoSetup, tmp_path: Path
) -> None:
    # Slow agents, so the run lasts long enough to be watched.
    script = tmp_path / "slow.json"
    script.write_text(json.dumps({**demo.script.model_dump(exclude_defaults=True), "latency_s": 0.3}))
    env = clean_env()
    root = demo.repo_root
    agents = ["--platform", "scripted", "--script", str(script)]
    run = subprocess.Popen(
        [str(autodev_exe), "-C", str(root), "run", *agents, demo.intent],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    try:
        owner = root / ".autodev" / "session.owner"
        deadline = time.monotonic() + 60
        while not owner.exists() and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert owner.exists(), "the run never took its lock"
        master, slave = os.openpty()
        watcher = subprocess.Popen(
            [str(autodev_exe), "-C", str(root), "watch", "--interval", "0.2"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env={**env, "TERM": "xterm-256color", "COLUMNS": "160", "LINES": "50"},
        )
        os.close(slave)
        output = _read_until_exit(watcher, master, 180).decode("utf-8", errors="replace")
        os.close(master)
        assert watcher.wait(timeout=30) == 0, output[-2000:]
        assert run.wait(timeout=120) == 0
    finally:
        if run.poll() is None:
            run.kill()
    assert "\x1b[" in output  # a live terminal display, redrawn in place
    assert "In flight" in output and "running" in output and "1.1" in output
    assert "Recent events" in output and "in_progress" in output
    assert output.rstrip().endswith("No run is going: 2 of 2 task(s) complete, 0 blocked.")
