"""A Ray node's scratch clones: a worker killed outright leaves its directory and the processes it started
(in sessions of their own) behind; the next sweep on the node stops those processes and removes the
directory, and leaves a live worker's directory alone. Real processes, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from autodev.orchestrator.execute.node_scratch import scratch_clone, sweep
from autodev.processes import TAG_VARIABLE, repository_tag
from autodev.state.children import register_child


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return not _alive(pid)


def _sleeper(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """A process in a session of its own, as AutoDev starts agent CLIs and QA tools; returned once it runs
    ``sleep`` (until its exec, /proc shows the environment it was forked with, not the one it was given)."""
    process = subprocess.Popen(["sleep", "300"], start_new_session=True, env={**os.environ, **(env or {})})
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{process.pid}/cmdline").read_bytes().startswith(b"sleep\0"):
                break
        except OSError:
            pass
        time.sleep(0.005)
    return process


_OWNER = """
import sys, time
from pathlib import Path
from autodev.orchestrator.execute.node_scratch import scratch_clone
with scratch_clone(Path(sys.argv[1]), "1.1") as root:
    root.mkdir()
    print(root, flush=True)
    time.sleep(300)
"""


def test_a_sweep_stops_what_a_killed_owner_left_and_removes_its_directory(tmp_path: Path) -> None:
    scratch_root = tmp_path / "scratch"
    # A worker (its own process) takes a scratch clone and is killed outright in the middle of its task.
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, str(scratch_root)], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    root = Path(owner.stdout.readline().strip())
    state_dir = root / ".autodev"
    registered = _sleeper()
    assert register_child(state_dir / "children", registered.pid) is not None
    # One that left its group and was never registered still carries the clone's tag.
    tagged = _sleeper({TAG_VARIABLE: f"{repository_tag(state_dir)}:call"})
    stranger = _sleeper({TAG_VARIABLE: f"{repository_tag(tmp_path / 'other' / '.autodev')}:call"})
    try:
        # While the owner lives, nothing is touched.
        assert sweep(scratch_root) == []
        assert root.is_dir() and _alive(registered.pid) and _alive(tagged.pid)

        owner.send_signal(signal.SIGKILL)
        owner.wait()
        owner.stdout.close()
        assert root.is_dir(), "a process killed outright cannot clean up after itself"

        stopped = sweep(scratch_root)

        assert registered.pid in stopped and tagged.pid in stopped
        registered.wait(timeout=5)
        tagged.wait(timeout=5)
        assert list(scratch_root.iterdir()) == []
        assert _alive(stranger.pid), "another clone's process is not this sweep's"
        assert sweep(scratch_root) == []
    finally:
        for process in (registered, tagged, stranger):
            process.kill()
            process.wait()


def test_a_live_owner_keeps_its_directory_and_removes_it_when_done(tmp_path: Path) -> None:
    scratch_root = tmp_path / "scratch"
    with scratch_clone(scratch_root, "2.3/odd name") as root:
        root.mkdir()
        (root / "file").write_text("work\n")
        assert sweep(scratch_root) == []
        assert (root / "file").is_file()
        assert root.parent.parent == scratch_root
    assert list(scratch_root.iterdir()) == []


def test_a_sweep_that_died_half_way_is_finished_by_the_next(tmp_path: Path) -> None:
    scratch_root = tmp_path / "scratch"
    # A directory a dead sweeper had claimed (renamed) but not finished: its process still runs.
    gone = subprocess.Popen(["true"])
    gone.wait()
    original = f"{gone.pid}.1-1.1-abcdefgh"
    claimed = scratch_root / f".swept.{gone.pid}.1-{original}"
    state_dir = claimed / "repo" / ".autodev"
    state_dir.mkdir(parents=True)
    left = _sleeper({TAG_VARIABLE: f"{repository_tag(scratch_root / original / 'repo' / '.autodev')}:x"})
    try:
        assert left.pid in sweep(scratch_root)
        left.wait(timeout=5)
        assert list(scratch_root.iterdir()) == []
    finally:
        left.kill()
        left.wait()
