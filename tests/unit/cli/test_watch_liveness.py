"""``autodev watch`` judges whether a run is live from the run lock's owner file alone (it takes no lock): the
pid must run, be an autodev, and have started before the file was written; a pid given again to another
autodev after the run was killed is not the run."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autodev.cli.watch import run_is_live
from autodev.state.paths import AutodevPaths


@pytest.fixture
def autodev_like() -> Iterator[subprocess.Popen[bytes]]:
    """A process whose command line names autodev, as a run's does."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "autodev", "run"])
    yield child
    child.kill()
    child.wait()


def _owner(repo: Path, pid: int) -> Path:
    paths = AutodevPaths(repo)
    paths.state_dir.mkdir(parents=True, exist_ok=True)
    owner = paths.state_dir / "session.owner"
    owner.write_text(f"{pid}\n", encoding="ascii")
    return owner


def test_a_run_whose_process_wrote_the_owner_file_is_live(
    tmp_path: Path, autodev_like: subprocess.Popen[bytes]
) -> None:
    time.sleep(0.05)  # the run writes its owner file after it started
    _owner(tmp_path, autodev_like.pid)
    assert run_is_live(AutodevPaths(tmp_path))


def test_a_pid_given_again_to_an_autodev_started_after_the_file_is_not_the_run(
    tmp_path: Path, autodev_like: subprocess.Popen[bytes]
) -> None:
    owner = _owner(tmp_path, autodev_like.pid)
    an_hour_ago = time.time() - 3600
    os.utime(owner, (an_hour_ago, an_hour_ago))
    assert not run_is_live(AutodevPaths(tmp_path))


def test_no_owner_file_a_dead_pid_or_another_program_is_no_run(tmp_path: Path) -> None:
    assert not run_is_live(AutodevPaths(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass", "autodev"])
    gone.wait()
    _owner(tmp_path, gone.pid)
    assert not run_is_live(AutodevPaths(tmp_path))
    other = subprocess.Popen(["sleep", "60"])
    try:
        time.sleep(0.05)
        _owner(tmp_path, other.pid)
        assert not run_is_live(AutodevPaths(tmp_path))
    finally:
        other.kill()
        other.wait()
