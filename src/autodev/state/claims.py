"""Claims and sessions: which interactive agent session took which task, and which session works which lane.

Several agent sessions may share one plan (``autodev next``): each asks for the next task it may take and
*claims* it, so that no other session takes it too. A claim is ``.autodev/claims/<task>.json`` and a lane's
session ``.autodev/sessions/<lane>.json`` (``all`` for a session that takes every lane), each written
atomically, and both are changed only under ``.autodev/claims/.lock``: two ``autodev next`` at once never
claim the same task.

A session is who runs ``autodev``: ``AUTODEV_SESSION_ID`` (else Claude Code's ``CLAUDE_CODE_SESSION_ID``)
names it; its pid is ``AUTODEV_SESSION_PID`` (else ``CLAUDE_PID``, else the parent of this process, the
agent's shell); ``CLAUDE_CODE_MESSAGING_SOCKET`` is where other sessions can message it. A record is
*alive* while its pid runs (and its socket file exists, when it names one): a claim of a session that is gone
is no claim. Claims are not plan state: they live beside the ledger and never change it.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from filelock import FileLock, Timeout
from pydantic import BaseModel, ConfigDict, ValidationError

from autodev.errors import LockHeldError, StateError
from autodev.files import MAX_STATE_FILE_BYTES, led_by, read_bounded
from autodev.state.atomic import atomic_write_bytes

__all__ = ["ALL_LANES", "Claim", "ClaimStore", "SessionIdentity", "SessionRecord", "process_running"]

# Without a lane, a session takes every lane; its registry record is under this reserved name.
ALL_LANES = "all"
_LOCK_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class SessionIdentity:
    """Who is asking: a session id (may be unknown), a pid to tell whether it still runs, a socket."""

    pid: int
    session: str | None = None
    socket: str | None = None
    # No variable named the pid: it is the parent of this process, which a wrapper (`uv run`) may be.
    pid_from_parent: bool = False

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> SessionIdentity:
        env = os.environ if env is None else env
        raw_pid = env.get("AUTODEV_SESSION_PID") or env.get("CLAUDE_PID") or ""
        named = raw_pid.strip().isdigit()
        session = env.get("AUTODEV_SESSION_ID") or env.get("CLAUDE_CODE_SESSION_ID") or None
        return cls(
            pid=int(raw_pid) if named else os.getppid(),
            session=session,
            socket=env.get("CLAUDE_CODE_MESSAGING_SOCKET") or None,
            pid_from_parent=not named,
        )

    def owns(self, record: Claim | SessionRecord) -> bool:
        """Whether ``record`` is this session's: the same session id, or the same pid when either has none."""
        if record.session is not None and self.session is not None:
            return record.session == self.session
        return record.pid == self.pid

    def describe(self) -> str:
        return f"session {self.session or '-'} (pid {self.pid})"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pid: int
    session: str | None = None
    socket: str | None = None
    model: str
    at: str

    @property
    def alive(self) -> bool:
        if self.socket is not None and not Path(self.socket).exists():
            return False
        return process_running(self.pid)

    def who(self) -> str:
        where = f"uds:{self.socket}" if self.socket else f"pid {self.pid}"
        return f"session {self.session or '-'} ({where})"


class Claim(_Record):
    """One task taken by one session."""

    id: str
    lane: str


class SessionRecord(_Record):
    """The session working one lane (``all``: every lane)."""

    lane: str


def process_running(pid: int) -> bool:
    """Whether a process with ``pid`` runs (anyone's)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it runs, as another user
    return True


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class ClaimStore:
    """The claims and session records of one ``.autodev/`` (see the module docstring)."""

    def __init__(self, state_dir: Path) -> None:
        self.claims_dir = state_dir / "claims"
        self.sessions_dir = state_dir / "sessions"
        self._lock = FileLock(str(self.claims_dir / ".lock"), timeout=_LOCK_TIMEOUT_S)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the claims lock: what is read under it stays true until it is let go."""
        self.claims_dir.mkdir(parents=True, exist_ok=True)
        try:
            with self._lock:
                yield
        except Timeout as exc:
            raise LockHeldError(str(self.claims_dir / ".lock"), None, _LOCK_TIMEOUT_S) from exc

    # --- claims ---------------------------------------------------------------------------------------

    def claims(self) -> dict[str, Claim]:
        """Every readable claim by task id (a file that is not a claim is ignored: it claims nothing)."""
        return {claim.id: claim for claim in _read_all(self.claims_dir, Claim)}

    def claim(self, task_id: str, *, lane: str, model: str, me: SessionIdentity) -> Claim:
        record = Claim(
            id=task_id, lane=lane, model=model, pid=me.pid, session=me.session, socket=me.socket, at=_now()
        )
        _write(self.claims_dir / f"{task_id}.json", record)
        return record

    def release(self, task_id: str) -> bool:
        """Drop the claim on ``task_id``; whether there was one."""
        try:
            (self.claims_dir / f"{task_id}.json").unlink()
        except FileNotFoundError:
            return False
        return True

    # --- sessions -------------------------------------------------------------------------------------

    def sessions(self) -> dict[str, SessionRecord]:
        """The session record of each lane that has one (``all`` included)."""
        return {record.lane: record for record in _read_all(self.sessions_dir, SessionRecord)}

    def register(self, lane: str, model: str, me: SessionIdentity) -> SessionRecord | None:
        """Record ``me`` as ``lane``'s session, the newest winning, unless another live session holds
        the lane: then that one is kept and returned."""
        current = self.sessions().get(lane)
        if current is not None and current.alive and not me.owns(current):
            return current
        record = SessionRecord(
            lane=lane, model=model, pid=me.pid, session=me.session, socket=me.socket, at=_now()
        )
        _write(self.sessions_dir / f"{lane}.json", record)
        return None

    def unregister(self, me: SessionIdentity) -> list[str]:
        """Drop ``me``'s session records; the lanes it held."""
        dropped = []
        for lane, record in self.sessions().items():
            if me.owns(record):
                with contextlib.suppress(FileNotFoundError):
                    (self.sessions_dir / f"{lane}.json").unlink()
                dropped.append(lane)
        return dropped


def _write(path: Path, record: BaseModel) -> None:
    atomic_write_bytes(path, (json.dumps(record.model_dump(mode="json"), sort_keys=True) + "\n").encode())


_RecordT = TypeVar("_RecordT", bound=_Record)


def _read_all(directory: Path, model: type[_RecordT]) -> list[_RecordT]:
    if not directory.is_dir():
        return []
    found = []
    for path in sorted(directory.glob("*.json")):
        try:
            data = read_bounded(
                path,
                limit=MAX_STATE_FILE_BYTES,
                what="a claim",
                follow_symlinks=False,
                error=led_by(path, StateError),
            )
            found.append(model.model_validate_json(data))
        except (OSError, ValidationError, StateError):
            continue  # half a file from a crash, or not ours: it holds nothing
    return found
