"""The execute phase: per task, developer → QA gates → reviewer → test engineer →
(implementation tournament) → commit → complete.

The step to run is read from the task's recorded status, so a resumed run (after a crash, an inline
suspend or a budget stop) continues exactly where the ledger says the task is, and never repeats a step
that was recorded as done. One retry counter per task spans every step; at ``qa_retry_limit`` the critic
sounding board diagnoses the task, and the task and everything depending on it are blocked with a reason.

Each failure goes to whoever can act on it:

- what the developer can fix (a gate finding new against the base commit, a reviewer's issues, tests that
  fail when AutoDev runs them) goes back to the developer with the concrete failure in its prompt;
- a role's own mistake (a reply without its ``VERDICT:`` or ``RESULTS:`` line, counts that contradict
  AutoDev's run, lint errors in the test engineer's own files) gets one repair turn in the same role with
  the exact problem stated, then retries that role's step; a failed call of the role retries its step at
  once (there is no reply to repair). Either way an attempt is counted and the developer's work is not
  thrown back;
- what nobody in the run can fix (a gate's tool gone missing, an agent CLI that cannot start) stops the
  run resumably (``EnvironmentFaultError``, exit 3) and costs no attempt.

Nothing counts as a pass by default: an empty diff, a gate that could not run, a missing verdict or results
line, or a claim the real test run contradicts are all failures. What is committed is what was checked:
the test engineer's additions go through the gates too, the commit must hold exactly the tree the last
checks saw, and ``evidence/<task>.patch`` is the committed change (the developer's own diff is kept in
``evidence/<task>.developer.patch``).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import anyio

from autodev.adapters.base import AgentResult
from autodev.agents.parsing import (
    parse_changed,
    parse_critic_verdict,
    parse_review_verdict,
    parse_test_results,
    review_problem,
)
from autodev.errors import (
    EXIT_SUSPENDED,
    AutodevError,
    EnvironmentFaultError,
    EvidenceError,
    GuardrailExceededError,
)
from autodev.guardrails.errors import LoopDetectedError
from autodev.logging import get_logger
from autodev.orchestrator.delegate import DelegationRequest, delegate
from autodev.orchestrator.delegation_envelope import DelegationAction, DelegationEnvelope
from autodev.orchestrator.events import ProgressEvent
from autodev.orchestrator.execute.completion import CompletionBlockedError, ContractBinding, run_contract
from autodev.orchestrator.execute.results import accepted_result
from autodev.orchestrator.run_policy import DelegationRejectedError
from autodev.orchestrator.submodules import submodules_touched
from autodev.orchestrator.text import clip
from autodev.orchestrator.tournaments.impl import run_impl_tournament
from autodev.qa import GateResult
from autodev.qa.gates import GateName, GateRun
from autodev.state.evidence import read_evidence
from autodev.state.plan_markdown import MODEL_NAMES, TIER_NAMES
from autodev.state.schemas import (
    EFFORTS,
    MODEL_TIERS,
    ChangeStat,
    CoderEvidence,
    CommandRun,
    CriticEvidence,
    Evidence,
    GateCheck,
    GateEvidence,
    ModelTier,
    RepositoryFacts,
    ReviewEvidence,
    Task,
    TestEvidence,
    TestRunCounts,
)
from autodev.state.vocabulary import IN_FLIGHT_STATUSES, TERMINAL_STATUSES
from autodev.workspace.areas import area_prompt_block, areas_for_files
from autodev.workspace.change_facts import numstat
from autodev.workspace.git import GitRepo, WorkingDiff
from autodev.workspace.integration import (
    Integrated,
    MainTreeChangedError,
    TaskWorkspace,
    adoption_ref,
    commit_message,
    commit_task,
    integrate,
    park_change,
    prepare_landing,
    rebase_after_conflict,
    task_ref,
)

if TYPE_CHECKING:
    from autodev.orchestrator.checks import ChangeChecks
    from autodev.orchestrator.run_context import RunContext

__all__ = [
    "HeldForAdoption",
    "PlanNotApprovedError",
    "TaskContext",
    "WorkingTreeDirtyError",
    "block_and_park",
    "block_task",
    "check_working_tree",
    "execute_task",
    "hold_for_adoption",
    "record_complete",
]

_log = get_logger("autodev.execute_phase")

# How much of a diff or of tool output goes into an agent's prompt; the evidence files keep everything.
PROMPT_DIFF_CHARS = 60_000
PROMPT_OUTPUT_CHARS = 4_000
_FILE_GATES: tuple[GateName, ...] = ("syntax", "lint", "secretscan")


class PlanNotApprovedError(AutodevError):
    """The plan asks for approval and has none; the run waits (exit 3) for ``autodev approve``."""

    exit_code = EXIT_SUSPENDED


class WorkingTreeDirtyError(AutodevError):
    """Uncommitted user changes would be mixed into the first task's change and commit."""


@dataclass(frozen=True, slots=True)
class StepFailure:
    """Why a step failed, as concrete lines the next attempt will see.

    ``role`` is set when the failure is that role's own (its step is retried, the task stays where it is);
    unset, the task goes back to the developer. ``new_base`` moves an isolated task onto a new base commit
    for its next attempt (after a conflict).
    """

    issues: tuple[str, ...]
    new_base: str | None = None
    role: str | None = None

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
    # Told the commit an isolated task's landing is about to fast-forward the main tree to (``integrate``).
    landing: Callable[[str], None] | None = None
    # The developer's change as git showed it, reused by the gates and the review (they change no file);
    # dropped on any failure and before the test engineer, who adds files.
    developer_diff: WorkingDiff | None = None
    # What git showed in the checkout after the developer ran, and where its CHANGED: list differed.
    developer_facts: tuple[RepositoryFacts, list[str]] | None = None
    # The task was in flight when a run was killed: steps may find half-done work of that run.
    resumed: bool = False
    # What every role of the task is told about the project (``autodev.orchestrator.context``).
    project_block: str = ""
    # What the tasks before it delivered, as AutoDev recorded it (``autodev.orchestrator.execute.results``).
    results_block: str = ""
    # The developer's reply, for the task's accepted-result record.
    developer_reply: str | None = None
    # The git tree of the change as the developer last left it: what later calls are about.
    change_tree: str = ""


async def task_checks(session: RunContext, task: Task) -> ChangeChecks:
    """The gates for ``task``: the test gate runs the test recipe of the area map holding its files when
    the configuration names no test command."""
    return await session.change_checks(session.test_recipe(task.files))


def _agent_failure(role: str, result: AgentResult, *, own: bool = False) -> StepFailure:
    """A failed agent call; ``own``: the role's step is retried rather than the developer's."""
    kind = result.error.kind if result.error else "failed"
    message = result.error.message if result.error else "no reason given"
    label = role.replace("_", " ")
    return StepFailure((f"{label} call failed ({kind}): {message}",), role=role if own else None)


