"""The execute phase's entry: check that the plan may run, take the baseline, then hand the tasks to the
dispatcher (``autodev.orchestrator.execute.dispatcher``), which runs each task's flow (``execute_phase``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import anyio

from autodev.errors import AutodevError
from autodev.logging import get_logger
from autodev.orchestrator.base_check import check_base_before_writers, read_base_before_writers
from autodev.orchestrator.beside import beside
from autodev.orchestrator.delegate import landed_commits
from autodev.orchestrator.delegation_policy import DelegationHeldError
from autodev.orchestrator.events import ProgressEvent
from autodev.orchestrator.execute.dispatcher import Dispatcher, early_pool
from autodev.orchestrator.execute.executor import LocalExecutor, TaskExecutor
from autodev.orchestrator.execute.task_flow import PlanNotApprovedError, block_task, check_working_tree
from autodev.orchestrator.preflight import Preflight
from autodev.orchestrator.run_context import RunContext
from autodev.orchestrator.run_policy import approval_wait_message
from autodev.state.policy_records import ApprovalRecord
from autodev.state.schemas import ResultRecord, Task
from autodev.state.vocabulary import DONE_STATUSES, TERMINAL_STATUSES
from autodev.workspace.base_freshness import BaseFreshness
from autodev.workspace.worktree_pool import WorktreePool

__all__ = ["run_execute_phase"]

_log = get_logger("autodev.execute_phase")


async def run_execute_phase(
    session: RunContext,
    task_id: str | None = None,
    *,
    executor: TaskExecutor | None = None,
    evidence: Sequence[ResultRecord] | None = None,
) -> list[Task]:
    """Process every runnable task in dependency order (or only ``task_id``); return their final states.
    Each task's flow runs in ``executor`` (``autodev.orchestrator.execute.executor``; here by default).
    ``evidence``: the accepted results every task's roles are given, instead of the most recent ones."""
    pm = session.plan_manager
    plan = pm.plan
    if plan.metadata.get("requires_approval") and not pm.plan_approved:
        raise PlanNotApprovedError(
            f"plan {plan.plan_id} waits for approval; review it with `autodev status`, then run "
            "`autodev approve` and `autodev execute`"
        )
    await check_working_tree(session)
    # A run resumed after an agent (or anyone) rewrote the branch must not build on top of it unnoticed.
    await session.agent_watch.check_landed(landed_commits(session))
    if task_id is not None:
        _check_runnable(session, task_id)
    pool = early_pool(session, task_id)
    if pool is None:
        return await _execute_phase(session, task_id, None, executor, evidence)
    first = _FirstWorktree(pool)
    try:
        # The first task's worktree is checked out while the preflight runs (ADR 0054); the first claim
        # takes it, waiting for it when the preflight was quicker.
        async with beside(functools.partial(_check_out_first, pool)):
            return await _execute_phase(session, task_id, first, executor, evidence)
    finally:
        if not first.left_to_resume:
            # What the dispatcher did not take over (a preflight that stopped the run, a plan it refused)
            # goes with the run that made it; after the dispatcher's own cleanup this finds nothing.
            with anyio.CancelScope(shield=True):
                await pool.cleanup_all()


@dataclass(slots=True)
class _FirstWorktree:
    """A pool whose first worktree is made while the preflight runs, and whether the dispatcher stopped
    with it: a stopped run leaves every worktree to the next start (``resume`` continues in them, and its
    start removes the others), and so this pool's."""

    pool: WorktreePool
    left_to_resume: bool = False


async def _check_out_first(pool: WorktreePool) -> None:
    """The pool's first worktree. One that cannot be made is left to the claim that needs it, which
    meets the same problem on the task's own path (``WorktreePool.cold_start`` logs it)."""
    try:
        await pool.cold_start(1)
    except AutodevError as exc:
        _log.warning("execute_phase.first_worktree_failed", error=str(exc))


async def _execute_phase(
    session: RunContext,
    task_id: str | None,
    first: _FirstWorktree | None,
    executor: TaskExecutor | None,
    evidence: Sequence[ResultRecord] | None,
) -> list[Task]:
    """The preflight and the dispatch (``run_execute_phase`` has checked the plan may run); ``first``: the
    pool the dispatcher takes over, its first worktree being made, marked when the dispatcher stops."""
    pm = session.plan_manager
    plan = pm.plan
    preflight, base = await _preflight_beside_the_base(session)
    check_base_before_writers(session, base)
    awaiting = _approvals_first(session, task_id)
    pm.record_session(session.session_id)
    record = preflight.record()
    if record is not None and pm.record_baseline(record) and preflight.preexisting_failures():
        failing = preflight.preexisting_failures()
        session.emit(
            ProgressEvent(
                "note",
                f"{len(failing)} check(s) fail on the base commit already; not blamed on any task",
                details=tuple(failing[:20]),
            )
        )
    _cascade_existing_blocks(session)
    session.emit(ProgressEvent("phase", f"execute phase: {plan.title or plan.plan_id}"))
    _log.info("orchestrator.execute.start", task_id=task_id)
    session.agent_watch.rescan_main_checkout()
    if session.config.change_tracking_enabled:
        await _watch_main_checkout(session)
    executor = executor or LocalExecutor()
    try:
        async with executor.serving(session):
            processed = await Dispatcher(
                session,
                only_task=task_id,
                executor=executor,
                awaiting_approval=awaiting,
                evidence=evidence,
                worktrees=first.pool if first is not None else None,
            ).run()
    except BaseException:
        if first is not None:
            first.left_to_resume = True
        raise
    finally:
        session.git.unwatch()
        await session.close_checks()
    await session.git.maintain()
    if session.agent_watch.guard_ledger(whole=True):
        session.emit(ProgressEvent("note", "the ledger was changed during the run; AutoDev put it back"))
    pm.checkpoint()
    final = [pm.get_task(tid) for tid in processed]
    _log.info(
        "orchestrator.execute.done",
        processed=len(final),
        complete=sum(t.status == "complete" for t in final),
        blocked=sum(t.status == "blocked" for t in final),
    )
    return final


