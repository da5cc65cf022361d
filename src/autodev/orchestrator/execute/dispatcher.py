"""The execute phase's DAG dispatcher: a worker pool over the plan's tasks.

A task starts only when every dependency is terminal-and-done and its ``files`` are disjoint from every
in-flight task's; at most ``workers`` run at once. By default one phase runs at a time (a later phase waits
for the current one to finish); with ``cross_phase_parallelism_enabled`` one pool spans every phase. With
more than one worker each task works in its own git worktree and reaches the main tree through
``workspace.integrate``, in completion order, under one integration lock.

Failure isolation: an exception in a worker blocks that task and its descendants; siblings go on. Only
what must stop the whole run gets through: an inline suspend, the plan's cost budget, a broken ledger,
a main tree changed under the run, cancellation. Those leave every in-flight task's status and worktree
in place, so ``autodev resume`` continues each one from its recorded step.

Speculative execution (``speculative_execution_enabled``): when a worker slot is free, one child per phase
may start while its only parent is still on its first attempt. The child finishes its work but waits for
the parent before merging. If the parent fails that attempt (or is blocked), the child is cancelled, its
worktree discarded and the child re-queued (``speculative_rolled_back``); it runs again once the parent
completes. If the parent completes, the speculation is confirmed (``speculative_committed``).
"""

from __future__ import annotations

import functools
import math
import tempfile
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from autodev.adapters.base import DelegationPendingSignal
from autodev.adapters.inline import InvalidResponseError
from autodev.errors import AutodevError, EnvironmentFaultError, LockHeldError, PlanParseError, StateError
from autodev.faults import environment_fault
from autodev.guardrails.errors import BudgetExceededError
from autodev.logging import get_logger
from autodev.orchestrator.delegation_policy import DelegationHeldError
from autodev.orchestrator.events import ProgressEvent
from autodev.orchestrator.execute.adoption import AdoptionPendingError, adopt, pending_message
from autodev.orchestrator.execute.approval_waits import ApprovalWaits
from autodev.orchestrator.execute.area_refresh import refresh_stale_areas
from autodev.orchestrator.execute.executor import LocalExecutor, TaskExecutor
from autodev.orchestrator.execute.parallelism import Parallelism, isolated_writes, resolve_parallelism
from autodev.orchestrator.execute.phase_review import review_finished_phases
from autodev.orchestrator.execute.results import results_block
from autodev.orchestrator.execute.slicing import is_slice_job, slice_task, slices_finished
from autodev.orchestrator.execute.task_flow import (
    TaskContext,
    block_task,
)
from autodev.orchestrator.integrity import RepositoryChangedError
from autodev.orchestrator.lanes import LaneOrder
from autodev.orchestrator.run_policy import approval_wait_message
from autodev.orchestrator.sessions import now_pickable_lines
from autodev.state.claims import ClaimStore, SessionIdentity
from autodev.state.policy_records import ApprovalRecord
from autodev.state.scheduling import TaskScheduler, scheduler_for
from autodev.state.schemas import Plan, ResultRecord, Task
from autodev.state.validation import validate_dag
from autodev.state.vocabulary import DONE_STATUSES, IN_FLIGHT_STATUSES, TASK_STATUSES, TERMINAL_STATUSES
from autodev.workspace.git import GitRepo
from autodev.workspace.integration import (
    MainTreeChangedError,
    TaskWorkspace,
    base_ref,
    main_tree_base,
    park_change,
    task_ref,
    unpark_change,
)
from autodev.workspace.worktree import WorkspaceProvider, Worktree, WorktreeManager
from autodev.workspace.worktree_pool import WorktreePool

if TYPE_CHECKING:
    from autodev.orchestrator.run_context import RunContext

__all__ = ["Dispatcher", "validate_dispatch_order"]

_log = get_logger("autodev.dispatcher")
# What stops the whole run instead of blocking one task (see the module docstring).
_RUN_FATAL: tuple[type[BaseException], ...] = (
    DelegationPendingSignal,
    # An inline answer that is not a valid response: the user fixes the file, the task is not to blame.
    InvalidResponseError,
    DelegationHeldError,
    BudgetExceededError,
    StateError,
    LockHeldError,
    MainTreeChangedError,
    RepositoryChangedError,
    EnvironmentFaultError,
)


# The step a task at a status is in, for messages.
_STEP_NAMES = {
    "pending": "start",
    "in_progress": "developer",
    "coded": "QA gates",
    "auto_gated": "review",
    "reviewed": "tests",
    "tested": "tournament",
    "tournamented": "commit",
}


def validate_dispatch_order(plan: Plan, *, cross_phase: bool) -> None:
    """Refuse, before anything starts, a plan the chosen dispatcher could never finish.

    Every dependency must name a task of the plan and the graph must be acyclic (across phases too). Run
    phase by phase, a task cannot wait for a task of a *later* phase: that phase starts only after this one
    ends, so the plan would stall; cross-phase mode accepts such edges.
    """
    validate_dag(plan.iter_tasks())
    if cross_phase:
        return
    position = {task.id: index for index, phase in enumerate(plan.phases) for task in phase.tasks}
    for index, phase in enumerate(plan.phases):
        for task in phase.tasks:
            later = [dep for dep in task.depends_on if position[dep] > index]
            if later:
                raise PlanParseError(
                    f"task {task.id} (phase {phase.id}) depends on {', '.join(later)} of a later phase; "
                    "phases run in order, so move the task or set cross_phase_parallelism_enabled = true"
                )


