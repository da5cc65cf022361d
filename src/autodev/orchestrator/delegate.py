"""The one delegation function: every agent call in AutoDev goes through ``delegate``.

It builds the prompt from the role's spec, the structured envelope and extra context, applies the guardrails
before and after the call (the call's timeout is what is left of the task's time budget), records cost in
the ledger, feeds the loop detector and the knowledge store, and on an inline delegation writes the suspend
state before letting the signal through. Deciding *whether and where* a call runs stays with the callers;
*making* the call happens only here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NoReturn

import anyio

from autodev.adapters.base import (
    AgentError,
    AgentErrorKind,
    AgentInvocation,
    AgentResult,
    DelegationPendingSignal,
    PlatformAdapter,
)
from autodev.agents.registry import get_spec
from autodev.config.schema import CapabilityTier
from autodev.errors import EnvironmentFaultError
from autodev.guardrails.errors import LoopDetectedError
from autodev.logging import get_logger
from autodev.orchestrator.delegation_policy import DelegationHeldError, DelegationRequest
from autodev.orchestrator.events import ProgressEvent
from autodev.orchestrator.harnesses import platform_of
from autodev.orchestrator.inline_state import InlineSuspendState, write_suspend_state
from autodev.orchestrator.provider_guard import (
    RETRIED_REFUSALS,
    STOPPING_REFUSALS,
    ProviderRefusedError,
    pause_message,
)
from autodev.orchestrator.run_policy import DelegationRejectedError, approval_wait_message
from autodev.orchestrator.text import clip
from autodev.workspace.git import GitRepo

if TYPE_CHECKING:
    from autodev.orchestrator.run_context import RunContext

__all__ = [
    "DelegationRequest",
    "delegate",
    "landed_commits",
]  # DelegationRequest: re-exported for the callers

_log = get_logger("autodev.delegate")
_TOURNAMENT_ROLES = frozenset({"critic_t", "architect_b", "synthesizer", "judge"})
# An agent that could not even be started (or never came up) failed for the machine's reasons, not the work's.
_ENVIRONMENT_ERRORS: frozenset[AgentErrorKind] = frozenset(
    {"cli_missing", "spawn_failed", "cli_start_failed"}
)


def landed_commits(session: RunContext) -> Mapping[str, str]:
    """``{task id: commit}`` of every task recorded as landed."""
    return session.plan_manager.landed_commits()


def _build_prompt(system_prompt: str, request: DelegationRequest, knowledge_block: str) -> str:
    parts = [system_prompt.rstrip(), "---", request.envelope.render_as_task_message()]
    if request.extra_context.strip():
        parts += ["", request.extra_context.rstrip()]
    if knowledge_block:
        parts += ["", knowledge_block.rstrip()]
    return "\n".join(parts) + "\n"


async def _ask_the_run_policy(session: RunContext, request: DelegationRequest) -> DelegationRequest:
    """Decide ``request`` by the run's policy (``autodev.orchestrator.run_policy``) before anything starts:
    wait while it is queued, stop the run resumably when it needs the user's approval, refuse it when it
    can never run as asked. The request to make: continuing its warm session only when the policy said
    ``resume_worker``."""
    policy = session.run_policy
    told = ""
    while True:
        decision = policy.decide(request)
        if decision.route != "queue":
            break
        if decision.reason != told:
            told = decision.reason
            session.emit(
                ProgressEvent(
                    "waiting",
                    f"waits for a worker ({decision.reason}): {decision.remediation}",
                    request.task_id,
                    request.role,
                )
            )
        await policy.wait_for_release()
    if decision.route == "require_approval":
        record = policy.request_for(request, decision)
        raise DelegationHeldError(approval_wait_message([record]))
    if decision.route == "reject":
        raise DelegationRejectedError(f"policy: {decision.reason}: {decision.remediation}")
    given = policy.given_route(request)
    return replace(
        request,
        warm_session=decision.resume_session if decision.route == "resume_worker" else None,
        platform=given[0] if given is not None else None,
        tier=given[1] if given is not None else None,
    )


def _ask_the_policy(session: RunContext, request: DelegationRequest) -> None:
    """Stop before anything is started when the delegation policy does not let ``request`` run now."""
    decision = session.delegation_policy.decide(request)
    if decision.verdict == "execute":
        return
    _log.info("delegate.held", task_id=request.task_id, role=request.role, verdict=decision.verdict)
    role = request.role.replace("_", " ")
    raise DelegationHeldError(
        f"the delegation policy did not let the {role} of {request.task_id} run "
        f"({decision.verdict.replace('_', ' ')}{': ' + decision.reason if decision.reason else ''}); "
        "nothing was started or counted; `autodev resume` asks it again"
    )


def _adapter(session: RunContext, request: DelegationRequest) -> PlatformAdapter:
    """The platform ``request``'s call goes to: its role's, or the one an autonomous route gave it."""
    if request.platform is not None:
        return session.adapter_named(request.platform)
    return session.adapter_for(request.role)


def _invocation(session: RunContext, request: DelegationRequest, timeout_s: float) -> AgentInvocation:
    spec = get_spec(session.registry, request.role)
    platform = platform_of(_adapter(session, request), session.platform_name)
    settings = spec.effective(session.config, platform, task_tier=_task_tier(session, request))
    if request.tier is not None and request.model is None:
        # An autonomous route's tier is the call's own (the role's offset applied already).
        settings = replace(settings, model=session.config.resolve_model(platform, request.tier))
    knowledge_block = ""
    if request.knowledge_query:
        knowledge_block = session.knowledge.inject_block(request.knowledge_query, request.knowledge_files)
    return AgentInvocation(
        role=request.role,
        prompt=_build_prompt(spec.prompt, request, knowledge_block),
        cwd=request.cwd or session.repo_root,
        model=request.model or settings.model,
        tools=spec.tools,
        max_turns=settings.max_turns,
        timeout_s=timeout_s,
        stall_timeout_s=session.config.agent_stall_timeout_s,
        task_id=request.task_id,
        attempt=request.attempt,
        metadata={"step": request.step, "phase": request.phase, "session_id": session.session_id},
        resume_session=request.warm_session,
    )


def _task_tier(session: RunContext, request: DelegationRequest) -> CapabilityTier | None:
    """The tier the roles of ``request``'s task run on (its Model line; strong without one), or None for
    a call made for no task of the plan (the plan phase, a phase review)."""
    if request.phase != "execute" or session.plan_manager.get_task_status(request.task_id) is None:
        return None
    return session.plan_manager.task_tier(request.task_id)


def _suspend(session: RunContext, request: DelegationRequest, signal: DelegationPendingSignal) -> None:
    """Record where an inline delegation stopped the run, so that ``autodev resume`` continues there."""
    write_suspend_state(
        session.paths,
        InlineSuspendState(
            session_id=session.session_id,
            phase=request.phase,
            pending_task_id=request.task_id,
            pending_role=request.role,
            delegation_path=str(signal.delegation_path),
            response_path=str(signal.response_path),
            orchestrator_step=request.step,
            attempt=request.attempt,
            retry_count=request.retry_count,
            last_issues=list(request.last_issues),
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        ),
    )
    _log.info("delegate.suspended", task_id=request.task_id, role=request.role, step=request.step)


async def _watched_call(
    session: RunContext, request: DelegationRequest, invocation: AgentInvocation
) -> AgentResult:
    """The agent call itself, with what the agent did besides its answer checked from git and the files
    (``orchestrator.integrity``) and noted in the result."""
    adapter = _adapter(session, request)
    await session.prepare_workspace(invocation.cwd, adapter)
    in_main = invocation.cwd.resolve() == session.repo_root.resolve()
    copy = session.git if in_main else GitRepo(invocation.cwd, like=session.git)
    who = f"the {request.role.replace('_', ' ')}" + (
        f" of task {request.task_id}" if request.phase == "execute" else ""
    )
    view = await session.agent_watch.before(copy)
    # Kept until the check below has run: a call the process does not live to check (a kill, an inline
    # wait) is checked by the next start.
    record = session.agent_watch.remember(view, copy, who)
    try:
        async with session.agent_slots:
            result = await adapter.execute(invocation)
    except DelegationPendingSignal as signal:
        _suspend(session, request, signal)
        raise
    # Listed before the check reads the branch: each commit is on the branch before it is recorded.
    landed = landed_commits(session)
    report = await session.agent_watch.after(view, copy, who=who, main_tree_lock=session.main_tree_lock)
    # Only once the check passed: a stop it raised must survive a kill before its message is shown (the
    # next start then names the same changes again, unless the user has put them back meanwhile).
    session.agent_watch.forget(record)
    await session.agent_watch.check_landed(landed, tip=report.main_tip)
    if report.notes:
        result = result.model_copy(update={"agent_actions": tuple(report.notes)})
        for note in report.notes:
            session.emit(ProgressEvent("note", f"{who}: {note}", request.task_id))
    return result


def _learn_from(session: RunContext, request: DelegationRequest, result: AgentResult) -> None:
    """A successful answer feeds the loop detector and the knowledge store."""
    # Tournament roles are many fresh calls whose identical answers (two judges agreeing) are no loop.
    if request.role not in _TOURNAMENT_ROLES and session.loop_detector.observe(
        request.task_id, request.role, result.text, f"{request.subject}\0{request.extra_context}"
    ):
        raise LoopDetectedError(
            f"task {request.task_id}: {request.role} returned the same output "
            f"{session.config.guardrails.loop_detection_threshold} times in a row",
            task_id=request.task_id,
            role=request.role,
        )
    # Every role may have learned something about the repository worth telling later prompts.
    session.knowledge.add_from_text(result.text, role=request.role, task_id=request.task_id)


async def _through_refusals(session: RunContext, request: DelegationRequest, budget_key: str) -> AgentResult:
    """The call, asked again in place while the provider refuses it for a while; a pause when waiting
    will not do (``orchestrator.provider_guard``). A prompt too long for the model's context is asked once
    more with its bounded parts cut further (``_cut_prompt``); a second overflow is the step's failure.
    Every call made, retried ones included, is counted by the guardrails (its cost, tokens, time) like any
    other."""
    guard = session.provider_guard
    retry = 0
    cut = False
    while True:
        timeout_s = session.guardrails.pre_invocation(
            budget_key, request.role, session.config.guardrails.max_duration_s_per_task
        )
        result = await _watched_call(session, request, _invocation(session, request, timeout_s))
        session.guardrails.post_invocation(
            budget_key,
            request.role,
            result,
            phase=request.phase,
            step=request.step,
            attempt=request.attempt,
        )
        error = result.error
        if error is not None and error.kind == "context_overflow" and not cut:
            cut = True
            request = _cut_prompt(session, request, error)
            continue
        if error is None or error.kind not in RETRIED_REFUSALS | STOPPING_REFUSALS:
            return result
        # Only this run's refusals keep the router off a platform (a limit an earlier session hit says
        # nothing about now).
        guard.refused_by(_adapter(session, request).name, error.kind)
        retry += 1
        why = ""
        wait = None
        breaker = False
        if error.kind in RETRIED_REFUSALS:
            state = guard.note_refusal()
            if state == "open":
                # Another task's refusal opened the breaker and paused the run: stop, recording nothing.
                raise ProviderRefusedError(
                    pause_message(error, request.role, request.task_id, why=", the circuit breaker is open"),
                    kind=error.kind,
                    resets_at=error.resets_at,
                )
            if state == "tripped":
                breaker = True
                _log.warning(
                    "delegate.circuit_open",
                    task_id=request.task_id,
                    role=request.role,
                    failures=guard.settings.breaker_failures,
                    window_s=guard.settings.breaker_window_s,
                )
                why = (
                    f", {guard.settings.breaker_failures} refusals within "
                    f"{guard.settings.breaker_window_s:g}s: the circuit breaker paused the run"
                )
            else:
                wait = guard.delay_s(retry, error)
                if wait is None:
                    why = f", still refused after {retry - 1} retries"
        if wait is None:
            _pause(session, request, error, why, breaker=breaker)
        assert wait is not None
        session.plan_manager.record_event(
            "provider_backoff",
            {
                "task_id": request.task_id,
                "role": request.role,
                "kind": error.kind,
                "retry": retry,
                "wait_s": round(wait, 3),
                "message": error.message[:500],
            },
        )
        _log.warning(
            "delegate.provider_backoff",
            task_id=request.task_id,
            role=request.role,
            kind=error.kind,
            wait_s=wait,
        )
        session.emit(
            ProgressEvent(
                "note",
                f"{request.role}: {error.kind.replace('_', ' ')}; asking again in {wait:.0f}s "
                f"(retry {retry} of {guard.settings.retry_attempts})",
                request.task_id,
                request.step,
                request.attempt,
            )
        )
        await anyio.sleep(wait)
        session.guardrails.exclude_wait(budget_key, wait)


# What is left of each bounded part of a prompt (the diff, tool output, findings, earlier reviews) when the
# model's context could not hold it: a quarter, and never more than this many characters.
_CUT_FRACTION = 4
_CUT_MAX_CHARS = 8_000
_KEPT_WHOLE_CHARS = 400


def _cut_prompt(session: RunContext, request: DelegationRequest, error: AgentError) -> DelegationRequest:
    """``request`` with the parts of its prompt that were excerpts already cut to a quarter (at most
    ``_CUT_MAX_CHARS`` each): the extra context, the envelope's context values, and no knowledge block.
    What the task *is* (its id, files, acceptance, the role's instructions) is kept whole."""

    def shorter(text: str) -> str:
        # A few lines are no excerpt: cutting them would save nothing and could lose the point.
        if len(text) <= _KEPT_WHOLE_CHARS:
            return text
        return clip(text, min(_CUT_MAX_CHARS, len(text) // _CUT_FRACTION))

    envelope = request.envelope
    context = {
        key: shorter(value) if isinstance(value, str) else value for key, value in envelope.context.items()
    }
    before = len(request.extra_context) + sum(len(v) for v in envelope.context.values() if isinstance(v, str))
    cut = replace(
        request,
        envelope=envelope.model_copy(update={"context": context}),
        extra_context=shorter(request.extra_context) if request.extra_context else "",
        knowledge_query="",
    )
    after = len(cut.extra_context) + sum(len(v) for v in context.values() if isinstance(v, str))
    session.plan_manager.record_event(
        "prompt_cut",
        {
            "task_id": request.task_id,
            "role": request.role,
            "step": request.step,
            "chars_before": before,
            "chars_after": after,
            "message": error.message[:500],
        },
    )
    _log.warning(
        "delegate.context_overflow",
        task_id=request.task_id,
        role=request.role,
        chars_before=before,
        chars_after=after,
    )
    session.emit(
        ProgressEvent(
            "note",
            f"{request.role}: the prompt is too long for the model; asking once more with its excerpts cut",
            request.task_id,
            request.step,
            request.attempt,
        )
    )
    return cut


def _pause(
    session: RunContext, request: DelegationRequest, error: AgentError, why: str, *, breaker: bool = False
) -> NoReturn:
    session.plan_manager.record_event(
        "provider_paused",
        {
            "task_id": request.task_id,
            "role": request.role,
            "kind": error.kind,
            "resets_at": error.resets_at.isoformat() if error.resets_at else None,
            "circuit_breaker": breaker,
            "message": error.message[:500],
        },
    )
    _log.warning("delegate.provider_paused", task_id=request.task_id, role=request.role, kind=error.kind)
    raise ProviderRefusedError(
        pause_message(error, request.role, request.task_id, why=why),
        kind=error.kind,
        resets_at=error.resets_at,
    )


async def delegate(session: RunContext, request: DelegationRequest) -> AgentResult:
    """Run one agent call for ``request`` under every guardrail; see the module docstring."""
    request = await _ask_the_run_policy(session, request)
    _ask_the_policy(session, request)
    # Plan-phase roles each get their own per-task limits: one shared "plan" budget would let the explorer
    # use up what the architect needs.
    budget_key = f"plan:{request.role}" if request.phase == "plan" else request.task_id
    result = await _through_refusals(session, request, budget_key)
    if request.warm_session is not None and not result.success and result.tool_calls == 0:
        # The platform could not continue the session (gone, or made in another directory): the same call
        # in a new session, rather than a failed attempt for the platform's reasons.
        _log.warning("delegate.resume_failed", task_id=request.task_id, role=request.role, error=result.error)
        request = replace(request, warm_session=None)
        result = await _through_refusals(session, request, budget_key)
    if result.error is not None and result.error.kind in _ENVIRONMENT_ERRORS:
        _log.warning("delegate.agent_unavailable", role=request.role, error=result.error.message)
        raise EnvironmentFaultError(
            f"the {request.role} agent cannot be started ({result.error.message}); install the agent CLI "
            "or choose another --platform, then run `autodev resume` (no attempt was counted)"
        )
    _log.info(
        "delegate.done",
        task_id=request.task_id,
        role=request.role,
        success=result.success,
        tool_calls=result.tool_calls,
        cost_usd=result.cost_usd,
        error=result.error.kind if result.error else None,
    )
    if result.success:
        _learn_from(session, request, result)
    return result
