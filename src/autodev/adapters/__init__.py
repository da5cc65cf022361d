"""Platform adapters: one ``AgentInvocation`` in, one ``AgentResult`` out, for each agent platform.

The contract lives in ``base``; ``ScriptedAdapter`` (deterministic, for the demo, tests and benchmarks) and
``InlineAdapter`` (delegation files, suspend and resume) ship here. The agent CLI adapters are reached
through ``create_adapter`` / ``adapter_class``, which import them only when asked for, and
``detect_platform`` resolves ``--platform auto``.
"""

from autodev.adapters.base import (
    TOOL_NAMES,
    AgentError,
    AgentErrorKind,
    AgentInvocation,
    AgentResult,
    DelegationPendingSignal,
    PlatformAdapter,
    ToolName,
)
from autodev.adapters.detect import PlatformChoice, detect_platform
from autodev.adapters.inline import InlineAdapter, InlineResponse, InvalidResponseError
from autodev.adapters.registry import adapter_class, create_adapter
from autodev.adapters.scripted import Script, ScriptedAdapter

__all__ = [
    "TOOL_NAMES",
    "AgentError",
    "AgentErrorKind",
    "AgentInvocation",
    "AgentResult",
    "DelegationPendingSignal",
    "InlineAdapter",
    "InlineResponse",
    "InvalidResponseError",
    "PlatformAdapter",
    "PlatformChoice",
    "Script",
    "ScriptedAdapter",
    "ToolName",
    "adapter_class",
    "create_adapter",
    "detect_platform",
]