async def check_working_tree(session: RunContext) -> None:
    """Refuse to start on uncommitted user changes (they would end up in the first task's commit)."""
    manager = session.plan_manager
    if manager.has_plan and any(
        (task := manager.get_task(tid)).worktree is None and task.base_commit is not None
        for tid in manager.task_ids_with_status(*IN_FLIGHT_STATUSES)
    ):
        return  # a task is mid-flight in the main tree: the uncommitted changes are its own work
    if not await session.git.is_clean() and not await _only_a_merge_cut_short(session):
        raise WorkingTreeDirtyError(
            f"{session.repo_root} has uncommitted changes; commit or stash them first, so that each task's "
            "change and commit contain only that task's work"
        )


async def _only_a_merge_cut_short(session: RunContext) -> bool:
    """Whether every uncommitted change in the main tree is a file a task at its merge step changes: what a
    fast-forward stopped half way (a kill, a full disk) leaves behind, and the merge repairs."""
    manager = session.plan_manager
    if not manager.has_plan:
        return False
    merged: set[str] = set()
    for task_id in manager.task_ids_with_status("tournamented"):
        task = manager.get_task(task_id)
        if task.worktree is None or task.base_commit is None:
            continue
        if not await anyio.Path(session.repo_root / task.worktree).is_dir():
            continue
        copy = GitRepo(session.repo_root / task.worktree, like=session.git)
        head = await copy.head()
        if head is not None and head != task.base_commit:
            merged.update(await copy.changed_paths(task.base_commit, head))
    return bool(merged) and set(await session.git.dirty_paths()) <= merged


# --- one task --------------------------------------------------------------------------------------------


async def execute_task(
    session: RunContext, task_id: str, ctx: TaskContext, *, until: Callable[[Task], bool] | None = None
) -> None:
    """Run one started task (status past pending) from its recorded step until it is terminal, or until
    ``until`` holds for it (an executor that runs the steps on one machine and the merge on another)."""
    pm = session.plan_manager
    steps: dict[str, Callable[[RunContext, Task, TaskContext], Awaitable[StepFailure | None]]] = {
        "in_progress": _developer_step,
        "coded": _gates_step,
        "auto_gated": _review_step,
        "reviewed": _test_step,
        "tested": _tournament_step,
        "tournamented": _complete_step,
    }
    limit = session.config.qa_retry_limit
    while True:
        task = pm.get_task(task_id)
        if task.status in TERMINAL_STATUSES or (until is not None and until(task)):
            return
        if task.retry_count >= limit + task.automatic_retries:
            if await _automatic_retry(session, task):
                continue
            await _escalate(session, task, ctx)
            return
        try:
            failure = await steps[task.status](session, task, ctx)
        except HeldForAdoption:
            return  # in flight still, until `autodev adopt` or a later run lands it
        except LoopDetectedError as exc:
            await block_and_park(session, task_id, f"loop_detected: {exc.message}", ctx)
            return
        except (DelegationRejectedError, CompletionBlockedError) as exc:
            await block_and_park(session, task_id, exc.message, ctx)
            return
        except OutsideScopeError as exc:
            _log.warning("execute_phase.wrote_outside_scope", task_id=task_id, paths=exc.paths)
            await block_and_park(session, task_id, exc.message, ctx)
            return
        except GuardrailExceededError as exc:
            _log.warning("execute_phase.guardrail_exceeded", task_id=task_id, reason=exc.message)
            await block_and_park(session, task_id, f"guardrail: {exc.message}", ctx)
            return
        if failure is None:
            continue
        ctx.developer_diff = None
        ctx.developer_facts = None
        count = pm.mark_task_retry(
            task_id,
            failure.issues,
            back_to_developer=failure.role is None and count_below(task, limit + task.automatic_retries),
            base_commit=failure.new_base,
            issues_for=failure.role,
        )
        if failure.new_base is not None:
            await ctx.workspace.git.delete_ref(task_ref(task_id))
        ctx.on_change(task_id)
        _log_failure(session, task, failure, count)
        again = f"; the {failure.role.replace('_', ' ')} tries again" if failure.role else ""
        session.emit(
            ProgressEvent(
                "retry",
                f"attempt {count} failed: {failure.summary}{again}",
                task_id,
                task.status,
                count,
                False,
                details=failure.issues,
            )
        )


# The log event of a failed attempt, by the step that failed (the task's status when it ran).
_FAILURE_EVENTS = {
    "in_progress": "execute_phase.developer_failed",
    "coded": "execute_phase.qa_gate_failed",
    "auto_gated": "execute_phase.review_needs_changes",
    "reviewed": "execute_phase.tests_failed",
    "tested": "execute_phase.tournament_failed",
    "tournamented": "execute_phase.integration_failed",
}


def _log_failure(session: RunContext, task: Task, failure: StepFailure, retry: int) -> None:
    """One event per kind of failed attempt, with the fields a reader greps for: what failed and why."""
    event = _FAILURE_EVENTS.get(task.status, "execute_phase.step_failed")
    fields: dict[str, object] = {"task_id": task.id, "retry": retry, "role": failure.role}
    if event.endswith("developer_failed"):
        fields["err"] = failure.summary
    elif event.endswith("qa_gate_failed"):
        fields["details"] = list(failure.issues)
    elif event.endswith("review_needs_changes"):
        review = _recorded(session, task.id, "review", task.retry_count + 1)
        fields["verdict"] = review.verdict if isinstance(review, ReviewEvidence) else None
        fields["issues"] = list(failure.issues)
    elif event.endswith("tests_failed"):
        tests = _recorded(session, task.id, "test", task.retry_count + 1)
        if isinstance(tests, TestEvidence):
            # AutoDev's own run where it ran, else the test engineer's claim.
            fields["failed"] = tests.run_failed if tests.run_failed is not None else tests.failed
            fields["total"] = tests.run_total if tests.run_total is not None else tests.total
        fields["reason"] = failure.summary
    else:
        fields["reason"] = failure.summary
    _log.info(event, **fields)


def count_below(task: Task, limit: int) -> bool:
    """Whether the retry about to be counted still leaves an attempt (else the critic is next)."""
    return task.retry_count + 1 < limit


def block_task(session: RunContext, task_id: str, reason: str, ctx: TaskContext | None = None) -> None:
    """Block ``task_id`` and every task depending on it, with ``reason``."""
    pm = session.plan_manager
    pm.update_task_status(task_id, "blocked", reason=reason)
    blocked = pm.mark_blocked_descendants(task_id, reason)
    if ctx is not None:
        ctx.on_change(task_id)
    _log.warning("execute_phase.task_blocked", task_id=task_id, reason=reason, descendants=blocked)
    session.emit(ProgressEvent("task_finished", f"blocked: {reason}", task_id, "blocked", ok=False))
    for child in blocked:
        session.emit(
            ProgressEvent("task_finished", f"blocked: depends on {task_id}", child, "blocked", ok=False)
        )