def _first_fatal(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The exception to raise for a failed task group: a run-stopping one first, in a stable order."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        current = pending.pop(0)
        if isinstance(current, BaseExceptionGroup):
            pending[:0] = list(current.exceptions)
        else:
            leaves.append(current)
    for kind in _RUN_FATAL:
        for leaf in leaves:
            if isinstance(leaf, kind):
                return leaf
    return leaves[0]


@dataclass(slots=True)
class _Worker:
    scope: anyio.CancelScope
    in_place: bool
    worktree: Worktree | None = None
    resumed: bool = False  # the task was already in flight when this run started
    workspace: TaskWorkspace | None = None


def dispatch_parallelism(session: RunContext, only_task: str | None) -> Parallelism:
    """How many tasks the dispatcher runs at once, and whether each works in a worktree of its own."""
    if only_task is not None:
        return Parallelism(1, "a single task was asked for", always_isolated=isolated_writes(session.config))
    return resolve_parallelism(session.config, *session.harnesses)


def worktree_provider(session: RunContext, parallelism: Parallelism) -> WorkspaceProvider:
    """Where the dispatcher's tasks get their working copies: a pool of recycled worktrees when tasks run
    isolated and the pool is on, else a worktree made for each task."""
    root, tree, lock = session.repo_root, session.paths.task_worktrees_dir, session.worktree_admin_lock
    preparer = session.worktree_preparer
    split_from = session.config.worktree_split_index_min_files
    if session.config.worktree_pool_enabled and parallelism.isolated:
        # One more than the tasks at once: the spare a landing resets ahead when it frees a task, so that
        # task starts on a worktree already at the new commit, also when every other one is busy.
        return WorktreePool(
            root,
            tree,
            parallelism.workers + 1,
            admin_lock=lock,
            preparer=preparer,
            track_changes=session.config.change_tracking_enabled,
            split_index_min_entries=split_from,
            main_git=session.git,
        )
    return WorktreeManager(
        root,
        tree,
        admin_lock=lock,
        preparer=preparer,
        split_index_min_entries=split_from,
        main_git=session.git,
    )


def early_pool(session: RunContext, only_task: str | None) -> WorktreePool | None:
    """The dispatcher's worktree pool, made before the preflight so that the first task's worktree is
    checked out while the preflight finds the environment and takes the baseline (ADR 0054); None when the
    run makes its worktrees as it does without one, at the claims:

    - a single task, or tasks in the main checkout, or no pool;
    - a worktree setup command (it runs in the project's environment, which the preflight finds first);
    - a task already in flight (a resumed run): its worktree is the one it continues in, and the pool's
      names must not be taken before the dispatcher has adopted it;
    - no task ready to start.

    Its worktree setup is built before the environment is known: without a command, the setup only copies
    ignored files, which needs no environment."""
    if only_task is not None or session.config.worktree_setup.command is not None:
        return None
    pm = session.plan_manager
    if pm.task_ids_with_status(*IN_FLIGHT_STATUSES) or not pm.next_pending_tasks(1):
        return None
    provider = worktree_provider(session, dispatch_parallelism(session, only_task))
    return provider if isinstance(provider, WorktreePool) else None


class Dispatcher:
    """Run every runnable task of the current plan (or only ``only_task``) to a terminal status."""

    def __init__(
        self,
        session: RunContext,
        *,
        only_task: str | None = None,
        executor: TaskExecutor | None = None,
        awaiting_approval: Mapping[str, ApprovalRecord] | None = None,
        evidence: Sequence[ResultRecord] | None = None,
        worktrees: WorkspaceProvider | None = None,
    ) -> None:
        """``worktrees``: the pool ``early_pool`` made before the dispatcher (its first worktree made or
        being made); by default the dispatcher makes its own provider (``worktree_provider``)."""
        self.session = session
        # The accepted results every task is given: the caller's selection, else the most recent ones.
        self.evidence = list(evidence) if evidence is not None else None
        # Tasks whose write scope waits for the user's approval: not started until it is answered; the run
        # ends waiting (exit 3) when they are all that is left, unless it waits for the answer (--wait).
        self.approval_waits = ApprovalWaits(session, dict(awaiting_approval or {}))
        self.executor: TaskExecutor = executor or LocalExecutor()
        self.pm = session.plan_manager
        self.only_task = only_task
        config = session.config
        self.parallelism = dispatch_parallelism(session, only_task)
        self.cross_phase = config.cross_phase_parallelism_enabled
        self.scheduler: TaskScheduler = (
            LaneOrder(config)
            if config.lanes_enabled and only_task is None
            else scheduler_for(self.parallelism.workers)
        )
        self.speculative = config.speculative_execution_enabled and self.parallelism.isolated
        # Tasks interactive agent sessions claimed (`autodev next`) are theirs, not this run's.
        self.claims = ClaimStore(session.paths.state_dir)
        self.me = SessionIdentity.from_environment()
        self.lock = session.main_tree_lock
        self.workers: dict[str, _Worker] = {}
        self.speculating: dict[str, str] = {}  # child -> parent
        self.rolling_back: dict[str, str] = {}  # child -> reason
        # The tasks started, in order (a dict for an ordered set: looked up at every start).
        self.processed: dict[str, None] = {}
        # Tasks whose verified change waits for adoption and that this run tried to land once already.
        self.adoption_tried: set[str] = set()
        # Whether the worktrees were last told that no task is left to start (``_wind_down_worktrees``).
        self._winding_down = False
        self._changed = anyio.Event()
        # Set when a worker stops the whole run: nothing new starts while the task group winds down (a
        # restarted task could reach its next agent call before the group's cancellation reaches it).
        self._stopping = False
        # A start may find phases checkpointed but not reviewed (a run killed in between).
        self._review_due = True
        self._main_head: str | None = None
        # The main checkout is looked at again after each landing (``_look_at_main_checkout``): one look
        # at a time, and one more when a landing came during it.
        self._looking_at_main = False
        self._look_at_main_again = False
        self._task_group: anyio.abc.TaskGroup | None = None
        self._commits_prepared = False
        self._project_block = ""
        self.worktrees = worktrees or worktree_provider(session, self.parallelism)

    # --- the loop -----------------------------------------------------------------------------------

    async def run(self) -> list[str]:
        """Dispatch until nothing more can start and nothing is in flight; the ids of tasks it ran."""
        validate_dispatch_order(self.pm.plan, cross_phase=self.cross_phase)
        if self.only_task is not None and self.only_task in self._claimed_by_others():
            claim = self.claims.claims()[self.only_task]
            raise AutodevError(
                f"task {self.only_task} is claimed by {claim.who()}, which is still running; take another "
                "task (`autodev next`), or let that session finish it"
            )
        _log.info(
            "dispatcher.start",
            workers=self.parallelism.workers,
            reason=self.parallelism.reason,
            cross_phase=self.cross_phase,
            speculative=self.speculative,
            pool=self.worktrees.recycles,
        )
        self._project_block = await self.session.project_block()
        if self.parallelism.isolated:
            workers = self.parallelism.workers
            shown = (
                f"running up to {workers} tasks at once"
                if workers > 1
                else "each task in a worktree of its own"
            )
            self.session.emit(ProgressEvent("note", shown))
            await self.worktrees.warm_up(workers)
        self._adopt_speculations()
        try:
            async with anyio.create_task_group() as group:
                self._task_group = group
                await self._checkpoint_phases()
                await self._review_phases()
                self.approval_waits.begin()
                while True:
                    self._check_speculation()
                    self._settle_approvals()
                    self._fill()
                    self._wind_down_worktrees()
                    if not self.workers:
                        if self.approval_waits and self.session.wait_for_approval and not self._stopping:
                            await self._wait_for_an_answer()
                            continue
                        break
                    # While tasks wait for an answer, look at the ledger every second for it.
                    with anyio.move_on_after(1.0 if self.approval_waits else math.inf):
                        await self._changed.wait()
                    self._changed = anyio.Event()
                    await self._review_phases()
        except BaseExceptionGroup as group:
            raise _first_fatal(group) from None
        finally:
            self.approval_waits.end()
        with anyio.CancelScope(shield=True):
            await self.worktrees.cleanup_all()
        if self.approval_waits:
            raise DelegationHeldError(approval_wait_message(self.approval_waits.records()))
        waiting = self.pm.pending_adoptions()
        if waiting:
            raise AdoptionPendingError(pending_message(waiting))
        return list(self.processed)

    def _settle_approvals(self) -> None:
        """Apply the answers given meanwhile; with ``--wait``, block what waited past its deadline."""
        self.approval_waits.settle()
        if self.session.wait_for_approval and self.approval_waits and not self.approval_waits.seconds_left():
            self.approval_waits.time_out()

    async def _wait_for_an_answer(self) -> None:
        """Nothing else is left and the run waits for the user (``--wait``): until an answer, or until the
        deadline (``policy.worker_approval_timeout_s``), when the waiting tasks are blocked."""
        records = self.approval_waits.records()
        left = self.approval_waits.seconds_left()
        ids = ", ".join(record.id for record in records)
        self.session.emit(
            ProgressEvent(
                "note",
                f"waiting up to {left:.0f} s for an answer to {ids} (`autodev approvals`): answer with "
                f"`autodev approve --scope {records[0].id}` or `autodev decline {records[0].id}`",
            )
        )
        while self.approval_waits and left > 0:
            await anyio.sleep(min(1.0, left))
            if self.approval_waits.settle():
                return
            left = self.approval_waits.seconds_left()
        if self.approval_waits:
            self.approval_waits.time_out()

    def _notify(self, task_id: str = "") -> None:
        self._changed.set()
        self.session.run_policy.released()
        if task_id:
            self._check_speculation()

    def _current_phase(self) -> str | None:
        """The first phase (plan order) with an unfinished task: the only one the per-phase mode runs."""
        return next((phase.phase_id for phase in self.pm.phase_progress() if not phase.finished), None)

    def _wind_down_worktrees(self) -> None:
        """Once every task left is running, let the worktree provider remove what it keeps for a next task
        while those tasks work, instead of after the last one (``WorkspaceProvider.wind_down``)."""
        # A task just started may still be pending in the ledger: its worker runs it all the same. Counted
        # first: this runs after every start and finish, and a long plan has thousands of pending tasks.
        statuses = ("pending", *IN_FLIGHT_STATUSES)
        nothing_left = (
            self.parallelism.isolated
            and not self.approval_waits
            and self.pm.count_with_status(*statuses) <= len(self.workers)
            and all(task_id in self.workers for task_id in self.pm.task_ids_with_status(*statuses))
        )
        if nothing_left and not self._winding_down and self._task_group is not None:
            self._task_group.start_soon(self.worktrees.wind_down)
        self._winding_down = nothing_left

    def _fill(self) -> None:
        """Start as many tasks as the free slots, the dependencies and the file sets allow."""
        free = self.parallelism.workers - len(self.workers)
        if free <= 0 or self._stopping:
            return
        if self.only_task is not None:
            task = self.pm.get_task(self.only_task)
            waits = task.status == "pending" and any(
                self.pm.get_task_status(dep) not in DONE_STATUSES for dep in task.depends_on
            )
            # A slice job asked for alone ends once sliced: it waits on its slices now.
            tried = task.id in self.adoption_tried
            if (
                task.id not in self.workers
                and task.status not in TERMINAL_STATUSES
                and not waits
                and not tried
            ):
                self._begin(task)
            return
        claimed = self._claimed_by_others()
        # A task a live session claimed is that session's, also when it is in flight (suspended there).
        mid_flight = [
            tid
            for tid in self.pm.task_ids_with_status(*IN_FLIGHT_STATUSES)
            if tid not in self.workers and tid not in claimed and tid not in self.adoption_tried
        ]
        # In the main tree mid-flight: started there (a retried task, with no base yet, starts anew anywhere).
        in_place = [
            tid
            for tid in mid_flight
            if (task := self.pm.get_task(tid)).worktree is None and task.base_commit is not None
        ]
        if self.parallelism.isolated and (in_place or self._running_in_place()):
            # A task interrupted while working in the main tree finishes there, alone: isolated tasks
            # merging meanwhile would mix into its diff.
            if in_place and not self.workers:
                self._start(in_place[0], in_place=True)
            return
        for task_id in mid_flight[:free]:
            self._begin(self.pm.get_task(task_id))
        free = self.parallelism.workers - len(self.workers)
        if free <= 0:
            return
        phase = None if self.cross_phase else self._current_phase()
        # A task a live session claimed is in flight there: skipped, and its files held.
        held = [*self.workers, *claimed, *self.approval_waits]
        if isinstance(self.scheduler, LaneOrder):
            self.scheduler.held = frozenset(held)
        for task in self.pm.next_pending_tasks(free, held, phase_id=phase, scheduler=self.scheduler):
            self._begin(task)
        free = self.parallelism.workers - len(self.workers)
        if self.speculative and free > 0:
            self._speculate(phase)

    def _begin(self, task: Task) -> None:
        """Start ``task``: slice it when it is a slice job, complete it when it is a sliced task whose
        slices are all done, else run its flow (``_start``)."""
        slice_above = self.session.config.slice_above
        if self.pm.adoption_pending(task.id):
            self._start_aside(task.id, self._adopt)
        elif slices_finished(self.pm, task, slice_above):
            self._start_aside(task.id, self._complete_sliced)
        elif is_slice_job(task, self.pm.slices_of(task.id), slice_above):
            self._start_aside(task.id, self._slice)
        else:
            self._start(task.id)

    def _not_coded(self, task: Task) -> bool:
        """A slice job, or a task split into slices: neither is coded as it stands."""
        slices = self.pm.slices_of(task.id)
        return bool(slices) or is_slice_job(task, slices, self.session.config.slice_above)

    def _start_aside(self, task_id: str, job: Callable[[str], Awaitable[None]]) -> None:
        """Run ``job`` for ``task_id`` in a worker slot, with no working copy: it changes only the plan."""
        if self._task_group is None:
            raise StateError("the dispatcher is not running")
        worker = _Worker(anyio.CancelScope(), in_place=False)
        self.workers[task_id] = worker
        self.processed[task_id] = None
        self._task_group.start_soon(self._aside, task_id, worker, job, name=f"task {task_id}")

    async def _aside(self, task_id: str, worker: _Worker, job: Callable[[str], Awaitable[None]]) -> None:
        try:
            with worker.scope:
                await job(task_id)
        except _RUN_FATAL:
            self._stopping = True
            raise
        except Exception as exc:  # failure isolation, as for a task's flow
            if anyio.current_effective_deadline() == -math.inf:
                return
            fault = self._fault(task_id, exc)
            if fault is not None:
                self._stopping = True
                raise fault from exc
            _log.exception("dispatcher.worker_failed", task_id=task_id)
            if self.pm.get_task(task_id).status not in TERMINAL_STATUSES:
                reason = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                block_task(self.session, task_id, f"internal error: {reason}")
        finally:
            self.workers.pop(task_id, None)
            self._notify(task_id)
        # Not reached when the run stops or suspends: the task is still what its claim says then.
        status = self.pm.get_task(task_id).status
        if status in TERMINAL_STATUSES or self.pm.slices_of(task_id):
            self._drop_claim(task_id)  # done with it: sliced, completed or blocked
        if status in ("blocked", "skipped"):
            async with self.lock:  # a phase may have ended with this block
                await self._checkpoint_phases()

    async def _adopt(self, task_id: str) -> None:
        """Try once to land a change that waits for adoption (a run killed or stopped before it could)."""
        self.adoption_tried.add(task_id)
        # The change was made in a worktree of its own; it lands on the main checkout from its commit.
        workspace = TaskWorkspace(self.session.repo_root, self.session.git, isolated=True)
        async with self.lock:
            await adopt(self.session, task_id, self._context(task_id, workspace, resumed=True))

    async def _slice(self, task_id: str) -> None:
        await slice_task(self.session, task_id)

    async def _complete_sliced(self, task_id: str) -> None:
        async with self.lock:  # the phase checkpoint must see the tree as this task leaves it
            self.pm.complete_sliced(task_id)
            await self._checkpoint_phases()
        slices = self.pm.slices_of(task_id)
        self._tell_sessions(self.pm.get_task(task_id))
        _log.info("execute_phase.slices_done", task_id=task_id, slices=slices)
        self.session.emit(
            ProgressEvent(
                "task_finished", f"all slices done: {', '.join(slices)}", task_id, "complete", ok=True
            )
        )

    def _claimed_by_others(self) -> list[str]:
        """Open tasks that live sessions other than this run's claimed."""
        return [
            task_id
            for task_id, claim in self.claims.claims().items()
            if self.pm.get_task_status(task_id) not in (None, *DONE_STATUSES)
            and claim.alive
            and not self.me.owns(claim)
        ]

    def _drop_claim(self, task_id: str) -> None:
        """A task this run finished with (done, blocked, sliced) is no longer claimed by anybody."""
        try:
            self.claims.release(task_id)
        except OSError:
            _log.warning("dispatcher.claim_not_released", task_id=task_id)

    def _running_in_place(self) -> bool:
        return any(worker.in_place for worker in self.workers.values())

    def _start(self, task_id: str, *, in_place: bool = False) -> None:
        if self._task_group is None:
            raise StateError("the dispatcher is not running")
        # A task that recorded a worktree (a parallel run was interrupted) finishes there, whatever the
        # parallelism now: its work is in that worktree, not in the main tree.
        recorded = self.pm.get_task(task_id).worktree is not None
        isolated = recorded or (self.parallelism.isolated and not in_place)
        worker = _Worker(anyio.CancelScope(), in_place=not isolated)
        self.workers[task_id] = worker
        self.processed[task_id] = None
        self._task_group.start_soon(self._work, task_id, worker, isolated, name=f"task {task_id}")

    # --- one worker ---------------------------------------------------------------------------------

    async def _work(self, task_id: str, worker: _Worker, isolated: bool) -> None:
        try:
            with worker.scope:
                workspace = worker.workspace = await self._open_workspace(task_id, worker, isolated)
                if workspace is not None:
                    self._prepare_commits_soon()
                    context = self._context(task_id, workspace, resumed=worker.resumed)
                    await self.executor.run_task(self.session, task_id, context)
        except _RUN_FATAL as exc:
            self._stopping = True
            # State that cannot be written for the machine's reasons (a full disk) pauses the run resumably.
            fault = self._fault(task_id, exc) if isinstance(exc, StateError) else None
            if fault is not None:
                raise fault from exc
            raise
        except Exception as exc:  # failure isolation: this task (and what depends on it) only
            if anyio.current_effective_deadline() == -math.inf:
                # The run is being stopped (Ctrl-C, another task's stop): a git or tool call cut short by
                # the same stop is no failure of this task, which stays at its step for the resume.
                _log.warning("dispatcher.failed_while_stopping", task_id=task_id, error=str(exc))
                return
            task = self.pm.get_task(task_id)
            fault = self._fault(task_id, exc)
            if fault is not None:
                # A full disk or the like: the run stops resumably, and the task stays where it was.
                self._stopping = True
                raise fault from exc
            _log.exception("dispatcher.worker_failed", task_id=task_id)
            if task.status not in TERMINAL_STATUSES:
                reason = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
                block_task(self.session, task_id, f"internal error: {reason}")
                self._check_speculation()
                if worker.workspace is not None:
                    with anyio.CancelScope(shield=True):
                        await self._park(worker.workspace, task)
        finally:
            with anyio.CancelScope(shield=True):
                await self._finish_worker(task_id, worker)

    def _fault(self, task_id: str, exc: BaseException) -> EnvironmentFaultError | None:
        """The resumable stop ``exc`` amounts to when the machine, not the work, caused it."""
        try:
            status = self.pm.get_task(task_id).status
        except Exception:  # the state itself may be what failed
            status = "in_progress"
        step = f"task {task_id} ({_STEP_NAMES.get(status, status)})"
        watched = (self.session.repo_root, self.session.paths.state_dir, Path(tempfile.gettempdir()))
        return environment_fault(exc, step, watched=watched)

    async def _park(self, workspace: TaskWorkspace, task: Task) -> None:
        try:
            await park_change(workspace, task, self.session.git)
        except Exception:  # best effort: its change is in evidence/<task>.developer.patch as well
            _log.exception("dispatcher.park_failed", task_id=task.id)

    async def _finish_worker(self, task_id: str, worker: _Worker) -> None:
        rollback = self.rolling_back.pop(task_id, None)
        if rollback is not None:
            await self._roll_back(task_id, rollback, worker)
        if self.pm.adoption_pending(task_id):
            self.adoption_tried.add(task_id)  # its change waits: not started again by this run
            if worker.worktree is not None:
                # Where the change was made stays until its adoption ends (a later start prunes it then).
                self.worktrees.keep(worker.worktree)
        status = self.pm.get_task(task_id).status
        if status in TERMINAL_STATUSES:
            self._drop_claim(task_id)
        if status in TERMINAL_STATUSES and worker.in_place:
            # Its base is no longer needed: a completed change is in the tree, a blocked one kept on it.
            await self.session.git.delete_ref(base_ref(task_id))
        if status in TERMINAL_STATUSES and status != "complete":
            async with self.lock:  # a completed task's phase was checkpointed inside its merge
                await self._checkpoint_phases()
        release = rollback is None and status in TERMINAL_STATUSES and worker.worktree is not None
        # A pooled worktree is recycled in a reset: done before the slot frees, the next task reuses it.
        # Removing a plain worktree takes longer: dependents start while it goes.
        pooled = self.worktrees.recycles
        if release and pooled:
            await self._release(task_id, status, worker)
        self.workers.pop(task_id, None)  # gone already when it completed (see _after_complete)
        self._notify(task_id)
        if release and not pooled:
            await self._release(task_id, status, worker)

    async def _release(self, task_id: str, status: str, worker: _Worker) -> None:
        if status != "complete":  # a completed task's pinned commit went with its merge
            await self.session.git.delete_ref(task_ref(task_id))
        if worker.worktree is not None:
            await self.worktrees.release(worker.worktree)

    async def _open_workspace(self, task_id: str, worker: _Worker, isolated: bool) -> TaskWorkspace | None:
        """The tree the task works in; starts a pending task (its base is the main tree's HEAD now)."""
        task = self.pm.get_task(task_id)
        # A task sent back by `autodev retry` is in progress without a base: it starts anew, from now.
        starting = task.status == "pending" or task.base_commit is None
        worker.resumed = not starting
        if not isolated:
            workspace = TaskWorkspace(self.session.repo_root, self.session.git)
            if starting:
                git = self.session.git
                base = await main_tree_base(git, task_id, committed=self.session.config.auto_commit)
                self._record_start(task, base, None, phase_base=await git.ensure_base_commit())
                await self._unpark(workspace, task_id)
            return workspace
        if starting:
            # The branch moves only by our own merges: the last one known is the current base (and if
            # someone else moved it, the merge replays onto whatever HEAD really is).
            if self._main_head is None:
                self._main_head = await self.session.git.ensure_base_commit()
            base = self._main_head
            worker.worktree = await self.worktrees.claim(task_id, base)
            self._record_start(task, base, worker.worktree.path)
        else:
            worker.worktree = await self._resumed_worktree(task)
            if worker.worktree is None:
                return None
        git = GitRepo(worker.worktree.path, like=self.session.git)
        workspace = TaskWorkspace(worker.worktree.path, git, isolated=True)
        if starting:
            await self._unpark(workspace, task_id)
        return workspace

    async def _unpark(self, workspace: TaskWorkspace, task_id: str) -> None:
        """A task retried after a block continues from its last change, kept when it was blocked."""
        applied = await unpark_change(workspace, task_id, self.session.git)
        if applied is not None:
            how = "" if applied else " (with conflict markers where the code moved on)"
            self.session.emit(ProgressEvent("note", f"continuing from its last change{how}", task_id))

    def _record_start(
        self, task: Task, base: str, worktree: Path | None, *, phase_base: str | None = None
    ) -> None:
        """``phase_base``: where the phase's commit range begins when it is not ``base`` (a task's base on
        top of the uncommitted work before it is on no branch)."""
        relative = self.session.paths.relative(worktree) if worktree else None
        self.pm.update_task_status(task.id, "in_progress", base_commit=base, worktree=relative)
        self.pm.record_phase_baseline(task.phase_id, phase_base or base)
        if self.speculative:
            self._changed.set()  # an in-flight parent is what a speculative child waits for
        self.session.emit(
            ProgressEvent(
                "task_started",
                f"started {task.title}",
                task.id,
                "in_progress",
                task.retry_count + 1,
                details=(relative,) if relative else (),
            )
        )

    async def _resumed_worktree(self, task: Task) -> Worktree | None:
        """The worktree a resumed task recorded; a vanished one re-queues the task (nothing merged yet)."""
        worktree = self._recorded_worktree(task)
        if worktree is not None:
            return worktree
        self.pm.revert_task_to_pending(task.id, "its worktree was lost; the task starts again")
        self.session.emit(ProgressEvent("note", "worktree lost: the task starts again", task.id))
        return None

    def _recorded_worktree(self, task: Task) -> Worktree | None:
        """The worktree an interrupted run left for ``task``, taken over; None when there is none."""
        path = self.session.repo_root / task.worktree if task.worktree else None
        if path is not None and task.base_commit is not None and (path / ".git").exists():
            return self.worktrees.adopt(path, task.base_commit)
        return None

    async def _review_phases(self) -> None:
        """Review phases that reached their end checkpoint (from the loop only: it may call an agent)."""
        if self._review_due:
            self._review_due = False
            await review_finished_phases(self.session)

    def _context(self, task_id: str, workspace: TaskWorkspace, *, resumed: bool) -> TaskContext:
        async def wait_for_parent() -> None:
            while task_id in self.speculating:
                event = self._changed
                await event.wait()

        return TaskContext(
            workspace=workspace,
            integration_lock=self.lock,
            before_integration=wait_for_parent,
            on_change=self._notify,
            after_complete=self._after_complete,
            landing=functools.partial(self._landing, task_id),
            resumed=resumed,
            project_block=self._project_block,
            results_block=results_block(
                self.evidence
                if self.evidence is not None
                else self.pm.recent_results(self.session.config.sibling_results)
            ),
        )

    def _landing(self, task_id: str, commit: str) -> None:
        """``task_id``'s landing is about to move the branch to ``commit``: when that makes a task ready, the
        worktree it will claim is made ready at ``commit`` meanwhile, beside the main checkout's
        fast-forward. Not otherwise: whatever claims next may do so after more landings, and the worktree
        would be reset twice."""
        if self.parallelism.isolated and self._task_group is not None and self.pm.frees_a_task(task_id):
            self._task_group.start_soon(self._advance_worktree, commit, name="advance an idle worktree")

    async def _advance_worktree(self, commit: str) -> None:
        try:
            await self.worktrees.advance(commit)
        except Exception:  # best effort: the claim resets the worktree itself, and meets the cause there
            _log.warning("dispatcher.advance_failed", commit=commit, exc_info=True)

    async def _after_complete(self, task: Task) -> None:
        """Under the integration lock, right after a task is recorded complete: refresh tasks for stale
        area maps, exact phase checkpoints, and the task's slot handed on at once (its worktree is cleaned up
        while its dependents start)."""
        if task.commit is not None:
            self._main_head = task.commit
            if self.parallelism.isolated and self._task_group is not None:
                self._task_group.start_soon(self._look_at_main_checkout, name="look at the main checkout")
        await refresh_stale_areas(self.session, task)
        self._tell_sessions(task)
        await self._checkpoint_phases()
        if not self.worktrees.recycles:  # a pooled worktree is recycled first (quick)
            self.workers.pop(task.id, None)
            self._notify(task.id)

    def _prepare_commits_soon(self) -> None:
        """Once the first task has its working copy (after it, not beside its making, which the task waits
        for): ask git in the background what AutoDev's commits need."""
        if not self._commits_prepared and self._task_group is not None:
            self._commits_prepared = True
            self._task_group.start_soon(self._prepare_commits, name="prepare the commits")

    async def _prepare_commits(self) -> None:
        """While the first tasks' agents work: what AutoDev's commits need from git (the identities, the
        configuration), which the first landing would otherwise wait for. A failure is left to that
        landing, which asks again."""
        try:
            await self.session.git.prepare_commits()
        except AutodevError as exc:
            _log.debug("dispatcher.prepare_commits_failed", error=str(exc))

    async def _look_at_main_checkout(self) -> None:
        """After a landing, while the tasks it freed start: what is dirty in the main checkout now, so that
        the check after each agent's call in a worktree (``autodev.orchestrator.integrity``) finds it known
        and starts no git on the way from that call to the next step. Outside the integration lock: an
        answer taken while a landing writes is keyed to the state it saw and is not used once that moves
        on. A failure is left to that check, which asks git itself."""
        if self._looking_at_main:
            self._look_at_main_again = True
            return
        self._looking_at_main = True
        try:
            again = True
            while again:
                self._look_at_main_again = False
                try:
                    await self.session.git.refresh_dirty_paths()
                except AutodevError as exc:
                    _log.debug("dispatcher.main_checkout_look_failed", error=str(exc))
                    return
                again = self._look_at_main_again
        finally:
            self._looking_at_main = False

    def _tell_sessions(self, landed: Task) -> None:
        """With agent sessions working lanes: which tasks of other lanes ``landed`` made pickable."""
        sessions = self.claims.sessions()
        if not sessions:
            return
        for line in now_pickable_lines(landed, self.pm.tasks(), self.session.config, sessions):
            self.session.emit(ProgressEvent("note", line, landed.id))

    async def _checkpoint_phases(self) -> None:
        """Record the main tree's HEAD as the end of every phase that just became all-terminal.

        Called with the integration lock held (or before any worker runs), so HEAD is exactly the tree at
        the moment the phase's last task finished, however many later-phase tasks merge afterwards.
        """
        head: str | None = None
        for phase in self.pm.phase_progress():
            if phase.end_checkpoint_commit is not None or not phase.finished:
                continue
            head = head or await self.session.git.ensure_base_commit()
            if self.pm.record_phase_checkpoint(phase.phase_id, head):
                self._review_due = True
                _log.info("dispatcher.phase_checkpoint", phase_id=phase.phase_id, commit=head)

    # --- speculative execution ----------------------------------------------------------------------

    def _adopt_speculations(self) -> None:
        """After a resume: an in-flight task whose parent is unfinished was started speculatively."""
        for task_id in self.pm.task_ids_with_status(*IN_FLIGHT_STATUSES):
            task = self.pm.get_task(task_id)
            unfinished = [dep for dep in task.depends_on if self.pm.get_task(dep).status not in DONE_STATUSES]
            if unfinished:
                self.speculating[task_id] = unfinished[0]

    def _speculate(self, phase: str | None) -> None:
        busy_phases = {self.pm.get_task(child).phase_id for child in self.speculating}
        for parent in self._in_plan_order(self.workers):
            if len(self.workers) >= self.parallelism.workers:
                return
            if parent in self.speculating:
                continue
            child = self.pm.speculable_candidate(parent, list(self.workers))
            if child is None or child.phase_id in busy_phases or self._not_coded(child):
                continue
            if phase is not None and child.phase_id != phase:
                continue
            self.pm.record_event("speculative_started", {"task_id": child.id, "parent_task_id": parent})
            _log.info("dispatcher.speculative_started", task_id=child.id, parent=parent)
            self.session.emit(
                ProgressEvent("note", f"started speculatively before {parent} finished", child.id)
            )
            self.speculating[child.id] = parent
            busy_phases.add(child.phase_id)
            self._start(child.id)

    def _check_speculation(self) -> None:
        """Confirm speculations whose parent completed; roll back those whose parent failed an attempt."""
        for child, parent_id in list(self.speculating.items()):
            parent = self.pm.get_task(parent_id)
            if parent.status in DONE_STATUSES:
                del self.speculating[child]
                self.pm.record_event("speculative_committed", {"task_id": child, "parent_task_id": parent_id})
                _log.info("dispatcher.speculative_committed", task_id=child, parent=parent_id)
                self._changed.set()
            elif (
                parent.retry_count > 0
                or parent.status in ("blocked", "pending")
                or self.pm.adoption_pending(parent_id)
            ):
                reason = f"parent {parent_id} " + (
                    "was blocked"
                    if parent.status == "blocked"
                    else "waits for adoption"
                    if self.pm.adoption_pending(parent_id)
                    else "failed its first attempt"
                )
                del self.speculating[child]
                worker = self.workers.get(child)
                if worker is not None:
                    self.rolling_back[child] = reason
                    worker.scope.cancel()
                else:
                    self._roll_back_unstarted(child, reason)

    def _roll_back_unstarted(self, child: str, reason: str) -> None:
        """Roll back a speculative child adopted at a resume that no worker runs yet: nothing to cancel, but
        left in flight it would start and merge before its parent."""
        worktree = self._recorded_worktree(self.pm.get_task(child))
        self._requeue(child, reason)  # first: a task the ledger holds pending is not started as in flight
        assert self._task_group is not None
        self._task_group.start_soon(self._discard, child, worktree, name=f"roll back {child}")

    async def _roll_back(self, child: str, reason: str, worker: _Worker) -> None:
        """Discard a cancelled speculative child's work and re-queue it (best effort, idempotent)."""
        await self._discard(child, worker.worktree)
        self._requeue(child, reason)

    async def _discard(self, child: str, worktree: Worktree | None) -> None:
        try:
            await self.session.git.delete_ref(task_ref(child))
            if worktree is not None:
                await self.worktrees.release(worktree)
        except Exception:
            _log.exception("dispatcher.rollback_cleanup_failed", task_id=child)

    def _requeue(self, child: str, reason: str) -> None:
        task = self.pm.get_task(child)
        if task.status not in TERMINAL_STATUSES:
            self.pm.revert_task_to_pending(child, f"speculation lost: {reason}")
        parent = self.pm.get_task(child).depends_on[0]
        self.pm.record_event(
            "speculative_rolled_back", {"task_id": child, "parent_task_id": parent, "reason": reason}
        )
        _log.warning("dispatcher.speculative_rolled_back", task_id=child, parent=parent, reason=reason)
        self.session.emit(ProgressEvent("note", f"speculation rolled back: {reason}", child, ok=False))

    def _in_plan_order(self, task_ids: Iterable[str]) -> list[str]:
        wanted = set(task_ids)
        return [task_id for task_id in self.pm.task_ids_with_status(*TASK_STATUSES) if task_id in wanted]
