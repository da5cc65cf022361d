"""The decision point before every delegation: a ``DelegationPolicy`` sees each request before ``delegate``
makes the call, and may let it run, hold it (queue it, or wait for a person's approval) or reject it.

Today's only policy, ``ExecuteEverything``, lets every call run. A held or rejected request stops the run
resumably (``DelegationHeldError``, exit 3) before any agent is started: nothing is counted, nothing is
spent, and ``autodev resume`` asks the policy again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from autodev.config.schema import CapabilityTier
from autodev.errors import EXIT_SUSPENDED, AutodevError
from autodev.orchestrator.delegation_envelope import DelegationEnvelope

__all__ = [
    "DelegationDecision",
    "DelegationHeldError",
    "DelegationPolicy",
    "DelegationRequest",
    "DelegationVerdict",
    "ExecuteEverything",
]

DelegationVerdict = Literal["execute", "queue", "require_approval", "reject"]


@dataclass(frozen=True, slots=True)
class DelegationRequest:
    """Where in the FSM a call is made: enough to resume exactly there after an inline suspend."""

    role: str
    envelope: DelegationEnvelope
    phase: Literal["plan", "execute"]
    step: str
    task_id: str = "plan"
    attempt: int = 1
    retry_count: int = 0
    last_issues: tuple[str, ...] = ()
    cwd: Path | None = None
    extra_context: str = ""
    knowledge_query: str = ""
    knowledge_files: tuple[str, ...] = ()
    # A concrete model for this call only (tournaments.<kind>.model); None: the role's configured model.
    model: str | None = None
    # The platform's session of this worker's earlier call (the developer's previous attempt), which the
    # policy may let the call continue; None: start a new session.
    warm_session: str | None = None
    # What the call works on or judges: the git tree of the task's change as its developer last left it
    # ("" before any). The same answer about another change is no loop.
    subject: str = ""
    # The platform and tier an autonomous route gave this call (``router.mode``); None: the role's usual.
    platform: str | None = None
    tier: CapabilityTier | None = None


@dataclass(frozen=True, slots=True)
class DelegationDecision:
    """What the policy decided for one request, and why (shown to the user when it is not ``execute``)."""

    verdict: DelegationVerdict
    reason: str = ""


class DelegationPolicy(Protocol):
    """Decides, before each agent call, whether it runs now."""

    def decide(self, request: DelegationRequest) -> DelegationDecision: ...


class ExecuteEverything:
    """Every request runs: what AutoDev does without a policy layer."""

    def decide(self, request: DelegationRequest) -> DelegationDecision:
        return DelegationDecision("execute")


class DelegationHeldError(AutodevError):
    """The delegation policy did not let a call run; the run waits (exit 3) and nothing was spent."""

    exit_code = EXIT_SUSPENDED
