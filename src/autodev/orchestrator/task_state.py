"""The task state machine under the module name the original design gave it.

The table is defined in ``autodev.state.transitions`` so that ``PlanManager`` can enforce it without the
state layer importing the orchestrator.
"""

from autodev.state.transitions import TASK_TRANSITIONS, assert_transition, can_transition

__all__ = ["TASK_TRANSITIONS", "assert_transition", "can_transition"]
