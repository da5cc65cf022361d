"""The ledger's kept-descriptor lock: exclusive against other processes (also those using ``FileLock``),
a timeout that says so, and no split-brain when the lock file is deleted or replaced while held."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from filelock import FileLock

from autodev.state.file_lock import KeptFileLock, Timeout

_HOLDER = textwrap.dedent(
    """
    import sys, time
    from filelock import FileLock
    lock = FileLock(sys.argv[1])
    lock.acquire()
    print("held", flush=True)
    sys.stdin.readline()
    lock.release()
    """
)


def _holder(path: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


def _times_out_while_another_process_holds(lock: KeptFileLock) -> None:
    holder = _holder(lock.path)
    try:
        with pytest.raises(Timeout):
            lock.acquire(timeout=0.2, poll_interval=0.01)
    finally:
        holder.communicate("\n")


def test_another_process_holding_the_lock_makes_acquire_time_out(tmp_path: Path) -> None:
    path = tmp_path / "ledger.lock"
    lock = KeptFileLock(path)
    _times_out_while_another_process_holds(lock)
    lock.acquire(timeout=1, poll_interval=0.01)  # free once the other process let go
    lock.release()
    lock.close()


def test_a_held_kept_lock_excludes_filelock_users(tmp_path: Path) -> None:
    path = tmp_path / "ledger.lock"
    lock = KeptFileLock(path)
    lock.acquire(timeout=1, poll_interval=0.01)
    other = FileLock(str(path))
    with pytest.raises(Timeout):
        other.acquire(timeout=0.1)
    lock.release()
    other.acquire(timeout=1)
    other.release()
    lock.close()


def test_the_descriptor_is_kept_and_the_lock_taken_again(tmp_path: Path) -> None:
    path = tmp_path / "ledger.lock"
    lock = KeptFileLock(path)
    for _ in range(3):
        lock.acquire(timeout=1, poll_interval=0.01)
        lock.release()
    assert path.exists()
    lock.close()


def test_a_lock_file_replaced_while_another_process_holds_it_is_not_taken_twice(tmp_path: Path) -> None:
    """The holder locked the new file; a lock on the deleted inode would let both proceed."""
    path = tmp_path / "ledger.lock"
    lock = KeptFileLock(path)
    lock.acquire(timeout=1, poll_interval=0.01)
    lock.release()
    path.unlink()  # an agent removed it; the kept descriptor still names the old inode
    _times_out_while_another_process_holds(lock)
    lock.acquire(timeout=1, poll_interval=0.01)
    assert path.exists()
    lock.release()
    lock.close()
