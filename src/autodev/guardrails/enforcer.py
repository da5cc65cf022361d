"""``GuardrailEnforcer``: the limits checked around every agent call (seed 001, 5.1 steps 6 and 9, and 8).

Every agent call, tournament and critic calls included, runs ``pre_invocation`` → adapter →
``post_invocation``:

- **tool calls per task**: the sum of the adapters' own ``AgentResult.tool_calls`` counts;
- **duration per task**: wall-clock time since the task's first call in this process, plus the seconds
  earlier processes used (see ``restore``). ``pre_invocation`` returns the call's timeout as the smaller of
  the requested timeout and what is left, so a call is stopped *during* its run when the task's time ends;
  wall-clock rather than a sum of call durations, so that parallel calls (tournament judges) are not
  counted twice and time spent between calls (QA gates) counts as the task's time;
- **diff bytes**: the size of the task's *current* diff, checked by ``check_diff`` whenever it is read;
- **cost per plan**: every priced call is recorded in the ledger through ``PlanManager.record_cost``, so the
  running total survives a resume; reaching the budget raises ``BudgetExceededError`` (exit 3, suspend).

Where the usage lives: the cost goes through the ledger, which is the source of truth. Per-task tool calls
and seconds are kept in memory only: ``PlanManager`` has no op for them, and appending (and fsync'ing) a
ledger entry per agent call for counters that only bound a runaway task is not worth it. Instead the
orchestrator seeds them on resume with ``restore`` from what it recorded in the task's evidence (it can take
the numbers from ``usage``). A task whose usage is not restored starts again from zero after a resume: the
limits then bound each process's share, never less.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autodev.errors import GuardrailExceededError
from autodev.guardrails.errors import BudgetExceededError
from autodev.logging import get_logger

if TYPE_CHECKING:
    from autodev.adapters.base import AgentResult
    from autodev.config.schema import GuardrailSettings
    from autodev.state.plan_manager import PlanManager

__all__ = ["GuardrailEnforcer", "TaskUsage"]

_log = get_logger("autodev.guardrails")


@dataclass(frozen=True, slots=True)
class TaskUsage:
    """What one task has used so far: agent calls, tool calls, seconds, and dollars (from the ledger)."""

    task_id: str
    calls: int
    tool_calls: int
    duration_s: float
    cost_usd: float


@dataclass(slots=True)
class _Counters:
    calls: int = 0
    tool_calls: int = 0
    # Seconds used before this process's clock started (earlier processes, via restore()).
    restored_s: float = 0.0
    # Clock reading at the task's first call in this process; None until then.
    started_at: float | None = None


class GuardrailEnforcer:
    """Per-task and per-plan limits around agent calls.

    ``post_invocation`` writes to the ledger, which blocks on a file lock and an fsync, so callers may run it
    in a worker thread; the counters are guarded by a lock for that reason.
    """

    def __init__(
        self,
        settings: GuardrailSettings,
        plan_manager: PlanManager,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.plan_manager = plan_manager
        self._clock = clock
        self._counters: dict[str, _Counters] = {}
        self._lock = threading.Lock()

    # --- queries ------------------------------------------------------------------------------------

    def usage(self, task_id: str) -> TaskUsage:
        """A snapshot of ``task_id``'s usage (zeros for a task that made no call yet)."""
        with self._lock:
            counters = self._counters.get(task_id, _Counters())
            elapsed = self._elapsed(counters)
        return TaskUsage(
            task_id=task_id,
            calls=counters.calls,
            tool_calls=counters.tool_calls,
            duration_s=elapsed,
            cost_usd=self.plan_manager.cost_usd_for(task_id),
        )

    # --- the call protocol --------------------------------------------------------------------------

    def restore(self, task_id: str, tool_calls: int, seconds: float) -> None:
        """Seed ``task_id`` with what earlier processes used (on resume, before the task's next call).

        Replaces whatever this process tracked for the task so far; the clock restarts at its next call.
        """
        if tool_calls < 0 or seconds < 0:
            raise ValueError(f"usage must not be negative (tool_calls={tool_calls}, seconds={seconds})")
        with self._lock:
            self._counters[task_id] = _Counters(tool_calls=tool_calls, restored_s=seconds)

    def pre_invocation(self, task_id: str, role: str, requested_timeout_s: float) -> float:
        """Refuse a call whose limits are already used up; return the timeout the call must use.

        Raises ``BudgetExceededError`` when the plan's recorded cost has reached the budget, and
        ``GuardrailExceededError`` (``limit`` ``"tool_calls"`` or ``"duration"``) when the task has used up
        its tool calls or its time. The returned timeout is ``min(requested_timeout_s, seconds left)``.
        """
        self._check_budget(self.plan_manager.cost_usd_total)
        max_tool_calls = self.settings.max_tool_calls_per_task
        max_duration = self.settings.max_duration_s_per_task
        with self._lock:
            counters = self._counters.setdefault(task_id, _Counters())
            if counters.started_at is None:
                counters.started_at = self._clock()
            tool_calls = counters.tool_calls
            elapsed = self._elapsed(counters)
        if tool_calls >= max_tool_calls:
            raise self._breach(
                f"task {task_id}: no tool calls left for the {role} call ({tool_calls} of {max_tool_calls} "
                "used); raise guardrails.max_tool_calls_per_task to let it continue",
                task_id=task_id,
                role=role,
                limit="tool_calls",
            )
        if elapsed >= max_duration:
            raise self._breach(
                f"task {task_id}: no time left for the {role} call ({elapsed:.1f}s of {max_duration:.1f}s "
                "used); raise guardrails.max_duration_s_per_task to let it continue",
                task_id=task_id,
                role=role,
                limit="duration",
            )
        return min(requested_timeout_s, max_duration - elapsed)

    def post_invocation(self, task_id: str, role: str, result: AgentResult) -> None:
        """Account for a finished call; raise when it took the task or the plan over a limit.

        The cost is recorded in the ledger *before* anything is raised, so a breach never loses it. A
        budget breach wins over a per-task one: it suspends the whole run rather than blocking the task.
        Calls without a price (``cost_usd`` None) record no cost.
        """
        with self._lock:
            counters = self._counters.setdefault(task_id, _Counters())
            if counters.started_at is None:
                # A call that skipped pre_invocation (an inline response collected on resume) still counts.
                counters.started_at = self._clock()
            counters.calls += 1
            counters.tool_calls += result.tool_calls
            tool_calls = counters.tool_calls
            elapsed = self._elapsed(counters)
        if result.cost_usd is not None:
            self._check_budget(self.plan_manager.record_cost(task_id, role, result.cost_usd))
        max_tool_calls = self.settings.max_tool_calls_per_task
        max_duration = self.settings.max_duration_s_per_task
        if tool_calls > max_tool_calls:
            raise self._breach(
                f"task {task_id}: the {role} call brought the task to {tool_calls} tool calls, over the "
                f"limit of {max_tool_calls}; raise guardrails.max_tool_calls_per_task to let it continue",
                task_id=task_id,
                role=role,
                limit="tool_calls",
            )
        if elapsed >= max_duration:
            raise self._breach(
                f"task {task_id}: ran {elapsed:.1f}s by the end of the {role} call, reaching the limit of "
                f"{max_duration:.1f}s; raise guardrails.max_duration_s_per_task to let it continue",
                task_id=task_id,
                role=role,
                limit="duration",
            )

    def check_diff(self, task_id: str, diff_bytes: int) -> None:
        """Raise ``GuardrailExceededError`` (``limit="diff_bytes"``) when the task's current diff is too big.

        ``diff_bytes`` is the size of the diff as it stands now (against the task's base), not a sum over
        attempts: a retry that shrinks the change brings the task back under the limit.
        """
        max_diff = self.settings.max_diff_bytes
        if diff_bytes > max_diff:
            raise self._breach(
                f"task {task_id}: its diff is {diff_bytes} bytes, over the limit of {max_diff} bytes; "
                "split the task or raise guardrails.max_diff_bytes",
                task_id=task_id,
                role=None,
                limit="diff_bytes",
            )

    # --- internals ----------------------------------------------------------------------------------

    def _elapsed(self, counters: _Counters) -> float:
        running = 0.0 if counters.started_at is None else self._clock() - counters.started_at
        return counters.restored_s + running

    def _check_budget(self, spent_usd: float) -> None:
        budget = self.settings.cost_budget_usd_per_plan
        # Rounded to micro-dollars: a float sum such as 0.1 + 0.2 must not slip under a budget of 0.30.
        if budget is not None and round(spent_usd, 6) >= budget:
            _log.warning("guardrail.budget_reached", spent_usd=spent_usd, budget_usd=budget)
            raise BudgetExceededError(spent_usd, budget)

    @staticmethod
    def _breach(message: str, *, task_id: str, role: str | None, limit: str) -> GuardrailExceededError:
        _log.warning("guardrail.exceeded", task_id=task_id, role=role, limit=limit)
        return GuardrailExceededError(message, task_id=task_id, limit=limit)
