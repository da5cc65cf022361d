"""The scratch clones a Ray node's tasks work in, and what a killed worker leaves behind in them.

Each task's flow on a node runs in a directory of its own under the node's scratch root, marked with the
process that owns it (the Ray worker: its pid and start time). A worker that ends normally removes its
directory. One that Ray kills outright (SIGKILL: the task's retry, a lost node, a cancelled run, the head's
death ending the job) cannot: its directory stays, and the agent CLIs and QA tools it started, which run
in sessions of their own, go on working for nobody.

``sweep`` finds the directories whose owner is gone and, for each, stops the processes registered in its
clone's ``.autodev/children`` and every process that carries its clone's tag (the same two ways
``autodev clean`` and the run lock stop what a killed local run left), then removes the directory. Every
flow on a node sweeps before it starts, and the head has every node swept when a run starts and ends, so a
killed worker's processes live at most until the node's next task or the run's end.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from autodev.logging import get_logger
from autodev.processes import kill_tagged, repository_tag
from autodev.state.children import process_start_ticks, reap_orphans

__all__ = ["scratch_clone", "sweep"]

_log = get_logger("autodev.node_scratch")

# A directory's name starts with its owner, ``<pid>.<start ticks>-``, so that it names its owner from the
# moment it exists; a sweep claims a dead owner's directory by renaming it ``.swept.<its own pid and
# ticks>-<name>`` (one rename wins), so two sweeps never handle one directory and a sweep that dies
# half-way leaves it for the next.
_CLAIMED = ".swept."
_UNSAFE = re.compile(r"[^A-Za-z0-9_.]")


def _me() -> str:
    pid = os.getpid()
    return f"{pid}.{process_start_ticks(pid) or 0}"


def _alive(owner: str) -> bool:
    pid, _, started = owner.partition(".")
    return pid.isdigit() and process_start_ticks(int(pid)) == started


def _clone_root(directory: Path) -> Path:
    return directory / "repo"


@contextmanager
def scratch_clone(scratch_root: Path, task_id: str) -> Iterator[Path]:
    """A new directory under ``scratch_root``, owned by this process; yields where the task's clone goes
    (not created yet) and removes the directory afterwards."""
    scratch_root.mkdir(parents=True, exist_ok=True)
    prefix = f"{_me()}-{_UNSAFE.sub('_', task_id)}-"
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_root))
    try:
        yield _clone_root(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def sweep(scratch_root: Path) -> list[int]:
    """Stop what the dead owners of directories under ``scratch_root`` left running and remove those
    directories; the pids stopped. Several processes may sweep one root at once."""
    try:
        entries = [entry for entry in scratch_root.iterdir() if entry.is_dir()]
    except OSError:
        return []
    stopped: list[int] = []
    for entry in entries:
        if entry.name.startswith(_CLAIMED):
            sweeper, _, original = entry.name.removeprefix(_CLAIMED).partition("-")
            if not original or _alive(sweeper):
                continue
        else:
            original = entry.name
            if _alive(original.partition("-")[0]):
                continue
        claimed = scratch_root / f"{_CLAIMED}{_me()}-{original}"
        try:
            entry.rename(claimed)
        except OSError:
            continue  # another sweep claimed it first
        # The tag names the clone by the path it ran at, before the claim renamed it.
        stopped += reap_orphans(_clone_root(claimed) / ".autodev" / "children")
        stopped += kill_tagged(
            repository_tag(_clone_root(scratch_root / original) / ".autodev") + ":", prefix=True
        )
        shutil.rmtree(claimed, ignore_errors=True)
    stopped = sorted(set(stopped))
    if stopped:
        _log.warning("node_scratch.orphans_stopped", pids=stopped)
    return stopped
