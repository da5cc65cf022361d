"""The execute phase (seed 001, 5.1 "Execute Phase Flow" and 5.9): per task, developer → QA gates → reviewer →
test engineer → (implementation tournament) → commit → complete.

The step to run is read from the task's recorded status, so a resumed run (after a crash, an inline
suspend or a budget stop) continues exactly where the ledger says the task is, and never repeats a step
that was recorded as done. One retry counter per task spans every step: any failure sends the task back
to the developer with the concrete failure in its prompt; at ``qa_retry_limit`` the critic sounding board
diagnoses it, and the task and everything depending on it are blocked with a reason.

Nothing counts as a pass by default: an empty diff, a gate that could not run, a reviewer reply without a
``VERDICT:`` line, a test engineer reply without a ``RESULTS:`` line, or a claim the real test run
contradicts are all failures.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from autodev.adapters.base import AgentResult
from autodev.agents.parsing import parse_critic_verdict, parse_review_verdict, parse_test_results
from autodev.errors import EXIT_SUSPENDED, AutodevError, GuardrailExceededError
from autodev.guardrails.errors import LoopDetectedError
from autodev.logging import get_logger
from autodev.orchestrator.delegate import DelegationRequest, delegate
from autodev.orchestrator.delegation_envelope import DelegationAction, DelegationEnvelope
from autodev.orchestrator.events import ProgressEvent
from autodev.orchestrator.git import WorkingDiff
from autodev.orchestrator.text import clip
from autodev.orchestrator.workspace import (
    Integrated,
    TaskWorkspace,
    commit_message,
    commit_task,
    integrate,
    rebase_after_conflict,
    task_ref,
)
from autodev.qa import GateResult, run_gates
from autodev.state.schemas import (
    TERMINAL_STATUSES,
    CoderEvidence,
    CommandRun,
    CriticEvidence,
    GateCheck,
    GateEvidence,
    ReviewEvidence,
    Task,
    TaskStatus,
    TestEvidence,
)

if TYPE_CHECKING:
    from autodev.orchestrator.core import Orchestrator

__all__ = [
    "MID_FLIGHT",
    "PlanNotApprovedError",
    "TaskContext",
    "WorkingTreeDirtyError",
    "block_task",
    "check_working_tree",
    "execute_task",
    "run_execute_phase",
]

_log = get_logger("autodev.execute_phase")

# How much of a diff or of tool output goes into an agent's prompt; the evidence files keep everything.
PROMPT_DIFF_CHARS = 60_000
PROMPT_OUTPUT_CHARS = 4_000
MID_FLIGHT: tuple[TaskStatus, ...] = (
    "in_progress",
    "coded",
    "auto_gated",
    "reviewed",
    "tested",
    "tournamented",
)
_PYTEST_COUNTS = re.compile(r"(\d+) (passed|failed|error|errors)\b")


class PlanNotApprovedError(AutodevError):
    """The plan asks for approval and has none; the run waits (exit 3) for ``autodev approve``."""

    exit_code = EXIT_SUSPENDED


class WorkingTreeDirtyError(AutodevError):
    """Uncommitted user changes would be mixed into the first task's change and commit."""


@dataclass(frozen=True, slots=True)
class StepFailure:
    """Why a step failed, as concrete lines the developer's next attempt will see.

    ``new_base`` moves an isolated task onto a new base commit for its next attempt (after a conflict).
    """

    issues: tuple[str, ...]
    new_base: str | None = None

    @property
    def summary(self) -> str:
        return self.issues[0] if self.issues else "unspecified failure"


async def _nothing_to_wait_for() -> None:
    return None


def _no_change(task_id: str) -> None:
    return None


@dataclass(slots=True)
class TaskContext:
    """How one task runs: its working tree, and the dispatcher's hooks around it.

    ``integration_lock`` serializes what touches the main tree (integration, commits, phase checkpoints);
    ``before_integration`` lets a speculative task wait for its parent; ``on_change`` tells the dispatcher
    at once that the task failed an attempt or was blocked (a speculative child may have to be rolled back).
    """

    workspace: TaskWorkspace
    integration_lock: anyio.Lock = field(default_factory=anyio.Lock)
    before_integration: Callable[[], Awaitable[None]] = _nothing_to_wait_for
    on_change: Callable[[str], None] = _no_change
    after_complete: Callable[[Task], Awaitable[None]] | None = None
    # The developer's change as git showed it, reused by the gates and the review (they change no file);
    # dropped on any failure and before the test engineer, who adds files.
    developer_diff: WorkingDiff | None = None
    # The task was in flight when a run was killed: steps may find half-done work of that run.
    resumed: bool = False


