"""Telling the machine's faults from the work's: a full disk is no reason to block a finished task.

A write that fails with ``ENOSPC``, ``EDQUOT``, ``EMFILE``/``ENFILE``, ``EROFS`` or ``EFBIG`` (raised by
Python, or reported in git's own words) says nothing about the change being made: the run stops
resumably instead (``EnvironmentFaultError``, exit 3), naming the step and the errno, and ``autodev
resume`` continues that step once the cause is fixed. No attempt is counted and no task is blocked for it.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

from autodev.errors import AutodevError, EnvironmentFaultError

__all__ = ["FAULT_ERRNOS", "environment_fault"]

FAULT_ERRNOS: dict[int, str] = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EMFILE: "the process has too many open files",
    errno.ENFILE: "the system has too many open files",
    errno.EROFS: "the file system is read-only",
    errno.EFBIG: "a file size limit is reached",
}
# How git and other tools word the same errnos (strerror of each, as C's libraries print it).
_WORDS: dict[str, int] = {
    "No space left on device": errno.ENOSPC,
    "Disk quota exceeded": errno.EDQUOT,
    "Too many open files in system": errno.ENFILE,
    "Too many open files": errno.EMFILE,
    "Read-only file system": errno.EROFS,
    "File too large": errno.EFBIG,
}


def _found(exc: BaseException) -> tuple[int, str] | None:
    if isinstance(exc, OSError) and exc.errno in FAULT_ERRNOS:
        where = f" ({exc.filename})" if exc.filename else ""
        return exc.errno, f"{exc.strerror or FAULT_ERRNOS[exc.errno]}{where}"
    text = str(exc)
    for words, number in _WORDS.items():
        if words in text:
            return number, " ".join(text.split())[:300]
    return None


# Below this many bytes free a file system counts as full: git may fail on one without naming the errno
# ("unable to write new index file"), and nothing of AutoDev's fits in less.
FULL_BELOW_BYTES = 64 * 1024


def _full(paths: Sequence[Path]) -> Path | None:
    for path in paths:
        try:
            stats = os.statvfs(path)
        except OSError:
            continue
        if stats.f_bavail * stats.f_frsize < FULL_BELOW_BYTES:
            return path
    return None


def environment_fault(
    exc: BaseException, step: str, *, watched: Sequence[Path] = ()
) -> EnvironmentFaultError | None:
    """The resumable stop ``exc`` (or what caused it) amounts to during ``step``, or None when it is no
    fault of the machine's. ``watched`` are directories whose file system, when full, explains a failure
    that does not name its errno."""
    seen: set[int] = set()
    current: BaseException | None = exc
    found: tuple[int, str] | None = None
    while current is not None and id(current) not in seen and found is None:
        seen.add(id(current))
        if isinstance(current, EnvironmentFaultError):
            return current
        found = _found(current)
        current = current.__cause__ or current.__context__
    if found is None:
        full = _full(watched)
        if full is None:
            return None
        found = (
            errno.ENOSPC,
            f"the file system of {full} has less than {FULL_BELOW_BYTES} bytes free: {exc}",
        )
    number, detail = found
    # AutoDev's own message says best what could not be done (which file, what is unchanged).
    said = exc.message if isinstance(exc, AutodevError) else detail
    return EnvironmentFaultError(
        f"{step} stopped, {errno.errorcode[number]} ({FAULT_ERRNOS[number]}): {said}; nothing finished is "
        "lost: fix it (free disk space, raise the quota or the open-file limit, make the file system "
        "writable), then run `autodev resume`"
    )
