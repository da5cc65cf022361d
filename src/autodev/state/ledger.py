"""The append-only, hash-chained ledger: the one source of truth for plan state.

Each line of ``.autodev/ledger.jsonl`` is one JSON object with the keys, in this order,
``seq``, ``ts``, ``op``, ``payload``, ``prev`` and ``hash``. ``hash`` is the sha256 of the line's
canonical bytes without the ``hash`` key (``{"seq":..,"ts":..,"op":..,"payload":..,"prev":".."}``), and
``prev`` is the previous line's hash (64 zeros for the first line). Because the layout is fixed, the chain
is verified on raw bytes, without decoding JSON: opening a 100,000-line ledger costs one pass over the file
in chunks and one sha256 per line.

The ledger is a regular file read in place: a symbolic link, a FIFO or a device there is refused with a
``StateError``, never followed or waited on. A ledger larger than ``MAX_LEDGER_BYTES`` (1 GiB) or an entry
longer than ``MAX_LEDGER_LINE_BYTES`` (64 MiB) is refused as corrupt, and an append that would cross either
limit is refused before anything is written, so AutoDev never writes a ledger it would not read back.

An append writes one whole line with ``O_APPEND``, then ``fdatasync``: O(1) in the ledger's size. An entry
whose loss a resumed run repairs by itself (``append(durable=False)``: a record of a step that the step's
own durable change follows) is written without the ``fdatasync``; the next durable append's one covers it
(one file: its ``fdatasync`` writes every earlier line too), and so does ``flush`` or ``close``. A crash
can leave only the final lines incomplete or missing; ``open`` truncates a torn tail and logs it. Any other
damage raises ``LedgerCorruptError`` naming the line. The caller (``PlanManager``) serialises appends across
processes with the ``.autodev/lock`` file lock and calls ``sync`` under it to pick up lines another process
appended.

A writable ledger also keeps, in memory, the bytes it has verified or written and a stamp of the file as it
left it (device, inode, size, modification and change time). ``as_written`` compares the stamp (one
``lstat``), so AutoDev can check after every agent call that nobody else wrote the file without reading
it; ``restore_as_written`` puts those bytes back when somebody did. An append first checks the stamp
too: a file changed behind AutoDev's back keeps its stamp unset until a full comparison
(``matches_file``) has looked at it, so a later append cannot make a foreign change look like AutoDev's.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from autodev.errors import LedgerCorruptError, StateError
from autodev.files import MAX_LEDGER_BYTES, MAX_LEDGER_LINE_BYTES, MIB, format_size, led_by, open_regular
from autodev.logging import get_logger
from autodev.state.atomic import atomic_write_bytes

__all__ = ["GENESIS_HASH", "Ledger", "LedgerEntry", "LedgerHead"]

GENESIS_HASH = "0" * 64

_HASH_SUFFIX = b',"hash":"'
_PREV_KEY = b',"prev":"'
# A line ends with ',"hash":"<64 hex>"}': 9 + 64 + 2 bytes after the canonical body's closing brace.
_SUFFIX_LEN = len(_HASH_SUFFIX) + 64 + 2
_SEQ_PREFIX = b'{"seq":'
_READ_CHUNK = 8 * MIB

_log = get_logger("autodev.ledger")

# What identifies the file's content without reading it: a write changes the size or the change time, a
# replacement the inode.
_Stamp = tuple[int, int, int, int, int]


def _stamp_of(path: Path) -> _Stamp | None:
    try:
        return _stamp_from(os.lstat(path))
    except OSError:
        return None


def _stamp_of_descriptor(fd: int) -> _Stamp:
    return _stamp_from(os.fstat(fd))


def _stamp_from(found: os.stat_result) -> _Stamp:
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns)


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One decoded ledger line."""

    seq: int
    ts: str
    op: str
    payload: dict[str, Any]
    prev: str
    hash: str


@dataclass(frozen=True, slots=True)
class LedgerHead:
    """Where the verified part of the ledger ends: last ``seq``, its hash, and the byte offset after it."""

    seq: int
    hash: str
    offset: int


