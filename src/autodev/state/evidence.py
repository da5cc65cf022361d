"""Evidence files: one JSON record per step and attempt, plus the developer's patch, written atomically.

The attempt number is part of the file name (``<task>-<kind>-<attempt>.json``) so a retry never overwrites
what an earlier attempt proved or failed to prove. An evidence record is read back in place, as a regular
file of at most ``MAX_EVIDENCE_BYTES`` (1 GiB); a link, a FIFO or a device there is an ``EvidenceError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from autodev.errors import EvidenceError
from autodev.files import MAX_EVIDENCE_BYTES, led_by, read_bounded
from autodev.state.atomic import atomic_write_bytes
from autodev.state.hashing import sha256_hex
from autodev.state.paths import AutodevPaths
from autodev.state.schemas import Evidence

__all__ = ["WrittenFile", "read_evidence", "write_evidence", "write_patch"]

_EVIDENCE_ADAPTER: TypeAdapter[Evidence] = TypeAdapter(Evidence)


@dataclass(frozen=True, slots=True)
class WrittenFile:
    """A file AutoDev wrote, with the sha256 of its bytes (recorded in the ledger)."""

    path: Path
    sha256: str
    size: int


def _write(path: Path, data: bytes, *, durable: bool = True) -> WrittenFile:
    try:
        atomic_write_bytes(path, data, durable=durable)
    except OSError as exc:
        raise EvidenceError(f"cannot write evidence {path}: {exc.strerror or exc}") from exc
    return WrittenFile(path, sha256_hex(data), len(data))


def write_evidence(paths: AutodevPaths, evidence: Evidence, *, durable: bool = True) -> WrittenFile:
    """Write ``evidence`` to ``evidence/<task>-<kind>-<attempt>.json``; fills ``created_at`` if empty.
    ``durable=False``: no fsync, for a copy whose durable original is elsewhere (a remote worker's)."""
    if not evidence.created_at:
        evidence = evidence.model_copy(update={"created_at": datetime.now(UTC).isoformat(timespec="seconds")})
    target = paths.evidence_file(evidence.task_id, evidence.kind, evidence.attempt)
    data = evidence.model_dump_json(indent=2).encode("utf-8") + b"\n"
    return _write(target, data, durable=durable)


def write_patch(
    paths: AutodevPaths, task_id: str, diff: str, *, developer: bool = False, durable: bool = True
) -> WrittenFile:
    """Write the task's current change as ``evidence/<task>.patch`` (the latest attempt's diff)."""
    data = diff.encode("utf-8", errors="surrogateescape")
    return _write(paths.patch_file(task_id, developer=developer), data, durable=durable)


def read_evidence(path: Path) -> Evidence:
    """Read and validate one evidence file."""
    try:
        data = read_bounded(
            path,
            limit=MAX_EVIDENCE_BYTES,
            what="the evidence record",
            follow_symlinks=False,
            error=led_by(path, EvidenceError),
        )
        return _EVIDENCE_ADAPTER.validate_json(data)
    except FileNotFoundError as exc:
        raise EvidenceError(f"evidence file {path} does not exist") from exc
    except OSError as exc:
        raise EvidenceError(f"cannot read evidence {path}: {exc.strerror}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(root)"
        raise EvidenceError(f"{path} is not valid evidence: {where}: {first['msg']}") from exc
