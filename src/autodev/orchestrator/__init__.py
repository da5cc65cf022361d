"""The orchestrator: the ``Orchestrator`` facade, the plan and execute phases, plan parsing and rendering,
delegation envelopes, inline suspend state and the task state machine."""

from autodev.orchestrator.core import Orchestrator, ResponseMissingError, RunOutcome
from autodev.orchestrator.delegation_envelope import DelegationAction, DelegationEnvelope
from autodev.orchestrator.events import ProgressEvent, ProgressListener
from autodev.orchestrator.inline_state import (
    InlineSuspendState,
    clear_suspend_state,
    load_suspend_state,
    write_suspend_state,
)
from autodev.state.plan_markdown import (
    compute_content_hash,
    parse_plan_markdown,
    render_plan_markdown,
    validate_dag,
)
from autodev.state.transitions import TASK_TRANSITIONS, assert_transition, can_transition

__all__ = [
    "TASK_TRANSITIONS",
    "DelegationAction",
    "DelegationEnvelope",
    "InlineSuspendState",
    "Orchestrator",
    "ProgressEvent",
    "ProgressListener",
    "ResponseMissingError",
    "RunOutcome",
    "assert_transition",
    "can_transition",
    "clear_suspend_state",
    "compute_content_hash",
    "load_suspend_state",
    "parse_plan_markdown",
    "render_plan_markdown",
    "validate_dag",
    "write_suspend_state",
]
