"""The run lock: a second run is refused at once with the first one's pid; a dead holder frees it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autodev.errors import LockHeldError
from autodev.state.paths import AutodevPaths
from autodev.state.session_lock import SessionLock

HOLDER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from autodev.state.paths import AutodevPaths
    from autodev.state.session_lock import SessionLock
    lock = SessionLock(AutodevPaths(Path(sys.argv[1])))
    lock.acquire()
    print("held", flush=True)
    time.sleep(60)
    """
)


def test_second_run_is_refused_and_a_killed_holder_frees_the_lock(repo: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(repo)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(LockHeldError, match=rf"another autodev run \(process {holder.pid}\)"):
            SessionLock(AutodevPaths(repo)).acquire()
    finally:
        holder.kill()
        holder.communicate()
    with SessionLock(AutodevPaths(repo)):
        assert (repo / ".autodev" / "session.owner").exists()
    assert not (repo / ".autodev" / "session.owner").exists()
