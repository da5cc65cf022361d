"""A deterministic agent that answers from a script: the engine of ``autodev demo``, the tests and benchmarks.

A script is a list of entries, each keyed by ``role`` and optionally ``task_id`` and ``attempt``. A call gets
the most specific entry that matches it (role+task+attempt, then role+task, then role+attempt, then role).
An entry holds one response, or a sequence under ``responses`` that successive matching calls consume in
order, the last one repeating once the sequence is used up. In TOML::

    [[entries]]
    role = "developer"
    text = "Implemented task {task_id}."
    edits = [{ path = "src/app.py", content = "VALUE = 1\\n" }]

    [[entries]]
    role = "reviewer"
    responses = [{ text = "NEEDS_CHANGES: add a test" }, { text = "APPROVED" }]

The placeholders ``{task_id}``, ``{attempt}`` and ``{role}`` are replaced in ``text``, in edit paths and
contents, and in failure messages; every other brace is left as written, so code in edits needs no
escaping. Edits are applied inside the invocation's ``cwd`` and never outside it.

``latency_s`` simulates a slow agent: a call sleeps that many seconds before it answers (and reports them
as its ``duration_s``), so cancelling the caller interrupts it before any edit. A top-level ``latency_s``
is the default for every call; a response's own ``latency_s`` replaces it, 0 included. Both must be finite
and 0 or more. A call whose latency exceeds its ``timeout_s`` sleeps until the deadline and times out::

    latency_s = 0.5               # top-level keys come before the first [[entries]]

    [[entries]]
    role = "developer"
    edits = [{ path = "src/mod_{task_id}.py", content = "VALUE = 1\\n" }]

    [[entries]]
    role = "reviewer"
    latency_s = 2.0               # this role is slower than the default
    text = "VERDICT: APPROVED"

Nothing depends on wall clock or randomness (latency only delays an answer, it never changes it): the same
script and the same calls give the same results.

A script file may be a link, but what it names must be a regular file of at most ``MAX_INPUT_FILE_BYTES``
(16 MiB), UTF-8 with or without a byte-order mark; anything else (a FIFO, a device) is a ``ConfigError``.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from autodev.adapters.base import AgentError, AgentErrorKind, AgentInvocation, AgentResult, PlatformAdapter
from autodev.errors import ConfigError, PathEscapeError
from autodev.files import MAX_INPUT_FILE_BYTES, read_bounded_text
from autodev.state.paths import normalize_repo_path

__all__ = [
    "Script",
    "ScriptEdit",
    "ScriptEntry",
    "ScriptFailure",
    "ScriptResponse",
    "ScriptedAdapter",
]

_PLACEHOLDER = re.compile(r"\{(task_id|attempt|role)\}")
_IN_MEMORY = "<in-memory script>"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _finite_seconds(value: float | None) -> float | None:
    # A bare ge=0 would let inf through (an endless call) and reject NaN as "not >= 0", which misleads.
    # The message leaves out the field's name: the error's location (``entries[0].latency_s``) gives it.
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise ValueError(f"must be a finite number of seconds, 0 or more, not {value!r}")
    return value


class ScriptEdit(_Model):
    """One file change made by the scripted agent: write ``content`` to ``path``, or delete ``path``."""

    path: str = Field(description="Path relative to the invocation's working directory.")
    content: str | None = Field(default=None, description="The file's new content (UTF-8).")
    delete: bool = Field(default=False, description="Delete the file instead of writing it.")

    @field_validator("path")
    @classmethod
    def _relative_path(cls, value: str) -> str:
        # Symlinks can only be judged against a real directory, at call time; '..' and absolute paths now.
        try:
            normalize_repo_path(value)
        except PathEscapeError:
            raise ValueError(
                "must be a path relative to the working directory, without '..' that leaves it"
            ) from None
        return value

    @model_validator(mode="after")
    def _one_action(self) -> ScriptEdit:
        if self.delete == (self.content is not None):
            raise ValueError("give either content (to write the file) or delete = true, not both or neither")
        return self


class ScriptFailure(_Model):
    """A failure the scripted agent reports instead of succeeding."""

    kind: AgentErrorKind = Field(default="scripted_failure", description="The error kind to report.")
    message: str = Field(description="The error message to report.")
    resets_at: datetime | None = Field(
        default=None, description="When a rate or usage limit ends, as a CLI would report it."
    )


class ScriptResponse(_Model):
    """What the scripted agent does for one call."""

    text: str = Field(default="", description="The agent's answer.")
    edits: list[ScriptEdit] = Field(default_factory=list, description="Files to write or delete.")
    latency_s: float | None = Field(
        default=None, description="Seconds the call takes; unset takes the script's latency_s."
    )
    fail: ScriptFailure | None = Field(
        default=None, description="Report this failure (after applying the edits) instead of success."
    )
    # A scripted agent makes no paid call: its cost is a known $0 unless the script says otherwise (in a
    # JSON script, null reports no cost at all, as a CLI that reports none would).
    cost_usd: float | None = Field(
        default=0.0, ge=0, description="Cost to report, in US dollars (null: report none, unknown)."
    )
    tokens_in: int | None = Field(default=None, ge=0, description="Input tokens to report.")
    tokens_out: int | None = Field(default=None, ge=0, description="Output tokens to report.")
    model: str | None = Field(
        default=None, description="The model to report the call ran on; unset reports the one asked for."
    )
    tool_calls: int | None = Field(
        default=None, ge=0, description="Tool calls to report; unset reports one per edit."
    )

    _latency_is_seconds = field_validator("latency_s")(_finite_seconds)


_RESPONSE_FIELDS = frozenset(ScriptResponse.model_fields)


class ScriptEntry(ScriptResponse):
    """The answer(s) for calls of one ``role``, optionally narrowed to one ``task_id`` and ``attempt``.

    Either the response fields are given directly (one response) or ``responses`` holds a sequence.
    """

    role: str = Field(min_length=1, description="The agent role this entry answers.")
    task_id: str | None = Field(default=None, description="Only answer calls for this task.")
    attempt: int | None = Field(default=None, ge=1, description="Only answer calls for this attempt.")
    responses: list[ScriptResponse] | None = Field(
        default=None,
        min_length=1,
        description="Responses consumed in order by successive matching calls; the last one repeats.",
    )

    @model_validator(mode="after")
    def _single_or_sequence(self) -> ScriptEntry:
        # Fields left at their defaults do not count: a script dumped in full must load back.
        inline = sorted(
            name
            for name in self.model_fields_set & _RESPONSE_FIELDS
            if getattr(self, name) != type(self).model_fields[name].get_default(call_default_factory=True)
        )
        if self.responses is not None and inline:
            raise ValueError(
                f"has both responses and {', '.join(inline)}; move those fields into the items of responses"
            )
        return self

    @property
    def key(self) -> tuple[str, str | None, int | None]:
        return (self.role, self.task_id, self.attempt)

    @property
    def specificity(self) -> int:
        """3 for role+task+attempt, 2 for role+task, 1 for role+attempt, 0 for role alone."""
        return 2 * (self.task_id is not None) + (self.attempt is not None)

    def sequence(self) -> Sequence[ScriptResponse]:
        """The responses this entry gives, in order."""
        return self.responses if self.responses is not None else (self,)

    def matches(self, inv: AgentInvocation) -> bool:
        return (
            self.role == inv.role
            and self.task_id in (None, inv.task_id)
            and self.attempt in (None, inv.attempt)
        )


class Script(_Model):
    """A whole script: the entries the scripted agent answers from."""

    latency_s: float = Field(
        default=0.0, description="Seconds every call takes unless its response sets its own latency_s."
    )
    entries: list[ScriptEntry] = Field(default_factory=list, description="Entries, in any order.")

    _latency_is_seconds = field_validator("latency_s")(_finite_seconds)

    @model_validator(mode="after")
    def _unique_keys(self) -> Script:
        seen: dict[tuple[str, str | None, int | None], int] = {}
        for index, entry in enumerate(self.entries):
            first = seen.setdefault(entry.key, index)
            if first != index:
                raise ValueError(
                    f"entries[{index}] has the same role, task_id and attempt as entries[{first}]; "
                    "merge them into one entry with responses = [...]"
                )
        return self


class ScriptedAdapter(PlatformAdapter):
    """A ``PlatformAdapter`` whose agent follows a ``Script``; every call it receives is kept in ``calls``.

    An unmatched role gives a failure of kind ``scripted_failure``; a call whose latency (the response's
    ``latency_s``, else the script's) exceeds its ``timeout_s`` gives a ``timeout`` failure once the deadline
    has passed, without its edits.
    An edit path that leads outside ``cwd`` (through a symlink) raises ``PathEscapeError`` before any file
    is touched: that is a broken script, not an agent's answer.
    """

    name = "scripted"

    def __init__(self, *, script: Script | Mapping[str, Any]) -> None:
        self.script = script if isinstance(script, Script) else _validate(script, _IN_MEMORY)
        self.calls: list[AgentInvocation] = []
        self._served: dict[int, int] = {}

    @classmethod
    def from_file(cls, path: Path | str) -> ScriptedAdapter:
        """Load a script from a ``.toml`` or ``.json`` file; a malformed one is a ``ConfigError``."""
        return cls(script=_load(Path(path)))

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        """Answer ``inv`` from the script: wait the latency, apply the edits, report the response."""
        self.calls.append(inv)
        response = self._next_response(inv)
        if response is None:
            return AgentResult.failure("scripted_failure", self._unmatched(inv))
        latency = self.script.latency_s if response.latency_s is None else response.latency_s
        if latency > inv.timeout_s:
            await anyio.sleep(inv.timeout_s)
            return AgentResult.failure(
                "timeout",
                f"scripted {inv.role} takes {latency:g}s, over the {inv.timeout_s:g}s deadline",
                duration_s=inv.timeout_s,
            )
        # Sleeping before the edits lets a cancelled caller interrupt the call with nothing written.
        await anyio.sleep(latency)
        values = {"task_id": inv.task_id, "attempt": str(inv.attempt), "role": inv.role}
        try:
            _apply_edits(response.edits, inv.cwd, values, role=inv.role)
        except OSError as exc:
            return AgentResult.failure(
                "scripted_failure",
                f"scripted {inv.role} could not edit {exc.filename or 'a file'}: {exc.strerror or exc}",
                duration_s=latency,
            )
        fields: dict[str, Any] = {
            "text": _render(response.text, values),
            "cost_usd": response.cost_usd,
            "tokens_in": response.tokens_in,
            "tokens_out": response.tokens_out,
            "model": response.model or inv.model,
            "tool_calls": len(response.edits) if response.tool_calls is None else response.tool_calls,
            "duration_s": latency,
        }
        if response.fail is not None:
            error = AgentError(
                kind=response.fail.kind,
                message=_render(response.fail.message, values),
                resets_at=response.fail.resets_at,
            )
            return AgentResult(success=False, error=error, **fields)
        return AgentResult(success=True, **fields)

    async def init_workspace(self, cwd: Path, agents: Sequence[Any]) -> None:
        """Nothing to prepare: the scripted agent reads no instruction files."""

    async def healthcheck(self, *, probe: bool = False, model: str | None = None) -> tuple[bool, str]:
        count = len(self.script.entries)
        return True, f"scripted: {count} {'entry' if count == 1 else 'entries'}"

    def _next_response(self, inv: AgentInvocation) -> ScriptResponse | None:
        # Keys are unique (Script validates it), so the most specific match is the only one at its level.
        candidates = [(e.specificity, i) for i, e in enumerate(self.script.entries) if e.matches(inv)]
        if not candidates:
            return None
        _, index = max(candidates)
        sequence = self.script.entries[index].sequence()
        served = self._served.get(index, 0)
        self._served[index] = served + 1
        return sequence[min(served, len(sequence) - 1)]

    def _unmatched(self, inv: AgentInvocation) -> str:
        roles = sorted({entry.role for entry in self.script.entries})
        return (
            f"the script has no entry for role {inv.role!r} (task {inv.task_id!r}, attempt {inv.attempt}); "
            f"roles it answers: {', '.join(roles) if roles else 'none'}"
        )


def _render(template: str, values: Mapping[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)


def _apply_edits(edits: Sequence[ScriptEdit], cwd: Path, values: Mapping[str, str], *, role: str) -> None:
    """Apply ``edits`` under ``cwd``; every path is checked before any file is touched."""
    context = f"scripted {role} edit"
    targets = [cwd / normalize_repo_path(_render(edit.path, values), cwd, context=context) for edit in edits]
    for edit, target in zip(edits, targets, strict=True):
        if edit.content is None:
            target.unlink(missing_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(_render(edit.content, values), encoding="utf-8")


def _load(path: Path) -> Script:
    source = str(path)
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise ConfigError("a script must be a .toml or .json file", source=source)
    try:
        raw = read_bounded_text(
            path,
            limit=MAX_INPUT_FILE_BYTES,
            what="the script",
            follow_symlinks=True,
            error=lambda problem: ConfigError(problem, source=source),
            remedy="give the path of a .toml or .json script file",
            encoding="utf-8-sig",
        )
    except OSError as exc:
        raise ConfigError(f"cannot read the script: {exc.strerror or exc}", source=source) from exc
    data: Any
    if suffix == ".toml":
        try:
            data = tomllib.loads(raw)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"not valid TOML: {exc}", source=source) from exc
    else:
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}", source=source
            ) from exc
    return _validate(data, source)


def _validate(data: Any, source: str) -> Script:
    try:
        return Script.model_validate(data)
    except ValidationError as exc:
        # A misspelt key shows up as an unknown key plus a missing one; the unknown key explains both.
        errors = sorted(exc.errors(include_url=False), key=lambda err: err["type"] != "extra_forbidden")
        first = errors[0]
        more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
        if first["type"] == "extra_forbidden":
            message = f"unknown key; allowed here: {', '.join(_allowed_keys(first['loc']))}{more}"
        else:
            message = first["msg"].removeprefix("Value error, ") + more
        raise ConfigError(message, source=source, key=_location(first["loc"]) or None) from exc


def _allowed_keys(loc: Sequence[int | str]) -> list[str]:
    """The keys of the script table that holds the key at ``loc``."""
    tables: dict[str, type[BaseModel]] = {
        "entries": ScriptEntry,
        "responses": ScriptResponse,
        "edits": ScriptEdit,
        "fail": ScriptFailure,
    }
    parents = [part for part in loc[:-1] if isinstance(part, str)]
    return list(tables.get(parents[-1], Script).model_fields if parents else Script.model_fields)


def _location(loc: Sequence[int | str]) -> str:
    """``("entries", 2, "edits", 0, "path")`` as ``entries[2].edits[0].path``."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text
