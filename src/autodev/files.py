"""Bounded reads: every file AutoDev reads is opened without blocking and read up to a limit.

A file someone replaced with a FIFO, a device (``/dev/zero``, ``/dev/urandom``) or a huge file must give a
one-line error, not a hang or a process that eats memory. So a file is opened with ``O_NONBLOCK`` (a FIFO
never waits for a writer), checked with ``fstat`` to be a regular file, and read at most ``limit + 1``
bytes. State files inside ``.autodev/`` and inline answers are also opened with ``O_NOFOLLOW``: AutoDev
writes them itself, so a symbolic link there is never expected. Files a user names (plan markdown, agent
scripts, configuration) may be links, but what they point to must be a regular file.

The limits, generous next to anything AutoDev or a person writes:

``DEFAULT_MAX_ANSWER_BYTES`` (4 MiB)
    an inline answer (``.autodev/responses/*.json``); the setting ``inline.max_answer_bytes`` changes it.
``MAX_LEDGER_BYTES`` (1 GiB), ``MAX_LEDGER_LINE_BYTES`` (64 MiB)
    the ledger, read in chunks: its whole size and the length of one entry are bounded separately.
``MAX_STATE_FILE_BYTES`` (64 MiB)
    the other files AutoDev writes and reads back whole: ``plan.json``, ``knowledge.json``,
    ``inline-state.json``.
``MAX_EVIDENCE_BYTES`` (1 GiB)
    an evidence record, which holds an agent's answer in full: its size is set by the limits on agent
    output and on inline answers (``inline.max_answer_bytes`` can be raised), not here.
``MAX_INPUT_FILE_BYTES`` (16 MiB)
    files a person writes: ``.autodev/config.toml``, ``pyproject.toml``, plan markdown, agent scripts.
``MAX_PID_FILE_BYTES`` (4 KiB)
    the files that hold a process id (lock owners, registered child processes).

Every refusal goes through ``error``, which is called with what is wrong and what to do but not the file's
name: the error type names it (``ConfigError(..., source=...)``), or ``led_by`` puts the path first.
Errors other than these refusals (``FileNotFoundError``, ``PermissionError``) are raised as they are, so
that callers keep their own handling of a missing or unreadable file.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from autodev.errors import AutodevError

__all__ = [
    "DEFAULT_MAX_ANSWER_BYTES",
    "GIB",
    "KIB",
    "MAX_EVIDENCE_BYTES",
    "MAX_INPUT_FILE_BYTES",
    "MAX_LEDGER_BYTES",
    "MAX_LEDGER_LINE_BYTES",
    "MAX_PID_FILE_BYTES",
    "MAX_STATE_FILE_BYTES",
    "MIB",
    "STAMP_SETTLED_NS",
    "ErrorFactory",
    "format_size",
    "led_by",
    "open_regular",
    "read_bounded",
    "read_bounded_text",
]

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

DEFAULT_MAX_ANSWER_BYTES = 4 * MIB
MAX_LEDGER_BYTES = 1 * GIB
MAX_LEDGER_LINE_BYTES = 64 * MIB
MAX_STATE_FILE_BYTES = 64 * MIB
MAX_EVIDENCE_BYTES = 1 * GIB
MAX_INPUT_FILE_BYTES = 16 * MIB
MAX_PID_FILE_BYTES = 4 * KIB
# How far in the past a file's change time must be before its stamp (inode, size, times) is trusted to show
# any later write: the change time comes from a coarse clock, so a write within the same tick as a read can
# keep the stamp that read saw. Far longer than any kernel's timestamp tick.
STAMP_SETTLED_NS = 100_000_000

ErrorFactory = Callable[[str], AutodevError]
"""Builds the error to raise from a message that says what is wrong and what to do, without the path."""

_REPLACE = "replace it with the real file"
_READ_CHUNK = 1 * MIB
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
)


def format_size(size: int) -> str:
    """``size`` in bytes as people read it: ``4 MiB``, ``1 GiB``, ``1500 bytes``."""
    for unit, name in ((GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")):
        if size >= unit and size % unit == 0:
            return f"{size // unit} {name}"
    return f"{size} bytes"


def led_by(path: Path, error: Callable[[str], AutodevError]) -> ErrorFactory:
    """``error`` with its message led by ``path``, for error types that do not name a file themselves."""
    return lambda message: error(f"{path}: {message}")


def open_regular(
    path: Path, *, what: str, follow_symlinks: bool, error: ErrorFactory, remedy: str = _REPLACE
) -> int:
    """Open ``path`` read-only without blocking and return its descriptor; the caller closes it.

    ``what`` names the file in messages ("the ledger"). Raises ``error(...)`` when ``path`` is not a
    regular file, or is a symbolic link and ``follow_symlinks`` is false; ``remedy`` is the advice given.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        # O_NOFOLLOW on a link fails with ELOOP; a socket cannot be opened at all (ENXIO).
        if exc.errno not in (errno.ELOOP, errno.ENXIO, errno.EOPNOTSUPP):
            raise
        try:
            mode = (os.stat(path) if follow_symlinks else os.lstat(path)).st_mode
        except OSError:
            raise exc from None
        raise _not_regular(mode, what, error, remedy) from exc
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _not_regular(mode, what, error, remedy)
    return fd


def read_bounded(
    path: Path,
    *,
    limit: int,
    what: str,
    follow_symlinks: bool,
    error: ErrorFactory,
    limit_name: str | None = None,
    remedy: str = _REPLACE,
) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them; never more is read or kept.

    Raises ``error(...)`` as ``open_regular`` does, and when the file holds more than ``limit`` bytes.
    ``limit_name`` is the setting that sets ``limit``; a too large file is then advised to raise it.
    """
    fd = open_regular(path, what=what, follow_symlinks=follow_symlinks, error=error, remedy=remedy)
    try:
        # st_size is only a hint (a file may grow, kernel files report 0): the read below is what bounds.
        if os.fstat(fd).st_size > limit:
            raise _too_large(limit, what, error, limit_name, remedy)
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(_READ_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise _too_large(limit, what, error, limit_name, remedy)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_bounded_text(
    path: Path,
    *,
    limit: int,
    what: str,
    follow_symlinks: bool,
    error: ErrorFactory,
    limit_name: str | None = None,
    remedy: str = _REPLACE,
    encoding: Literal["utf-8", "utf-8-sig"] = "utf-8",
) -> str:
    """``read_bounded``, decoded; ``encoding="utf-8-sig"`` accepts a leading byte-order mark.

    Raises ``error(...)`` naming the offset of the first byte that does not decode.
    """
    data = read_bounded(
        path,
        limit=limit,
        what=what,
        follow_symlinks=follow_symlinks,
        error=error,
        limit_name=limit_name,
        remedy=remedy,
    )
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise error(f"{what} is not UTF-8 text (bad byte at offset {exc.start}); save it as UTF-8") from exc


def _not_regular(mode: int, what: str, error: ErrorFactory, remedy: str) -> AutodevError:
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    return error(f"{what} is {kind}, not a regular file; {remedy}")


def _too_large(
    limit: int, what: str, error: ErrorFactory, limit_name: str | None, remedy: str
) -> AutodevError:
    if limit_name is None:
        return error(f"{what} is larger than {format_size(limit)}, the most AutoDev reads of it; {remedy}")
    return error(
        f"{what} is larger than {format_size(limit)} (limit {limit_name}); shorten it or raise {limit_name}"
    )
