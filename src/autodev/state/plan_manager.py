"""``PlanManager``: the only writer of plan state.

Every change is validated, appended to the ledger (under the ``.autodev/lock`` file lock; fsync'd before
the method returns, except a step's evidence and delegation records, which the step's own change that
follows them syncs: ``_append``) and then applied to the in-memory state by the same function that replays
the ledger, so the live object and a replay can never disagree. ``plan.json`` is a snapshot of that state
tagged with the ledger position it reflects; it is written on ``checkpoint()``/``close()``, never per
transition, and rebuilt from the ledger whenever it is missing, stale or corrupt.
"""

from __future__ import annotations

import math
import os
import pickle
import threading
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autodev.errors import (
    AutodevError,
    InvalidTransitionError,
    LedgerCorruptError,
    LockHeldError,
    PlanExistsError,
    PlanNotFoundError,
    SnapshotError,
    StateError,
    TaskNotFoundError,
)
from autodev.files import MAX_PID_FILE_BYTES, MAX_STATE_FILE_BYTES, led_by, read_bounded
from autodev.logging import get_logger
from autodev.state.atomic import atomic_write_bytes
from autodev.state.evidence import write_evidence, write_patch
from autodev.state.file_lock import KeptFileLock, Timeout
from autodev.state.hashing import plan_content_hash
from autodev.state.ledger import Ledger, LedgerEntry, LedgerHead
from autodev.state.paths import AutodevPaths, StateDirKeeper
from autodev.state.policy_records import (
    ApprovalRecord,
    HumanBlock,
    HumanRelease,
    LastDecision,
    ScopeDeclaration,
    ScopeSource,
    WorkerGrant,
)
from autodev.state.scheduling import PlanOrder, TaskScheduler
from autodev.state.schemas import (
    DEFAULT_TASK_TIER,
    MODEL_TIERS,
    CoderEvidence,
    CompletionEvidence,
    Evidence,
    ModelTier,
    Phase,
    Plan,
    ResultRecord,
    Task,
)
from autodev.state.snapshot import decode_snapshot, encode_snapshot, read_snapshot_bytes
from autodev.state.status import status_from_state, waiting_for
from autodev.state.transitions import TASK_TRANSITIONS, assert_transition
from autodev.state.validation import validate_plan
from autodev.state.vocabulary import DONE_STATUSES, TASK_STATUSES, TERMINAL_STATUSES, TaskStatus

__all__ = [
    "AdoptionRecord",
    "BaselineGate",
    "BaselineRecord",
    "CallUsage",
    "EvidenceRef",
    "PhaseProgress",
    "PlanManager",
    "PlanPhaseProgress",
    "PlanState",
    "TaskUsageRecord",
]

# Ops that record what happened without changing plan state; replay accepts and skips them.
_AUDIT_OPS = frozenset(
    {
        "note",
        "speculative_started",
        "speculative_rolled_back",
        "speculative_committed",
        "plan_tournament_complete",
        "impl_tournament_complete",
        "provider_backoff",
        "prompt_cut",
        "provider_paused",
    }
)
# Tasks that can be re-queued by revert_task_to_pending; finished work is never silently undone.
_PLAN_ORDER = PlanOrder()
_REVERTIBLE = frozenset(TASK_STATUSES) - DONE_STATUSES

_log = get_logger("autodev.plan_manager")


@dataclass
class _OfferedOrder:
    """A scheduler's order of the plan's tasks, kept while the plan keeps its tasks (``children``, rebuilt
    whenever tasks are added or the plan replaced): the dispatcher asks for the next tasks after every task,
    and ordering the whole plan each time costs its size."""

    scheduler: TaskScheduler
    children: Mapping[str, Sequence[str]]
    tasks: Sequence[Task]
    # How many tasks at the head of ``tasks`` were found not pending, and ``PlanManager._requeued`` then:
    # none of them can be picked until a task goes back to pending, which starts the count again.
    settled: int
    requeued: int


class EvidenceRef(BaseModel):
    """Where one evidence file is and what its bytes hashed to when it was recorded."""

    model_config = ConfigDict(extra="forbid")

    kind: str
    attempt: int
    path: str
    sha256: str
    # For a developer run: what git showed in its checkout, in brief (status reads it without the file).
    summary: dict[str, Any] | None = None


class PlanPhaseProgress(BaseModel):
    """A plan phase under way: which agent steps finished for which spec (so a resume skips them)."""

    model_config = ConfigDict(extra="forbid")

    spec_hash: str
    steps: dict[str, EvidenceRef] = Field(default_factory=dict)
    require_approval: bool = False


class BaselineGate(BaseModel):
    """One whole-tree gate on the base commit: its status and the findings it had there already."""

    model_config = ConfigDict(extra="forbid")

    gate: str
    language: str | None = None
    status: str
    reason: str | None = None
    findings: list[str] = Field(default_factory=list)
    finding_count: int = 0


class BaselineRecord(BaseModel):
    """The base commit's own gate results, as the execute phase started from them (``autodev status``)."""

    model_config = ConfigDict(extra="forbid")

    commit: str
    tree: str
    key: str
    taken_in: str
    environment: str
    gates: list[BaselineGate] = Field(default_factory=list)


AdoptionState = Literal["pending_adoption", "adopted", "discarded"]


class AdoptionRecord(BaseModel):
    """A task's verified change that could not land on the main checkout by itself: kept as ``commit``
    (under ``refs/autodev/adopt/<task>``) until it is adopted (the task completes) or discarded (the task is
    blocked); ``reason`` says why it waits."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    state: AdoptionState = "pending_adoption"
    commit: str
    base: str | None = None
    worktree: str | None = None
    reason: str = ""
    since: str = ""


class TaskUsageRecord(BaseModel):
    """What one task's agent calls used, summed over every process that ran them."""

    model_config = ConfigDict(extra="forbid")

    calls: int = 0
    tool_calls: int = 0
    seconds: float = 0.0
    # Calls whose cost nobody knows (they add nothing to the cost figures), and the part of the task's
    # cost AutoDev estimated from token counts rather than took from the CLI.
    unknown_cost_calls: int = 0
    estimated_cost_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class CallUsage:
    """What the ledger keeps of one agent call besides its limits: where it ran and what it consumed.

    Token counts follow the adapters' convention (``tokens_in`` includes the cache reads and writes); a
    count the CLI did not report is None and is left out of the record.
    """

    phase: str
    step: str | None = None
    attempt: int | None = None
    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_cache_read: int | None = None
    tokens_cache_write: int | None = None
    duration_s: float | None = None
    cost_estimated: bool = False


class PlanState(BaseModel):
    """Everything the ledger replays into; ``plan.json`` stores exactly this.

    The cost and usage counters cover one budget period: from the start of a plan phase (or the saving of
    a hand-written plan) until the next one.
    """

    model_config = ConfigDict(extra="forbid")

    plan: Plan | None = None
    session_id: str | None = None
    evidence: dict[str, list[EvidenceRef]] = Field(default_factory=dict)
    cost_usd_total: float = 0.0
    cost_usd_by_task: dict[str, float] = Field(default_factory=dict)
    usage_by_task: dict[str, TaskUsageRecord] = Field(default_factory=dict)
    # Calls of the budget period whose cost is unknown, and the ledger entry the period started at (its
    # ``usage_recorded`` entries are those after it: what ``autodev cost`` reads).
    unknown_cost_calls: int = 0
    budget_since_seq: int = 0
    plan_approved: bool = False
    plan_phase: PlanPhaseProgress | None = None
    baseline: BaselineRecord | None = None
    # The delegation policy's run state: what the user authorized for this plan, what waits for their
    # approval, and which write workers hold a grant (released when their task finishes).
    write_scopes: list[ScopeDeclaration] = Field(default_factory=list)
    approvals: dict[str, ApprovalRecord] = Field(default_factory=dict)
    workers: dict[str, WorkerGrant] = Field(default_factory=dict)
    # Automatic retries the policy granted in this plan's run (its budget is per run, so it survives resume).
    automatic_retries_used: int = 0
    # Pending tasks held while a task they depend on waits for an approval, and the seconds each task has
    # spent held so far (a queued task's time to live does not count them).
    blocked_on_human: dict[str, HumanBlock] = Field(default_factory=dict)
    human_blocked_s: dict[str, float] = Field(default_factory=dict)
    # The newest decision about each task's calls (its family, and whether it runs or waits).
    last_decisions: dict[str, LastDecision] = Field(default_factory=dict)
    # The newest check of the checkout against its base ref (``workspace.base_freshness``), and the base
    # commits the user chose to build on although the checkout was behind them.
    base_check: dict[str, Any] | None = None
    stale_bases_accepted: list[str] = Field(default_factory=list)
    # Completion checks the user waived: ``{task id: [{check, revision, reason}]}``, each for one revision.
    waivers: dict[str, list[dict[str, str]]] = Field(default_factory=dict)
    # The plan's accepted task results in the order they were accepted (``ResultRecord``).
    results: list[ResultRecord] = Field(default_factory=list)
    # Verified changes that wait to be adopted into the main checkout, and how each one ended.
    adoptions: dict[str, AdoptionRecord] = Field(default_factory=dict)
    # The cluster node each task's flow last ran on (``executor = "ray"``): ``autodev status`` shows it.
    nodes: dict[str, str] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _LockOwner:
    pid: int | None


@dataclass(frozen=True, slots=True)
class PhaseProgress:
    phase_id: str
    finished: bool
    baseline_commit: str | None
    end_checkpoint_commit: str | None


@contextmanager
def _recorded_version_kept(path: Path) -> Iterator[None]:
    """Around replacing an evidence file and recording it: if the recording fails (a full disk), put the
    version the ledger already records back, so the file never disagrees with its last recorded hash.

    The old version is kept as a hard link (no space needed, even on a full disk).
    """
    backup = path.with_name(f".{path.name}.{os.getpid()}.prev")
    try:
        os.link(path, backup)
    except OSError:
        backup_made = False
    else:
        backup_made = True
    try:
        yield
    except BaseException:
        if backup_made:
            os.replace(backup, path)
        raise
    if backup_made:
        backup.unlink(missing_ok=True)


