"""Slice jobs: a task too big to code in one go is split by the architect before anyone codes it.

A task whose ``Effort`` is above ``slice_above`` and that has no slices yet is a *slice job*. Instead of a
developer, the architect (on the task's own level: slicing is judgement) reads the repository and replies
with the task's slices as plan task blocks, each no bigger than ``slice_above``, with its own Model, Effort,
files, acceptance and dependencies. They are added to the plan through the ledger with the task as their
``parent``, and the task waits on them. Once every slice is done the task is complete: it has no change of
its own, its work is its slices' commits (``PlanManager.complete_sliced``). A task that already has slices
is never sliced again, and one whose effort was lowered to ``slice_above`` or less meanwhile is then coded
like any other task.

An answer that cannot be used (no task blocks, a slice too big, an id the plan already has, a cycle) is
asked for once more with the problem; a second one blocks the task with the reason, and ``autodev retry``
asks afresh.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from autodev.errors import PlanParseError
from autodev.logging import get_logger
from autodev.orchestrator.delegate import DelegationRequest, delegate
from autodev.orchestrator.delegation_envelope import DelegationEnvelope
from autodev.orchestrator.events import ProgressEvent
from autodev.orchestrator.execute.task_flow import block_task
from autodev.state.plan_markdown import TIER_NAMES, parse_task_blocks
from autodev.state.schemas import EFFORTS, ArchitectEvidence, Effort, Task
from autodev.state.vocabulary import DONE_STATUSES

if TYPE_CHECKING:
    from autodev.orchestrator.run_context import RunContext
    from autodev.state.plan_manager import PlanManager

__all__ = ["is_slice_job", "slice_task", "slices_finished"]

_log = get_logger("autodev.execute_phase")

# The first call and its retry after an answer that could not be used (inline answers are kept per step).
_STEPS = ("slice", "slice-retry")


def is_slice_job(task: Task, slices: Sequence[str], slice_above: Effort) -> bool:
    """Whether ``task`` is to be sliced rather than coded: bigger than ``slice_above``, never sliced
    (``slices``: the ids of its slices), and not started (or sent back by ``autodev retry`` after a
    slicing that failed, which leaves it in progress with no base)."""
    waiting = task.status == "pending" or (task.status == "in_progress" and task.base_commit is None)
    return (
        waiting
        and not slices
        and task.effort is not None
        and EFFORTS.index(task.effort) > EFFORTS.index(slice_above)
    )


def slices_finished(pm: PlanManager, task: Task, slice_above: Effort) -> bool:
    """Whether ``task`` is a sliced task all of whose slices are done, and too big to be coded itself: it
    is then complete (``PlanManager.complete_sliced``) rather than started."""
    slices = pm.slices_of(task.id)
    return (
        task.status == "pending"
        and bool(slices)
        and all(pm.get_task_status(slice_id) in DONE_STATUSES for slice_id in slices)
        and task.effort is not None
        and EFFORTS.index(task.effort) > EFFORTS.index(slice_above)
    )


def _instructions(task: Task, slice_above: Effort, problem: str | None) -> str:
    allowed = ", ".join(effort for effort in EFFORTS if EFFORTS.index(effort) <= EFFORTS.index(slice_above))
    lines = [
        f"SLICE JOB: task {task.id} is too big to code in one go (Effort {task.effort}). Do not write code.",
        f"Split it into slices, each a task one developer finishes in one sitting (Effort: {allowed}).",
        "Reply with the slices only, as '### Task <id>: <title>' blocks with their lines (Description,",
        "Files, Model, Effort, Depends, Acceptance), no '# Plan' or '## Phase' heading. Give slice ids",
        f"'{task.id}.1', '{task.id}.2', ... (new ids). A slice may depend on an earlier slice or on a task",
        "of the plan, never on the task being sliced. Together the slices' acceptance criteria must cover",
        "every acceptance criterion of the task: the task is complete when all its slices are.",
    ]
    if problem:
        lines += ["", f"YOUR PREVIOUS ANSWER COULD NOT BE USED: {problem}. Fix that and answer again."]
    return "\n".join(lines)


def _later_phase(slices: Sequence[Task], phases: Sequence[str], phase_id: str, pm: PlanManager) -> str | None:
    """A slice dependency on a task of a later phase, which a run that keeps phases in order never starts
    before this phase ends: the phase would wait for ever."""
    position = phases.index(phase_id)
    own = {item.id for item in slices}
    for item in slices:
        for dep in item.depends_on:
            if dep in own:
                continue
            dep_phase = pm.get_task(dep).phase_id if pm.get_task_status(dep) is not None else phase_id
            if phases.index(dep_phase) > position:
                return f"slice {item.id} depends on {dep}, a task of the later phase {dep_phase}"
    return None


def _too_big(slices: Sequence[Task], slice_above: Effort) -> str | None:
    for item in slices:
        if item.effort is None:
            return f"slice {item.id} has no Effort line; give every slice one ({slice_above} or less)"
        if EFFORTS.index(item.effort) > EFFORTS.index(slice_above):
            return f"slice {item.id} has Effort {item.effort}, above {slice_above}; split it further"
    return None


async def slice_task(session: RunContext, task_id: str) -> list[str] | None:
    """Have the architect slice ``task_id`` and add the slices to the plan; their ids, or None when the
    task was blocked because no usable answer came (the reason is its ``blocked_reason``)."""
    pm = session.plan_manager
    slice_above = session.config.slice_above
    task = pm.get_task(task_id)
    if task.status == "in_progress":  # `autodev retry` of a slicing that failed: slice it afresh
        pm.revert_task_to_pending(task_id, "it is sliced afresh")
    tier = pm.task_tier(task_id)
    envelope = DelegationEnvelope(
        task_id=task.id,
        target_agent="architect",
        action="document",
        files=list(task.files),
        acceptance="; ".join(c.description for c in task.acceptance) or None,
        context={
            "task_title": task.title,
            "task_description": task.description,
            "slice_above": slice_above,
            "model": TIER_NAMES[tier],
        },
    )
    problem: str | None = None
    for attempt, step in enumerate(_STEPS, start=1):
        session.emit(ProgressEvent("step_started", "architect slicing", task.id, step, attempt))
        result = await delegate(
            session,
            DelegationRequest(
                role="architect",
                envelope=envelope,
                phase="execute",
                step=step,
                task_id=task.id,
                attempt=attempt,
                cwd=session.repo_root,
                extra_context=_instructions(task, slice_above, problem),
                knowledge_query=f"{task.title} {task.description}",
                knowledge_files=tuple(task.files),
            ),
        )
        session.emit(
            ProgressEvent(
                "step_finished",
                f"architect {'done' if result.success else 'failed'}",
                task.id,
                step,
                attempt,
                result.success,
                result.cost_usd,
            )
        )
        pm.record_evidence(
            ArchitectEvidence(
                task_id=task.id,
                role="architect",
                attempt=attempt,
                output_text=result.text,
                cost_usd=result.cost_usd,
                session_id=result.session_id,
            )
        )
        if not result.success:
            reason = result.error.message if result.error else "no reason given"
            block_task(session, task_id, f"the architect could not slice it: {reason}")
            return None
        known = [other.id for other in pm.tasks()]
        try:
            slices, warnings = parse_task_blocks(
                result.text, task.phase_id, known_ids=known, source=f"slices of task {task.id}"
            )
            problem = _too_big(slices, slice_above)
            if problem is None and not session.config.cross_phase_parallelism_enabled:
                phases = [phase.id for phase in pm.plan.phases]
                problem = _later_phase(slices, phases, task.phase_id, pm)
            if problem is None:
                ids = pm.add_tasks(
                    slices,
                    phase_id=task.phase_id,
                    parent=task.id,
                    by="architect",
                    reason=f"task {task.id} (Effort {task.effort}) is above slice_above {slice_above}",
                )
        except PlanParseError as exc:
            problem = exc.message
        if problem is None:
            for warning in warnings:
                _log.warning("execute_phase.slice_warning", task_id=task.id, warning=warning)
            _log.info("execute_phase.task_sliced", task_id=task.id, slices=ids)
            session.emit(ProgressEvent("note", f"sliced into {', '.join(ids)}", task.id))
            return ids
        _log.warning("execute_phase.slices_refused", task_id=task.id, attempt=attempt, problem=problem)
        session.emit(ProgressEvent("retry", f"slices not usable: {problem}", task.id, step, attempt))
    block_task(session, task_id, f"slicing failed: {problem}")
    return None
