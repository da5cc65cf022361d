"""``GuardrailEnforcer``: the limits checked around every agent call.

Every agent call, tournament and critic calls included, runs ``pre_invocation`` → adapter →
``post_invocation``:

- **tool calls per task**: the sum of the adapters' own ``AgentResult.tool_calls`` counts;
- **duration per task**: wall-clock time since the task's first call in this process, plus the seconds
  earlier processes recorded. ``pre_invocation`` returns the call's timeout as the smaller of the
  requested timeout and what is left, so a call is stopped *during* its run when the task's time ends;
  wall-clock rather than a sum of call durations, so that parallel calls (tournament judges) are not
  counted twice and time spent between calls (QA gates) counts as the task's time;
- **change size**: what a change adds (``change_size_problem``, before anything is staged) and the size of
  its diff (``diff_size_problem``); a change over either limit fails the attempt of the role that made it;
- **cost per plan**: reaching the budget raises ``BudgetExceededError`` (exit 3, suspend). Every call
  counts, whatever made it: retries, repairs, critics, tournament variants and judges, and the calls a
  provider refused before a backoff. A call whose cost nobody knows (no figure from the CLI, no price for
  its model) is never counted as $0: with a budget set, ``guardrails.unknown_cost`` refuses the next call
  (``CostUnknownError``, exit 3, suspend; the unknown call's own work is kept), warns about it once per
  model, or estimates it from its tokens at ``guardrails.unknown_model_price``.

Where the usage lives: in the ledger. ``post_invocation`` records each call as one ``usage_recorded`` op
(its tool calls, the task's seconds since the previous record, its cost when known, whether that cost is an
estimate, its tokens, model, duration, phase, step and attempt), and a task's
counters start from what the ledger holds for it the first time this process sees the task. So no limit
restarts with a new process: inline resumes and crash resumes add up to the same totals as one run. One
fsync'd append per agent call costs a fraction of a millisecond against seconds of agent work.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autodev.errors import GuardrailExceededError
from autodev.guardrails.errors import BudgetExceededError, CostUnknownError
from autodev.logging import get_logger
from autodev.state.plan_manager import CallUsage

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
    # Seconds the ledger recorded for the task before this process's clock started.
    restored_s: float = 0.0
    # Clock reading at the task's first call in this process; None until then.
    started_at: float | None = None
    # Clock reading up to which this process recorded the task's seconds.
    recorded_until: float | None = None
    # Seconds spent waiting for the provider (back-offs) since the task's clock started, and the part of
    # them not yet taken out of a ledger record: waits are the provider's time, not the task's.
    waited_s: float = 0.0
    unrecorded_wait_s: float = 0.0


# Failures before the model did any work: the CLI never started or never came up, or the provider refused
# the request. With no tokens reported, such a call cost nothing, and a 429 must not read as unknown cost.
_NOTHING_BILLED: frozenset[str] = frozenset(
    {
        "cli_missing",
        "spawn_failed",
        "cli_start_failed",
        "auth_failed",
        "rate_limited",
        "usage_limit",
        "provider_unavailable",
        "context_overflow",
    }
)


def _never_reached_the_model(result: AgentResult) -> bool:
    return (
        result.error is not None
        and result.error.kind in _NOTHING_BILLED
        and not result.tokens_in
        and not result.tokens_out
    )


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
        # Models whose unknown cost was warned about (once per model and process).
        self._unknown_models: set[str | None] = set()
        # The refusal of an unknown cost under ``unknown_cost = refuse``, raised at the next call.
        self._refusal: CostUnknownError | None = None
        self._lock = threading.Lock()

    # --- queries ------------------------------------------------------------------------------------

    def usage(self, task_id: str) -> TaskUsage:
        """A snapshot of the task's usage (the ledger's record, for a task this process has not run)."""
        with self._lock:
            counters = self._counters_of(task_id)
            elapsed = self._elapsed(counters)
        return TaskUsage(
            task_id=task_id,
            calls=counters.calls,
            tool_calls=counters.tool_calls,
            duration_s=elapsed,
            cost_usd=self.plan_manager.cost_usd_for(task_id),
        )

    # --- the call protocol --------------------------------------------------------------------------

    def _counters_of(self, task_id: str) -> _Counters:
        """The task's counters, seeded from the ledger the first time (call with ``_lock`` held)."""
        counters = self._counters.get(task_id)
        if counters is None:
            recorded = self.plan_manager.usage_for(task_id)
            counters = _Counters(
                calls=recorded.calls, tool_calls=recorded.tool_calls, restored_s=recorded.seconds
            )
            self._counters[task_id] = counters
        return counters

    def forget(self, task_id: str) -> None:
        """Drop what this process holds for ``task_id`` (its recorded usage was reset: read it again)."""
        with self._lock:
            self._counters.pop(task_id, None)

    def pre_invocation(self, task_id: str, role: str, requested_timeout_s: float) -> float:
        """Refuse a call whose limits are already used up; return the timeout the call must use.

        Raises ``BudgetExceededError`` when the plan's recorded cost has reached the budget (its
        ``CostUnknownError`` when an earlier call's cost was unknown under ``unknown_cost = refuse``), and
        ``GuardrailExceededError`` (``limit`` ``"tool_calls"`` or ``"duration"``) when the task has used up
        its tool calls or its time. The returned timeout is ``min(requested_timeout_s, seconds left)``.
        """
        self._check_budget(self.plan_manager.cost_usd_total)
        with self._lock:
            # Raised once: a resume on the same facade asks the call again, as a new process would.
            refusal, self._refusal = self._refusal, None
        if refusal is not None:
            raise refusal
        max_tool_calls = self.settings.max_tool_calls_per_task
        max_duration = self.settings.max_duration_s_per_task
        with self._lock:
            counters = self._counters_of(task_id)
            if counters.started_at is None:
                counters.started_at = counters.recorded_until = self._clock()
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

    def post_invocation(
        self,
        task_id: str,
        role: str,
        result: AgentResult,
        *,
        phase: str = "execute",
        step: str | None = None,
        attempt: int | None = None,
    ) -> None:
        """Account for a finished call; raise when it took the task or the plan over a limit.

        The usage (the cost, tokens, model, duration, and where the call ran: ``phase``, ``step``,
        ``attempt``) is recorded in the ledger *before* anything is raised, so a breach never loses it. A
        budget breach wins over a per-task one: it suspends the whole run rather than blocking the task. A
        call whose cost nobody knows records no cost and is counted as unknown; with a budget set,
        ``unknown_cost`` decides what that means (``_cost_of``, ``_unknown_cost``).
        """
        cost, estimated = self._cost_of(result)
        call = CallUsage(
            phase=phase,
            step=step,
            attempt=attempt,
            model=result.model,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            tokens_cache_read=result.tokens_cached,
            tokens_cache_write=result.tokens_cache_write,
            duration_s=result.duration_s,
            cost_estimated=estimated,
        )
        with self._lock:
            counters = self._counters_of(task_id)
            now = self._clock()
            if counters.started_at is None:
                # A call that skipped pre_invocation (an inline response collected on resume) still counts.
                counters.started_at = counters.recorded_until = now
            seconds = max(0.0, now - (counters.recorded_until or now) - counters.unrecorded_wait_s)
            counters.unrecorded_wait_s = 0.0
            counters.recorded_until = now
            counters.calls += 1
            counters.tool_calls += result.tool_calls
            tool_calls = counters.tool_calls
            elapsed = self._elapsed(counters)
        total = self.plan_manager.record_usage(
            task_id, role, tool_calls=result.tool_calls, seconds=seconds, cost_usd=cost, call=call
        )
        if cost is not None:
            self._check_budget(total)
        else:
            self._unknown_cost(total, task_id, role, result)
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

    def diff_size_problem(self, diff_bytes: int) -> str | None:
        """What makes the task's current diff too big (None when it is not), as a failure of the attempt.

        ``diff_bytes`` is the size of the diff as it stands now (against the task's base), not a sum over
        attempts: a retry that shrinks the change brings the task back under the limit. It answers the
        same as ``change_size_problem``: the role whose change it is is told, and an attempt is counted.
        """
        max_diff = self.settings.max_diff_bytes
        if diff_bytes <= max_diff:
            return None
        return (
            f"the change's diff is {diff_bytes} bytes, over the limit of {max_diff}; make it smaller or "
            "split the task (guardrails.max_diff_bytes)"
        )

    def change_size_problem(self, added: Mapping[str, int]) -> str | None:
        """What makes a change too big to stage (``added``: bytes each path adds), or None.

        Checked before anything is staged: a file of hundreds of megabytes must not reach git's object
        store, a diff or a gate just to be refused there.
        """
        max_file = self.settings.max_file_bytes
        too_big = sorted((path for path, size in added.items() if size > max_file), key=lambda p: -added[p])
        if too_big:
            shown = ", ".join(f"{path} ({added[path]} bytes)" for path in too_big[:5])
            return (
                f"the change adds more than {max_file} bytes to {len(too_big)} file(s): {shown}; remove "
                "or shrink them (guardrails.max_file_bytes)"
            )
        total = sum(added.values())
        if total > self.settings.max_diff_bytes:
            return (
                f"the change adds {total} bytes, over the limit of {self.settings.max_diff_bytes}; make it "
                "smaller or split the task (guardrails.max_diff_bytes)"
            )
        return None

    # --- internals ----------------------------------------------------------------------------------

    def exclude_wait(self, task_id: str, seconds: float) -> None:
        """Leave ``seconds`` spent waiting for the provider (a back-off before asking a refused call again)
        out of the task's time: a rate limit must not eat the task's duration budget."""
        if seconds <= 0:
            return
        with self._lock:
            counters = self._counters_of(task_id)
            counters.waited_s += seconds
            counters.unrecorded_wait_s += seconds

    def _elapsed(self, counters: _Counters) -> float:
        running = 0.0 if counters.started_at is None else self._clock() - counters.started_at
        return counters.restored_s + max(0.0, running - counters.waited_s)

    def _cost_of(self, result: AgentResult) -> tuple[float | None, bool]:
        """The call's cost and whether it is an estimate: the adapter's figure; else, with
        ``unknown_cost = estimate``, its tokens at ``unknown_model_price``; else None (unknown)."""
        if result.cost_usd is not None:
            return result.cost_usd, result.cost_estimated
        if _never_reached_the_model(result):
            return 0.0, False
        if self.settings.unknown_cost != "estimate" or result.tokens_in is None or result.tokens_out is None:
            return None, False
        cost = self.settings.unknown_model_price.dollars(
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            tokens_cached=result.tokens_cached or 0,
            tokens_cache_write=result.tokens_cache_write or 0,
        )
        return cost, True

    def _unknown_cost(self, spent_usd: float, task_id: str, role: str, result: AgentResult) -> None:
        """A call of unknown cost under a budget: refused (the run suspends) or warned about, per
        ``unknown_cost`` (an ``estimate`` that had no token counts to price warns too)."""
        budget = self.settings.cost_budget_usd_per_plan
        if budget is None:
            return
        model = result.model
        if self.settings.unknown_cost == "refuse":
            _log.warning("guardrail.cost_unknown", task_id=task_id, role=role, model=model, refused=True)
            # Refused at the next call, not now: this call's work is done and paid for, and raising here
            # would throw it away for a resume to pay for again.
            with self._lock:
                self._refusal = CostUnknownError(
                    spent_usd,
                    budget,
                    task_id=task_id,
                    role=role,
                    model=model,
                    tokens_known=result.tokens_in is not None and result.tokens_out is not None,
                )
            return
        with self._lock:
            first = model not in self._unknown_models
            self._unknown_models.add(model)
        if first:
            _log.warning("guardrail.cost_unknown", task_id=task_id, role=role, model=model, refused=False)

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