class PlanManager:
    """Crash-safe plan state for one repository. Use as a context manager or call ``close()``.

    ``readonly=True`` never takes the lock and never writes (``autodev status`` runs beside a live run).
    """

    def __init__(
        self,
        repo_root: Path,
        *,
        lock_timeout_s: float = 10.0,
        readonly: bool = False,
        use_snapshot: bool = True,
    ) -> None:
        self.use_snapshot = use_snapshot
        self.paths = AutodevPaths(Path(repo_root))
        self.readonly = readonly
        self.lock_timeout_s = lock_timeout_s
        self._ledger = Ledger(self.paths.ledger, readonly=readonly)
        self._file_lock = KeptFileLock(self.paths.lock)
        self._state_dir = StateDirKeeper(self.paths)
        self._thread_lock = threading.RLock()
        self._depth = 0
        self._owner_fd: int | None = None
        self._loaded = False
        self._state = PlanState()
        self._tasks: dict[str, Task] = {}
        self._landed: dict[str, str] = {}  # task id -> its landed commit, for landed_commits
        # A read-only copy of ``_landed`` handed out until it changes: asked for after every agent call,
        # it changes once a landing, and a copy costs its size.
        self._landed_copy: Mapping[str, str] | None = None
        self._children: dict[str, list[str]] = {}
        self._slices: dict[str, list[str]] = {}
        # Task ids by status, each task's position in plan order, and each phase's unfinished tasks
        # (``_set_status``): the dispatcher asks for them after every task.
        self._by_status: dict[str, set[str]] = {status: set() for status in TASK_STATUSES}
        self._position: dict[str, int] = {}
        self._open_in_phase: Counter[str] = Counter()
        self._requeued = 0  # status changes to pending (``_offered_from_first_pending``)
        self._offered: _OfferedOrder | None = None
        self._snapshot_seq = -1
        # Whether load() could use plan.json (False: missing, stale beyond repair, or corrupt).
        self.snapshot_usable = False
        self._appliers: dict[str, Callable[[LedgerEntry], None]] = {
            "plan_init": self._apply_plan_init,
            "session_started": self._apply_session_started,
            "task_status": self._apply_task_status,
            "task_retry": self._apply_task_retry,
            "task_escalated": self._apply_task_escalated,
            "task_model_set": self._apply_task_model_set,
            "task_reverted": self._apply_task_reverted,
            "tasks_blocked": self._apply_tasks_blocked,
            "evidence_recorded": self._apply_evidence_recorded,
            "cost_recorded": self._apply_cost_recorded,
            "usage_recorded": self._apply_usage_recorded,
            "plan_approved": self._apply_plan_approved,
            "plan_phase_started": self._apply_plan_phase_started,
            "plan_step_done": self._apply_plan_step_done,
            "plan_steps_dropped": self._apply_plan_steps_dropped,
            "phase_baseline": self._apply_phase_baseline,
            "phase_checkpoint": self._apply_phase_checkpoint,
            "baseline_recorded": self._apply_baseline_recorded,
            "task_retried": self._apply_task_retried,
            "tasks_added": self._apply_tasks_added,
            "slices_done": self._apply_slices_done,
            "write_scope_declared": self._apply_write_scope_declared,
            "approval_requested": self._apply_approval_requested,
            "approval_resolved": self._apply_approval_resolved,
            "delegation_decided": self._apply_delegation_decided,
            "automatic_retry_granted": self._apply_automatic_retry_granted,
            "approval_waiting": self._apply_approval_waiting,
            "base_checked": self._apply_base_checked,
            "adoption_pending": self._apply_adoption_pending,
            "task_node": self._apply_task_node,
            "check_waived": self._apply_check_waived,
            "tasks_blocked_on_human": self._apply_tasks_blocked_on_human,
            "tasks_released_by_human": self._apply_tasks_released_by_human,
        }

    # --- lifecycle ----------------------------------------------------------------------------------

    @classmethod
    def open(cls, repo_root: Path, *, lock_timeout_s: float = 10.0, readonly: bool = False) -> PlanManager:
        """Construct and ``load()`` in one step."""
        manager = cls(repo_root, lock_timeout_s=lock_timeout_s, readonly=readonly)
        manager.load()
        return manager

    def __enter__(self) -> Self:
        if not self._loaded:
            self.load()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def load(self) -> None:
        """Verify the ledger and restore state from the snapshot plus the ledger tail."""
        with self._thread_lock:
            if self.readonly:
                self._load_unlocked()
            else:
                with self._locked(sync=False):
                    self._load_unlocked()

    def close(self) -> None:
        """Write the snapshot if it is behind the ledger, then release file handles."""
        with self._thread_lock:
            if self._loaded and not self.readonly and self._snapshot_seq != self._ledger.head.seq:
                with self._locked():
                    self._write_snapshot()
            try:
                self._ledger.close()
            finally:
                self._file_lock.close()
                if self._owner_fd is not None:
                    os.close(self._owner_fd)
                    self._owner_fd = None

    def checkpoint(self) -> None:
        """Write ``plan.json`` now (the orchestrator calls this at phase boundaries)."""
        self._require_writable()
        with self._locked():
            self._write_snapshot()

    def catch_up(self) -> None:
        """Writable managers: apply what other processes appended (an answer given with ``autodev approve``
        beside a live run), under the ledger lock; every write does this anyway."""
        with self._locked():
            pass

    def refresh(self) -> None:
        """Read-only managers: pick up what a writer appended since the last load or refresh."""
        with self._thread_lock:
            for entry in self._ledger.sync():
                self._apply(entry)

    # --- queries ------------------------------------------------------------------------------------

    @property
    def plan(self) -> Plan:
        """A copy of the current plan; ``PlanNotFoundError`` when none was saved."""
        return self._require_plan().model_copy(deep=True)

    @property
    def has_plan(self) -> bool:
        return self._state.plan is not None

    @property
    def session_id(self) -> str | None:
        return self._state.session_id

    @property
    def ledger_head(self) -> LedgerHead:
        return self._ledger.head

    @property
    def ledger(self) -> Ledger:
        return self._ledger

    @property
    def snapshot_seq(self) -> int:
        """The ledger seq that plan.json reflects (0 when it was missing or unusable at load)."""
        return max(self._snapshot_seq, 0)

    def state_copy(self) -> PlanState:
        """A deep copy of everything the ledger replays into (for verification and tests)."""
        return self._state.model_copy(deep=True)

    def pickled_state(self) -> bytes:
        """``state_copy`` as ``pickle`` bytes, for another process (a remote worker's replica): the
        pickling is the copy, at about a third of what a deep copy and then pickling it cost."""
        return pickle.dumps(self._state, protocol=pickle.HIGHEST_PROTOCOL)

    def get_task(self, task_id: str) -> Task:
        return self._task(task_id).detached_copy()

    def task_tier(self, task_id: str) -> ModelTier:
        """The tier ``task_id``'s roles run on: its Model line's, else the default (strong)."""
        return self._task(task_id).model or DEFAULT_TASK_TIER

    def get_task_status(self, task_id: str) -> TaskStatus | None:
        """The task's status, or None when the current plan has no such task (no copy made)."""
        task = self._tasks.get(task_id)
        return task.status if task is not None else None

    def frees_a_task(self, task_id: str) -> bool:
        """Whether ``task_id`` finishing makes a pending task ready: one that depends on it and on nothing
        else still open (no copy made: the dispatcher asks at every landing)."""
        for child_id in self._children.get(task_id, ()):
            child = self._tasks.get(child_id)
            if child is None or child.status != "pending":
                continue
            if all(dep == task_id or self.get_task_status(dep) in DONE_STATUSES for dep in child.depends_on):
                return True
        return False

    def slices_of(self, task_id: str) -> list[str]:
        """The ids of the slices ``task_id`` was split into, in plan order (none: it was never sliced)."""
        return list(self._slices.get(task_id, ()))

    def count_with_status(self, *statuses: TaskStatus) -> int:
        """How many tasks are currently in any of ``statuses`` (distinct statuses: each task counts once)."""
        self._require_plan()
        return sum(len(self._by_status.get(status, ())) for status in set(statuses))

    def task_ids_with_status(self, *statuses: TaskStatus) -> list[str]:
        """Ids of the tasks currently in any of ``statuses``, in plan order (no copies made)."""
        self._require_plan()
        found = set().union(*(self._by_status.get(status, ()) for status in statuses))
        return sorted(found, key=self._position.__getitem__)

    def landed_commits(self) -> Mapping[str, str]:
        """``{task id: commit}`` of every task recorded as landed, as now: kept up to date by the replay.
        Read-only, and the same object until a commit is recorded or withdrawn, so that a caller may
        remember what it already looked at by identity."""
        if self._landed_copy is None:
            self._landed_copy = MappingProxyType(dict(self._landed))
        return self._landed_copy

    def tasks(self) -> list[Task]:
        """Copies of every task in plan order."""
        return [task.detached_copy() for task in self._require_plan().iter_tasks()]

    @property
    def cost_usd_total(self) -> float:
        """Dollars spent on agent calls for the current plan, as recorded in the ledger (survives resume)."""
        return self._state.cost_usd_total

    @property
    def plan_approved(self) -> bool:
        return self._state.plan_approved

    @property
    def baseline(self) -> BaselineRecord | None:
        """The base commit's gate results the last execute phase started from, if recorded."""
        return self._state.baseline.model_copy(deep=True) if self._state.baseline else None

    @property
    def estimated_cost_usd(self) -> float:
        """The part of ``cost_usd_total`` AutoDev estimated from token counts (no cost reported)."""
        return sum(usage.estimated_cost_usd for usage in self._state.usage_by_task.values())

    @property
    def unknown_cost_calls(self) -> int:
        """Agent calls of the current plan whose cost nobody knows (counted apart, never as $0)."""
        return self._state.unknown_cost_calls

    def usage_entries(self) -> Iterator[LedgerEntry]:
        """The current plan's ``usage_recorded`` entries (its budget period), in ledger order: one per
        agent call, with everything ``record_usage`` kept of it."""
        for entry in self._ledger.entries(after_seq=self._state.budget_since_seq):
            if entry.op == "usage_recorded":
                yield entry

    def cost_usd_for(self, task_id: str) -> float:
        return self._state.cost_usd_by_task.get(task_id, 0.0)

    def usage_for(self, task_id: str) -> TaskUsageRecord:
        """Agent calls, tool calls and seconds recorded for ``task_id`` (zeros when none)."""
        usage = self._state.usage_by_task.get(task_id)
        return usage.model_copy() if usage is not None else TaskUsageRecord()

    def evidence_for(self, task_id: str) -> list[EvidenceRef]:
        return [ref.model_copy() for ref in self._state.evidence.get(task_id, [])]

    def next_pending_tasks(
        self,
        limit: int,
        in_flight: Collection[str] = (),
        *,
        phase_id: str | None = None,
        scheduler: TaskScheduler | None = None,
    ) -> list[Task]:
        """Up to ``limit`` pending tasks that may start now, in the order ``scheduler`` offers them (plan
        order by default; ``autodev.state.scheduling``).

        A task is ready when every dependency is complete or skipped, and its ``files`` overlap neither an
        in-flight task's files nor those of a task picked earlier in the same call. ``phase_id`` limits the
        choice to one phase (the per-phase dispatcher).
        """
        busy_files: set[str] = set()
        for task_id in in_flight:
            busy_files.update(self._task(task_id).files)
        picked: list[Task] = []
        offered, first = self._offered_from_first_pending(scheduler or _PLAN_ORDER)
        for position in range(first, len(offered)):
            task = offered[position]
            if len(picked) >= limit:
                break
            if task.status != "pending" or task.id in in_flight:
                continue
            if phase_id is not None and task.phase_id != phase_id:
                continue
            if any(self._tasks[dep].status not in DONE_STATUSES for dep in task.depends_on):
                continue
            if busy_files.intersection(task.files):
                continue
            busy_files.update(task.files)
            picked.append(task.detached_copy())
        return picked

    def _offered_from_first_pending(self, scheduler: TaskScheduler) -> tuple[Sequence[Task], int]:
        """``scheduler``'s order of the plan's tasks, and a position in it before which no task is pending.

        For an order that does not follow the statuses, the order is kept and so is that position, moved on
        past the tasks found started or finished: a run then looks at each task a bounded number of times
        instead of at the whole plan after every task (quadratic in the plan's size)."""
        plan = self._require_plan()
        if scheduler.follows_statuses:
            return scheduler.order(plan.iter_tasks(), self._children), 0
        kept = self._offered
        if kept is None or kept.scheduler is not scheduler or kept.children is not self._children:
            tasks = scheduler.order(plan.iter_tasks(), self._children)
            kept = self._offered = _OfferedOrder(scheduler, self._children, tasks, 0, self._requeued)
        elif kept.requeued != self._requeued:
            kept.settled, kept.requeued = 0, self._requeued
        while kept.settled < len(kept.tasks) and kept.tasks[kept.settled].status != "pending":
            kept.settled += 1
        return kept.tasks, kept.settled

    def speculable_candidate(self, parent_id: str, in_flight: Collection[str]) -> Task | None:
        """The one child that may start before ``parent_id`` finishes, or None.

        The parent must be in flight on its first attempt; the child must be pending, depend on the parent
        alone (no diamonds), and touch no file of any in-flight task. The first such child in pick order.
        """
        parent = self._task(parent_id)
        if parent.status in TERMINAL_STATUSES or parent.status == "pending" or parent.retry_count != 0:
            return None
        busy_files: set[str] = set()
        for task_id in in_flight:
            busy_files.update(self._task(task_id).files)
        children = set(self._children.get(parent_id, ()))
        for task in self._require_plan().iter_tasks():
            if task.id not in children or task.id in in_flight or task.status != "pending":
                continue
            if task.depends_on == [parent_id] and not busy_files.intersection(task.files):
                return task.detached_copy()
        return None

    def phase(self, phase_id: str) -> Phase:
        """A copy of one phase (its tasks included)."""
        return self._phase(phase_id).model_copy(deep=True)

    def phase_progress(self) -> list[PhaseProgress]:
        """Per phase, in plan order: whether every task is terminal, and its recorded range (no copies of
        the plan: the dispatcher asks after every task)."""
        return [
            PhaseProgress(
                phase.id,
                self._open_in_phase[phase.id] == 0,
                phase.baseline_commit,
                phase.end_checkpoint_commit,
            )
            for phase in self._require_plan().phases
        ]

    def status(self) -> dict[str, Any]:
        """The JSON object of ``autodev status --json``."""
        status = status_from_state(self._state.model_dump(mode="json", exclude={"evidence"}))
        status["waiting_for"] = waiting_for(self.paths)
        return status

    # --- changes ------------------------------------------------------------------------------------

    def init_plan(
        self,
        plan: Plan,
        *,
        session_id: str | None = None,
        replace: bool = False,
        write_scope: ScopeDeclaration | None = None,
    ) -> Plan:
        """Save ``plan`` as the current plan (all tasks as given, normally pending).

        ``write_scope`` is the scope the user declared with it (the intent's or the plan file's
        ``Write scope:`` line); a new plan starts a new run, so earlier declarations and approvals end.

        Replacing a plan on which work was recorded needs ``replace=True``: the old plan stays in the ledger
        history, but the new one becomes current. When a plan phase produced the plan, what it cost stays
        in the new plan's budget; a hand-written plan starts a budget period at zero.
        """
        validate_plan(plan)
        if not plan.content_hash:
            plan = plan.model_copy(update={"content_hash": plan_content_hash(plan)})
        with self._locked():
            current = self._state.plan
            if current is not None and not replace:
                started = [t.id for t in current.iter_tasks() if t.status != "pending"]
                if started:
                    raise PlanExistsError(
                        f"plan {current.plan_id} already has work recorded on tasks "
                        f"{', '.join(started[:5])}{'...' if len(started) > 5 else ''}; "
                        "pass --replace to start over with the new plan"
                    )
            payload: dict[str, Any] = {"plan": plan.model_dump(mode="json"), "session_id": session_id}
            if write_scope is not None:
                payload["write_scope"] = write_scope.model_dump(mode="json")
            self._append("plan_init", payload)
            self._write_snapshot()
        _log.info("plan.saved", plan_id=plan.plan_id, tasks=len(self._tasks))
        return self.plan

    def record_session(self, session_id: str) -> None:
        """Record which run is driving the plan now (shown by ``autodev status``); once per session."""
        with self._locked():
            if self._state.session_id != session_id:
                self._append("session_started", {"session_id": session_id})

    def update_task_status(
        self,
        task_id: str,
        status: TaskStatus,
        *,
        reason: str | None = None,
        base_commit: str | None = None,
        commit: str | None = None,
        worktree: str | None = None,
        checked_tree: str | None = None,
        result: ResultRecord | None = None,
    ) -> Task:
        """Move a task along ``TASK_TRANSITIONS``.

        ``reason`` is kept as ``blocked_reason`` when blocking; ``base_commit`` records the commit a developer
        starts from, ``commit`` the commit that completed the task, ``worktree`` the isolated worktree the
        task works in (cleared when the task reaches a terminal status), ``checked_tree`` the git tree its
        final checks saw (what its commit must hold), ``result`` the accepted result of a completed task
        (its id becomes this entry's: ``E<seq>``).
        """
        with self._locked():
            task = self._task(task_id)
            assert_transition(task.status, status, task_id=task_id)
            payload: dict[str, Any] = {"task_id": task_id, "from": task.status, "to": status}
            if reason is not None:
                payload["reason"] = reason
            if base_commit is not None:
                payload["base_commit"] = base_commit
            if commit is not None:
                payload["commit"] = commit
            if worktree is not None:
                payload["worktree"] = worktree
            if checked_tree is not None:
                payload["checked_tree"] = checked_tree
            if result is not None and status == "complete":
                payload["result"] = result.model_dump(mode="json", exclude={"id", "task_id"})
            self._append("task_status", payload)
            return task.detached_copy()

    def mark_task_retry(
        self,
        task_id: str,
        issues: Sequence[str] = (),
        *,
        back_to_developer: bool = False,
        base_commit: str | None = None,
        issues_for: str | None = None,
    ) -> int:
        """Count one more failed attempt and keep its concrete failures for the next one; new count.

        With ``back_to_developer`` the same ledger op also moves the task to ``in_progress``, so a crash can
        never leave a counted retry without the status change that goes with it (or the reverse).
        ``base_commit`` moves the task to a new base (an isolated task retried after a merge conflict).
        ``issues_for`` names the role whose own step is retried (the failures are its own, not the
        developer's); the task then stays where it is.
        """
        with self._locked():
            task = self._task(task_id)
            payload: dict[str, Any] = {
                "task_id": task_id,
                "retry_count": task.retry_count + 1,
                "issues": list(issues),
            }
            if back_to_developer:
                assert_transition(task.status, "in_progress", task_id=task_id)
                payload["from"] = task.status
                payload["to"] = "in_progress"
            if base_commit is not None:
                payload["base_commit"] = base_commit
            if issues_for is not None:
                payload["issues_for"] = issues_for
            self._append("task_retry", payload)
            return task.retry_count

    def mark_escalated(self, task_id: str, reason: str) -> Task:
        """Flag a task as escalated to the critic (it is blocked separately, with the critic's reason)."""
        with self._locked():
            task = self._task(task_id)
            self._append("task_escalated", {"task_id": task_id, "reason": reason})
            return task.detached_copy()

    def revert_task_to_pending(self, task_id: str, reason: str) -> Task:
        """Re-queue a task as pending with a fresh retry budget: the one sanctioned bypass of the FSM.

        Used to roll back a speculatively started task, to re-queue a task whose worktree was lost, and to
        slice afresh a slice job that `autodev retry` sent back. Idempotent: a task that is already pending
        with nothing to reset records nothing. Complete or skipped tasks are never reverted.
        """
        with self._locked():
            task = self._task(task_id)
            if task.status == "pending" and task.retry_count == 0 and not task.escalated:
                return task.detached_copy()
            if task.status not in _REVERTIBLE:
                raise StateError(f"task {task_id} is {task.status}; only unfinished tasks can be re-queued")
            self._append("task_reverted", {"task_id": task_id, "from": task.status, "reason": reason})
            return task.detached_copy()

    def retry_blocked(self, task_id: str, *, reset_attempts: bool = False, retry_limit: int) -> list[str]:
        """Send a blocked task back to work (``autodev retry``): ``blocked → in_progress``, one ledger op.

        The task starts anew from the branch as it is then (its base is recorded when it starts), keeping
        its last failures for the developer; its usage counters start again. It keeps its attempt count
        unless ``reset_attempts``, but always gets at least one more attempt below ``retry_limit``. The
        tasks blocked because of it go back to pending. Refused with a one-line reason for a task that is
        not blocked, that is blocked because of another task, or that still waits for a dependency.
        Returns the ids of the dependents put back to pending.
        """
        with self._locked():
            task = self._task(task_id)
            if task.status != "blocked":
                raise InvalidTransitionError(
                    task_id,
                    task.status,
                    "in_progress",
                    sorted(TASK_TRANSITIONS.get(task.status, ())),
                    hint="only a blocked task can be retried",
                )
            if task.blocked_by is not None:
                raise AutodevError(
                    f"task {task_id} is blocked because task {task.blocked_by} is; retry {task.blocked_by} "
                    "(the tasks blocked because of it come back with it)"
                )
            waiting = [dep for dep in task.depends_on if self._tasks[dep].status not in DONE_STATUSES]
            if waiting:
                raise AutodevError(
                    f"task {task_id} depends on unfinished task(s) {', '.join(waiting)}; finish or retry "
                    "those first"
                )
            count = 0 if reset_attempts else min(task.retry_count, max(retry_limit - 1, 0))
            order = {t.id: index for index, t in enumerate(self._require_plan().iter_tasks())}
            dependents = sorted(
                (t.id for t in self._tasks.values() if t.status == "blocked" and t.blocked_by == task_id),
                key=order.__getitem__,
            )
            self._append(
                "task_retried",
                {
                    "task_id": task_id,
                    "from": "blocked",
                    "to": "in_progress",
                    "retry_count": count,
                    "unblocked": dependents,
                },
            )
            return dependents

    def skip_task(self, task_id: str, *, satisfies_dependents: bool = True) -> list[str]:
        """Skip a pending task (``autodev skip``): ``pending → skipped``. Unless the configuration lets a
        skipped dependency satisfy the tasks that depend on it, they are blocked (one more op). Returns the
        ids so blocked."""
        with self._locked():
            task = self._task(task_id)
            if task.status != "pending":
                hint = (
                    "a blocked task can be retried (`autodev retry`), not skipped"
                    if task.status == "blocked"
                    else "only a pending task can be skipped"
                )
                raise InvalidTransitionError(
                    task_id, task.status, "skipped", sorted(TASK_TRANSITIONS.get(task.status, ())), hint=hint
                )
            self._append("task_status", {"task_id": task_id, "from": "pending", "to": "skipped"})
            if satisfies_dependents:
                return []
            return self.mark_blocked_descendants(task_id, "it was skipped", verb="was skipped")

    def set_task_model(
        self, task_id: str, model: ModelTier | None, *, reason: str = "", by: str = "user"
    ) -> Task:
        """Give ``task_id`` another Model level (None: the default, strong): ``autodev task set --model``,
        or a developer's ``ESCALATE`` (``by``), with why. A finished task's level no longer matters and is
        refused."""
        with self._locked():
            task = self._task(task_id)
            if task.status in DONE_STATUSES:
                raise AutodevError(
                    f"task {task_id} is {task.status}: its Model no longer matters; set it on an "
                    "unfinished task"
                )
            self._append(
                "task_model_set",
                {"task_id": task_id, "model": model, "from": task.model, "by": by, "reason": reason[:500]},
            )
            return task.detached_copy()

    def add_tasks(
        self, tasks: Sequence[Task], *, phase_id: str, parent: str | None = None, by: str, reason: str
    ) -> list[str]:
        """Add pending ``tasks`` to ``phase_id`` through the ledger; their ids in plan order.

        With ``parent`` they are its slices (an architect split it): placed before it, they carry its id in
        ``parent`` and it waits on them (its ``depends_on`` gains them), so it can neither start nor be
        sliced again while one is open. Otherwise they go to the end of the phase. Ids must be new to the
        plan (ids are never reused); dependencies name tasks of the plan or of ``tasks``, and the plan stays
        acyclic (``PlanParseError`` otherwise, the ledger untouched).
        """
        with self._locked():
            plan = self._require_plan()
            if parent is not None:
                owner = self._task(parent)
                if owner.status != "pending":
                    raise AutodevError(f"task {parent} is {owner.status}: only a pending task can be sliced")
                if owner.phase_id != phase_id:
                    raise StateError(f"the slices of task {parent} belong to its phase {owner.phase_id}")
            self._phase(phase_id)
            added = [
                task.model_copy(update={"phase_id": phase_id, "parent": parent, "status": "pending"})
                for task in tasks
            ]
            trial = plan.model_copy(deep=True)
            _insert_tasks(trial, added, phase_id=phase_id, parent=parent)
            validate_plan(trial, source=f"tasks added by {by}")
            self._append(
                "tasks_added",
                {
                    "phase_id": phase_id,
                    "parent": parent,
                    "tasks": [task.model_dump(mode="json") for task in added],
                    "by": by,
                    "reason": reason[:500],
                },
            )
            return [task.id for task in added]

    def complete_sliced(self, task_id: str) -> Task:
        """Record ``task_id`` complete because every one of its slices is done: a sliced task has no change
        of its own, its work is its slices' commits. Refused while a slice is unfinished."""
        with self._locked():
            task = self._task(task_id)
            slices = self._slices.get(task_id, [])
            if task.status != "pending" or not slices:
                raise AutodevError(
                    f"task {task_id} is {task.status} and not a sliced task waiting on its slices"
                )
            open_slices = [
                slice_id for slice_id in slices if self._tasks[slice_id].status not in DONE_STATUSES
            ]
            if open_slices:
                raise AutodevError(
                    f"task {task_id} still has slices that are not done: {', '.join(open_slices)}"
                )
            self._append("slices_done", {"task_id": task_id, "slices": slices})
            return task.detached_copy()

    def mark_blocked_descendants(self, task_id: str, reason: str, *, verb: str = "is blocked") -> list[str]:
        """Block every unfinished task that depends, directly or not, on ``task_id``; one ledger op.

        Returns the ids newly blocked, in plan order.
        """
        with self._locked():
            self._task(task_id)
            seen = self.descendants([task_id])
            order = {task.id: index for index, task in enumerate(self._require_plan().iter_tasks())}
            blocked = [
                {"id": tid, "from": self._tasks[tid].status}
                for tid in sorted(seen, key=order.__getitem__)
                if self._tasks[tid].status not in TERMINAL_STATUSES
            ]
            if blocked:
                self._append(
                    "tasks_blocked",
                    {
                        "cause": task_id,
                        "reason": f"dependency {task_id} {verb}: {reason}",
                        "tasks": blocked,
                    },
                )
            return [item["id"] for item in blocked]

    def record_evidence(self, evidence: Evidence) -> Path:
        """Write the evidence file atomically, then record its path and hash in the ledger."""
        if evidence.task_id != "plan":
            self._task(evidence.task_id)
        target = self.paths.evidence_file(evidence.task_id, evidence.kind, evidence.attempt)
        with self._locked(), _recorded_version_kept(target):
            written = write_evidence(self.paths, evidence)
            payload: dict[str, Any] = {
                "task_id": evidence.task_id,
                "kind": evidence.kind,
                "attempt": evidence.attempt,
                "path": self._relative(written.path),
                "sha256": written.sha256,
            }
            summary = _repository_summary(evidence)
            if summary is not None:
                payload["summary"] = summary
            self._append("evidence_recorded", payload, durable=False)
            return written.path

    def record_patch(self, task_id: str, diff: str, *, attempt: int = 1, developer: bool = False) -> Path:
        """Write ``evidence/<task>.patch`` (the committed change) or, with ``developer``, the developer's
        own ``evidence/<task>.developer.patch``, and record it in the ledger."""
        self._task(task_id)
        target = self.paths.patch_file(task_id, developer=developer)
        with self._locked(), _recorded_version_kept(target):
            written = write_patch(self.paths, task_id, diff, developer=developer)
            self._append(
                "evidence_recorded",
                {
                    "task_id": task_id,
                    "kind": "developer_patch" if developer else "patch",
                    "attempt": attempt,
                    "path": self._relative(written.path),
                    "sha256": written.sha256,
                },
                durable=False,
            )
            return written.path

    def record_cost(self, task_id: str, role: str, cost_usd: float) -> float:
        """Add one agent call's cost to the plan's running total; returns the new total."""
        if not math.isfinite(cost_usd) or cost_usd < 0:
            raise StateError(f"cost must be a finite, non-negative number of dollars (got {cost_usd})")
        with self._locked():
            self._append("cost_recorded", {"task_id": task_id, "role": role, "cost_usd": cost_usd})
            return self._state.cost_usd_total

    def record_usage(
        self,
        task_id: str,
        role: str,
        *,
        tool_calls: int,
        seconds: float,
        cost_usd: float | None,
        call: CallUsage | None = None,
    ) -> float:
        """Record one agent call: its tool calls, the task's seconds since the last record, its cost (None:
        unknown), and with ``call`` its phase, step, model, tokens and duration. One op, so a limit read
        back after a crash is exactly what was used, and ``autodev cost`` reads every call from the ledger.
        The new cost total."""
        if tool_calls < 0 or not math.isfinite(seconds) or seconds < 0:
            raise StateError(f"usage must not be negative (tool_calls={tool_calls}, seconds={seconds})")
        if cost_usd is not None and (not math.isfinite(cost_usd) or cost_usd < 0):
            raise StateError(f"cost must be a finite, non-negative number of dollars (got {cost_usd})")
        payload: dict[str, Any] = {
            "task_id": task_id,
            "role": role,
            "tool_calls": tool_calls,
            "seconds": round(seconds, 3),
        }
        if cost_usd is not None:
            payload["cost_usd"] = cost_usd
        if call is not None:
            payload |= _call_fields(call)
        with self._locked():
            self._append("usage_recorded", payload)
            return self._state.cost_usd_total

    def approve_plan(self) -> None:
        """Record the user's approval of the current plan (``autodev approve``); idempotent."""
        with self._locked():
            plan = self._require_plan()
            if not self._state.plan_approved:
                self._append("plan_approved", {"plan_id": plan.plan_id})

    @property
    def plan_phase(self) -> PlanPhaseProgress | None:
        """The plan phase under way, if any (cleared when its plan is saved)."""
        return self._state.plan_phase.model_copy(deep=True) if self._state.plan_phase else None

    def start_plan_phase(self, spec_hash: str, *, require_approval: bool = False) -> None:
        """Begin a plan phase for ``spec_hash``: a new budget period; no-op if it is already under way.

        ``require_approval`` is remembered with the phase, so a plan phase resumed later still produces a
        plan that waits for ``autodev approve``.
        """
        with self._locked():
            current = self._state.plan_phase
            if current is None or current.spec_hash != spec_hash:
                payload: dict[str, Any] = {"spec_hash": spec_hash}
                if require_approval:
                    payload["require_approval"] = True
                self._append("plan_phase_started", payload)

    def record_plan_step(self, role: str, evidence_path: Path) -> None:
        """Mark a plan-phase agent step done; its evidence file (already recorded) holds the output."""
        with self._locked():
            progress = self._state.plan_phase
            if progress is None:
                raise StateError("no plan phase is under way; start one with start_plan_phase")
            ref = next(
                (r for r in self._state.evidence.get("plan", []) if r.path == self._relative(evidence_path)),
                None,
            )
            if ref is None:
                raise StateError(f"{evidence_path} was not recorded as evidence; record it first")
            self._append(
                "plan_step_done",
                {"spec_hash": progress.spec_hash, "role": role, "path": ref.path, "sha256": ref.sha256},
            )

    def drop_plan_steps(self, steps: Sequence[str]) -> None:
        """Forget recorded plan-phase steps whose output was rejected, so that the next plan phase of the
        same intent asks for them again instead of reusing what failed; steps not recorded are ignored."""
        with self._locked():
            progress = self._state.plan_phase
            if progress is None:
                raise StateError("no plan phase is under way; start one with start_plan_phase")
            recorded = [step for step in steps if step in progress.steps]
            if recorded:
                self._append("plan_steps_dropped", {"spec_hash": progress.spec_hash, "steps": recorded})

    def record_phase_baseline(self, phase_id: str, commit: str) -> bool:
        """Record the commit a phase started from (its review range begins there); once per phase."""
        with self._locked():
            if self._phase(phase_id).baseline_commit is not None:
                return False
            self._append("phase_baseline", {"phase_id": phase_id, "commit": commit})
            return True

    def record_phase_checkpoint(self, phase_id: str, commit: str) -> bool:
        """Record the commit at which every task of a phase was terminal (its review range ends there).

        Once per phase: later commits of other phases never move it. Returns whether it was recorded now.
        """
        with self._locked():
            phase = self._phase(phase_id)
            if phase.end_checkpoint_commit is not None:
                return False
            unfinished = [t.id for t in phase.tasks if t.status not in TERMINAL_STATUSES]
            if unfinished:
                raise StateError(f"phase {phase_id} still has unfinished tasks: {', '.join(unfinished)}")
            self._append("phase_checkpoint", {"phase_id": phase_id, "commit": commit})
            return True

    def record_baseline(self, record: BaselineRecord) -> bool:
        """Record the base commit's gate results (pre-existing failures); once per commit and settings."""
        with self._locked():
            current = self._state.baseline
            if current is not None and (current.commit, current.tree, current.key) == (
                record.commit,
                record.tree,
                record.key,
            ):
                return False
            self._append("baseline_recorded", record.model_dump(mode="json"))
            return True

    def record_event(self, op: str, payload: dict[str, Any]) -> None:
        """Append an audit-only op (tournament results, speculative bookkeeping, notes)."""
        if op not in _AUDIT_OPS:
            raise StateError(f"{op!r} is not an audit op; allowed: {', '.join(sorted(_AUDIT_OPS))}")
        with self._locked():
            self._append(op, payload)

    # --- the delegation policy's records ---------------------------------------------------------------

    @property
    def write_scopes(self) -> list[ScopeDeclaration]:
        """The write scopes the user declared for the current plan, in order."""
        return list(self._state.write_scopes)

    @property
    def approvals(self) -> list[ApprovalRecord]:
        """Every approval request of the current plan, oldest first."""
        return list(self._state.approvals.values())

    @property
    def workers(self) -> dict[str, WorkerGrant]:
        """The write workers that hold a grant, by task id."""
        return dict(self._state.workers)

    def declare_write_scope(self, source: ScopeSource, patterns: Sequence[str]) -> bool:
        """Record a scope the user declared for the current plan; False when that one is recorded already."""
        with self._locked():
            self._require_plan()
            if any(d.source == source and d.patterns == list(patterns) for d in self._state.write_scopes):
                return False
            self._append("write_scope_declared", {"source": source, "patterns": list(patterns)})
            return True

    def request_approval(
        self, scope: Sequence[str], task_ids: Sequence[str], reason: str, remediation: str
    ) -> ApprovalRecord:
        """The approval request for ``scope`` in this run: the one recorded already (with ``task_ids``
        added while it is pending), or a new one. One request per run and scope."""
        with self._locked():
            self._require_plan()
            wanted = sorted(dict.fromkeys(scope))
            for record in self._state.approvals.values():
                if sorted(record.scope) == wanted:
                    added = [task_id for task_id in task_ids if task_id not in record.task_ids]
                    if added and record.status == "pending":
                        payload = {**record.model_dump(mode="json"), "task_ids": [*record.task_ids, *added]}
                        self._append("approval_requested", payload)
                    return self._state.approvals[record.id]
            approval_id = f"A{len(self._state.approvals) + 1}"
            self._append(
                "approval_requested",
                {
                    "id": approval_id,
                    "scope": wanted,
                    "task_ids": list(dict.fromkeys(task_ids)),
                    "reason": reason,
                    "remediation": remediation,
                },
            )
            return self._state.approvals[approval_id]

    def resolve_approval(self, approval_id: str, *, accepted: bool) -> ApprovalRecord:
        """Accept or decline a pending request (``StateError`` for an unknown id or one answered already)."""
        with self._locked():
            record = self._state.approvals.get(approval_id)
            if record is None:
                known = ", ".join(self._state.approvals) or "none"
                raise StateError(
                    f"there is no approval request {approval_id!r} (requests: {known}); "
                    "see `autodev approvals`"
                )
            if record.status != "pending":
                raise StateError(
                    f"approval request {approval_id} was {record.status} already; it cannot be answered again"
                )
            self._append(
                "approval_resolved", {"id": approval_id, "accepted": accepted, "scope": record.scope}
            )
            if record.waiting_since is not None:
                self._append("approval_waiting", {"id": approval_id, "waiting": False})
            self._release_from_human(approval_id, "accepted" if accepted else "declined")
            return self._state.approvals[approval_id]

    def waive_check(self, task_id: str, check: str, revision: str, reason: str) -> None:
        """Record the user's waiver of ``check`` for ``task_id`` at exactly ``revision`` (a tree id)."""
        if not reason.strip():
            raise StateError('a waiver needs a reason: --reason "why this check may be skipped"')
        with self._locked():
            self._task(task_id)
            payload = {
                "task_id": task_id,
                "check": check,
                "revision": revision,
                "reason": reason.strip()[:500],
            }
            self._append("check_waived", payload)

    def waived_checks(self, task_id: str, revision: str) -> frozenset[str]:
        """The checks of ``task_id`` waived for ``revision`` (a waiver of another revision does not count)."""
        return frozenset(
            waiver["check"]
            for waiver in self._state.waivers.get(task_id, [])
            if waiver["revision"] == revision
        )

    def hold_for_adoption(
        self, task_id: str, commit: str, *, base: str | None, worktree: str | None, reason: str
    ) -> bool:
        """Record that ``task_id``'s verified change, ``commit``, waits to be adopted, and why; nothing
        when that is what is recorded already. Whether it was recorded."""
        with self._locked():
            task = self._task(task_id)
            if task.status in TERMINAL_STATUSES:
                raise StateError(f"task {task_id} is {task.status}: nothing of it can wait for adoption")
            known = self._state.adoptions.get(task_id)
            if (
                known is not None
                and known.state == "pending_adoption"
                and (known.commit, known.reason) == (commit, reason)
            ):
                return False
            payload = {
                "task_id": task_id,
                "commit": commit,
                "base": base,
                "worktree": worktree,
                "reason": reason,
            }
            self._append("adoption_pending", payload)
            return True

    def record_node(self, task_id: str, node: str) -> None:
        """Record that ``task_id``'s flow runs on cluster node ``node`` (once per change of node)."""
        self._task(task_id)
        with self._locked():
            if self._state.nodes.get(task_id) != node:
                self._append("task_node", {"task_id": task_id, "node": node})

    def node_of(self, task_id: str) -> str | None:
        """The cluster node ``task_id``'s flow last ran on; None when it ran here."""
        return self._state.nodes.get(task_id)

    def adoption(self, task_id: str) -> AdoptionRecord | None:
        """The adoption record of ``task_id`` (None when its change never waited for adoption)."""
        record = self._state.adoptions.get(task_id)
        return record.model_copy() if record is not None else None

    def adoption_pending(self, task_id: str) -> bool:
        """Whether ``task_id``'s verified change waits to be adopted."""
        record = self._state.adoptions.get(task_id)
        return record is not None and record.state == "pending_adoption"

    def pending_adoptions(self) -> list[AdoptionRecord]:
        """Every change that waits to be adopted, in the order they started waiting."""
        return [r.model_copy() for r in self._state.adoptions.values() if r.state == "pending_adoption"]

    def record_base_check(self, check: dict[str, Any], *, accepted: bool = False) -> bool:
        """Record a check of the checkout against its base; nothing when it says what the last one said
        (so a warning is given once per run and base commit). Whether it was recorded."""
        with self._locked():
            self._require_plan()
            last = self._state.base_check
            keys = ("ref", "ref_commit", "ahead", "behind", "stale")
            commit = check.get("ref_commit")
            known = commit in self._state.stale_bases_accepted
            if (
                last is not None
                and all(last.get(k) == check.get(k) for k in keys)
                and (known or not accepted)
            ):
                return False
            self._append("base_checked", {"check": check, "accepted": accepted})
            return True

    def recent_results(self, limit: int) -> list[ResultRecord]:
        """The plan's ``limit`` most recently accepted results, oldest first."""
        return [record.model_copy() for record in self._state.results[-limit:]] if limit > 0 else []

    def result_record(self, record_id: str) -> ResultRecord | None:
        """The plan's accepted result with this id (``E<seq>``), or None."""
        found = next((record for record in self._state.results if record.id == record_id), None)
        return found.model_copy() if found is not None else None

    @property
    def base_check(self) -> dict[str, Any] | None:
        """The newest check of the checkout against its base ref, with ``checked_at``; None before any."""
        return dict(self._state.base_check) if self._state.base_check is not None else None

    def stale_base_accepted(self, ref_commit: str | None) -> bool:
        """Whether the user chose to build on a checkout behind ``ref_commit`` in this run."""
        return ref_commit is not None and ref_commit in self._state.stale_bases_accepted

    def mark_waiting(self, approval_ids: Iterable[str], *, waiting: bool) -> None:
        """A live run starts (``waiting``) or stops waiting for the answer to these pending requests:
        ``waiting_since`` moves either way (one op per request whose state changes); nothing to change
        takes no lock."""
        approval_ids = [
            approval_id
            for approval_id in dict.fromkeys(approval_ids)
            if (record := self._state.approvals.get(approval_id)) is not None and record.status == "pending"
        ]
        if not approval_ids:
            return
        with self._locked():
            for approval_id in dict.fromkeys(approval_ids):
                record = self._state.approvals.get(approval_id)
                if (
                    record is None
                    or record.status != "pending"
                    or (record.waiting_since is not None) == waiting
                ):
                    continue
                self._append("approval_waiting", {"id": approval_id, "waiting": waiting})

    def block_on_human(self, approval_id: str, waiting_task_ids: Iterable[str]) -> list[str]:
        """Hold every pending task that depends, directly or not, on one of ``waiting_task_ids`` (the tasks
        waiting for request ``approval_id``) and is not held already; one op. The ids held, in plan order."""
        with self._locked():
            seen = self.descendants(waiting_task_ids)
            # A dependent that waits for a request itself is not held: it is one of the waiting.
            waiting = {
                task_id
                for record in self._state.approvals.values()
                if record.status == "pending"
                for task_id in record.task_ids
            }
            order = {task.id: index for index, task in enumerate(self._require_plan().iter_tasks())}
            held = [
                task_id
                for task_id in sorted(seen, key=order.__getitem__)
                if self._tasks[task_id].status == "pending"
                and task_id not in self._state.blocked_on_human
                and task_id not in waiting
            ]
            if held:
                self._append("tasks_blocked_on_human", {"approval_id": approval_id, "tasks": held})
            return held

    def descendants(self, task_ids: Iterable[str]) -> set[str]:
        """Every task that depends, directly or not, on one of ``task_ids``."""
        seen: set[str] = set()
        frontier = list(task_ids)
        while frontier:
            current = frontier.pop()
            for child in self._children.get(current, ()):
                if child not in seen:
                    seen.add(child)
                    frontier.append(child)
        return seen

    def release_from_human(self, approval_id: str, resolution: HumanRelease) -> list[str]:
        """Release the tasks held for request ``approval_id`` (answered, or its wait past its deadline);
        one op recording how long each was held. The ids released."""
        with self._locked():
            return self._release_from_human(approval_id, resolution)

    def _release_from_human(self, approval_id: str, resolution: HumanRelease) -> list[str]:
        held = [block for block in self._state.blocked_on_human.values() if block.approval_id == approval_id]
        if not held:
            return []
        now = datetime.now(UTC)
        tasks = [
            {"id": block.task_id, "blocked_s": round(_seconds_between(block.since, now), 3)} for block in held
        ]
        self._append(
            "tasks_released_by_human", {"approval_id": approval_id, "resolution": resolution, "tasks": tasks}
        )
        return [block.task_id for block in held]

    @property
    def blocked_on_human(self) -> dict[str, HumanBlock]:
        """``{task id: its hold}`` for the pending tasks held while an approval is unanswered."""
        return dict(self._state.blocked_on_human)

    def human_blocked_seconds(self, task_id: str) -> float:
        """The seconds ``task_id`` has been held for approvals, its current hold included."""
        total = self._state.human_blocked_s.get(task_id, 0.0)
        block = self._state.blocked_on_human.get(task_id)
        if block is not None:
            total += _seconds_between(block.since, datetime.now(UTC))
        return total

    def record_decision(
        self,
        snapshot: dict[str, Any],
        decision: dict[str, Any],
        grant: WorkerGrant | None = None,
        *,
        route: dict[str, Any] | None = None,
    ) -> None:
        """Log one delegation decision with the inputs it was made from; a ``spawn`` carries its grant, a
        routed call the router's record (``autodev.policy.router``)."""
        payload: dict[str, Any] = {"inputs": snapshot, "decision": decision}
        if grant is not None:
            payload["grant"] = grant.model_dump(mode="json")
        if route is not None:
            payload["route"] = route
        with self._locked():
            self._append("delegation_decided", payload, durable=False)

    @property
    def automatic_retries_used(self) -> int:
        """Automatic retries the delegation policy granted in this plan's run."""
        return self._state.automatic_retries_used

    def grant_automatic_retry(self, task_id: str, tier: ModelTier, reason: str) -> Task:
        """Give a task that used up its attempts one more at ``tier`` (strictly above its own), counted
        against the run's automatic retries; one ledger op."""
        with self._locked():
            task = self._task(task_id)
            current = task.model or DEFAULT_TASK_TIER
            if MODEL_TIERS.index(tier) <= MODEL_TIERS.index(current):
                raise StateError(f"task {task_id} is at {current}: an automatic retry only goes higher")
            if task.status in TERMINAL_STATUSES:
                raise StateError(f"task {task_id} is {task.status}: it cannot be retried automatically")
            payload: dict[str, Any] = {"task_id": task_id, "model": tier, "reason": reason[:500]}
            if task.last_issues_for is None and task.status != "in_progress":
                # The last attempt's failure stopped where it happened (the critic would have been next):
                # the new attempt starts with the developer, as every developer retry does.
                assert_transition(task.status, "in_progress", task_id=task_id)
                payload["from"] = task.status
                payload["to"] = "in_progress"
            self._append("automatic_retry_granted", payload)
            return self._task(task_id).detached_copy()

    # --- serving a remote worker (``autodev.state.relay``) -------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the ledger lock (caught up with other writers) across several calls: what a relayed call
        appends and the entries read back after it belong to one uninterrupted stretch of the ledger."""
        with self._locked():
            yield

    def entries_since(self, seq: int) -> list[LedgerEntry]:
        """The ledger's entries after ``seq`` (a replica's last one), in order."""
        with self._thread_lock:
            return list(self._ledger.entries(after_seq=seq))

    # --- internals: locking -------------------------------------------------------------------------

    @contextmanager
    def _locked(self, *, sync: bool = True) -> Iterator[None]:
        self._require_writable()
        with self._thread_lock:
            if self._depth == 0:
                self._acquire_file_lock()
                try:
                    if sync and self._loaded:
                        for entry in self._ledger.sync():
                            self._apply(entry)
                except BaseException:
                    self._file_lock.release()
                    raise
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._file_lock.release()

    def _acquire_file_lock(self) -> None:
        self._state_dir.ensure()
        try:
            self._file_lock.acquire(timeout=self.lock_timeout_s, poll_interval=0.005)
        except Timeout:
            raise LockHeldError(str(self.paths.lock), self._read_owner().pid, self.lock_timeout_s) from None
        self._write_owner()

    def _write_owner(self) -> None:
        # Written on every acquisition so a process that times out can name the holder; a fixed-width
        # pwrite on a kept descriptor costs microseconds.
        try:
            if self._owner_fd is None:
                self._owner_fd = os.open(self.paths.lock_owner, os.O_RDWR | os.O_CREAT, 0o644)
            os.pwrite(self._owner_fd, f"{os.getpid():>12}\n".encode("ascii"), 0)
        except OSError as exc:
            self._file_lock.release()
            raise StateError(
                f"cannot write {self.paths.lock_owner}: {exc.strerror or exc}; free disk space or fix the "
                "permissions of .autodev/, then try again"
            ) from exc

    def _read_owner(self) -> _LockOwner:
        try:
            path = self.paths.lock_owner
            data = read_bounded(
                path,
                limit=MAX_PID_FILE_BYTES,
                what="the lock owner file",
                follow_symlinks=False,
                error=led_by(path, StateError),
            )
            return _LockOwner(int(data.decode("ascii").strip()))
        except (OSError, ValueError, StateError):
            return _LockOwner(None)

    def _require_writable(self) -> None:
        if self.readonly:
            raise StateError("this PlanManager is read-only; open it without readonly=True to change it")

    # --- internals: loading and snapshots -----------------------------------------------------------

    def _load_unlocked(self) -> None:
        # A torn tail is cut only after the snapshot check: a snapshot ahead of the ledger means entries were
        # lost, and then the ledger must be reported exactly as found.
        head = self._ledger.open(repair=False)
        self._state = PlanState()
        self._reindex()
        restored_seq = self._restore_snapshot(head) if self.use_snapshot else None
        self.snapshot_usable = restored_seq is not None
        if restored_seq is None:
            restored_seq = 0
            self._state = PlanState()
            self._reindex()
        self._ledger.repair_tail()
        for entry in self._ledger.entries(after_seq=restored_seq):
            self._apply(entry)
        self._snapshot_seq = restored_seq
        self._loaded = True
        if not self.readonly and restored_seq != head.seq and head.seq > 0:
            self._write_snapshot()

    def _restore_snapshot(self, head: LedgerHead) -> int | None:
        """Load ``plan.json`` when it matches the ledger; return its seq, or None to replay from zero."""
        path = self.paths.snapshot
        try:
            snapshot = decode_snapshot(read_snapshot_bytes(path))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            _log.warning("snapshot.rebuilt", path=str(path), reason=str(exc))
            return None
        seq = snapshot.ledger_seq
        if seq > head.seq:
            raise LedgerCorruptError(
                f"plan.json reflects entry {seq} but the ledger ends at entry {head.seq} (entries were lost)",
                path=str(self.paths.ledger),
            )
        if seq > 0 and self._ledger.hash_at(seq) != snapshot.ledger_hash:
            _log.warning("snapshot.rebuilt", path=str(path), reason="ledger hash differs")
            return None
        try:
            self._state = PlanState.model_validate_json(snapshot.state_bytes)
        except ValidationError as exc:
            _log.warning("snapshot.rebuilt", path=str(path), reason=str(exc.errors()[0]["msg"]))
            return None
        self._reindex()
        return seq

    def _write_snapshot(self) -> None:
        head = self._ledger.head
        data = encode_snapshot(head, self._state.model_dump_json().encode("utf-8"))
        if len(data) > MAX_STATE_FILE_BYTES:
            # It would be refused when read back; the older snapshot stays valid and the rest is replayed.
            _log.warning("snapshot.too_large", path=str(self.paths.snapshot), bytes=len(data))
            return
        try:
            # Not fsync'd: a lost snapshot is rebuilt from the (fsync'd) ledger on the next open.
            atomic_write_bytes(self.paths.snapshot, data, durable=False)
        except OSError as exc:
            raise SnapshotError(
                f"cannot write {self.paths.snapshot}: {exc.strerror}; the ledger is intact"
            ) from exc
        self._snapshot_seq = head.seq

    # --- internals: applying ops --------------------------------------------------------------------

    def _append(self, op: str, payload: dict[str, Any], *, durable: bool = True) -> None:
        """``durable=False`` for a record of a step that the step's own durable change follows (evidence, a
        delegation decision): a crash that loses it also loses that change, so a resumed run repeats the
        step and records it again. The next durable append, or closing, syncs it (``Ledger.append``)."""
        self._apply(self._ledger.append(op, payload, durable=durable))

    def _apply(self, entry: LedgerEntry) -> None:
        applier = self._appliers.get(entry.op)
        if applier is None:
            if entry.op in _AUDIT_OPS:
                return
            raise LedgerCorruptError(
                f"unknown op {entry.op!r} (written by a newer AutoDev?)",
                path=str(self.paths.ledger),
                line=entry.seq,
            )
        try:
            applier(entry)
        except (KeyError, TypeError, ValueError, ValidationError, StateError) as exc:
            raise LedgerCorruptError(
                f"op {entry.op!r} cannot be applied ({exc})",
                path=str(self.paths.ledger),
                line=entry.seq,
            ) from exc
        plan = self._state.plan
        if plan is not None:
            plan.updated_at = entry.ts

    def _apply_plan_init(self, entry: LedgerEntry) -> None:
        previous = self._state
        carried = previous.plan_phase is not None
        self._state = PlanState(
            plan=Plan.model_validate(entry.payload["plan"]),
            session_id=entry.payload.get("session_id"),
            cost_usd_total=previous.cost_usd_total if carried else 0.0,
            cost_usd_by_task=dict(previous.cost_usd_by_task) if carried else {},
            usage_by_task=dict(previous.usage_by_task) if carried else {},
            unknown_cost_calls=previous.unknown_cost_calls if carried else 0,
            budget_since_seq=previous.budget_since_seq if carried else entry.seq,
            # The plan phase's evidence (explorer, domain expert) belongs to the plan it produced.
            evidence={"plan": list(previous.evidence.get("plan", []))} if carried else {},
            # The base's own gate results belong to the repository, not to a plan.
            baseline=previous.baseline,
            write_scopes=(
                [ScopeDeclaration.model_validate(entry.payload["write_scope"])]
                if entry.payload.get("write_scope")
                else []
            ),
        )
        self._reindex()

    def _apply_session_started(self, entry: LedgerEntry) -> None:
        self._state.session_id = entry.payload["session_id"]

    def _replayed_task(self, entry: LedgerEntry, task_id: str, expected: str | None) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise KeyError(f"task {task_id!r} is not in the plan")
        if expected is not None and task.status != expected:
            raise ValueError(f"task {task_id} is {task.status!r}, entry says {expected!r}")
        return task

    def _apply_task_status(self, entry: LedgerEntry) -> None:
        payload = entry.payload
        task = self._replayed_task(entry, payload["task_id"], payload["from"])
        target = payload["to"]
        if target not in TASK_STATUSES:
            raise ValueError(f"unknown status {target!r}")
        self._set_status(task, target)
        task.blocked_reason = payload.get("reason") if target == "blocked" else None
        if "base_commit" in payload:
            task.base_commit = payload["base_commit"]
        if "commit" in payload:
            task.commit = payload["commit"]
            if task.commit is None:
                self._landed.pop(task.id, None)
            else:
                self._landed[task.id] = task.commit
            self._landed_copy = None
        if "worktree" in payload:
            task.worktree = payload["worktree"]
        if "checked_tree" in payload:
            task.checked_tree = payload["checked_tree"]
        task.blocked_by = None
        if target in TERMINAL_STATUSES:
            task.worktree = None
        adoption = self._state.adoptions.get(task.id)
        if (
            adoption is not None
            and adoption.state == "pending_adoption"
            and target in ("complete", "blocked")
        ):
            # A waiting change ends when its task does: adopted when it completes, discarded when blocked.
            adoption.state = "adopted" if target == "complete" else "discarded"
        if target == "complete" and "result" in payload:
            record = {**payload["result"], "id": f"E{entry.seq}", "task_id": task.id}
            self._state.results.append(ResultRecord.model_validate(record))

    def _apply_task_retry(self, entry: LedgerEntry) -> None:
        payload = entry.payload
        task = self._replayed_task(entry, payload["task_id"], payload.get("from"))
        task.retry_count = int(payload["retry_count"])
        task.last_issues = [str(issue) for issue in payload.get("issues", [])]
        task.last_issues_for = payload.get("issues_for")
        if "to" in payload:
            self._set_status(task, payload["to"])
            task.blocked_reason = None
        if "base_commit" in payload:
            task.base_commit = payload["base_commit"]

    def _apply_task_model_set(self, entry: LedgerEntry) -> None:
        task = self._replayed_task(entry, entry.payload["task_id"], None)
        model = entry.payload["model"]
        if model not in (None, *MODEL_TIERS):
            raise ValueError(f"unknown model tier {model!r}")
        task.model = model

    def _apply_tasks_added(self, entry: LedgerEntry) -> None:
        payload = entry.payload
        tasks = [Task.model_validate(task) for task in payload["tasks"]]
        for task in tasks:
            if task.id in self._tasks:
                raise ValueError(f"task {task.id!r} is already in the plan")
        _insert_tasks(self._require_plan(), tasks, phase_id=payload["phase_id"], parent=payload.get("parent"))
        self._reindex()

    def _apply_slices_done(self, entry: LedgerEntry) -> None:
        task = self._replayed_task(entry, entry.payload["task_id"], "pending")
        self._set_status(task, "complete")
        task.blocked_reason = None
        task.blocked_by = None

    def _apply_task_escalated(self, entry: LedgerEntry) -> None:
        task = self._replayed_task(entry, entry.payload["task_id"], None)
        task.escalated = True

    def _apply_task_reverted(self, entry: LedgerEntry) -> None:
        payload = entry.payload
        task = self._replayed_task(entry, payload["task_id"], payload["from"])
        self._set_status(task, "pending")
        task.retry_count = 0
        task.automatic_retries = 0
        task.escalated = False
        task.blocked_reason = None
        task.last_issues = []
        task.last_issues_for = None
        task.base_commit = None
        task.worktree = None
        task.checked_tree = None
        task.blocked_by = None

    def _apply_tasks_blocked(self, entry: LedgerEntry) -> None:
        reason = entry.payload["reason"]
        for item in entry.payload["tasks"]:
            task = self._replayed_task(entry, item["id"], item["from"])
            adoption = self._state.adoptions.get(task.id)
            if adoption is not None and adoption.state == "pending_adoption":
                adoption.state = "discarded"
            self._set_status(task, "blocked")
            task.blocked_reason = reason
            task.blocked_by = entry.payload.get("cause")
            task.worktree = None

    def _apply_task_retried(self, entry: LedgerEntry) -> None:
        payload = entry.payload
        task = self._replayed_task(entry, payload["task_id"], "blocked")
        self._set_status(task, "in_progress")
        task.retry_count = int(payload["retry_count"])
        task.automatic_retries = 0
        task.escalated = False
        task.blocked_reason = None
        task.blocked_by = None
        task.base_commit = None
        task.worktree = None
        task.checked_tree = None
        # A new budget for the new run of the task; what it cost stays in the plan's total, and so does what
        # is known about that cost.
        spent = self._state.usage_by_task.pop(task.id, None)
        if spent is not None and (spent.unknown_cost_calls or spent.estimated_cost_usd):
            self._state.usage_by_task[task.id] = TaskUsageRecord(
                unknown_cost_calls=spent.unknown_cost_calls, estimated_cost_usd=spent.estimated_cost_usd
            )
        for dependent in payload.get("unblocked", []):
            other = self._replayed_task(entry, dependent, "blocked")
            self._set_status(other, "pending")
            other.blocked_reason = None
            other.blocked_by = None
            other.retry_count = 0
            other.automatic_retries = 0
            other.escalated = False
            other.base_commit = None
            other.worktree = None
            other.checked_tree = None
            other.last_issues = []
            other.last_issues_for = None

    def _apply_baseline_recorded(self, entry: LedgerEntry) -> None:
        self._state.baseline = BaselineRecord.model_validate(entry.payload)

    def _apply_phase_baseline(self, entry: LedgerEntry) -> None:
        self._phase(str(entry.payload["phase_id"])).baseline_commit = str(entry.payload["commit"])

    def _apply_phase_checkpoint(self, entry: LedgerEntry) -> None:
        self._phase(str(entry.payload["phase_id"])).end_checkpoint_commit = str(entry.payload["commit"])

    def _apply_evidence_recorded(self, entry: LedgerEntry) -> None:
        payload = entry.payload
        task_id = payload["task_id"]
        ref = EvidenceRef(
            kind=payload["kind"],
            attempt=payload["attempt"],
            path=payload["path"],
            sha256=payload["sha256"],
            summary=payload.get("summary"),
        )
        self._state.evidence.setdefault(task_id, []).append(ref)
        task = self._tasks.get(task_id)
        if task is not None:
            task.evidence_bundle = ref.path

    def _apply_cost_recorded(self, entry: LedgerEntry) -> None:
        payload = entry.payload
        cost = float(payload["cost_usd"])
        self._state.cost_usd_total += cost
        task_id = str(payload["task_id"])
        self._state.cost_usd_by_task[task_id] = self._state.cost_usd_by_task.get(task_id, 0.0) + cost

    def _apply_usage_recorded(self, entry: LedgerEntry) -> None:
        payload = entry.payload
        task_id = str(payload["task_id"])
        usage = self._state.usage_by_task.setdefault(task_id, TaskUsageRecord())
        if "cost_usd" in payload:
            cost = float(payload["cost_usd"])
            self._state.cost_usd_total += cost
            self._state.cost_usd_by_task[task_id] = self._state.cost_usd_by_task.get(task_id, 0.0) + cost
            if payload.get("cost_estimated"):
                usage.estimated_cost_usd += cost
        else:
            usage.unknown_cost_calls += 1
            self._state.unknown_cost_calls += 1
        usage.calls += 1
        usage.tool_calls += int(payload["tool_calls"])
        usage.seconds += float(payload["seconds"])

    def _apply_plan_phase_started(self, entry: LedgerEntry) -> None:
        self._state.plan_phase = PlanPhaseProgress(
            spec_hash=str(entry.payload["spec_hash"]),
            require_approval=bool(entry.payload.get("require_approval", False)),
        )
        self._state.cost_usd_total = 0.0
        self._state.cost_usd_by_task = {}
        self._state.usage_by_task = {}
        self._state.unknown_cost_calls = 0
        self._state.budget_since_seq = entry.seq
        self._state.evidence.pop("plan", None)

    def _apply_plan_step_done(self, entry: LedgerEntry) -> None:
        progress = self._state.plan_phase
        payload = entry.payload
        if progress is None or progress.spec_hash != payload["spec_hash"]:
            raise ValueError("plan step for a plan phase that is not under way")
        progress.steps[str(payload["role"])] = EvidenceRef(
            kind=str(payload["role"]), attempt=1, path=str(payload["path"]), sha256=str(payload["sha256"])
        )

    def _apply_plan_steps_dropped(self, entry: LedgerEntry) -> None:
        progress = self._state.plan_phase
        payload = entry.payload
        if progress is None or progress.spec_hash != payload["spec_hash"]:
            raise ValueError("dropped plan steps of a plan phase that is not under way")
        for step in payload["steps"]:
            progress.steps.pop(str(step), None)

    def _apply_write_scope_declared(self, entry: LedgerEntry) -> None:
        self._state.write_scopes.append(ScopeDeclaration.model_validate({**entry.payload, "ts": entry.ts}))

    def _apply_approval_requested(self, entry: LedgerEntry) -> None:
        previous = self._state.approvals.get(entry.payload["id"])
        self._state.approvals[entry.payload["id"]] = ApprovalRecord.model_validate(
            {**entry.payload, "requested_at": previous.requested_at if previous else entry.ts}
        )

    def _apply_approval_resolved(self, entry: LedgerEntry) -> None:
        record = self._state.approvals[entry.payload["id"]]
        record.status = "accepted" if entry.payload["accepted"] else "declined"
        record.resolved_at = entry.ts

    def _apply_check_waived(self, entry: LedgerEntry) -> None:
        payload = entry.payload
        self._task(payload["task_id"])
        waiver = {key: str(payload[key]) for key in ("check", "revision", "reason")}
        self._state.waivers.setdefault(payload["task_id"], []).append(waiver)

    def _apply_task_node(self, entry: LedgerEntry) -> None:
        self._state.nodes[entry.payload["task_id"]] = entry.payload["node"]

    def _apply_adoption_pending(self, entry: LedgerEntry) -> None:
        payload = entry.payload
        task_id = str(payload["task_id"])
        self._task(task_id)
        known = self._state.adoptions.get(task_id)
        self._state.adoptions[task_id] = AdoptionRecord(
            task_id=task_id,
            commit=str(payload["commit"]),
            base=payload.get("base"),
            worktree=payload.get("worktree"),
            reason=str(payload.get("reason", "")),
            since=known.since if known is not None and known.state == "pending_adoption" else entry.ts,
        )

    def _apply_base_checked(self, entry: LedgerEntry) -> None:
        check = dict(entry.payload["check"])
        self._state.base_check = {**check, "checked_at": entry.ts}
        commit = check.get("ref_commit")
        if entry.payload.get("accepted") and commit and commit not in self._state.stale_bases_accepted:
            self._state.stale_bases_accepted.append(commit)

    def _apply_approval_waiting(self, entry: LedgerEntry) -> None:
        record = self._state.approvals[entry.payload["id"]]
        record.waiting_since = entry.ts if entry.payload["waiting"] else None

    def _apply_tasks_blocked_on_human(self, entry: LedgerEntry) -> None:
        approval_id = entry.payload["approval_id"]
        if approval_id not in self._state.approvals:
            raise ValueError(f"unknown approval request {approval_id!r}")
        for task_id in entry.payload["tasks"]:
            self._task(task_id)
            self._state.blocked_on_human[task_id] = HumanBlock(
                task_id=task_id, approval_id=approval_id, since=entry.ts
            )

    def _apply_tasks_released_by_human(self, entry: LedgerEntry) -> None:
        for item in entry.payload["tasks"]:
            self._state.blocked_on_human.pop(item["id"], None)
            spent = self._state.human_blocked_s.get(item["id"], 0.0) + float(item["blocked_s"])
            self._state.human_blocked_s[item["id"]] = spent

    def _apply_delegation_decided(self, entry: LedgerEntry) -> None:
        inputs, decision = entry.payload.get("inputs") or {}, entry.payload.get("decision") or {}
        task_id = inputs.get("task_id")
        if task_id in self._tasks and "route" in decision:
            self._state.last_decisions[task_id] = LastDecision(
                role=str(inputs.get("role", "")),
                family=str(inputs.get("family", "")),
                route=str(decision["route"]),
                reason=str(decision.get("reason", "")),
            )
        grant = entry.payload.get("grant")
        if grant is not None:
            worker = WorkerGrant.model_validate(grant)
            self._state.workers[worker.task_id] = worker

    def _apply_automatic_retry_granted(self, entry: LedgerEntry) -> None:
        task = self._replayed_task(entry, entry.payload["task_id"], entry.payload.get("from"))
        model = entry.payload["model"]
        if model not in MODEL_TIERS:
            raise ValueError(f"unknown model tier {model!r}")
        task.model = model
        task.automatic_retries += 1
        if "to" in entry.payload:
            self._set_status(task, entry.payload["to"])
        self._state.automatic_retries_used += 1

    def _apply_plan_approved(self, entry: LedgerEntry) -> None:
        plan = self._state.plan
        if plan is None or plan.plan_id != entry.payload["plan_id"]:
            raise ValueError("approval for a plan that is not the current one")
        self._state.plan_approved = True

    # --- internals: helpers -------------------------------------------------------------------------

    def _set_status(self, task: Task, status: TaskStatus) -> None:
        """Every status change of the replay goes through here, so that the indexes by status and the
        count of unfinished tasks per phase stay exact without a scan of the plan."""
        previous = task.status
        if previous == status:
            return
        self._by_status[previous].discard(task.id)
        self._by_status.setdefault(status, set()).add(task.id)
        was_open, now_open = previous not in TERMINAL_STATUSES, status not in TERMINAL_STATUSES
        if was_open != now_open:
            self._open_in_phase[task.phase_id] += 1 if now_open else -1
        task.status = status
        if status == "pending":
            self._requeued += 1
        if status == "pending" or status in TERMINAL_STATUSES:
            self._state.workers.pop(task.id, None)

    def _reindex(self) -> None:
        plan = self._state.plan
        self._tasks = {task.id: task for task in plan.iter_tasks()} if plan else {}
        self._position = {task_id: n for n, task_id in enumerate(self._tasks)}
        self._by_status = {status: set() for status in TASK_STATUSES}
        self._open_in_phase = Counter()
        for task in self._tasks.values():
            self._by_status[task.status].add(task.id)
            if task.status not in TERMINAL_STATUSES:
                self._open_in_phase[task.phase_id] += 1
        self._landed = {task.id: task.commit for task in self._tasks.values() if task.commit is not None}
        self._landed_copy = None
        children: dict[str, list[str]] = {}
        slices: dict[str, list[str]] = {}
        for task in self._tasks.values():
            for dep in task.depends_on:
                children.setdefault(dep, []).append(task.id)
            if task.parent is not None:
                slices.setdefault(task.parent, []).append(task.id)
        self._children = children
        self._slices = slices

    def _require_plan(self) -> Plan:
        if self._state.plan is None:
            raise PlanNotFoundError(
                f"no plan in {self.paths.state_dir}; create one with `autodev plan --from-markdown FILE`"
            )
        return self._state.plan

    def _phase(self, phase_id: str) -> Phase:
        phase = next((p for p in self._require_plan().phases if p.id == phase_id), None)
        if phase is None:
            raise StateError(f"phase {phase_id!r} is not in the plan")
        return phase

    def _task(self, task_id: str) -> Task:
        self._require_plan()
        task = self._tasks.get(task_id)
        if task is None:
            raise TaskNotFoundError(task_id)
        return task

    def _relative(self, path: Path) -> str:
        try:
            return path.relative_to(self.paths.repo_root).as_posix()
        except ValueError:
            return str(path)


def _insert_tasks(plan: Plan, tasks: Sequence[Task], *, phase_id: str, parent: str | None) -> None:
    """Put ``tasks`` into ``plan`` in place: before ``parent``, which then waits on them, or at the end of
    the phase ``phase_id``."""
    phase = next((phase for phase in plan.phases if phase.id == phase_id), None)
    if phase is None:
        raise KeyError(f"phase {phase_id!r} is not in the plan")
    if parent is None:
        phase.tasks.extend(tasks)
        return
    position = next((n for n, task in enumerate(phase.tasks) if task.id == parent), None)
    if position is None:
        raise KeyError(f"task {parent!r} is not in phase {phase_id!r}")
    owner = phase.tasks[position]
    owner.depends_on.extend(task.id for task in tasks if task.id not in owner.depends_on)
    phase.tasks[position:position] = tasks


def _call_fields(call: CallUsage) -> dict[str, Any]:
    """The ``usage_recorded`` fields of ``call``: those it knows (a count nobody reported is left out)."""
    fields: dict[str, Any] = {"phase": call.phase}
    for name, value in (
        ("step", call.step),
        ("attempt", call.attempt),
        ("model", call.model),
        ("tokens_in", call.tokens_in),
        ("tokens_out", call.tokens_out),
        ("tokens_cache_read", call.tokens_cache_read),
        ("tokens_cache_write", call.tokens_cache_write),
    ):
        if value is not None:
            fields[name] = value
    if call.duration_s is not None and math.isfinite(call.duration_s):
        fields["call_s"] = round(max(0.0, call.duration_s), 3)
    if call.cost_estimated:
        fields["cost_estimated"] = True
    return fields


def _seconds_between(since: str, now: datetime) -> float:
    """Seconds from the ledger timestamp ``since`` to ``now`` (never negative: clocks step back)."""
    return max(0.0, (now - datetime.fromisoformat(since)).total_seconds())


def _repository_summary(evidence: Evidence) -> dict[str, Any] | None:
    """What a developer run's evidence says git showed, or a completion contract's verdict, in brief, for
    the ledger (``EvidenceRef.summary``)."""
    if isinstance(evidence, CompletionEvidence):
        by_status: dict[str, list[str]] = {}
        for check in evidence.checks:
            by_status.setdefault(check.status, []).append(check.id)
        return {
            "verdict": evidence.verdict,
            "revision": evidence.revision,
            "base_commit": evidence.base_commit,
            "implemented_on": evidence.implemented_on,
            "verified_on": evidence.verified_on,
            "checks": by_status,
        }
    if not isinstance(evidence, CoderEvidence) or evidence.repository is None:
        return None
    facts = evidence.repository
    return {
        "head": facts.head,
        "branch": facts.branch,
        "files": len(facts.diffstat),
        "insertions": facts.insertions,
        "deletions": facts.deletions,
        "commits_since_base": facts.commits_since_base,
        "risks": evidence.risks[:20],
    }