async def block_and_park(session: RunContext, task_id: str, reason: str, ctx: TaskContext) -> None:
    """Block the task (and its dependents), then keep its last change aside (``workspace.park_change``)."""
    task = session.plan_manager.get_task(task_id)
    block_task(session, task_id, reason, ctx)
    oversized: list[str] = []
    if task.base_commit is not None:
        added = await ctx.workspace.git.added_bytes(task.base_commit)
        limit = session.config.guardrails.max_file_bytes
        oversized = sorted(path for path, size in added.items() if size > limit)
    kept = await park_change(ctx.workspace, task, session.git, set_aside=oversized)
    if oversized:
        session.emit(
            ProgressEvent(
                "note",
                f"files over guardrails.max_file_bytes are not kept in git but moved to "
                f"{session.paths.state_dir / 'oversized' / task_id}: {', '.join(oversized[:5])}",
                task_id,
            )
        )
    if kept is not None:
        session.emit(
            ProgressEvent(
                "note", f"its last change is kept: git show {kept[:10]} (autodev retry {task_id})", task_id
            )
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
    for block in (ctx.results_block, ctx.project_block):
        if block:
            extra = f"{extra.rstrip()}\n\n{block}" if extra.strip() else block
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
        subject=ctx.change_tree,
    )


async def _agent(session: RunContext, task: Task, request: DelegationRequest) -> AgentResult:
    session.emit(
        ProgressEvent("step_started", f"{request.role} working", task.id, request.step, request.attempt)
    )
    result = await delegate(session, request)
    session.emit(
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


async def _oversized(
    session: RunContext, task: Task, ctx: TaskContext, dirty: Sequence[str] | None = None
) -> str | None:
    """Why the working copy's change is too big to stage at all (None when it is not); ``dirty``: the
    copy's changed paths when the caller has just listed them."""
    assert task.base_commit is not None
    git = ctx.workspace.git
    if dirty is None and await _bound_within_limits(session, task, ctx) is not None:
        return None
    paths = await git.dirty_paths() if dirty is None else dirty
    # A file adds at most its whole size: a change within the limits counted so is within them, and the
    # base's sizes (a git process each time) are asked for only when it may not be.
    if session.guardrails.change_size_problem(git.sizes_now(paths)) is None:
        return None
    return session.guardrails.change_size_problem(await git.added_bytes(task.base_commit, paths))


async def _current_diff(task: Task, ctx: TaskContext) -> WorkingDiff:
    if task.base_commit is None:
        raise AutodevError(f"task {task.id} has no recorded base commit; the ledger is from an older AutoDev")
    return await ctx.workspace.git.diff_against(task.base_commit)


def _recorded(session: RunContext, task_id: str, kind: str, attempt: int | None = None) -> Evidence | None:
    """The latest evidence of ``kind`` recorded for the task (of ``attempt`` only, when given)."""
    refs = [
        ref
        for ref in session.plan_manager.evidence_for(task_id)
        if ref.kind == kind and (attempt is None or ref.attempt == attempt)
    ]
    if not refs:
        return None
    try:
        return read_evidence(session.repo_root / refs[-1].path)
    except EvidenceError:
        return None


def _issues_block(title: str, issues: Sequence[str]) -> str:
    return f"{title}\n" + "\n".join(f"- {clip(issue, PROMPT_OUTPUT_CHARS)}" for issue in issues)


def _own_issues(task: Task, role: str) -> tuple[str, ...]:
    """The last failures when they are ``role``'s own (the developer's: those of no other role)."""
    owner = task.last_issues_for or "developer"
    return tuple(task.last_issues) if owner == role else ()


def _own_failures(task: Task, role: str, title: str, repair_of: str | None, previous: str) -> str:
    """What a role is told of its own earlier failures: those of its last attempt at the step, and the
    problem with its last reply when this call is that reply's repair turn."""
    parts = []
    own = _own_issues(task, role)
    if own:
        parts.append(_issues_block(title, own))
    if repair_of is not None:
        parts.append(_repair_instruction(repair_of, previous))
    return "".join(f"\n\n{part}" for part in parts)


def _repair_instruction(problem: str, previous: str) -> str:
    return (
        "YOUR PREVIOUS REPLY COULD NOT BE USED: "
        + problem
        + ". Answer again, following the output contract exactly. Your previous reply was:\n"
        + clip(previous, PROMPT_OUTPUT_CHARS)
    )


# --- the steps -------------------------------------------------------------------------------------------


class OutsideScopeError(AutodevError):
    """A writer changed files outside the run's authorized write scope: its task is blocked, naming them."""

    def __init__(self, message: str, paths: Sequence[str]) -> None:
        super().__init__(message)
        self.paths = list(paths)


def _earlier_developer_session(session: RunContext, task: Task) -> str | None:
    """The platform's session of the developer's previous attempt at ``task`` (None on a first attempt, or
    when none was recorded): the policy may let this attempt continue it."""
    if task.retry_count == 0:
        return None
    earlier = _recorded(session, task.id, "developer", task.retry_count)
    return earlier.session_id if isinstance(earlier, CoderEvidence) else None


def _scope_block(session: RunContext) -> str:
    """What a writer is told about where it may write (its change is checked against it afterwards)."""
    return (
        f"WRITE SCOPE: change only files inside {session.run_policy.authorized().render()}; a change "
        "outside it blocks the task."
    )


def _check_scope(session: RunContext, writer: str, files: Sequence[str]) -> None:
    """Raise ``OutsideScopeError`` when the ``writer``'s change (``files``) leaves the authorized scope."""
    stray = session.run_policy.outside_scope(files)
    if stray:
        shown = ", ".join(stray[:20]) + (f" and {len(stray) - 20} more" if len(stray) > 20 else "")
        raise OutsideScopeError(
            f"policy: outside_write_scope: the {writer} wrote outside the authorized write scope "
            f"({session.run_policy.authorized().render()}): {shown}; widen the scope (`autodev execute "
            "--write-scope`) or change the task, then `autodev retry`",
            stray,
        )


async def _developer_step(session: RunContext, task: Task, ctx: TaskContext) -> StepFailure | None:
    issues = _own_issues(task, "developer")
    extra = _issues_block("THE PREVIOUS ATTEMPT FAILED. Fix these problems first:", issues) if issues else ""
    areas, source = session.area_maps()
    maps = area_prompt_block(areas_for_files(areas, task.files), source)
    if maps:
        extra = f"{extra.rstrip()}\n\n{maps}" if extra else maps
    scope = _scope_block(session)
    extra = f"{extra.rstrip()}\n\n{scope}" if extra else scope
    pm = session.plan_manager
    step = "develop"
    while True:
        tier = pm.task_tier(task.id)
        envelope = _envelope(task, "developer", "implement", model=TIER_NAMES[tier], **_lane(session, task))
        request = _request(task, "developer", step, envelope, ctx, extra)
        if step == "develop":
            request = replace(request, warm_session=_earlier_developer_session(session, task))
        result = await _agent(session, task, request)
        escalation = _escalation(result.text, tier)
        if escalation is None:
            break
        # The developer found the task's level too low: the task is re-tiered and the developer asked
        # again at the new level, in the same working copy and the same attempt (nothing failed).
        higher, why = escalation
        pm.set_task_model(task.id, higher, reason=why, by="developer")
        _log.info("execute_phase.model_escalated", task_id=task.id, model=higher, previous=tier, reason=why)
        session.emit(
            ProgressEvent(
                "note",
                f"the developer asks for {TIER_NAMES[higher]}: {why}",
                task.id,
                "develop",
                request.attempt,
            )
        )
        # A step of its own, so that an inline answer to the first call is never taken for the second's.
        step = f"develop@{higher}"
    ctx.developer_reply = result.text
    diff = await _bounded_diff(session, task, ctx)
    refused: str | None = None
    if diff is not None:
        git = ctx.workspace.git
        dirty: Sequence[str] = diff.files if git.shows_whole_change(diff) else await git.dirty_paths()
    else:
        dirty, refused = await _checked_before_staging(session, task, ctx)
        if refused is None:  # only a change small enough to stage is diffed
            diff = await _current_diff(task, ctx)
    if diff is not None and refused is None:
        ctx.change_tree = diff.tree
        refused = session.guardrails.diff_size_problem(diff.size_bytes)
    if refused is not None:
        pm.record_evidence(
            CoderEvidence(
                task_id=task.id,
                attempt=request.attempt,
                role="developer",
                platform=session.adapter_for("developer").name,
                files_changed=sorted(dirty),
                output_text=result.text,
                duration_s=result.duration_s,
                cost_usd=result.cost_usd,
                session_id=result.session_id,
                agent_actions=[*result.agent_actions, refused],
            )
        )
        return StepFailure((refused,))
    assert diff is not None
    facts = await _repository_facts(task, ctx, diff, dirty)
    claimed = parse_changed(result.text)
    risks = claim_risks(claimed, diff.files)
    pm.record_evidence(
        CoderEvidence(
            task_id=task.id,
            attempt=request.attempt,
            role="developer",
            platform=session.adapter_for("developer").name,
            diff=diff.patch,
            files_changed=list(diff.files),
            output_text=result.text,
            duration_s=result.duration_s,
            success=result.success and not diff.is_empty,
            cost_usd=result.cost_usd,
            session_id=result.session_id,
            agent_actions=list(result.agent_actions),
            repository=facts,
            claimed_files=claimed,
            risks=risks,
        )
    )
    ctx.developer_facts = (facts, risks)
    pm.record_patch(task.id, diff.patch, attempt=request.attempt, developer=True)
    _check_scope(session, "developer", diff.files)
    if not result.success:
        return _agent_failure("developer", result)
    if diff.is_empty:
        said = f" (it listed {', '.join(claimed[:5])} as changed)" if claimed else ""
        return StepFailure(
            (
                f"evidence_mismatch: the developer reported success but git shows no change against "
                f"{task.base_commit}{said}; write the change to the files in the working directory",
            )
        )
    pm.update_task_status(task.id, "coded")
    ctx.developer_diff = diff
    return None


async def _bounded_diff(session: RunContext, task: Task, ctx: TaskContext) -> WorkingDiff | None:
    """The developer's change diffed at once, when the working copy's watch alone shows it small enough
    to stage (``GitRepo.change_bound``: no path that may have changed is over the size limits or in a
    submodule); None when the full checks must come first (``_checked_before_staging``)."""
    bound = await _bound_within_limits(session, task, ctx)
    if bound is None or submodules_touched(ctx.workspace.root, bound):
        return None
    return await _current_diff(task, ctx)


async def _bound_within_limits(session: RunContext, task: Task, ctx: TaskContext) -> list[str] | None:
    """The paths that may have changed in the working copy, from its watch alone (``GitRepo.change_bound``),
    when none of them is over the size limits: the change is then small enough to stage, and git need not
    list it first. None when git must."""
    git = ctx.workspace.git
    bound = await git.change_bound(task.base_commit) if task.base_commit is not None else None
    if bound is None or session.guardrails.change_size_problem(git.sizes_now(bound)) is not None:
        return None
    return bound


async def _checked_before_staging(
    session: RunContext, task: Task, ctx: TaskContext
) -> tuple[list[str], str | None]:
    """The copy's dirty paths, and why its change must not be staged at all (None when it may be)."""
    dirty = await ctx.workspace.git.dirty_paths()
    refused = await _oversized(session, task, ctx, dirty)
    touched = submodules_touched(ctx.workspace.root, dirty)
    if touched:
        # git shows the parent repository no change for files edited inside a submodule: refuse, never drop.
        refused = (
            f"the change edits the git submodule(s) {', '.join(touched)}; changes inside submodules "
            "cannot be part of this task: undo them (`git -C <submodule> checkout -- .` where it is "
            "checked out, else remove what you wrote there) and change only this repository's files"
        )
    return dirty, refused


async def _repository_facts(
    task: Task, ctx: TaskContext, diff: WorkingDiff, dirty: Sequence[str]
) -> RepositoryFacts:
    """What git shows in the task's checkout after the developer ran (``RepositoryFacts``)."""
    git = ctx.workspace.git
    base = task.base_commit or diff.base
    commits, committed = await git.commits_and_paths_since(base)
    stats = [
        ChangeStat(path=path, added=added, deleted=deleted) for path, added, deleted in numstat(diff.patch)
    ]
    return RepositoryFacts(
        checkout=str(ctx.workspace.root),
        head=await git.head(),
        branch=await git.branch(),
        base_commit=base,
        commits_since_base=commits,
        committed_paths=committed,
        dirty_paths=sorted(dirty),
        diffstat=stats,
        insertions=sum(stat.added or 0 for stat in stats),
        deletions=sum(stat.deleted or 0 for stat in stats),
    )


def _facts_block(facts: tuple[RepositoryFacts, list[str]] | None) -> str:
    """AutoDev's own record of the developer's change for the reviewer: from git, not from the developer."""
    if facts is None:
        return ""
    record, risks = facts
    lines = [
        f"\n\nAUTODEV'S RECORD OF THE CHANGE (from git, not from the developer): {len(record.diffstat)} "
        f"file(s), +{record.insertions} -{record.deletions}"
        + (f", {len(record.dirty_paths)} left uncommitted" if record.dirty_paths else "")
        + (
            f", {record.commits_since_base} commit(s) the developer made itself"
            if record.commits_since_base
            else ""
        )
        + "."
    ]
    if risks:
        lines.append("Where the developer's CHANGED: list and git disagree (check these):")
        lines += [f"- {risk}" for risk in risks[:20]]
    return "\n".join(lines)


def claim_risks(claimed: Sequence[str] | None, changed: Sequence[str]) -> list[str]:
    """Where a writer's ``CHANGED:`` list and git's disagree, one line each (nothing when it gave none:
    there is no claim to compare)."""
    if claimed is None:
        return []
    shown, said = set(changed), set(claimed)
    risks = [f"claimed_not_changed: {path}" for path in claimed if path not in shown]
    risks += [f"changed_not_claimed: {path}" for path in changed if path not in said]
    return risks


def _lane(session: RunContext, task: Task) -> dict[str, str]:
    """The task's lane for the developer's envelope, when the run starts tasks by lanes."""
    config = session.config
    if not config.lanes_enabled:
        return {}
    above = task.effort is not None and EFFORTS.index(task.effort) > EFFORTS.index(config.slice_above)
    return {"lane": config.lane_of(task.effort, slice_job=above)}


_ESCALATE = re.compile(r"^[ \t>*-]*ESCALATE:[ \t]*`?(\w+)`?[ \t]*(.*)$", re.MULTILINE | re.IGNORECASE)


def _escalation(text: str, current: ModelTier) -> tuple[ModelTier, str] | None:
    """The higher level a developer's ``ESCALATE: <level> <why>`` line asks for, with why; None when there
    is no such line, or it names no level above ``current`` (the level is never lowered this way)."""
    for match in _ESCALATE.finditer(text):
        wanted = MODEL_NAMES.get(match.group(1).lower())
        if wanted is not None and MODEL_TIERS.index(wanted) > MODEL_TIERS.index(current):
            return wanted, match.group(2).strip() or "no reason given"
    return None


def _gate_check(result: GateResult) -> GateCheck:
    return GateCheck(
        gate=result.gate,
        status=result.status,
        counts_as_pass=result.counts_as_pass,
        language=result.language,
        reason=result.reason,
        skipped_by=result.skipped_by,
        cause=result.cause,
        findings=list(result.findings),
        preexisting=list(result.preexisting),
        changed_files=list(result.changed_files),
        counts=TestRunCounts.model_validate(result.counts.model_dump()) if result.counts else None,
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


def _stop_on_environment(task: Task, results: Sequence[GateResult]) -> None:
    """Stop the run, resumably and without counting an attempt, on a gate the environment broke."""
    broken = [result for result in results if result.environmental]
    if broken:
        details = "; ".join(f"{result.gate} gate: {result.reason}" for result in broken)
        raise EnvironmentFaultError(
            f"task {task.id}: the QA gates cannot run here ({details}); fix that, then run `autodev resume` "
            "(no attempt was counted)"
        )


# Files that change how pytest collects tests or how they end: a change to one is shown to the reviewer.
_TEST_CONFIG_NAMES = frozenset({"conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml"})


def test_config_files(files: Sequence[str]) -> list[str]:
    """The files among ``files`` that can change which tests run and how they end."""
    return [path for path in files if path.rsplit("/", 1)[-1] in _TEST_CONFIG_NAMES]


def _gate_evidence(task: Task, attempt: int, run: GateRun, files: Sequence[str]) -> GateEvidence:
    return GateEvidence(
        task_id=task.id,
        attempt=attempt,
        passed=all(result.acceptable for result in run.results),
        checks=[_gate_check(result) for result in run.results],
        environment=run.environment.summary() if run.environment else None,
        interpreter=run.environment.python if run.environment else None,
        tree=run.tree,
        test_config_changed=test_config_files(files),
    )


async def _gates_step(session: RunContext, task: Task, ctx: TaskContext) -> StepFailure | None:
    diff = ctx.developer_diff or await _current_diff(task, ctx)
    attempt = task.retry_count + 1
    session.emit(ProgressEvent("step_started", "QA gates running", task.id, "gates", attempt))
    checks = await task_checks(session, task)
    assert task.base_commit is not None  # _current_diff checked it
    # The diff was read just now (here or by the developer step before): it holds the copy's tree, which
    # the gates need not stage again.
    run = await checks.check(
        ctx.workspace.root, ctx.workspace.git, task.base_commit, diff.files, tree=diff.tree
    )
    evidence = _gate_evidence(task, attempt, run, diff.files)
    session.plan_manager.record_evidence(evidence)
    session.emit(
        ProgressEvent(
            "step_finished",
            "QA gates " + ", ".join(f"{r.gate}={r.status}" for r in run.results),
            task.id,
            "gates",
            attempt,
            evidence.passed,
        )
    )
    _stop_on_environment(task, run.results)
    if not evidence.passed:
        return StepFailure(tuple(_gate_issue(result) for result in run.results if not result.acceptable))
    session.plan_manager.update_task_status(task.id, "auto_gated")
    return None


async def _review_step(session: RunContext, task: Task, ctx: TaskContext) -> StepFailure | None:
    attempt = task.retry_count + 1
    prior = _recorded(session, task.id, "review", attempt)
    repair_of = None
    if isinstance(prior, ReviewEvidence) and prior.problem and prior.repair_of is None:
        repair_of = prior.problem  # a malformed first reply was recorded: this call is its repair turn
    if ctx.developer_diff is not None:
        diff, tree = ctx.developer_diff, await ctx.workspace.git.snapshot_tree()  # the gates ran since
    else:
        diff = await _current_diff(task, ctx)
        tree = diff.tree
    extra = "THE CHANGE TO REVIEW (git diff against the task's base):\n" + clip(diff.patch, PROMPT_DIFF_CHARS)
    extra += _facts_block(ctx.developer_facts)
    configuring = test_config_files(diff.files)
    if configuring:
        extra += (
            f"\n\nTHE CHANGE EDITS TEST CONFIGURATION ({', '.join(configuring)}): check that it does not "
            "skip, xfail or deselect tests, or change how they are collected or how they end, unless the "
            "task asks for exactly that."
        )
    extra += await _since_last_review(session, task, ctx, tree)
    previous = prior.output_text if isinstance(prior, ReviewEvidence) else ""
    extra += _own_failures(
        task, "reviewer", "YOUR PREVIOUS REVIEW OF THIS TASK COULD NOT BE USED:", repair_of, previous
    )
    step = "review-repair" if repair_of else "review"
    request = _request(task, "reviewer", step, _envelope(task, "reviewer", "review"), ctx, extra)
    result = await _agent(session, task, request)
    guard = await _read_only_guard(ctx, "reviewer", tree)
    if guard is not None:
        return guard
    if not result.success:
        return _agent_failure("reviewer", result, own=True)
    parsed = parse_review_verdict(result.text)
    problem = None if parsed else review_problem(result.text)
    session.plan_manager.record_evidence(
        ReviewEvidence(
            task_id=task.id,
            attempt=request.attempt,
            role="reviewer",
            platform=session.adapter_for("reviewer").name,
            verdict=parsed.verdict if parsed else None,
            issues=list(parsed.issues) if parsed else [],
            output_text=result.text,
            cost_usd=result.cost_usd,
            session_id=result.session_id,
            agent_actions=list(result.agent_actions),
            tree=tree,
            problem=problem,
            repair_of=repair_of,
            previous_output=prior.output_text if repair_of and isinstance(prior, ReviewEvidence) else None,
        )
    )
    if parsed is None:
        if repair_of is None:
            session.emit(
                ProgressEvent("note", "the reviewer's reply has no VERDICT line: one repair turn", task.id)
            )
            return await _review_step(session, session.plan_manager.get_task(task.id), ctx)
        return StepFailure(
            (f"the reviewer's reply has no 'VERDICT:' line, also after a repair turn ({repair_of})",),
            role="reviewer",
        )
    if parsed.verdict != "APPROVED":
        issues = parsed.issues or (f"the reviewer said {parsed.verdict} without listing issues",)
        return StepFailure(tuple(f"reviewer ({parsed.verdict}): {issue}" for issue in issues))
    ctx.developer_diff = None  # the test engineer adds files next: the diff is no longer the tree's
    session.plan_manager.update_task_status(task.id, "reviewed")
    return None


async def _read_only_guard(ctx: TaskContext, role: str, before: str) -> StepFailure | None:
    """A read-only role that changed the working copy fails its guard: what it changed is put back as it
    was (``before``, the tree it was shown) and its step is retried, the files named."""
    git = ctx.workspace.git
    after = await git.snapshot_tree()
    if after == before:
        return None
    changed = await git.changed_between(before, after)
    await git.restore_from_tree(before, changed)
    _log.warning("execute_phase.read_only_guard", role=role, paths=changed[:20])
    shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
    return StepFailure(
        (
            f"the {role} may only read, but it changed {shown}; those changes were undone. Review without "
            "editing files: report what must change as ISSUES",
        ),
        role=role,
    )


async def _since_last_review(session: RunContext, task: Task, ctx: TaskContext, tree: str) -> str:
    """On a later attempt: the reviewer's own earlier issues and what changed since it last looked."""
    attempt = task.retry_count + 1
    earlier = next(
        (
            evidence
            for number in range(attempt - 1, 0, -1)
            if isinstance(evidence := _recorded(session, task.id, "review", number), ReviewEvidence)
            and evidence.verdict is not None
        ),
        None,
    )
    if earlier is None:
        return ""
    parts = [f"\n\nYOUR LAST REVIEW OF THIS TASK (attempt {earlier.attempt}) SAID {earlier.verdict}."]
    if earlier.issues:
        parts.append(_issues_block("The issues you raised then:", earlier.issues))
    if earlier.tree is not None and earlier.tree != tree:
        since = await ctx.workspace.git.range_patch(earlier.tree, tree)
        parts.append("WHAT CHANGED SINCE THAT REVIEW:\n" + clip(since, PROMPT_DIFF_CHARS))
    elif earlier.tree == tree:
        parts.append("Nothing changed since that review.")
    return "\n".join(parts)


def _claim_problem(claim: object, counts: TestRunCounts | None) -> str | None:
    """What is wrong with the test engineer's RESULTS line measured against AutoDev's own run."""
    from autodev.agents.parsing import TestCounts

    if not isinstance(claim, TestCounts):
        return "it has no 'RESULTS: passed=N failed=M total=T' line"
    if counts is None:
        return None  # a test command with no JUnit report (configured, or not pytest): nothing to compare
    real = counts
    executed = real.passed + real.failed
    if (claim.passed, claim.failed, claim.total) != (real.passed, real.failed, executed):
        return (
            f"it says passed={claim.passed} failed={claim.failed} total={claim.total}, but AutoDev's own run "
            f"of the tests shows passed={real.passed} failed={real.failed} total={executed} (skipped or "
            f"xfailed, not counted: {real.skipped})"
        )
    return None


def _test_run_instruction(argv: Sequence[str], cwd: str) -> str:
    shown = " ".join(argv) if argv else "the project's test command"
    return (
        "HOW YOUR COUNTS ARE CHECKED: after your reply AutoDev runs the tests itself, exactly as\n"
        f"  {shown}\nin {cwd}, and reads its JUnit report. Your RESULTS line must match that run: passed = "
        "cases that passed, failed = cases that failed or errored, total = passed + failed. Skipped and "
        "xfailed cases ran no test and are not counted."
    )


async def _test_step(session: RunContext, task: Task, ctx: TaskContext) -> StepFailure | None:
    pm = session.plan_manager
    attempt = task.retry_count + 1
    prior = _recorded(session, task.id, "test", attempt)
    repair_of = None
    if isinstance(prior, TestEvidence) and prior.problem and prior.repair_of is None:
        repair_of = prior.problem
    checks = await task_checks(session, task)
    assert task.base_commit is not None
    root, git = ctx.workspace.root, ctx.workspace.git
    gates = _recorded(session, task.id, "gates")
    developer_tree = gates.tree if isinstance(gates, GateEvidence) else None
    planned = _planned_test_argv(session, checks.environment, session.test_recipe(task.files))
    extra = _test_run_instruction(planned, str(root))
    previous = prior.output_text if isinstance(prior, TestEvidence) else ""
    extra += _own_failures(
        task, "test_engineer", "YOUR PREVIOUS ATTEMPT AT THIS STEP FAILED:", repair_of, previous
    )
    extra += f"\n\n{_scope_block(session)}"
    step = "test-repair" if repair_of else "test"
    request = _request(task, "test_engineer", step, _envelope(task, "test_engineer", "test"), ctx, extra)
    result = await _agent(session, task, request)
    if not result.success:
        return _agent_failure("test_engineer", result, own=True)
    claim = parse_test_results(result.text)
    too_big = await _oversized(session, task, ctx)
    if too_big is not None:
        return StepFailure((too_big,), role="test_engineer")
    diff = await _current_diff(task, ctx)
    too_big = session.guardrails.diff_size_problem(diff.size_bytes)
    if too_big is not None:
        return StepFailure((too_big,), role="test_engineer")
    _check_scope(session, "test engineer", diff.files)
    now = diff.tree
    added = await git.changed_between(developer_tree, now) if developer_tree else list(diff.files)
    session.emit(ProgressEvent("step_started", "AutoDev checks the tests itself", task.id, "verify", attempt))
    run = await checks.check(root, git, task.base_commit, added, only=(*_FILE_GATES, "test"), tree=now)
    tests = next((r for r in run.results if r.gate == "test"), None)
    counts = TestRunCounts.model_validate(tests.counts.model_dump()) if tests and tests.counts else None
    own_findings = [
        r for r in run.results if r.gate in _FILE_GATES and not r.acceptable and not r.environmental
    ]
    problem = _claim_problem(claim, counts)
    if own_findings:
        found = "; ".join(_gate_issue(r) for r in own_findings)
        problem = f"{problem}; also " if problem else ""
        problem += f"the files you changed fail AutoDev's gates: {found}"
    outside = sorted(set(added) - set(task.files))
    evidence = TestEvidence(
        task_id=task.id,
        attempt=request.attempt,
        role="test_engineer",
        platform=session.adapter_for("test_engineer").name,
        passed=claim.passed if claim else 0,
        failed=claim.failed if claim else 0,
        total=claim.total if claim else 0,
        claim_found=claim is not None,
        run_status=tests.status if tests else "not run",
        run_exit_code=tests.checks[-1].exit_code if tests and tests.checks else None,
        run_passed=counts.passed if counts else None,
        run_failed=counts.failed if counts else None,
        run_total=counts.total if counts else None,
        agrees=None if claim is None or counts is None else _claim_problem(claim, counts) is None,
        output_text=result.text,
        cost_usd=result.cost_usd,
        session_id=result.session_id,
        agent_actions=list(result.agent_actions),
        files_changed=added,
        outside_task_files=outside,
        checks=[_gate_check(r) for r in run.results],
        run_argv=list(tests.checks[-1].argv) if tests and tests.checks else [],
        tree=run.tree,
        problem=problem,
        repair_of=repair_of,
        previous_output=prior.output_text if repair_of and isinstance(prior, TestEvidence) else None,
    )
    pm.record_evidence(evidence)
    _stop_on_environment(task, run.results)
    if outside:
        session.emit(
            ProgressEvent(
                "note",
                f"the test engineer changed files outside the task: {', '.join(outside[:10])}",
                task.id,
            )
        )
    if tests is None or not tests.acceptable:
        status = tests.status if tests else "not run"
        detail = _gate_issue(tests) if tests else "the test gate did not run"
        return StepFailure((f"the tests do not pass when AutoDev runs them ({status}): {detail}",))
    if problem is not None:
        if repair_of is None:
            session.emit(
                ProgressEvent("note", f"the test engineer's reply: {problem}; one repair turn", task.id)
            )
            return await _test_step(session, pm.get_task(task.id), ctx)
        return StepFailure(
            (f"the test engineer's reply could not be used, also after a repair turn: {problem}",),
            role="test_engineer",
        )
    pm.update_task_status(task.id, "tested", checked_tree=run.tree)
    return None


def _planned_test_argv(session: RunContext, environment: object, recipe: Sequence[str] | None) -> list[str]:
    """The test command the gate will run, for the test engineer's prompt (the evidence has the real one)."""
    from autodev.qa.environment import ProjectEnvironment

    configured = session.config.qa_gates.test.command
    if configured is not None:
        return list(configured)
    if recipe is not None:
        return list(recipe)
    if isinstance(environment, ProjectEnvironment):
        return [environment.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=<report>"]
    return []


async def _tournament_step(session: RunContext, task: Task, ctx: TaskContext) -> StepFailure | None:
    if session.config.tournaments.impl.enabled and not session.disable_impl_tournament:
        await run_impl_tournament(session, task, ctx.workspace.root, ctx.workspace.git)
    checked = task.checked_tree
    if checked is not None and session.config.tournaments.impl.enabled:
        now = await ctx.workspace.git.snapshot_tree()
        if now != checked:
            # A variant won and replaced the change: it is checked like any change before it is committed.
            assert task.base_commit is not None
            diff = await _current_diff(task, ctx)
            checks = await task_checks(session, task)
            run = await checks.check(ctx.workspace.root, ctx.workspace.git, task.base_commit, diff.files)
            _stop_on_environment(task, run.results)
            failing = [result for result in run.results if not result.acceptable]
            if failing:
                issues = tuple(_gate_issue(result) for result in failing)
                return StepFailure(("the tournament's winning change fails the gates", *issues))
            checked = run.tree
    failure = await _completion_contract(session, task, ctx, checked)
    if failure is not None:
        return failure
    session.plan_manager.update_task_status(task.id, "tournamented", checked_tree=checked)
    return None


async def _completion_contract(
    session: RunContext, task: Task, ctx: TaskContext, checked: str | None
) -> StepFailure | None:
    """Open and judge the task's completion contract on the checked revision (``completion``); a failure
    when a required check fails, ``CompletionBlockedError`` when one could not run and is not waived."""
    pm = session.plan_manager
    git = ctx.workspace.git
    attempt = task.retry_count + 1
    revision = checked or await git.snapshot_tree()
    tests = _recorded(session, task.id, "test", attempt)
    gates = _recorded(session, task.id, "gates", attempt)
    # Each gate as it last ran on this attempt: the developer's gates, then AutoDev's run after the tests.
    latest = {check.gate: check for check in (gates.checks if isinstance(gates, GateEvidence) else [])}
    latest.update({check.gate: check for check in (tests.checks if isinstance(tests, TestEvidence) else [])})
    gate_checks = list(latest.values())
    settings = session.config.completion
    developer = _recorded(session, task.id, "developer", attempt)
    review = _recorded(session, task.id, "review", attempt)
    binding = ContractBinding(
        revision=revision,
        checkout=ctx.workspace.root,
        head=await git.head(),
        branch=await session.git.branch(),
        base_ref=(pm.base_check or {}).get("ref"),
        base_commit=task.base_commit,
        implemented_on=developer.platform if developer is not None else None,
        verified_on=review.platform if review is not None else None,
        worker_session=developer.session_id if developer is not None else None,
        run_session=session.session_id,
    )
    session.emit(ProgressEvent("step_started", "completion contract", task.id, "completion", attempt))
    evidence = await run_contract(
        task=task,
        attempt=attempt,
        binding=binding,
        cross_family=settings.cross_family,
        gate_checks=gate_checks,
        environment=(await session.project_environment()).environment,
        allowed=settings.allowed_programs,
        check_timeout_s=settings.check_timeout_s,
        verify_timeout_s=settings.verify_timeout_s,
        waived=pm.waived_checks(task.id, revision),
    )
    # What is committed must be what was checked: whatever a command check wrote is put back (only a
    # command that ran can have written anything).
    ran = any(check.kind == "command" and check.status in ("pass", "fail") for check in evidence.checks)
    now = await git.snapshot_tree() if ran else revision
    if now != revision:
        await git.restore_from_tree(revision, await git.changed_between(revision, now))
    pm.record_evidence(evidence)
    verified = evidence.verdict in ("verified", "verified_with_waiver")
    session.emit(
        ProgressEvent(
            "step_finished", f"completion: {evidence.verdict}", task.id, "completion", attempt, verified
        )
    )
    if verified:
        return None
    if evidence.verdict == "changes_requested":
        return StepFailure(
            tuple(
                f"completion check {check.id} ({' '.join(check.argv) or check.description}) failed"
                f"{f' (exit {check.exit_code})' if check.exit_code is not None else ''}: "
                f"{clip(check.output_excerpt.strip(), 1500) or check.reason or 'no output'}"
                for check in evidence.checks
                if check.status == "fail"
            )
        )
    blocked = [check for check in evidence.checks if check.status == "blocked"]
    shown = "; ".join(f"{check.id} ({check.description}): {check.reason}" for check in blocked[:5])
    first = blocked[0].id if blocked else "CHECK"
    raise CompletionBlockedError(
        f"completion: {evidence.verdict}: {shown}; fix the acceptance criterion, or waive the check for this "
        f"revision (`autodev waive {task.id} {first} --reason ...`), then `autodev retry {task.id}`"
    )


async def _unchecked_changes(task: Task, ctx: TaskContext, tree: str) -> StepFailure | None:
    """A failure when ``tree`` (about to be committed) is not the tree the task's last checks saw."""
    if task.checked_tree is None or tree == task.checked_tree:
        return None
    changed = await ctx.workspace.git.changed_between(task.checked_tree, tree)
    shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
    return StepFailure(
        (
            f"the working tree changed after AutoDev's last check ({shown}); what is committed must be "
            "what was checked, so the change goes through the checks again",
        )
    )


async def _complete_step(session: RunContext, task: Task, ctx: TaskContext) -> StepFailure | None:
    git = ctx.workspace.git
    pm = session.plan_manager
    assert task.base_commit is not None
    if ctx.workspace.isolated:
        await ctx.before_integration()
        session.emit(ProgressEvent("step_started", "merging", task.id, "merge", task.retry_count + 1))
        change = await commit_task(ctx.workspace, task, resumed=ctx.resumed)
        unchecked = await _unchecked_changes(task, ctx, await git.tree_of(change.commit))
        if unchecked is not None:
            # Undo the commit (not the files): the next attempt commits what its checks saw.
            await git.reset_soft(task.base_commit)
            await git.delete_ref(task_ref(task.id))
            return unchecked
        ready = await prepare_landing(session.git, ctx.workspace, task, change)
        async with ctx.integration_lock:
            try:
                outcome = await integrate(session.git, ctx.workspace, task, change, ready, ctx.landing)
            except MainTreeChangedError as exc:
                # Verified, but it cannot land without touching somebody's work: it waits, kept.
                await hold_for_adoption(session, task, change.commit, exc.message)
                raise HeldForAdoption(task.id) from exc
            if isinstance(outcome, Integrated):
                patch = await session.git.commit_patch(outcome.commit)
                pm.record_patch(task.id, patch, attempt=task.retry_count + 1)
                await record_complete(session, task, outcome.commit, patch, ctx, pinned=outcome.pinned)
                return None
        applied = await rebase_after_conflict(ctx.workspace, task, outcome)
        old_patch = await git.commit_patch(outcome.commit)
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
    message = commit_message(task)
    committed_before = await git.head_subject() == message and await git.head() != task.base_commit
    if not committed_before:
        unchecked = await _unchecked_changes(task, ctx, await git.snapshot_tree())
        if unchecked is not None:
            return unchecked
    if session.config.auto_commit:
        session.emit(ProgressEvent("step_started", "committing", task.id, "commit", task.retry_count + 1))
        async with ctx.integration_lock:
            commit = await git.commit_all(message)
            if commit is None and committed_before:
                # Committed by an earlier run that died before recording it: the same commit, not a new one.
                commit = await git.head()
            patch = ""
            if commit is not None:
                patch = await git.range_patch(task.base_commit, commit)
                pm.record_patch(task.id, patch, attempt=task.retry_count + 1)
            await record_complete(session, task, commit, patch, ctx)
        return None
    async with ctx.integration_lock:
        diff = await _current_diff(task, ctx)
        pm.record_patch(task.id, diff.patch, attempt=task.retry_count + 1)
        await record_complete(session, task, None, diff.patch, ctx)
    return None


class HeldForAdoption(Exception):
    """The task's verified change waits to be adopted (``hold_for_adoption``): its flow ends here."""


async def hold_for_adoption(session: RunContext, task: Task, commit: str, reason: str) -> None:
    """Keep ``task``'s verified change ``commit`` under its adoption ref and record that it waits, and
    why (a repeated reason is recorded once)."""
    await session.git.set_ref(adoption_ref(task.id), commit)
    held = session.plan_manager.hold_for_adoption(
        task.id, commit, base=task.base_commit, worktree=task.worktree, reason=reason
    )
    if held:
        _log.warning("execute_phase.adoption_pending", task_id=task.id, commit=commit, reason=reason)
        session.emit(
            ProgressEvent(
                "note",
                f"verified, but waits for adoption: {reason}; `autodev adopt {task.id}` lands it",
                task.id,
                "merge",
            )
        )


async def record_complete(
    session: RunContext,
    task: Task,
    commit: str | None,
    patch: str,
    ctx: TaskContext,
    *,
    pinned: bool = False,
) -> None:
    """Record the task complete with its accepted result (under the integration lock, so a phase checkpoint
    taken next is exact)."""
    pm = session.plan_manager
    attempt = task.retry_count + 1
    reply = ctx.developer_reply
    if reply is None:  # a run killed after the developer's call: its reply is in the evidence
        developer = _recorded(session, task.id, "developer", attempt)
        reply = developer.output_text if isinstance(developer, CoderEvidence) else ""
    contract = next(
        (
            ref
            for ref in reversed(pm.evidence_for(task.id))
            if ref.kind == "completion" and ref.attempt == attempt
        ),
        None,
    )
    verdict = contract.summary.get("verdict") if contract is not None and contract.summary else None
    record = accepted_result(task, attempt, commit, patch, verdict, reply, isolated=ctx.workspace.isolated)
    pm.update_task_status(task.id, "complete", commit=commit, result=record)
    if pinned:
        await session.git.delete_ref(task_ref(task.id))
    if ctx.after_complete is not None:
        await ctx.after_complete(session.plan_manager.get_task(task.id))
    _log.info("execute_phase.task_complete", task_id=task.id, commit=commit)
    session.emit(
        ProgressEvent(
            "task_finished",
            "complete" + (f" ({commit[:10]})" if commit else ""),
            task.id,
            "complete",
            ok=True,
        )
    )


async def _automatic_retry(session: RunContext, task: Task) -> bool:
    """Whether the run's policy gives ``task``, its attempts used up, one more at a higher tier (recorded,
    so a resumed run neither grants it twice nor forgets it); waits while the budget is taken."""
    policy = session.run_policy
    while True:
        decision = policy.decide_retry(task)
        if decision.route != "queue":
            break
        await policy.wait_for_release()
    if decision.route != "spawn" or decision.escalate_to is None:
        _log.info("execute_phase.no_automatic_retry", task_id=task.id, reason=decision.reason)
        return False
    tier = TIER_NAMES[session.plan_manager.task_tier(task.id)]
    why = f"automatic retry after {task.retry_count} attempt(s) at {tier}"
    session.plan_manager.grant_automatic_retry(task.id, decision.escalate_to, why)
    _log.info("execute_phase.automatic_retry", task_id=task.id, model=decision.escalate_to)
    session.emit(
        ProgressEvent(
            "note",
            f"{why}: one more at {TIER_NAMES[decision.escalate_to]}",
            task.id,
            "develop",
            task.retry_count + 1,
        )
    )
    return True


async def _escalate(session: RunContext, task: Task, ctx: TaskContext) -> None:
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
        result = await _agent(session, task, request)
    except (GuardrailExceededError, LoopDetectedError) as exc:
        result = AgentResult.failure("is_error", exc.message)
    parsed = parse_critic_verdict(result.text) if result.success else None
    session.plan_manager.record_evidence(
        CriticEvidence(
            task_id=task.id,
            attempt=request.attempt,
            role="critic_sounding_board",
            platform=session.adapter_for("critic_sounding_board").name,
            verdict=parsed.verdict if parsed else None,
            issues=list(parsed.issues) if parsed else list(issues),
            recommendation=parsed.recommendation if parsed else None,
            output_text=result.text,
            cost_usd=result.cost_usd,
            session_id=result.session_id,
            agent_actions=list(result.agent_actions),
        )
    )
    if parsed and parsed.recommendation:
        reason += f"; critic: {parsed.recommendation}"
    elif not result.success:
        reason += f"; critic unavailable ({result.error.message if result.error else 'failed'})"
    _log.warning("execute_phase.retry_exhausted", task_id=task.id, retry=task.retry_count, reason=reason)
    session.plan_manager.mark_escalated(task.id, reason)
    await block_and_park(session, task.id, reason, ctx)
