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
  killed ones so that none stays a zombie. AutoDev's own children in sessions of their own look the same
  at two moments, which ``starting_child`` and ``own_child`` cover: between fork and exec (the child still
  has AutoDev's untagged environment) and between exit and their caller's wait (a zombie's environment
  cannot be read). Taking one for an orphan there would reap it under its caller, whose wait then finds
  no exit status.

Elsewhere than Linux there is no ``/proc``: only the process group is stopped there.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import ClassVar

import anyio

__all__ = [
    "TAG_VARIABLE",
    "become_subreaper",
    "call_tag",
    "kill_adopted",
    "kill_tagged",
    "own_child",
    "repository_tag",
    "starting_child",
    "starting_child_soon",
]

TAG_VARIABLE = "AUTODEV_PROCESS_TAG"
_PR_SET_CHILD_SUBREAPER = 36
_PROC = Path("/proc")
_REAP_WAIT_S = 1.0


class _Children:
    """What ``kill_adopted`` leaves alone (see the module docstring), under one condition variable: the
    starts under way, the children not waited for yet, and whether a search for orphans is looking."""

    changed = threading.Condition()
    starting = 0
    own: ClassVar[set[int]] = set()
    searching = False


@contextlib.contextmanager
def starting_child() -> Iterator[None]:
    """Around starting a child in a session of its own, until its pid is passed to ``own_child``: no
    search for orphans looks meanwhile. A start waits for a search that is looking (a few ms of ``/proc``)."""
    while not _start_unless_searching():
        _wait_for_the_search()
    try:
        yield
    finally:
        _end_start()


@contextlib.asynccontextmanager
async def starting_child_soon() -> AsyncIterator[None]:
    """``starting_child`` for a caller on an event loop: a start that comes while a search is looking
    waits for it in a worker thread, so that the loop's other work goes on meanwhile (the search's time
    grows with the processes on the machine)."""
    while not _start_unless_searching():
        await anyio.to_thread.run_sync(_wait_for_the_search)
    try:
        yield
    finally:
        _end_start()


def _start_unless_searching() -> bool:
    """Count a start now unless a search is looking; whether it was counted."""
    with _Children.changed:
        if _Children.searching:
            return False
        _Children.starting += 1
        return True


def _wait_for_the_search() -> None:
    with _Children.changed:
        while _Children.searching:
            _Children.changed.wait()


def _end_start() -> None:
    with _Children.changed:
        _Children.starting -= 1
        _Children.changed.notify_all()


@contextlib.contextmanager
def own_child(pid: int) -> Iterator[None]:
    """While the caller that started ``pid`` has not waited for it: never taken for an orphan."""
    with _Children.changed:
        _Children.own.add(pid)
    try:
        yield
    finally:
        with _Children.changed:
            _Children.own.discard(pid)


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


# An entry of a NUL-separated environment block that sets the tag (the block is searched with a NUL put
# in front, so that the first entry matches too and a value that merely contains the name does not).
_TAG_ENTRY = b"\0" + TAG_VARIABLE.encode() + b"="
_ENVIRON_CHUNK = 1 << 16


def _tag_of(pid: int) -> str | None:
    """The tag in ``pid``'s initial environment (its first setting), or None. Every process on the machine
    is asked at the end of each call, so the block is read and searched as bytes, not split into
    entries: a machine with hundreds of processes pays it for every agent call and every gate."""
    try:
        descriptor = os.open(_PROC / str(pid) / "environ", os.O_RDONLY)
    except OSError:
        return None
    chunks = [b"\0"]
    try:
        while chunk := os.read(descriptor, _ENVIRON_CHUNK):
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    block = b"".join(chunks)
    start = block.find(_TAG_ENTRY)
    if start < 0:
        return None
    start += len(_TAG_ENTRY)
    end = block.find(b"\0", start)
    return block[start : end if end >= 0 else len(block)].decode("ascii", errors="replace")


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
        return [int(name) for name in os.listdir(_PROC) if name.isdigit()]
    except OSError:
        return []


def _kill_and_reap(pids: list[int]) -> list[int]:
    """SIGKILL ``pids``; wait (briefly) for those that are this process's children, so none stays a zombie."""
    return _reap(_kill(pids))


def _kill(pids: list[int]) -> list[int]:
    killed = []
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
    return killed


def _reap(killed: list[int]) -> list[int]:
    children = {pid for pid in killed if _parent_of(pid) == os.getpid()}
    deadline = time.monotonic() + _REAP_WAIT_S
    while children and time.monotonic() < deadline:
        for pid in list(children):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid  # reaped elsewhere already
            if done == pid:
                children.discard(pid)
        if children:
            time.sleep(0.01)
    return killed


def kill_tagged(tags: str | tuple[str, ...], *, prefix: bool = False) -> list[int]:
    """Kill every process whose environment carries one of ``tags`` (or a tag starting with one of them,
    ``prefix``), in one look at every process however many tags are asked for."""
    wanted = (tags,) if isinstance(tags, str) else tags
    me = os.getpid()
    found = []
    for pid in _pids():
        if pid == me:
            continue
        found_tag = _tag_of(pid)
        if found_tag is not None and (found_tag.startswith(wanted) if prefix else found_tag in wanted):
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
    with _Children.changed:
        while _Children.starting:
            _Children.changed.wait()
        _Children.searching = True
        started_here = set(_Children.own)
    try:
        adopted = []
        for pid in _pids():
            if pid in started_here:
                continue
            found = _parent_and_session(pid)
            if found is not None and found[0] == me and found[1] != session and _tag_of(pid) is None:
                adopted.append(pid)
        killed = _kill(adopted)
    finally:
        with _Children.changed:
            _Children.searching = False
            _Children.changed.notify_all()
    # Reaped after the search: the starts it held back need not wait for the killed ones to die.
    return _reap(killed)
