"""Hand each agent call to a person or a host agent through files, and suspend until it answers.

``execute`` writes ``.autodev/delegations/<task_id>-<role>.md`` (front matter, the full prompt, the response
schema) and raises ``DelegationPendingSignal``; the run exits and whoever reads the delegation does the work
and writes ``.autodev/responses/<task_id>-<role>.json``. On ``autodev resume`` the orchestrator collects the
response: it is validated, archived under ``.autodev/evidence/inline/`` and removed from ``responses/``, so a
later attempt never reuses a stale answer. A malformed response raises ``InvalidResponseError`` and stays
where it is, so it can be fixed in place. So does a response that is not a regular file written in place (a
link, a FIFO, a device) or that is larger than ``max_answer_bytes`` (the setting ``inline.max_answer_bytes``,
4 MiB by default): it is refused before more than that is read.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import ErrorDetails

from autodev.adapters.base import AgentInvocation, AgentResult, DelegationPendingSignal, PlatformAdapter
from autodev.errors import AutodevError, PathEscapeError, StateError
from autodev.files import DEFAULT_MAX_ANSWER_BYTES, KIB, led_by, open_regular, read_bounded
from autodev.state.atomic import atomic_write_text, fsync_dir
from autodev.state.paths import AutodevPaths, ensure_state_dir

__all__ = ["InlineAdapter", "InlineResponse", "InvalidResponseError"]

# The front matter opens a delegation file; the prompt after it may be megabytes long.
_FRONT_MATTER_BYTES = 64 * KIB

_EXAMPLE_SUCCESS: dict[str, Any] = {
    "text": "What you did and found, in full: this is the agent's answer AutoDev reads.",
    "success": True,
    "error": None,
    "cost_usd": None,
    "tool_calls": 3,
}
_EXAMPLE_FAILURE: dict[str, Any] = {
    "text": "What you tried.",
    "success": False,
    "error": "Why the task could not be done.",
}


class InlineResponse(BaseModel):
    """The answer to one delegation, as written to ``.autodev/responses/<task_id>-<role>.json``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: str = Field(description="The agent's answer, in full: AutoDev reads it as the role's output.")
    success: bool = Field(default=True, description="false when the task could not be done.")
    error: str | None = Field(default=None, description="Why it failed; only with success false.")
    cost_usd: float | None = Field(default=None, ge=0, description="What the work cost, in US dollars.")
    tool_calls: int | None = Field(default=None, ge=0, description="How many tool calls the work took.")

    @field_validator("error")
    @classmethod
    def _error_means_failure(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and info.data.get("success", True):
            raise ValueError("is set but success is true; set success to false or remove error")
        return value


class InvalidResponseError(AutodevError):
    """An inline response file is missing or does not match ``InlineResponse``; it is left where it is.

    ``field`` names the first offending field, or is None when the problem is the whole file.
    """

    def __init__(self, path: Path, problem: str, *, advice: str, field: str | None = None) -> None:
        self.path = path
        self.field = field
        super().__init__(f"{path}: {problem}; {advice}")


class InlineAdapter(PlatformAdapter):
    """A ``PlatformAdapter`` whose agent is whoever answers the delegation files under ``repo_root``."""

    name = "inline"
    # A run suspends on its first delegation file: two tasks in flight would each need an answer at once.
    max_concurrent_calls = 1

    def __init__(self, *, repo_root: Path, max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES) -> None:
        self.paths = AutodevPaths(repo_root.resolve())
        self.max_answer_bytes = max_answer_bytes

    @property
    def archive_dir(self) -> Path:
        """Where collected (and stale) responses are kept: ``.autodev/evidence/inline/``."""
        return self.paths.evidence_dir / "inline"

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        """Return the answer to ``inv`` if one is waiting; else write a delegation and suspend.

        A waiting response counts only when it is newer than the delegation written for this same
        attempt; any other response is stale, so it is archived with a ``-stale`` name and a fresh
        delegation is written. Raises ``DelegationPendingSignal`` after writing the delegation, and
        ``InvalidResponseError`` when the waiting response is malformed.
        """
        delegation = self._delegation_file(inv.task_id, inv.role)
        response = self.paths.response_file(inv.task_id, inv.role)
        if response.is_file():
            if _answers(delegation, response, inv.attempt):
                return self.collect_response(inv.task_id, inv.role, inv.attempt)
            with _state_io("set aside the stale response", response):
                stale = self._read_answer(response, advice="delete it, then run `autodev resume`")
                self._archive(stale, f"{inv.task_id}-{inv.role}-{inv.attempt}-stale")
                response.unlink()
        self._write_delegation(inv, delegation, response)
        raise DelegationPendingSignal(inv.task_id, inv.role, delegation, response)

    def check_response(self, task_id: str, role: str) -> None:
        """Raise ``InvalidResponseError`` unless the response for ``task_id`` and ``role`` is valid.

        Touches nothing: ``autodev resume`` calls it before it records anything, so a malformed answer is
        refused with the ledger untouched.
        """
        self._read_response(task_id, role)

    def collect_response(self, task_id: str, role: str, attempt: int) -> AgentResult:
        """Validate, archive and remove the response for ``task_id`` and ``role``; return it as a result.

        The archive is ``.autodev/evidence/inline/<task_id>-<role>-<attempt>.json`` (with ``_2``, ``_3``, ...
        appended rather than overwriting an earlier archive). ``success: false`` becomes a failure of kind
        ``is_error``. Raises ``InvalidResponseError`` naming the file and the field when the response is
        missing or malformed; the file is then left in place.
        """
        path, data, response = self._read_response(task_id, role)
        with _state_io("archive the response", path):
            archive = self._archive(data, f"{task_id}-{role}-{attempt}")
            path.unlink()
        fields: dict[str, Any] = {
            "text": response.text,
            "cost_usd": response.cost_usd,
            "tool_calls": response.tool_calls or 0,
            "transcript_path": archive,
        }
        if not response.success:
            reason = response.error or "the inline agent reported a failure without a reason"
            return AgentResult.failure("is_error", reason, **fields)
        return AgentResult(success=True, **fields)

    def _read_response(self, task_id: str, role: str) -> tuple[Path, bytes, InlineResponse]:
        path = self.paths.response_file(task_id, role)
        advice = (
            f"write it as the schema at the end of {self.paths.delegation_file(task_id, role)} says, "
            "then run `autodev resume`"
        )
        try:
            data = self._read_answer(path, advice=advice)
        except FileNotFoundError as exc:
            raise InvalidResponseError(path, "no response has been written", advice=advice) from exc
        except OSError as exc:
            raise InvalidResponseError(
                path, f"cannot be read ({exc.strerror or exc})", advice=advice
            ) from exc
        try:
            response = InlineResponse.model_validate_json(data)
        except ValidationError as exc:
            # An unknown key is usually a misspelt one and explains the "missing" error that comes with it.
            errors = sorted(exc.errors(include_url=False), key=lambda err: err["type"] != "extra_forbidden")
            problem = "; ".join(_describe(error) for error in errors)
            field = ".".join(str(part) for part in errors[0]["loc"]) or None
            raise InvalidResponseError(path, problem, field=field, advice=advice) from exc
        return path, data, response

    def _read_answer(self, path: Path, *, advice: str) -> bytes:
        return read_bounded(
            path,
            limit=self.max_answer_bytes,
            what="the answer",
            follow_symlinks=False,
            error=lambda problem: InvalidResponseError(path, problem, advice=advice),
            limit_name="inline.max_answer_bytes",
        )

    async def init_workspace(self, cwd: Path, agents: Sequence[Any]) -> None:
        """Create ``.autodev/`` (git-ignored) with its delegations and responses directories."""
        ensure_state_dir(self.paths)
        self.paths.delegations_dir.mkdir(exist_ok=True)
        self.paths.responses_dir.mkdir(exist_ok=True)

    async def healthcheck(self, *, probe: bool = False, model: str | None = None) -> tuple[bool, str]:
        return True, f"inline: delegations in {self.paths.delegations_dir}"

    def _delegation_file(self, task_id: str, role: str) -> Path:
        path = self.paths.delegation_file(task_id, role)
        # Task ids come from plan markdown; one holding a separator must not place files elsewhere.
        if path.parent != self.paths.delegations_dir or path.name.startswith("."):
            raise PathEscapeError(path.name, str(self.paths.delegations_dir), context="inline delegation")
        return path

    def _write_delegation(self, inv: AgentInvocation, delegation: Path, response: Path) -> None:
        front = {
            "task_id": inv.task_id,
            "role": inv.role,
            "attempt": inv.attempt,
            "cwd": str(inv.cwd.resolve()),
            "response_path": str(response),
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "tools": list(inv.tools),
        }
        # JSON scalars are valid YAML and keep task ids like 1.10 from reading as numbers.
        header = "\n".join(f"{key}: {json.dumps(value)}" for key, value in front.items())
        with _state_io("write the delegation", delegation):
            ensure_state_dir(self.paths)
            # Whoever answers should only have to write one file, not create its directory first.
            self.paths.responses_dir.mkdir(exist_ok=True)
            atomic_write_text(delegation, f"---\n{header}\n---\n\n{_body(inv, response)}")

    def _archive(self, data: bytes, stem: str) -> Path:
        """Write ``data`` to a new file named after ``stem`` in ``archive_dir``; never replace one."""
        directory = self.archive_dir
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f".{stem}.{os.getpid()}.tmp"
        try:
            with tmp.open("wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            target = _link_to_unused_name(tmp, directory, stem)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        fsync_dir(directory)
        return target


@contextlib.contextmanager
def _state_io(action: str, path: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise StateError(
            f"cannot {action} {path}: {exc.strerror or exc}; check that .autodev/ is writable"
        ) from exc


def _link_to_unused_name(source: Path, directory: Path, stem: str) -> Path:
    """Hard-link ``source`` as ``<stem>.json``, else ``<stem>_2.json``, ``<stem>_3.json``, ..."""
    number = 1
    while True:
        target = directory / (f"{stem}.json" if number == 1 else f"{stem}_{number}.json")
        try:
            # A hard link appears whole or not at all, and fails instead of replacing a file.
            os.link(source, target)
        except FileExistsError:
            number += 1
        else:
            return target


def _answers(delegation: Path, response: Path, attempt: int) -> bool:
    """Whether ``response`` was written after the delegation for this ``attempt``."""
    try:
        delegated = delegation.stat().st_mtime_ns
        fd = open_regular(
            delegation,
            what="the delegation file",
            follow_symlinks=False,
            error=led_by(delegation, StateError),
            remedy="delete it and run `autodev resume` to write it again",
        )
    except FileNotFoundError:
        return False
    try:
        text = os.read(fd, _FRONT_MATTER_BYTES).decode("utf-8", errors="replace")
    finally:
        os.close(fd)
    return _front_matter_attempt(text) == attempt and response.stat().st_mtime_ns >= delegated


def _front_matter_attempt(text: str) -> int | None:
    lines = text.splitlines()
    if not lines or lines[0] != "---":
        return None
    for line in lines[1:]:
        if line == "---":
            return None
        key, _, value = line.partition(":")
        if key == "attempt":
            with contextlib.suppress(ValueError):
                return int(value.strip())
            return None
    return None


def _body(inv: AgentInvocation, response: Path) -> str:
    tools = ", ".join(inv.tools) if inv.tools else "none: answer from the prompt alone, change no files"
    return (
        f"# AutoDev delegation: {inv.role} for task {inv.task_id} (attempt {inv.attempt})\n\n"
        f"Work in `{inv.cwd.resolve()}` as the {inv.role} described below. Tools you may use: {tools}.\n\n"
        f"## Prompt\n\n{inv.prompt.rstrip()}\n\n"
        f"## Response\n\n{_schema_section(response)}"
    )


def _schema_section(response: Path) -> str:
    schema = InlineResponse.model_json_schema()
    required = set(schema.get("required", []))
    rows = []
    for name, spec in schema["properties"].items():
        types = " or ".join(str(option.get("type", "any")) for option in spec.get("anyOf", [spec]))
        default = "required" if name in required else f"default {json.dumps(spec.get('default'))}"
        rows.append(f"| `{name}` | {types} | {default} | {spec.get('description', '')} |")
    table = "\n".join(["| field | type | required? | meaning |", "| --- | --- | --- | --- |", *rows])
    return (
        f"When you are done, write one JSON object to `{response}`, then run `autodev resume`.\n"
        "Only these fields are accepted; any other key is rejected.\n\n"
        f"{table}\n\n"
        f"Example:\n\n```json\n{json.dumps(_EXAMPLE_SUCCESS, indent=2)}\n```\n\n"
        f"If the task cannot be done:\n\n```json\n{json.dumps(_EXAMPLE_FAILURE, indent=2)}\n```\n"
    )


def _describe(error: ErrorDetails) -> str:
    """One validation error in words, led by the field it concerns."""
    kind = error["type"]
    if kind == "json_invalid":
        detail = str(error["msg"]).removeprefix("Invalid JSON: ")
        return f"not valid JSON ({detail}); it must be one JSON object"
    if kind in ("model_type", "model_attributes_type"):
        return 'must be a JSON object such as {"text": "..."}'
    field = ".".join(str(part) for part in error["loc"])
    if kind == "extra_forbidden":
        problem = f"is not allowed (allowed fields: {', '.join(InlineResponse.model_fields)})"
    elif kind == "missing":
        problem = "is required"
    else:
        problem = str(error["msg"]).removeprefix("Value error, ")
    return f"field {field!r}: {problem}"
