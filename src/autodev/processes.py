"""Finding every process a call started, however it hid: tagged environments and a child subreaper.

A process group is not enough to stop what an agent starts: ``setsid``, a double fork or a daemonizing
tool leave the group, and the process goes on (writing files, holding the call's pipes) after the call.
Two mechanisms close that (ADR 0014):

- **A tag in the environment.** Every process AutoDev starts gets ``AUTODEV_PROCESS_TAG=<repo>:<call>``,
  and every descendant inherits it whatever session or group it moves to. When the call ends, every
  process on the machine whose initial environment (``/proc/<pid>/environ``) carries the call's tag is
  killed. ``autodev clean`` looks for the repository's part of the tag the same way.
- **A child subreaper** (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``, set by the CLI at start): a process
  whose parent died is re-parented to AutoDev instead of init, so one that also emptied its environment
  is still AutoDev's child; the CLI stops every such adopted process before it exits, and reaps the
  killed ones so that none stays a zombie.

Elsewhere than Linux there is no ``/proc``: only the process group is stopped there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import signal
import sys
import time
from pathlib import Path

__all__ = [
    "TAG_VARIABLE",
    "become_subreaper",
    "call_tag",
    "kill_adopted",
    "kill_tagged",
    "repository_tag",
]

TAG_VARIABLE = "AUTODEV_PROCESS_TAG"
_PR_SET_CHILD_SUBREAPER = 36
_PROC = Path("/proc")
_REAP_WAIT_S = 1.0


def repository_tag(state_dir: Path | None) -> str:
    """The part of every tag that names the repository (its ``.autodev/`` directory)."""
    if state_dir is None:
        return "none"
    return hashlib.sha256(str(state_dir.resolve()).encode("utf-8", "surrogateescape")).hexdigest()[:12]


def call_tag(state_dir: Path | None) -> str:
    """A new tag for one call: ``<repository>:<unique call id>``."""
    return f"{repository_tag(state_dir)}:{secrets.token_hex(16)}"


class _Subreaper:
    """Whether this process made itself the subreaper (only then are its adopted orphans its to kill)."""

    active = False


def become_subreaper() -> bool:
    """Make this process the subreaper of its descendants (Linux); whether that worked."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # only commands that start agents or tools pay for it

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _Subreaper.active = bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        _Subreaper.active = False
    return _Subreaper.active


def _tag_of(pid: int) -> str | None:
    try:
        environ = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    prefix = TAG_VARIABLE.encode() + b"="
    for entry in environ.split(b"\0"):
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode("ascii", errors="replace")
    return None


def _parent_and_session(pid: int) -> tuple[int, int] | None:
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    try:
        fields = stat[stat.rindex(")") + 2 :].split()
        return int(fields[1]), int(fields[3])
    except (ValueError, IndexError):
        return None


def _parent_of(pid: int) -> int | None:
    found = _parent_and_session(pid)
    return found[0] if found else None


def _pids() -> list[int]:
    try:
        return [int(entry.name) for entry in _PROC.iterdir() if entry.name.isdigit()]
    except OSError:
        return []


def _kill_and_reap(pids: list[int]) -> list[int]:
    """SIGKILL ``pids``; wait (briefly) for those that are this process's children, so none stays a zombie."""
    killed = []
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    own = {pid for pid in killed if _parent_of(pid) == os.getpid()}
    deadline = time.monotonic() + _REAP_WAIT_S
    while own and time.monotonic() < deadline:
        for pid in list(own):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid  # reaped elsewhere already
            if done == pid:
                own.discard(pid)
        if own:
            time.sleep(0.01)
    return killed


def kill_tagged(tag: str, *, prefix: bool = False) -> list[int]:
    """Kill every process whose environment carries ``tag`` (or a tag starting with it, ``prefix``)."""
    me = os.getpid()
    found = []
    for pid in _pids():
        if pid == me:
            continue
        found_tag = _tag_of(pid)
        if found_tag is not None and (found_tag.startswith(tag) if prefix else found_tag == tag):
            found.append(pid)
    return _kill_and_reap(found)


def kill_adopted() -> list[int]:
    """Kill the orphans re-parented to this process as subreaper that no running call owns.

    Such a process is a child of this one outside its session (AutoDev's own short helpers, git among
    them, run in its session; every call starts a session of its own) and carries no tag: a tagged one
    belongs to a call still running, which stops it when it ends. Only in a process that made itself the
    subreaper (the CLI): a program using AutoDev as a library keeps whatever children it has.
    """
    if not _Subreaper.active:
        return []
    me = os.getpid()
    session = os.getsid(0)
    adopted = []
    for pid in _pids():
        found = _parent_and_session(pid)
        if found is not None and found[0] == me and found[1] != session and _tag_of(pid) is None:
            adopted.append(pid)
    return _kill_and_reap(adopted)
