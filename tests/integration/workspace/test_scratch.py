"""Temporary directories named for their process: one killed before its exit handlers leaves them behind,
and a later process removes them once they are clearly abandoned."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autodev.scratch import ABANDONED_AFTER_S, PREFIXES, owned_prefix, remove_abandoned
from autodev.state.children import process_start_ticks
from autodev.workspace import git as git_module

LONG_AGO = time.time() - 2 * ABANDONED_AFTER_S


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp directory of the test's own, so that only its scratch directories are looked at."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(git_module, "_scratch", [])
    return tmp_path


def _scratch_of(
    temp_dir: Path, pid: int, started: str, *, touched: float, prefix: str = "autodev-index-"
) -> Path:
    directory = temp_dir / f"{prefix}{pid}-{started}-abcd1234"
    directory.mkdir()
    (directory / "index-0").write_bytes(b"DIRC")
    os.utime(directory, (touched, touched))
    return directory


def _a_finished_process() -> tuple[int, str]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    started = process_start_ticks(process.pid)
    assert started is not None
    process.kill()
    process.wait()
    return process.pid, started


@pytest.mark.parametrize("prefix", PREFIXES)
def test_a_dead_processs_directory_untouched_for_long_is_removed(temp_dir: Path, prefix: str) -> None:
    pid, started = _a_finished_process()
    abandoned = _scratch_of(temp_dir, pid, started, touched=LONG_AGO, prefix=prefix)
    assert remove_abandoned() == [abandoned]
    assert not abandoned.exists()


def test_directories_are_named_for_their_process() -> None:
    started = process_start_ticks(os.getpid())
    assert [owned_prefix(prefix) for prefix in PREFIXES] == [
        f"{prefix}{os.getpid()}-{started}-" for prefix in PREFIXES
    ]


def test_a_reused_pid_does_not_keep_the_dead_processs_scratch(temp_dir: Path) -> None:
    # The pid names a live process (this one) that started at another time than the directory's owner.
    abandoned = _scratch_of(temp_dir, os.getpid(), "1", touched=LONG_AGO)
    assert remove_abandoned() == [abandoned]


def test_a_live_or_recently_touched_scratch_is_kept(temp_dir: Path) -> None:
    started = process_start_ticks(os.getpid())
    assert started is not None
    live = _scratch_of(temp_dir, os.getpid(), started, touched=LONG_AGO)
    pid, dead_started = _a_finished_process()
    # Touched within the wait: perhaps a live process of another pid namespace, between two snapshots.
    recent = _scratch_of(temp_dir, pid, dead_started, touched=time.time())
    unrelated = temp_dir / "autodev-indexes-of-someone"
    unrelated.mkdir()
    os.utime(unrelated, (LONG_AGO, LONG_AGO))

    assert remove_abandoned() == []
    assert live.is_dir() and recent.is_dir() and unrelated.is_dir()


def test_a_killed_process_leaves_its_scratch_and_the_next_one_removes_it(
    temp_dir: Path, tmp_path: Path
) -> None:
    """Real processes: one snapshots a repository, holds, and is killed with SIGKILL (no exit handler
    runs); once its directory is old enough, the next process that needs a scratch directory removes it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (
        ["init", "-q"],
        ["-c", "user.name=t", "-c", "user.email=t@invalid", "commit", "-q", "--allow-empty", "-m", "i"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True)
    (repo / "new.txt").write_text("new\n")
    snapshot_then_hold = (
        "import anyio, sys, tempfile, time\n"
        f"tempfile.tempdir = {str(temp_dir)!r}\n"
        "from autodev.workspace.git import GitRepo\n"
        f"anyio.run(GitRepo({str(repo)!r}).snapshot_tree)\n"
        "print('snapshot taken', flush=True)\n"
        "time.sleep(60)\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", snapshot_then_hold], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "snapshot taken"
        finally:
            holder.send_signal(signal.SIGKILL)
    (left,) = temp_dir.glob("autodev-index-*")
    assert left.name.startswith(f"autodev-index-{holder.pid}-")
    os.utime(left, (LONG_AGO, LONG_AGO))

    fresh = git_module._scratch_directory()

    assert not left.exists()
    assert fresh.is_dir() and fresh.name.startswith(f"autodev-index-{os.getpid()}-")