def _agent_failure(role: str, result: AgentResult) -> StepFailure:
    kind = result.error.kind if result.error else "failed"
    message = result.error.message if result.error else "no reason given"
    return StepFailure((f"{role} call failed ({kind}): {message}",))


# --- entry point -----------------------------------------------------------------------------------------


async def run_execute_phase(orch: Orchestrator, task_id: str | None = None) -> list[Task]:
    """Process every runnable task in dependency order (or only ``task_id``); return their final states."""
    from autodev.orchestrator.dispatcher import Dispatcher

    pm = orch.plan_manager
    plan = pm.plan
    if plan.metadata.get("requires_approval") and not pm.plan_approved:
        raise PlanNotApprovedError(
            f"plan {plan.plan_id} waits for approval; review it with `autodev status`, then run "
            "`autodev approve` and `autodev execute`"
        )
    await check_working_tree(orch)
    if task_id is not None:
        _check_runnable(orch, task_id)
    pm.record_session(orch.session_id)
    _cascade_existing_blocks(orch)
    orch.emit(ProgressEvent("phase", f"execute phase: {plan.title or plan.plan_id}"))
    _log.info("orchestrator.execute.start", task_id=task_id)
    processed = await Dispatcher(orch, only_task=task_id).run()
    pm.checkpoint()
    final = [pm.get_task(tid) for tid in processed]
    _log.info(
        "orchestrator.execute.done",
        processed=len(final),
        complete=sum(t.status == "complete" for t in final),
        blocked=sum(t.status == "blocked" for t in final),
    )
    return final


async def check_working_tree(orch: Orchestrator) -> None:
    """Refuse to start on uncommitted user changes (they would end up in the first task's commit)."""
    manager = orch.plan_manager
    if manager.has_plan and any(
        manager.get_task(tid).worktree is None for tid in manager.task_ids_with_status(*MID_FLIGHT)
    ):
        return  # a task is mid-flight in the main tree: the uncommitted changes are its own work
    if not await orch.git.is_clean():
        raise WorkingTreeDirtyError(
            f"{orch.repo_root} has uncommitted changes; commit or stash them first, so that each task's "
            "change and commit contain only that task's work"
        )


def _cascade_existing_blocks(orch: Orchestrator) -> None:
    """Block dependents of tasks already blocked (a run killed mid-escalation may have left them pending)."""
    pm = orch.plan_manager
    for blocked_id in pm.task_ids_with_status("blocked"):
        reason = pm.get_task(blocked_id).blocked_reason or "blocked"
        pm.mark_blocked_descendants(blocked_id, reason)


def _check_runnable(orch: Orchestrator, task_id: str) -> None:
    task = orch.plan_manager.get_task(task_id)
    if task.status == "blocked":
        raise AutodevError(
            f"task {task_id} is blocked ({task.blocked_reason}); fix the cause, then re-plan it"
        )
    waiting = [
        dep
        for dep in task.depends_on
        if orch.plan_manager.get_task(dep).status not in ("complete", "skipped")
    ]
    if waiting and task.status == "pending":
        raise AutodevError(
            f"task {task_id} depends on unfinished task(s) {', '.join(waiting)}; run those first"
        )


# --- one task --------------------------------------------------------------------------------------------