async def _preflight_beside_the_base(session: RunContext) -> tuple[Preflight, BaseFreshness]:
    """The preflight, with the base's freshness read meanwhile: the preflight first waits for the probe
    that finds the project's environment (over 100 ms through a version manager's shim), and the read is a
    few git processes that need nothing from it. Whatever either raises is raised in the order they ran in
    before: the preflight's problem first, then the read's."""
    found: list[BaseFreshness] = []
    failures: list[Exception] = []
    read_done = anyio.Event()

    async def read() -> None:
        try:
            found.append(await read_base_before_writers(session))
        except Exception as exc:  # raised below, after the preflight's verdict
            failures.append(exc)
        finally:
            read_done.set()

    # A preflight that raises stops the read and leaves as itself (``beside``).
    async with beside(read):
        preflight = await session.preflight()
        await read_done.wait()
    if failures:
        raise failures[0]
    return preflight, found[0]


async def _watch_main_checkout(session: RunContext) -> None:
    """Follow the main checkout's changes, so the checks after each agent call ask git about what changed
    only; where that cannot be done, they scan the checkout as before."""
    try:
        watched = await session.git.watch(skip=await session.git.ignored_directories())
    except AutodevError as exc:
        _log.warning("orchestrator.main_checkout_unwatched", error=str(exc))
        return
    if not watched:
        _log.info("orchestrator.main_checkout_unwatched", error="no file notifications here")


def _approvals_first(session: RunContext, task_id: str | None) -> dict[str, ApprovalRecord]:
    """Before any process starts: one approval request per scope for the tasks whose owned paths no
    declared scope covers. A task whose scope the user declined is blocked; the others wait (``{task id:
    request}``), and when nothing else could run the run stops here (exit 3), unless it waits for the answer
    (``--wait``)."""
    pm = session.plan_manager
    tasks = [pm.get_task(task_id)] if task_id is not None else pm.tasks()
    waiting = session.run_policy.awaiting_approval(tasks)
    for waiting_id, record in list(waiting.items()):
        if record.status == "declined":
            del waiting[waiting_id]
            if pm.get_task(waiting_id).status in TERMINAL_STATUSES:
                continue  # blocked already, as a dependent of one blocked just now
            block_task(
                session,
                waiting_id,
                f"policy: approval_declined: the user declined the write scope {', '.join(record.scope)} "
                f"({record.id}); declare a scope that covers the task's files, then "
                f"`autodev retry {waiting_id}`",
            )
    # What waits, and what depends on it, cannot start before the answer.
    held = pm.descendants(waiting) | set(waiting)
    runnable = [
        task.id
        for task in pm.tasks()
        if task.status not in TERMINAL_STATUSES
        and task.id not in held
        and (task_id is None or task.id == task_id)
    ]
    if waiting and not runnable and not session.wait_for_approval:
        records = list({record.id: record for record in waiting.values()}.values())
        raise DelegationHeldError(approval_wait_message(records))
    return waiting


def _cascade_existing_blocks(session: RunContext) -> None:
    """Block dependents of tasks already blocked (a run killed mid-escalation may have left them pending)."""
    pm = session.plan_manager
    for blocked_id in pm.task_ids_with_status("blocked"):
        reason = pm.get_task(blocked_id).blocked_reason or "blocked"
        pm.mark_blocked_descendants(blocked_id, reason)


def _check_runnable(session: RunContext, task_id: str) -> None:
    task = session.plan_manager.get_task(task_id)
    if task.status == "blocked":
        raise AutodevError(
            f"task {task_id} is blocked ({task.blocked_reason}); fix the cause, then "
            f"`autodev retry {task_id}`"
        )
    waiting = [
        dep for dep in task.depends_on if session.plan_manager.get_task(dep).status not in DONE_STATUSES
    ]
    if waiting and task.status == "pending":
        raise AutodevError(
            f"task {task_id} depends on unfinished task(s) {', '.join(waiting)}; run those first"
        )
