"""The adapter contract: one ``AgentInvocation`` in, one ``AgentResult`` out.

Adapters know nothing about plans or tasks. They run one agent call and report what the agent CLI itself
affirmed: a success the CLI did not affirm (no result event, unparsable output, ``is_error``, a non-zero
exit, a timeout) is a failure carrying its reason.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from autodev.adapters.sandbox import SANDBOXES, UNDECLARED, SandboxDescriptor

__all__ = [
    "TOOL_NAMES",
    "AgentError",
    "AgentErrorKind",
    "AgentInvocation",
    "AgentResult",
    "DelegationPendingSignal",
    "PlatformAdapter",
    "ToolName",
]

# Capabilities an agent may be offered, in AutoDev's own words; each adapter maps them to its CLI's tools.
ToolName = Literal["read", "search", "write", "edit", "bash", "web"]
TOOL_NAMES: tuple[ToolName, ...] = ("read", "search", "write", "edit", "bash", "web")

AgentErrorKind = Literal[
    "timeout",  # the deadline passed; the process group was killed
    "cancelled",  # the caller cancelled the call; the process group was killed
    "nonzero_exit",  # the CLI exited non-zero without a result that explains it
    "is_error",  # the CLI's result event says the run failed (API error, turn limit, ...)
    "malformed_output",  # no parsable result event in the output
    "cli_missing",  # the executable is not on PATH
    "spawn_failed",  # the executable exists but could not be started
    "output_limit",  # the CLI printed more than the configured bound
    "scripted_failure",  # a failure injected by the scripted adapter
    "invalid_response",  # an inline response file that does not match its schema
    # Refusals by the provider behind the CLI (``adapters.provider_errors``): nobody's mistake in the work.
    "auth_failed",  # the key or login was refused (401/403, "invalid api key", an expired login)
    "rate_limited",  # too many requests for now (429); ``resets_at`` when the CLI says when
    "usage_limit",  # the plan's or account's quota is used up; ``resets_at`` when the CLI says when
    "provider_unavailable",  # the provider failed or is overloaded (5xx, 529 ``overloaded_error``)
    "context_overflow",  # the prompt is longer than the model's context window
    "cli_start_failed",  # the CLI started but printed nothing for ``stall_timeout_s``: it never came up
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentInvocation(_Model):
    """One agent call. ``tools`` is explicit: an empty tuple offers the agent no tools at all."""

    role: str
    prompt: str
    cwd: Path
    model: str | None = Field(
        default=None, description="A concrete model name for the platform; None lets the CLI choose."
    )
    tools: tuple[ToolName, ...] = Field(
        default=(), description="Capabilities offered; () means none (never 'all tools')."
    )
    max_turns: int | None = Field(default=None, ge=1)
    timeout_s: float = Field(default=900.0, gt=0)
    stall_timeout_s: float | None = Field(
        default=None, gt=0, description="Seconds the CLI may print nothing while alive; None: no limit."
    )
    task_id: str = "plan"
    attempt: int = Field(default=1, ge=1)
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for the process.")
    metadata: dict[str, Any] = Field(default_factory=dict)
    resume_session: str | None = Field(
        default=None,
        description="Continue this earlier session of the platform (its own session id) instead of "
        "starting a new one; only for adapters whose ``resumes_sessions`` is true.",
    )

    @property
    def can_write(self) -> bool:
        return bool({"write", "edit", "bash"} & set(self.tools))


class AgentError(_Model):
    kind: AgentErrorKind
    message: str
    resets_at: datetime | None = Field(
        default=None, description="When a rate or usage limit ends (UTC), when the CLI said so."
    )


class AgentResult(_Model):
    """What an agent call produced, as far as the CLI's own output proves it."""

    success: bool
    text: str = ""
    structured: dict[str, Any] | None = None
    # None: nobody knows what the call cost (never the same as 0.0).
    cost_usd: float | None = None
    # True when AutoDev priced the tokens itself (``price_table``) because the CLI reported no cost.
    cost_estimated: bool = False
    # Token convention: ``tokens_in`` counts every input token, the cached reads and the cache writes
    # included; ``tokens_cached`` and ``tokens_cache_write`` are those parts of it.
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_cached: int | None = None
    tokens_cache_write: int | None = None
    # The model the call ran on, as the CLI's output names it; else the model AutoDev asked for.
    model: str | None = None
    tool_calls: int = 0
    num_turns: int | None = None
    duration_s: float = 0.0
    session_id: str | None = None
    exit_code: int | None = None
    transcript_path: Path | None = None
    error: AgentError | None = None
    # What AutoDev found the agent did besides its change (commits folded in, files put back): set by
    # AutoDev after the call, never by an adapter.
    agent_actions: tuple[str, ...] = ()

    @field_validator("cost_usd")
    @classmethod
    def _cost_is_a_cost(cls, value: float | None) -> float | None:
        # A CLI reporting NaN, infinity or a negative cost has not told us the cost: it is unknown. Kept as
        # a number it would poison the ledger's running total (a NaN total never reaches the budget).
        if value is None or (math.isfinite(value) and value >= 0):
            return value
        return None

    @classmethod
    def failure(cls, kind: AgentErrorKind, message: str, **fields: Any) -> AgentResult:
        return cls(success=False, error=AgentError(kind=kind, message=message), **fields)


class DelegationPendingSignal(Exception):
    """Raised by the inline adapter after writing a delegation file: the run suspends until an answer."""

    def __init__(self, task_id: str, role: str, delegation_path: Path, response_path: Path) -> None:
        self.task_id = task_id
        self.role = role
        self.delegation_path = delegation_path
        self.response_path = response_path
        super().__init__(f"waiting for {response_path} (delegation: {delegation_path})")


class PlatformAdapter(ABC):
    """How AutoDev reaches one agent platform. The orchestrator calls only these three methods."""

    name: str = "abstract"
    # Calls the platform can serve at once; None: no limit of its own (config and machine still apply).
    max_concurrent_calls: int | None = None
    # Whether a call can continue an earlier session of the platform (``AgentInvocation.resume_session``).
    resumes_sessions: bool = False

    @property
    def sandbox(self) -> SandboxDescriptor:
        """The sandbox modes this platform's harness can start in (``autodev.adapters.sandbox``)."""
        return SANDBOXES.get(self.name, UNDECLARED)

    @abstractmethod
    async def execute(self, inv: AgentInvocation) -> AgentResult:
        """Run one agent call to completion (or deadline) and report what it proved."""

    @abstractmethod
    async def init_workspace(self, cwd: Path, agents: Sequence[Any]) -> None:
        """Prepare ``cwd`` for this platform's agents (e.g. write instruction files); idempotent."""

    @abstractmethod
    async def healthcheck(self, *, probe: bool = False, model: str | None = None) -> tuple[bool, str]:
        """Whether the platform can be used here, and a one-line reason (version or what is missing).

        With ``probe`` a platform that reaches a paid model also makes the cheapest real call it can (a
        one-word answer from ``model``, or the CLI's default model), so that a refused key or a used-up plan
        shows before any work is paid for.
        """