async def execute_task(orch: Orchestrator, task_id: str, ctx: TaskContext) -> None:
    """Run one started task (status past pending) from its recorded step until it is terminal."""
    pm = orch.plan_manager
    steps: dict[str, Callable[[Orchestrator, Task, TaskContext], Awaitable[StepFailure | None]]] = {
        "in_progress": _developer_step,
        "coded": _gates_step,
        "auto_gated": _review_step,
        "reviewed": _test_step,
        "tested": _tournament_step,
        "tournamented": _complete_step,
    }
    limit = orch.config.qa_retry_limit
    while True:
        task = pm.get_task(task_id)
        if task.status in TERMINAL_STATUSES:
            return
        if task.retry_count >= limit:
            await _escalate(orch, task, ctx)
            return
        try:
            failure = await steps[task.status](orch, task, ctx)
        except LoopDetectedError as exc:
            block_task(orch, task_id, f"loop_detected: {exc.message}", ctx)
            return
        except GuardrailExceededError as exc:
            block_task(orch, task_id, f"guardrail: {exc.message}", ctx)
            return
        if failure is None:
            continue
        ctx.developer_diff = None
        count = pm.mark_task_retry(
            task_id,
            failure.issues,
            back_to_developer=count_below(task, limit),
            base_commit=failure.new_base,
        )
        if failure.new_base is not None:
            await ctx.workspace.git.delete_ref(task_ref(task_id))
        ctx.on_change(task_id)
        _log.info("execute_phase.retry", task_id=task_id, retry=count, reason=failure.summary)
        orch.emit(
            ProgressEvent(
                "retry",
                f"attempt {count} failed: {failure.summary}",
                task_id,
                task.status,
                count,
                False,
                details=failure.issues,
            )
        )


def count_below(task: Task, limit: int) -> bool:
    """Whether the retry about to be counted still leaves an attempt (else the critic is next)."""
    return task.retry_count + 1 < limit


def block_task(orch: Orchestrator, task_id: str, reason: str, ctx: TaskContext | None = None) -> None:
    """Block ``task_id`` and every task depending on it, with ``reason``."""
    pm = orch.plan_manager
    pm.update_task_status(task_id, "blocked", reason=reason)
    blocked = pm.mark_blocked_descendants(task_id, reason)
    if ctx is not None:
        ctx.on_change(task_id)
    _log.warning("execute_phase.task_blocked", task_id=task_id, reason=reason, descendants=blocked)
    orch.emit(ProgressEvent("task_finished", f"blocked: {reason}", task_id, "blocked", ok=False))
    for child in blocked:
        orch.emit(
            ProgressEvent("task_finished", f"blocked: depends on {task_id}", child, "blocked", ok=False)
        )


def _envelope(task: Task, role: str, action: DelegationAction, **context: object) -> DelegationEnvelope:
    return DelegationEnvelope(
        task_id=task.id,
        target_agent=role,
        action=action,
        files=list(task.files),
        constraints=[
            "work only inside the working directory",
            "keep the change to what this task needs",
        ],
        acceptance="; ".join(c.description for c in task.acceptance) or None,
        context={"task_title": task.title, "task_description": task.description, **context},
    )


def _request(
    task: Task, role: str, step: str, envelope: DelegationEnvelope, ctx: TaskContext, extra: str = ""
) -> DelegationRequest:
    return DelegationRequest(
        role=role,
        envelope=envelope,
        phase="execute",
        step=step,
        task_id=task.id,
        cwd=ctx.workspace.root,
        attempt=task.retry_count + 1,
        retry_count=task.retry_count,
        last_issues=tuple(task.last_issues),
        extra_context=extra,
        knowledge_query=f"{task.title} {task.description}",
        knowledge_files=tuple(task.files),
    )


async def _agent(orch: Orchestrator, task: Task, request: DelegationRequest) -> AgentResult:
    orch.emit(
        ProgressEvent("step_started", f"{request.role} working", task.id, request.step, request.attempt)
    )
    result = await delegate(orch, request)
    orch.emit(
        ProgressEvent(
            "step_finished",
            f"{request.role} {'done' if result.success else 'failed'}",
            task.id,
            request.step,
            request.attempt,
            result.success,
            result.cost_usd,
        )
    )
    return result


async def _current_diff(task: Task, ctx: TaskContext) -> WorkingDiff:
    if task.base_commit is None:
        raise AutodevError(f"task {task.id} has no recorded base commit; the ledger is from an older AutoDev")
    return await ctx.workspace.git.diff_against(task.base_commit)


# --- the steps -------------------------------------------------------------------------------------------


