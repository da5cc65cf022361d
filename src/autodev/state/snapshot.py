"""The ``plan.json`` file format, kept free of pydantic so read-only commands can use it cheaply.

``plan.json`` is one JSON object whose last key is ``state``; ``content_hash`` is the sha256 of the raw bytes
of that value. A reader verifies the hash on the bytes as stored, without re-serialising anything.

``plan.json`` is read in place as a regular file of at most ``MAX_STATE_FILE_BYTES`` (64 MiB): a link, a FIFO
or a device there is a ``StateError`` (deleting the file is always safe, it is rebuilt from the ledger), and
a larger snapshot is never written.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from autodev.errors import StateError
from autodev.files import MAX_STATE_FILE_BYTES, led_by, read_bounded
from autodev.state.hashing import sha256_hex
from autodev.state.ledger import LedgerHead

__all__ = ["SNAPSHOT_FORMAT", "SnapshotFile", "decode_snapshot", "encode_snapshot", "read_snapshot_bytes"]

SNAPSHOT_FORMAT = 1
_STATE_KEY = b'"state":'


@dataclass(frozen=True, slots=True)
class SnapshotFile:
    """A decoded ``plan.json``: the ledger position it reflects and the verified state bytes."""

    ledger_seq: int
    ledger_hash: str
    ledger_offset: int
    state_bytes: bytes


def encode_snapshot(head: LedgerHead, state_bytes: bytes) -> bytes:
    header = json.dumps(
        {
            "format": SNAPSHOT_FORMAT,
            "ledger_seq": head.seq,
            "ledger_hash": head.hash,
            "ledger_offset": head.offset,
            "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "content_hash": sha256_hex(state_bytes),
        }
    )
    return header[:-1].encode("ascii") + b", " + _STATE_KEY + state_bytes + b"}\n"


def read_snapshot_bytes(path: Path) -> bytes:
    """The bytes of the ``plan.json`` at ``path``; ``OSError`` when it cannot be read.

    Raises ``StateError`` when it is not a regular file (or is a link) or holds more than
    ``MAX_STATE_FILE_BYTES``.
    """
    return read_bounded(
        path,
        limit=MAX_STATE_FILE_BYTES,
        what="the plan snapshot",
        follow_symlinks=False,
        error=led_by(path, StateError),
        remedy="delete it (AutoDev rebuilds it from the ledger)",
    )


def decode_snapshot(data: bytes) -> SnapshotFile:
    """Parse and verify ``plan.json`` bytes; ``ValueError`` says why they cannot be used."""
    try:
        header_end = data.index(_STATE_KEY)
        header = json.loads(data[:header_end].rstrip().rstrip(b",") + b"}")
        state_bytes = data[header_end + len(_STATE_KEY) :].rstrip().removesuffix(b"}")
        if header.get("format") != SNAPSHOT_FORMAT:
            raise ValueError(f"unknown snapshot format {header.get('format')!r}")
        if sha256_hex(state_bytes) != header["content_hash"]:
            raise ValueError("content hash mismatch")
        return SnapshotFile(
            ledger_seq=int(header["ledger_seq"]),
            ledger_hash=str(header["ledger_hash"]),
            ledger_offset=int(header["ledger_offset"]),
            state_bytes=state_bytes,
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"malformed snapshot header ({exc})") from exc
