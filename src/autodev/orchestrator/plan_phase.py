"""The plan phase: spec → explorer → domain expert → architect → parse → (plan tournament) → save.

Each finished agent step is recorded in the ledger with its evidence, so a resumed plan phase (after an inline
suspend or a crash) reuses what was already produced instead of asking an agent again. The architect's
answers are recorded too, before they are parsed: one that does not parse gets one retry with the parse error
and its line in context; a second unparsable plan is the user's error to see.
"""

from __future__ import annotations

import contextlib
import unicodedata
from collections.abc import Iterator
from typing import TYPE_CHECKING

from autodev.adapters.base import AgentResult
from autodev.agents.parsing import parse_confidence, parse_files, parse_topic
from autodev.errors import AutodevError, PlanExistsError, PlanParseError
from autodev.logging import get_logger
from autodev.orchestrator.delegate import DelegationRequest, delegate
from autodev.orchestrator.delegation_envelope import DelegationEnvelope
from autodev.orchestrator.events import ProgressEvent
from autodev.orchestrator.integrity import RepositoryChangedError
from autodev.orchestrator.run_policy import declared_scope
from autodev.orchestrator.submodules import refuse_submodule_files
from autodev.orchestrator.tournaments.plan import run_plan_tournament
from autodev.state.atomic import atomic_write_text
from autodev.state.evidence import read_evidence
from autodev.state.hashing import sha256_hex
from autodev.state.paths import normalize_repo_path
from autodev.state.plan_markdown import parse_plan_markdown, render_plan_markdown
from autodev.state.schemas import ArchitectEvidence, ExploreEvidence, Plan, SMEEvidence
from autodev.workspace.areas import area_prompt_block

if TYPE_CHECKING:
    from autodev.orchestrator.run_context import RunContext

__all__ = ["PlanPhaseError", "run_plan_phase", "spec_hash_of"]

_log = get_logger("autodev.plan_phase")
MAX_INTENT_BYTES = 256 * 1024
# The plan steps that hold the architect's answers: the first call, and its retry after a parse error.
_ARCHITECT_STEPS = ("architect", "architect-retry")


class PlanPhaseError(AutodevError):
    """An agent step of the plan phase failed; the message names the role and the reason."""

    exit_code = 1


def spec_hash_of(intent: str) -> str:
    return sha256_hex(intent)[:16]


def check_intent(intent: str) -> str:
    """The intent as the spec will hold it, or a clear error for one that cannot be worked on."""
    # Control characters (C0, DEL and C1: Unicode category Cc) carry no meaning in an intent; tabs and
    # newlines do.
    cleaned = "".join(ch for ch in intent if ch in "\n\t" or unicodedata.category(ch) != "Cc").strip()
    if not cleaned:
        raise AutodevError(
            'the intent is empty; say what you want changed, e.g. autodev run "add a --json flag"'
        )
    if len(cleaned.encode("utf-8")) > MAX_INTENT_BYTES:
        raise AutodevError(
            f"the intent is {len(cleaned.encode('utf-8')) // 1024} KiB; keep it under "
            f"{MAX_INTENT_BYTES // 1024} KiB (put long material in a file in the repository and refer to it)"
        )
    return cleaned


def _recorded_earlier(session: RunContext, step: str, what: str, *, label: str | None = None) -> str | None:
    """What plan step ``step`` produced in an earlier, interrupted plan phase of the same intent (None: it
    has not run): a step recorded as done is never paid for twice."""
    progress = session.plan_manager.plan_phase
    done = progress.steps.get(step) if progress else None
    if done is None:
        return None
    evidence = read_evidence(session.repo_root / done.path)
    assert isinstance(evidence, ExploreEvidence | SMEEvidence | ArchitectEvidence)
    named = label or step.replace("_", " ")
    session.emit(ProgressEvent("note", f"{named}: reusing the {what} recorded earlier", "plan", step))
    return evidence.output_text if isinstance(evidence, ArchitectEvidence) else evidence.findings


async def _explore(session: RunContext, intent: str) -> str:
    earlier = _recorded_earlier(session, "explorer", "findings")
    if earlier is not None:
        return earlier
    envelope = DelegationEnvelope(
        task_id="plan",
        target_agent="explorer",
        action="explore",
        acceptance="Findings about the repository that the architect needs to plan this intent",
        context={"intent": intent},
    )
    areas, source = session.area_maps()
    result = await _call(session, "explorer", "explore", envelope, extra=area_prompt_block(areas, source))
    path = session.plan_manager.record_evidence(
        ExploreEvidence(
            task_id="plan",
            role="explorer",
            findings=result.text,
            files_referenced=_inside_repo(session, parse_files(result.text)),
            cost_usd=result.cost_usd,
            session_id=result.session_id,
        )
    )
    session.plan_manager.record_plan_step("explorer", path)
    return result.text


