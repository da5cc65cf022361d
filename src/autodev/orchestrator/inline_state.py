"""Where a suspended inline run waits, kept in ``.autodev/inline-state.json``.

``delegate`` writes it when the inline adapter hands a step to the agent the user is talking to and the
process exits. ``autodev resume`` reads it to check that the named response exists and is valid (before
anything is recorded), to stay on the inline platform, and to tell the user which step resumes; ``status``
shows it. The step that runs is still decided by the task's status in the ledger, never by this file.

It is read in place, as a regular file of at most ``MAX_STATE_FILE_BYTES`` (64 MiB); a link, a FIFO or a
device there is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autodev.errors import InlineStateError
from autodev.files import MAX_STATE_FILE_BYTES, led_by, read_bounded
from autodev.state.atomic import atomic_write_text
from autodev.state.paths import AutodevPaths

__all__ = [
    "InlineSuspendState",
    "clear_suspend_state",
    "load_suspend_state",
    "write_suspend_state",
]

_ADVICE = "fix the file, or delete it to abandon the suspended step and start the run again"


class InlineSuspendState(BaseModel):
    """The orchestrator's position while it waits for an inline delegation's response."""

    model_config = ConfigDict(extra="forbid")

    session_id: str
    phase: Literal["plan", "execute"]
    pending_task_id: str
    pending_role: str
    delegation_path: str
    response_path: str
    orchestrator_step: str
    attempt: int = Field(default=1, ge=1)
    retry_count: int = Field(default=0, ge=0)
    last_issues: list[str] = Field(default_factory=list)
    created_at: str
    metadata: dict[str, Any] = Field(default_factory=dict)


def write_suspend_state(paths: AutodevPaths, state: InlineSuspendState) -> Path:
    """Atomically replace ``inline-state.json`` with ``state`` and return its path."""
    target = paths.inline_state
    try:
        atomic_write_text(target, state.model_dump_json(indent=2) + "\n")
    except OSError as exc:
        raise InlineStateError(
            f"cannot write {target}: {exc.strerror or exc}; check that .autodev/ is writable"
        ) from exc
    return target


def load_suspend_state(paths: AutodevPaths) -> InlineSuspendState | None:
    """The saved suspend state, or ``None`` when no inline run is suspended.

    Raises ``InlineStateError`` naming the file and the offending field when the file exists but
    cannot be read as an ``InlineSuspendState``.
    """
    source = paths.inline_state
    try:
        data = read_bounded(
            source,
            limit=MAX_STATE_FILE_BYTES,
            what="the inline suspend state",
            follow_symlinks=False,
            error=led_by(source, InlineStateError),
            remedy=_ADVICE,
        )
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InlineStateError(f"cannot read {source}: {exc.strerror or exc}") from exc
    try:
        return InlineSuspendState.model_validate_json(data)
    except ValidationError as exc:
        raise InlineStateError(f"{source}: {_describe(exc)}; {_ADVICE}") from exc


def clear_suspend_state(paths: AutodevPaths) -> bool:
    """Delete ``inline-state.json``; True when there was one to delete."""
    target = paths.inline_state
    try:
        target.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise InlineStateError(f"cannot delete {target}: {exc.strerror or exc}") from exc
    return True


def _describe(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    first = errors[0]
    if first["type"] == "json_invalid":
        return f"not valid JSON ({first['msg']})"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    if not first["loc"]:
        return f"top level: {first['msg']}{more}"
    field = ".".join(str(part) for part in first["loc"])
    return f"field {field!r}: {first['msg']}{more}"