async def _developer_step(orch: Orchestrator, task: Task, ctx: TaskContext) -> StepFailure | None:
    extra = ""
    if task.last_issues:
        extra = "THE PREVIOUS ATTEMPT FAILED. Fix these problems first:\n" + "\n".join(
            f"- {clip(issue, PROMPT_OUTPUT_CHARS)}" for issue in task.last_issues
        )
    request = _request(task, "developer", "develop", _envelope(task, "developer", "implement"), ctx, extra)
    result = await _agent(orch, task, request)
    diff = await _current_diff(task, ctx)
    orch.guardrails.check_diff(task.id, diff.size_bytes)
    pm = orch.plan_manager
    pm.record_evidence(
        CoderEvidence(
            task_id=task.id,
            attempt=request.attempt,
            role="developer",
            diff=diff.patch,
            files_changed=list(diff.files),
            output_text=result.text,
            duration_s=result.duration_s,
            success=result.success and not diff.is_empty,
            cost_usd=result.cost_usd,
            session_id=result.session_id,
        )
    )
    pm.record_patch(task.id, diff.patch, attempt=request.attempt)
    if not result.success:
        return _agent_failure("developer", result)
    if diff.is_empty:
        return StepFailure(
            (
                f"the developer reported success but git shows no change against {task.base_commit}; "
                "write the change to the files in the working directory",
            )
        )
    pm.update_task_status(task.id, "coded")
    ctx.developer_diff = diff
    return None


def _gate_check(result: GateResult) -> GateCheck:
    return GateCheck(
        gate=result.gate,
        status=result.status,
        counts_as_pass=result.counts_as_pass,
        language=result.language,
        reason=result.reason,
        skipped_by=result.skipped_by,
        findings=list(result.findings),
        runs=[
            CommandRun(
                argv=list(check.argv),
                status=check.status,
                exit_code=check.exit_code,
                duration_s=check.duration_s,
                output_sha256=check.output_sha256,
                output_bytes=check.output_bytes,
                output_excerpt=check.output_excerpt,
                reason=check.reason,
            )
            for check in result.checks
        ],
    )


def _gate_output(result: GateResult) -> str:
    return "\n".join(check.output_excerpt.strip() for check in result.checks if check.output_excerpt.strip())


def _gate_issue(result: GateResult) -> str:
    reason = f" ({result.reason})" if result.reason else ""
    line = f"{result.gate} gate {result.status}{reason}"
    if result.findings:
        line += "\n" + "\n".join(f"- {finding}" for finding in result.findings[:20])
    output = _gate_output(result)
    return f"{line}:\n{clip(output, PROMPT_OUTPUT_CHARS)}" if output else line


async def _gates_step(orch: Orchestrator, task: Task, ctx: TaskContext) -> StepFailure | None:
    diff = ctx.developer_diff or await _current_diff(task, ctx)
    orch.emit(ProgressEvent("step_started", "QA gates running", task.id, "gates", task.retry_count + 1))
    results = await run_gates(
        ctx.workspace.root, list(diff.files), orch.config.qa_gates, state_dir=orch.paths.state_dir
    )
    passed = all(result.counts_as_pass for result in results)
    orch.plan_manager.record_evidence(
        GateEvidence(
            task_id=task.id,
            attempt=task.retry_count + 1,
            passed=passed,
            checks=[_gate_check(result) for result in results],
        )
    )
    orch.emit(
        ProgressEvent(
            "step_finished",
            "QA gates " + ", ".join(f"{r.gate}={r.status}" for r in results),
            task.id,
            "gates",
            task.retry_count + 1,
            passed,
        )
    )
    if not passed:
        return StepFailure(tuple(_gate_issue(result) for result in results if not result.counts_as_pass))
    orch.plan_manager.update_task_status(task.id, "auto_gated")
    return None


async def _review_step(orch: Orchestrator, task: Task, ctx: TaskContext) -> StepFailure | None:
    diff = ctx.developer_diff or await _current_diff(task, ctx)
    ctx.developer_diff = None
    extra = "THE CHANGE TO REVIEW (git diff against the task's base):\n" + clip(diff.patch, PROMPT_DIFF_CHARS)
    request = _request(task, "reviewer", "review", _envelope(task, "reviewer", "review"), ctx, extra)
    result = await _agent(orch, task, request)
    if not result.success:
        return _agent_failure("reviewer", result)
    parsed = parse_review_verdict(result.text)
    orch.plan_manager.record_evidence(
        ReviewEvidence(
            task_id=task.id,
            attempt=request.attempt,
            role="reviewer",
            verdict=parsed.verdict if parsed else None,
            issues=list(parsed.issues) if parsed else [],
            output_text=result.text,
            cost_usd=result.cost_usd,
            session_id=result.session_id,
        )
    )
    if parsed is None:
        return StepFailure(("the reviewer's reply has no 'VERDICT: APPROVED|NEEDS_CHANGES|REJECTED' line",))
    if parsed.verdict != "APPROVED":
        issues = parsed.issues or (f"the reviewer said {parsed.verdict} without listing issues",)
        return StepFailure(tuple(f"reviewer ({parsed.verdict}): {issue}" for issue in issues))
    orch.plan_manager.update_task_status(task.id, "reviewed")
    return None