async def _consult(session: RunContext, intent: str, findings: str) -> str:
    earlier = _recorded_earlier(session, "domain_expert", "advice")
    if earlier is not None:
        return earlier
    envelope = DelegationEnvelope(
        task_id="plan",
        target_agent="domain_expert",
        action="consult",
        acceptance="Domain knowledge, risks and conventions that matter for this intent",
        context={"intent": intent, "explorer_findings": findings},
    )
    result = await _call(session, "domain_expert", "consult", envelope)
    path = session.plan_manager.record_evidence(
        SMEEvidence(
            task_id="plan",
            role="domain_expert",
            topic=parse_topic(result.text) or "",
            findings=result.text,
            confidence=parse_confidence(result.text) or "MEDIUM",
            cost_usd=result.cost_usd,
            session_id=result.session_id,
        )
    )
    session.plan_manager.record_plan_step("domain_expert", path)
    return result.text


async def _architect(session: RunContext, intent: str, findings: str, advice: str, spec_hash: str) -> Plan:
    context: dict[str, object] = {
        "intent": intent,
        "explorer_findings": findings,
        "domain_expert_advice": advice,
    }
    envelope = DelegationEnvelope(
        task_id="plan",
        target_agent="architect",
        action="document",
        acceptance="A plan in the canonical plan markdown, nothing before '# Plan:'",
        context=context,
    )
    answer = await _architect_answer(session, "architect", envelope, attempt=1)
    try:
        return parse_plan_markdown(answer, spec_hash, source="architect output")
    except PlanParseError as first:
        _log.warning("plan_phase.parse_failed_retrying", err=first.message)
        session.emit(
            ProgressEvent("retry", f"architect plan did not parse: {first.message}", "plan", "architect")
        )
        retry_envelope = envelope.model_copy(
            update={
                "context": {
                    **context,
                    "previous_attempt": answer,
                    "parse_error": first.message,
                    "parse_error_line": first.line,
                }
            }
        )
        retried = await _architect_answer(session, "architect-retry", retry_envelope, attempt=2)
        with _rejects_the_architects_answers(session):
            return parse_plan_markdown(retried, spec_hash, source="architect output (retry)")


@contextlib.contextmanager
def _rejects_the_architects_answers(session: RunContext) -> Iterator[None]:
    """Forget the recorded architect answers when the plan they make is refused: the same intent run again
    asks the architect afresh rather than failing on the same answer. (A stop or crash keeps them.)"""
    try:
        yield
    except AutodevError:
        session.plan_manager.drop_plan_steps(_ARCHITECT_STEPS)
        raise


async def _architect_answer(
    session: RunContext, step: str, envelope: DelegationEnvelope, *, attempt: int
) -> str:
    """The architect's answer for ``step``: recorded before it is parsed, so that a resumed plan phase reuses
    it (an inline answer to the retry would otherwise be stale against a first call asked again)."""
    earlier = _recorded_earlier(session, step, "answer", label="architect")
    if earlier is not None:
        return earlier
    result = await _call(session, "architect", step, envelope, attempt=attempt)
    path = session.plan_manager.record_evidence(
        ArchitectEvidence(
            task_id="plan",
            role="architect",
            attempt=attempt,
            output_text=result.text,
            cost_usd=result.cost_usd,
            session_id=result.session_id,
        )
    )
    session.plan_manager.record_plan_step(step, path)
    return result.text


async def _read_only_guard(session: RunContext, role: str, before: str) -> None:
    """The planning roles only read: one that changed the checkout stops the run, naming what it changed.
    Nothing is undone here: the checkout is the user's, and what changed may not all be the agent's."""
    after = await session.git.snapshot_tree()
    if after == before:
        return
    changed = await session.git.changed_between(before, after)
    shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
    _log.warning("plan_phase.read_only_guard", role=role, paths=changed[:20])
    raise RepositoryChangedError(
        f"the {role.replace('_', ' ')} may only read, but the checkout changed during its call: {shown}; "
        "put those files back (`git checkout -- PATH`, or remove new ones), then `autodev resume`"
    )