def _canonical_body(seq: int, ts: str, op: str, payload: dict[str, Any], prev: str) -> bytes:
    payload_json = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return (
        f'{{"seq":{seq},"ts":{json.dumps(ts)},"op":{json.dumps(op)},'
        f'"payload":{payload_json},"prev":"{prev}"}}'
    ).encode("ascii")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class Ledger:
    """Append-only hash-chained JSONL file. Not thread-safe and not locked: ``PlanManager`` owns both."""

    def __init__(self, path: Path, *, readonly: bool = False) -> None:
        self.path = path
        self.readonly = readonly
        self._head = LedgerHead(0, GENESIS_HASH, 0)
        self._line_ends = array("q")
        self._fd: int | None = None
        # Lines written since the last fdatasync (appended with ``durable=False``).
        self._unsynced = False
        self.torn_tail_bytes = 0
        # The verified bytes (writable ledgers only) and the stamp of the file holding exactly them; None
        # when the file may hold something else.
        self._written = bytearray()
        self._stamp: _Stamp | None = None

    # --- reading ------------------------------------------------------------------------------------

    @property
    def head(self) -> LedgerHead:
        return self._head

    def open(self, *, repair: bool = True) -> LedgerHead:
        """Read and verify the whole chain; then (writable mode, ``repair``) truncate a torn final line.

        Nothing is cut before the whole chain has verified, so a corrupt ledger is reported untouched.
        ``repair=False`` leaves a torn tail for the caller to judge first (see ``repair_tail``).
        """
        self._head = LedgerHead(0, GENESIS_HASH, 0)
        self._line_ends = array("q")
        self.torn_tail_bytes = 0
        self._written = bytearray()
        self._stamp = None
        try:
            fd = self._open_for_reading()
        except FileNotFoundError:
            return self._head
        except OSError as exc:
            raise StateError(f"cannot read {self.path}: {exc.strerror}") from exc
        pending = b""
        try:
            self._check_size(os.fstat(fd).st_size)
            while chunk := os.read(fd, _READ_CHUNK):
                data = pending + chunk if pending else chunk
                complete = data.rfind(b"\n") + 1
                if complete:
                    self._verify(data, self._head.offset, complete, self._head)
                    self._keep(data[:complete])
                pending = data[complete:]
                self._check_size(self._head.offset + len(pending))
                self._check_line(len(pending), self._head.seq + 1)
        except OSError as exc:
            raise StateError(f"cannot read {self.path}: {exc.strerror}") from exc
        finally:
            os.close(fd)
        self.torn_tail_bytes = len(pending)
        if repair:
            self.repair_tail()
        if not self.readonly and not self.torn_tail_bytes:
            self._restamp()
        return self._head

    def repair_tail(self) -> None:
        """Cut the torn final line found by ``open`` (a crash mid-append); a no-op when read-only or clean."""
        if self.torn_tail_bytes and not self.readonly:
            self._handle_torn_tail(self.torn_tail_bytes, self._head.offset)
            self._restamp()

    def sync(self) -> list[LedgerEntry]:
        """Verify and return the lines appended (by another process) since the last open/sync/append."""
        try:
            fd = self._open_for_reading()
        except FileNotFoundError:
            if self._head.seq:
                raise LedgerCorruptError("the ledger disappeared while in use", path=str(self.path)) from None
            return []
        try:
            size = os.fstat(fd).st_size
            start = self._head.offset
            if size == start:
                return []
            if size < start:
                raise LedgerCorruptError(
                    f"the ledger shrank from {start} to {size} bytes while in use", path=str(self.path)
                )
            self._check_size(size)
            data = os.pread(fd, size - start, start)
        finally:
            os.close(fd)
        complete = data.rfind(b"\n") + 1
        if complete < len(data):
            # Appends happen only under the lock the caller holds, so bytes without a newline here were
            # left by a writer that died mid-append.
            self._handle_torn_tail(len(data) - complete, start + complete)
        previous = self._head
        self._verify(data, start, complete, previous)
        self._keep(data[:complete])
        # Another process wrote the new lines; whether the older ones are still AutoDev's bytes only a
        # full comparison can tell, so the stamp waits for ``matches_file``.
        self._stamp = None
        return list(self._decode_lines(data[:complete], previous.seq + 1))

    def entries(self, after_seq: int = 0) -> Iterator[LedgerEntry]:
        """Decode the verified lines with ``seq > after_seq`` (reads only that tail of the file)."""
        if after_seq >= self._head.seq:
            return
        start = 0 if after_seq == 0 else self._line_ends[after_seq - 1]
        data = self._read_range(start, self._head.offset)
        yield from self._decode_lines(data, after_seq + 1)

    def hash_at(self, seq: int) -> str | None:
        """The hash of line ``seq``, or None when there is no such verified line."""
        if seq < 1 or seq > self._head.seq:
            return None
        end = self._line_ends[seq - 1]
        tail = self._read_range(end - _SUFFIX_LEN - 1, end - 1)
        return tail[len(_HASH_SUFFIX) : len(_HASH_SUFFIX) + 64].decode("ascii")

    # --- writing ------------------------------------------------------------------------------------

    def append(self, op: str, payload: dict[str, Any], *, durable: bool = True) -> LedgerEntry:
        """Append one entry and make it durable, with every line before it, before returning. The caller
        holds the lock and has synced. ``durable=False``: written, not yet synced (see the module
        docstring); only for an entry a crash may lose because what follows it in the same step is durable
        and a resumed run repeats that step."""
        if self.readonly:
            raise StateError(f"{self.path} is open read-only")
        head = self._head
        seq = head.seq + 1
        ts = _now()
        body = _canonical_body(seq, ts, op, payload, head.hash)
        digest = hashlib.sha256(body).hexdigest()
        line = body[:-1] + _HASH_SUFFIX + digest.encode("ascii") + b'"}\n'
        if len(line) > MAX_LEDGER_LINE_BYTES or head.offset + len(line) > MAX_LEDGER_BYTES:
            raise StateError(
                f"cannot append to {self.path}: a {format_size(len(line))} entry would pass the ledger's "
                f"limits ({format_size(MAX_LEDGER_LINE_BYTES)} an entry, {format_size(MAX_LEDGER_BYTES)} in "
                "all); the ledger is unchanged (start a new plan in a fresh .autodev/ to go on)"
            )
        # Before the first line there is nothing to guard: the file may not exist yet.
        intact = self.as_written() or (head.offset == 0 and not os.path.lexists(self.path))
        fd = self._writer()
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(errno.ENOSPC, "short write")
            if durable:
                os.fdatasync(fd)
        except OSError as exc:
            self._undo_partial_append(fd, head.offset)
            raise StateError(
                f"cannot append to {self.path}: {exc.strerror or exc}; the ledger is unchanged "
                "(free disk space or fix permissions, then retry)"
            ) from exc
        self._unsynced = not durable
        new_offset = head.offset + len(line)
        self._line_ends.append(new_offset)
        self._head = LedgerHead(seq, digest, new_offset)
        self._keep(line)
        if intact:
            self._restamp(fd)
        return LedgerEntry(seq, ts, op, payload, head.hash, digest)

    # --- guarding -----------------------------------------------------------------------------------

    def as_written(self) -> bool:
        """Whether the file is, by its stamp, exactly what this ledger verified and wrote: one ``lstat``."""
        return self._stamp is not None and _stamp_of(self.path) == self._stamp

    def matches_file(self) -> bool:
        """Whether the file holds exactly the bytes this ledger verified and wrote (reads it whole); when it
        does, the stamp is taken again so the next ``as_written`` is cheap."""
        try:
            fd = self._open_for_reading()
        except (OSError, StateError):
            return False
        try:
            before = _stamp_of_descriptor(fd)
            same = before[2] == len(self._written) and os.pread(fd, before[2] + 1, 0) == self._written
            # Written to while it was read: what was read proves nothing.
            same = same and _stamp_of_descriptor(fd) == before
            if same:
                self._restamp(fd)
        except OSError:
            return False
        finally:
            os.close(fd)
        return same

    def restore_as_written(self) -> None:
        """Replace the file whole with the bytes this ledger verified and wrote (a link, a FIFO or another
        file put in its place is replaced too), durably; the appending descriptor is reopened on it."""
        if self.readonly:
            raise StateError(f"{self.path} is open read-only")
        try:
            atomic_write_bytes(self.path, bytes(self._written))
            self._unsynced = False  # every line it holds was just written durably
        except OSError as exc:
            raise StateError(f"cannot put back {self.path}: {exc.strerror or exc}") from exc
        finally:
            # Not ``close``: its sync would go to the replaced file, and must not hide the error above.
            self._close_descriptor()
        self._restamp()

    def flush(self) -> None:
        """Make the lines appended with ``durable=False`` durable now (a no-op when there are none)."""
        if not self._unsynced or self._fd is None:
            return
        try:
            os.fdatasync(self._fd)
        except OSError as exc:
            raise StateError(
                f"cannot write {self.path} to disk: {exc.strerror or exc}; its last entries may be lost "
                "in a power failure (free disk space or fix the disk, then run `autodev ledger verify`)"
            ) from exc
        self._unsynced = False

    def close(self) -> None:
        """Flush, then release the appending descriptor."""
        try:
            self.flush()
        finally:
            self._close_descriptor()

    def _close_descriptor(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # --- internals ----------------------------------------------------------------------------------

    def _keep(self, data: bytes) -> None:
        if not self.readonly:
            self._written += data

    def _restamp(self, fd: int | None = None) -> None:
        """Take the stamp of the file as it is now, which the caller knows to hold ``_written``."""
        if fd is None:
            self._stamp = _stamp_of(self.path)
            return
        # The stamp is compared with the path's: only valid while the path is still this descriptor's file.
        stamp = _stamp_of_descriptor(fd)
        self._stamp = stamp if _stamp_of(self.path) == stamp else None

    def _open_for_reading(self) -> int:
        return open_regular(
            self.path, what="the ledger", follow_symlinks=False, error=led_by(self.path, StateError)
        )

    def _read_range(self, start: int, end: int) -> bytes:
        """Bytes ``start:end`` of the (already verified) ledger."""
        try:
            fd = self._open_for_reading()
        except OSError as exc:
            raise StateError(f"cannot read {self.path}: {exc.strerror}") from exc
        try:
            return os.pread(fd, end - start, start)
        except OSError as exc:
            raise StateError(f"cannot read {self.path}: {exc.strerror}") from exc
        finally:
            os.close(fd)

    def _check_size(self, size: int) -> None:
        if size > MAX_LEDGER_BYTES:
            raise LedgerCorruptError(
                f"the ledger is larger than {format_size(MAX_LEDGER_BYTES)}, more than AutoDev ever writes",
                path=str(self.path),
            )

    def _check_line(self, length: int, seq: int) -> None:
        if length > MAX_LEDGER_LINE_BYTES:
            raise LedgerCorruptError(
                f"an entry longer than {format_size(MAX_LEDGER_LINE_BYTES)} (not a ledger entry)",
                path=str(self.path),
                line=seq,
            )

    def _writer(self) -> int:
        if self._fd is None:
            created = not self.path.exists()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            if created:
                dir_fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
        return self._fd

    def _undo_partial_append(self, fd: int, offset: int) -> None:
        # A failed write may have left part of the line behind; cutting it keeps the chain valid.
        try:
            if os.fstat(fd).st_size > offset:
                os.ftruncate(fd, offset)
                os.fsync(fd)
        except OSError:
            _log.warning("ledger.partial_append_left", path=str(self.path), offset=offset)

    def _handle_torn_tail(self, torn_bytes: int, keep: int) -> None:
        if self.readonly:
            # A writer may be in the middle of an append; readers simply stop at the last full line.
            return
        _log.warning("ledger.torn_tail_truncated", path=str(self.path), bytes=torn_bytes, kept=keep)
        try:
            with open(self.path, "r+b") as handle:
                handle.truncate(keep)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            raise StateError(f"cannot truncate the torn last line of {self.path}: {exc.strerror}") from exc

    def _verify(self, data: bytes, base: int, limit: int, start: LedgerHead) -> None:
        """Check seq continuity and the hash chain of ``data[:limit]``; ``data`` starts at offset ``base``."""
        seq, prev_hash = start.seq, start.hash
        position = 0
        sha256 = hashlib.sha256
        path = str(self.path)
        line_ends = self._line_ends
        while position < limit:
            newline = data.index(b"\n", position)
            line = data[position:newline]
            seq += 1
            if len(line) > MAX_LEDGER_LINE_BYTES:
                self._check_line(len(line), seq)
            if len(line) <= _SUFFIX_LEN + len(_SEQ_PREFIX) or line[-_SUFFIX_LEN:][:9] != _HASH_SUFFIX:
                raise LedgerCorruptError("not a ledger entry (no hash field)", path=path, line=seq)
            body = line[:-_SUFFIX_LEN] + b"}"
            recorded = line[-_SUFFIX_LEN + 9 : -2]
            if sha256(body).hexdigest().encode("ascii") != recorded:
                raise LedgerCorruptError("hash mismatch (the entry was modified)", path=path, line=seq)
            if body[-75:-66] != _PREV_KEY or body[-66:-2].decode("ascii") != prev_hash:
                raise LedgerCorruptError(
                    "chain broken (prev does not match the previous entry's hash)",
                    path=path,
                    line=seq,
                )
            comma = body.find(b",", len(_SEQ_PREFIX))
            if not body.startswith(_SEQ_PREFIX) or body[len(_SEQ_PREFIX) : comma] != str(seq).encode("ascii"):
                raise LedgerCorruptError(f"sequence gap (expected seq {seq})", path=path, line=seq)
            prev_hash = recorded.decode("ascii")
            position = newline + 1
            line_ends.append(base + position)
        self._head = LedgerHead(seq, prev_hash, base + position)

    def _decode_lines(self, data: bytes, first_seq: int) -> Iterator[LedgerEntry]:
        seq = first_seq
        for raw in data.splitlines():
            try:
                obj = json.loads(raw)
                entry = LedgerEntry(
                    seq=obj["seq"],
                    ts=obj["ts"],
                    op=obj["op"],
                    payload=obj["payload"],
                    prev=obj["prev"],
                    hash=obj["hash"],
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise LedgerCorruptError(
                    f"entry is not valid JSON of the ledger format ({exc})",
                    path=str(self.path),
                    line=seq,
                ) from exc
            yield entry
            seq += 1