def _run_counts(excerpt: str) -> tuple[int, int] | None:
    """(passed, failed) from a pytest summary line, when the output has one."""
    counts = {"passed": 0, "failed": 0}
    found = False
    for number, word in _PYTEST_COUNTS.findall(excerpt):
        found = True
        key = "passed" if word == "passed" else "failed"
        counts[key] += int(number)
    return (counts["passed"], counts["failed"]) if found else None


async def _test_step(orch: Orchestrator, task: Task, ctx: TaskContext) -> StepFailure | None:
    request = _request(task, "test_engineer", "test", _envelope(task, "test_engineer", "test"), ctx)
    result = await _agent(orch, task, request)
    if not result.success:
        return _agent_failure("test engineer", result)
    claim = parse_test_results(result.text)
    diff = await _current_diff(task, ctx)
    orch.guardrails.check_diff(task.id, diff.size_bytes)
    test_only = orch.config.qa_gates.model_copy(
        update={
            name: getattr(orch.config.qa_gates, name).model_copy(update={"enabled": False})
            for name in ("syntax", "lint", "build", "secretscan")
        }
    )
    orch.emit(
        ProgressEvent("step_started", "AutoDev runs the tests itself", task.id, "verify", request.attempt)
    )
    ran = await run_gates(ctx.workspace.root, list(diff.files), test_only, state_dir=orch.paths.state_dir)
    runs = [r for r in ran if r.gate == "test"]
    run = runs[0] if runs else None
    run_excerpt = _gate_output(run) if run else ""
    real = _run_counts(run_excerpt)
    agrees: bool | None = None
    if claim is not None and real is not None:
        agrees = (claim.passed, claim.failed) == real
    orch.plan_manager.record_evidence(
        TestEvidence(
            task_id=task.id,
            attempt=request.attempt,
            role="test_engineer",
            passed=claim.passed if claim else 0,
            failed=claim.failed if claim else 0,
            total=claim.total if claim else 0,
            claim_found=claim is not None,
            run_status=run.status if run else "not run",
            run_exit_code=run.checks[-1].exit_code if run and run.checks else None,
            run_passed=real[0] if real else None,
            run_failed=real[1] if real else None,
            run_total=sum(real) if real else None,
            agrees=agrees,
            output_text=result.text,
            cost_usd=result.cost_usd,
            session_id=result.session_id,
        )
    )
    issues: list[str] = []
    if claim is None:
        issues.append("the test engineer's reply has no 'RESULTS: passed=N failed=M total=T' line")
    elif claim.failed:
        issues.append(f"the test engineer reports {claim.failed} failing test(s)")
    if run is None or not run.counts_as_pass:
        status = run.status if run else "not run"
        excerpt = clip(run_excerpt, PROMPT_OUTPUT_CHARS)
        issues.append(f"the tests do not pass when AutoDev runs them ({status}):\n{excerpt}")
    if agrees is False and claim is not None and real is not None:
        issues.append(
            f"the test engineer claimed passed={claim.passed} failed={claim.failed}, but AutoDev's own run "
            f"shows passed={real[0]} failed={real[1]}"
        )
    if issues:
        return StepFailure(tuple(issues))
    orch.plan_manager.update_task_status(task.id, "tested")
    return None


async def _tournament_step(orch: Orchestrator, task: Task, ctx: TaskContext) -> StepFailure | None:
    await orch.impl_tournament_hook(task, ctx.workspace)
    orch.plan_manager.update_task_status(task.id, "tournamented")
    return None


