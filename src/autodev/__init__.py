"""AutoDev: turn a plain-language intent into a reviewed, tested change in a git repository.

The public API is re-exported here and imported lazily, so that ``autodev --help`` (which imports this
package) does not pay for pydantic and the state layer it never uses.
"""

from __future__ import annotations

from importlib import import_module as _import_module
from typing import TYPE_CHECKING, Any

from autodev._version import __version__

if TYPE_CHECKING:
    from autodev.adapters import AgentInvocation, AgentResult, PlatformAdapter, ScriptedAdapter
    from autodev.config import AutodevConfig, load_config
    from autodev.errors import (
        AutodevError,
        ConfigError,
        EvidenceError,
        GuardrailExceededError,
        InlineStateError,
        InvalidTransitionError,
        LedgerCorruptError,
        LockHeldError,
        PathEscapeError,
        PlanExistsError,
        PlanNotFoundError,
        PlanParseError,
        SnapshotError,
        StateError,
        TaskNotFoundError,
    )
    from autodev.orchestrator import (
        DelegationEnvelope,
        InlineSuspendState,
        Orchestrator,
        ProgressEvent,
        parse_plan_markdown,
        render_plan_markdown,
    )
    from autodev.state import (
        AcceptanceCriterion,
        Phase,
        Plan,
        PlanManager,
        Task,
        TaskStatus,
    )

__all__ = [
    "AcceptanceCriterion",
    "AgentInvocation",
    "AgentResult",
    "AutodevConfig",
    "AutodevError",
    "ConfigError",
    "DelegationEnvelope",
    "EvidenceError",
    "GuardrailExceededError",
    "InlineStateError",
    "InlineSuspendState",
    "InvalidTransitionError",
    "LedgerCorruptError",
    "LockHeldError",
    "Orchestrator",
    "PathEscapeError",
    "Phase",
    "Plan",
    "PlanExistsError",
    "PlanManager",
    "PlanNotFoundError",
    "PlanParseError",
    "PlatformAdapter",
    "ProgressEvent",
    "ScriptedAdapter",
    "SnapshotError",
    "StateError",
    "Task",
    "TaskNotFoundError",
    "TaskStatus",
    "__version__",
    "load_config",
    "parse_plan_markdown",
    "render_plan_markdown",
]

_LAZY: dict[str, str] = {
    "AcceptanceCriterion": "autodev.state",
    "AgentInvocation": "autodev.adapters",
    "AgentResult": "autodev.adapters",
    "Orchestrator": "autodev.orchestrator",
    "PlatformAdapter": "autodev.adapters",
    "ProgressEvent": "autodev.orchestrator",
    "ScriptedAdapter": "autodev.adapters",
    "AutodevConfig": "autodev.config",
    "DelegationEnvelope": "autodev.orchestrator",
    "InlineSuspendState": "autodev.orchestrator",
    "Phase": "autodev.state",
    "Plan": "autodev.state",
    "PlanManager": "autodev.state",
    "Task": "autodev.state",
    "TaskStatus": "autodev.state",
    "load_config": "autodev.config",
    "parse_plan_markdown": "autodev.orchestrator",
    "render_plan_markdown": "autodev.orchestrator",
    **dict.fromkeys(
        (
            "AutodevError",
            "ConfigError",
            "EvidenceError",
            "GuardrailExceededError",
            "InlineStateError",
            "InvalidTransitionError",
            "LedgerCorruptError",
            "LockHeldError",
            "PathEscapeError",
            "PlanExistsError",
            "PlanNotFoundError",
            "PlanParseError",
            "SnapshotError",
            "StateError",
            "TaskNotFoundError",
        ),
        "autodev.errors",
    ),
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'autodev' has no attribute {name!r}")
    value = getattr(_import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