async def _call(
    session: RunContext,
    role: str,
    step: str,
    envelope: DelegationEnvelope,
    *,
    attempt: int = 1,
    extra: str = "",
) -> AgentResult:
    """One plan-phase agent call; a failed call ends the plan phase with the agent's reason."""
    session.emit(ProgressEvent("step_started", f"{role} working", "plan", step, attempt))
    # Lessons earlier runs learned about this repository reach the planners too.
    intent = str(envelope.context.get("intent", ""))
    before = await session.git.snapshot_tree()
    result = await delegate(
        session,
        DelegationRequest(
            role=role,
            envelope=envelope,
            phase="plan",
            step=step,
            attempt=attempt,
            knowledge_query=intent,
            extra_context=extra,
        ),
    )
    await _read_only_guard(session, role, before)
    session.emit(
        ProgressEvent("step_finished", f"{role} done", "plan", step, attempt, result.success, result.cost_usd)
    )
    if not result.success:
        reason = result.error.message if result.error else "no reason given"
        kind = result.error.kind if result.error else "failed"
        raise PlanPhaseError(f"plan phase: {role} failed ({kind}: {reason}); fix the cause and run it again")
    return result


def _inside_repo(session: RunContext, paths: list[str]) -> list[str]:
    kept = []
    for path in paths:
        try:
            kept.append(normalize_repo_path(path, session.repo_root))
        except AutodevError:
            continue
    return kept


def _check_plan_paths(session: RunContext, plan: Plan) -> None:
    for task in plan.iter_tasks():
        for path in task.files:
            normalize_repo_path(path, session.repo_root, context=f"architect plan: task {task.id}")
    refuse_submodule_files(plan, session.repo_root, source="architect plan")


def _refuse_to_replace_started_work(session: RunContext) -> None:
    if not session.plan_manager.has_plan:
        return
    current = session.plan_manager.plan
    started = [task.id for task in current.iter_tasks() if task.status != "pending"]
    if started:
        raise PlanExistsError(
            f"plan {current.plan_id} ({current.title!r}) already has work recorded on {len(started)} "
            "task(s); finish it with `autodev resume`, or pass --replace to plan anew"
        )


async def run_plan_phase(
    session: RunContext, intent: str, *, replace: bool = False, require_approval: bool = False
) -> Plan:
    """Drive the plan phase to a saved plan.

    Without ``replace`` a current plan with recorded work is never replaced; that is checked before any
    agent is paid to plan. With ``require_approval`` (or config ``require_plan_approval``) the saved plan
    cannot be executed before ``autodev approve``.
    """
    intent = check_intent(intent)
    if not replace:
        _refuse_to_replace_started_work(session)
    spec_hash = spec_hash_of(intent)
    session.plan_manager.record_session(session.session_id)
    atomic_write_text(session.paths.spec, intent + "\n")
    _log.info("plan_phase.spec_written", bytes=len(intent.encode("utf-8")))
    session.plan_manager.start_plan_phase(spec_hash, require_approval=require_approval)
    progress = session.plan_manager.plan_phase
    require_approval = require_approval or bool(progress and progress.require_approval)
    findings = await _explore(session, intent)
    advice = await _consult(session, intent, findings)
    plan = await _architect(session, intent, findings, advice, spec_hash)
    with _rejects_the_architects_answers(session):
        _check_plan_paths(session, plan)
    if session.config.tournaments.plan.enabled:
        refined = await run_plan_tournament(session, plan, intent)
        if refined is not plan:
            _log.info(
                "plan_phase.tournament_applied",
                pre_bytes=len(render_plan_markdown(plan).encode("utf-8")),
                post_bytes=len(render_plan_markdown(refined).encode("utf-8")),
            )
        plan = refined
    if require_approval or session.config.require_plan_approval:
        plan = plan.model_copy(update={"metadata": {**plan.metadata, "requires_approval": True}})
    scope = declared_scope(intent, session.repo_root, "intent")
    saved = session.plan_manager.init_plan(
        plan, session_id=session.session_id, replace=True, write_scope=scope
    )
    session.plan_manager.checkpoint()
    tasks = sum(len(phase.tasks) for phase in saved.phases)
    _log.info("plan_phase.approved", plan_id=saved.plan_id, phases=len(saved.phases), tasks=tasks)
    for warning in saved.metadata.get("warnings", []):
        # What the architect's plan may mean but does not say exactly (words after a Model value).
        _log.warning("plan_phase.plan_warning", plan_id=saved.plan_id, warning=warning)
        session.emit(ProgressEvent("note", f"plan warning: {warning}"))
    return saved