async def _complete_step(orch: Orchestrator, task: Task, ctx: TaskContext) -> StepFailure | None:
    commit: str | None = None
    if ctx.workspace.isolated:
        await ctx.before_integration()
        orch.emit(ProgressEvent("step_started", "merging", task.id, "merge", task.retry_count + 1))
        change = await commit_task(ctx.workspace, task, resumed=ctx.resumed)
        async with ctx.integration_lock:
            outcome = await integrate(orch, ctx.workspace, task, change)
            if isinstance(outcome, Integrated):
                await _record_complete(orch, task, outcome.commit, ctx, pinned=outcome.pinned)
                return None
        applied = await rebase_after_conflict(ctx.workspace, task, outcome)
        old_patch = await ctx.workspace.git.commit_patch(outcome.commit)
        issue = (
            f"your change conflicts with work merged meanwhile ({', '.join(outcome.paths[:10])}); the "
            f"working directory is now at the current code ({outcome.head[:10]}) with your change re-applied"
            + (
                ""
                if applied
                else "; git left conflict markers (<<<<<<< ======= >>>>>>>): resolve them, keeping the "
                "intent of both sides"
            )
            + f".\nYour previous change was:\n{clip(old_patch, PROMPT_DIFF_CHARS)}"
        )
        return StepFailure((issue,), new_base=outcome.head)
    if orch.config.auto_commit:
        message = commit_message(task)
        orch.emit(ProgressEvent("step_started", "committing", task.id, "commit", task.retry_count + 1))
        async with ctx.integration_lock:
            commit = await ctx.workspace.git.commit_all(message)
            if commit is None and await ctx.workspace.git.head_subject() == message:
                # Committed by an earlier run that died before recording it: the same commit, not a new one.
                commit = await ctx.workspace.git.head()
            await _record_complete(orch, task, commit, ctx)
        return None
    async with ctx.integration_lock:
        await _record_complete(orch, task, None, ctx)
    return None


async def _record_complete(
    orch: Orchestrator, task: Task, commit: str | None, ctx: TaskContext, *, pinned: bool = False
) -> None:
    """Record the task complete (under the integration lock, so a phase checkpoint taken next is exact)."""
    orch.plan_manager.update_task_status(task.id, "complete", commit=commit)
    if pinned:
        await orch.git.delete_ref(task_ref(task.id))
    if ctx.after_complete is not None:
        await ctx.after_complete(orch.plan_manager.get_task(task.id))
    _log.info("execute_phase.task_complete", task_id=task.id, commit=commit)
    orch.emit(
        ProgressEvent(
            "task_finished",
            "complete" + (f" ({commit[:10]})" if commit else ""),
            task.id,
            "complete",
            ok=True,
        )
    )


async def _escalate(orch: Orchestrator, task: Task, ctx: TaskContext) -> None:
    """Retries are used up: ask the critic sounding board why, then block the task and its dependents."""
    issues: Sequence[str] = task.last_issues or ("no failure details were recorded",)
    envelope = _envelope(task, "critic_sounding_board", "critique", failures="\n".join(issues))
    request = _request(
        task,
        "critic_sounding_board",
        "critic",
        envelope,
        ctx,
        f"The task failed {task.retry_count} attempt(s). The last failures:\n"
        + "\n".join(f"- {clip(issue, PROMPT_OUTPUT_CHARS)}" for issue in issues),
    )
    reason = f"retries exhausted after {task.retry_count} attempt(s): {issues[0].splitlines()[0]}"
    try:
        result = await _agent(orch, task, request)
    except (GuardrailExceededError, LoopDetectedError) as exc:
        result = AgentResult.failure("is_error", exc.message)
    parsed = parse_critic_verdict(result.text) if result.success else None
    orch.plan_manager.record_evidence(
        CriticEvidence(
            task_id=task.id,
            attempt=request.attempt,
            role="critic_sounding_board",
            verdict=parsed.verdict if parsed else None,
            issues=list(parsed.issues) if parsed else list(issues),
            recommendation=parsed.recommendation if parsed else None,
            output_text=result.text,
            cost_usd=result.cost_usd,
            session_id=result.session_id,
        )
    )
    if parsed and parsed.recommendation:
        reason += f"; critic: {parsed.recommendation}"
    elif not result.success:
        reason += f"; critic unavailable ({result.error.message if result.error else 'failed'})"
    _log.warning("execute_phase.retry_exhausted", task_id=task.id, retry=task.retry_count, reason=reason)
    orch.plan_manager.mark_escalated(task.id, reason)
    block_task(orch, task.id, reason, ctx)
