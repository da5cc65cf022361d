"""GuardrailEnforcer: per-task tool-call, duration and diff limits; the plan's cost budget in the ledger."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import make_plan

from autodev.adapters.base import AgentResult
from autodev.config.schema import GuardrailSettings
from autodev.errors import EXIT_FAILED, EXIT_SUSPENDED, GuardrailExceededError
from autodev.guardrails import BudgetExceededError, CostUnknownError, GuardrailEnforcer, TaskUsage
from autodev.state.plan_manager import PlanManager


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def pm(repo: Path) -> Iterator[PlanManager]:
    with PlanManager(repo) as manager:
        manager.init_plan(make_plan(3))
        yield manager


def _result(*, tool_calls: int = 0, cost_usd: float | None = None) -> AgentResult:
    return AgentResult(success=True, text="done", tool_calls=tool_calls, cost_usd=cost_usd)


def _enforcer(pm: PlanManager, clock: FakeClock | None = None, **limits: object) -> GuardrailEnforcer:
    settings = GuardrailSettings.model_validate(limits)
    return GuardrailEnforcer(settings, pm, clock=clock or FakeClock())


def test_timeout_shrinks_to_the_time_the_task_has_left(pm: PlanManager) -> None:
    clock = FakeClock()
    enforcer = _enforcer(pm, clock, max_duration_s_per_task=900.0)

    assert enforcer.pre_invocation("1.1", "developer", 1200.0) == 900.0
    clock.advance(600.0)
    enforcer.post_invocation("1.1", "developer", _result())
    clock.advance(50.0)  # time between calls (QA gates) is the task's time too

    assert enforcer.pre_invocation("1.1", "reviewer", 900.0) == pytest.approx(250.0)
    assert enforcer.pre_invocation("1.1", "reviewer", 100.0) == 100.0
    # Another task has its own budget.
    assert enforcer.pre_invocation("1.2", "developer", 900.0) == 900.0


def test_duration_used_up_during_a_call_is_a_breach_after_it(pm: PlanManager) -> None:
    clock = FakeClock()
    enforcer = _enforcer(pm, clock, max_duration_s_per_task=100.0)

    timeout = enforcer.pre_invocation("1.1", "developer", 900.0)
    assert timeout == 100.0
    clock.advance(timeout)  # the adapter's deadline fired at the end of the task's budget

    with pytest.raises(GuardrailExceededError) as caught:
        enforcer.post_invocation("1.1", "developer", _result(tool_calls=2))
    assert caught.value.limit == "duration"
    assert caught.value.task_id == "1.1"
    assert caught.value.exit_code == EXIT_FAILED
    assert "ran 100.0s by the end of the developer call" in caught.value.message
    assert "guardrails.max_duration_s_per_task" in caught.value.message

    with pytest.raises(GuardrailExceededError, match=r"no time left for the reviewer call") as again:
        enforcer.pre_invocation("1.1", "reviewer", 900.0)
    assert again.value.limit == "duration"


def test_tool_call_limit_counts_the_adapters_reported_tool_calls(pm: PlanManager) -> None:
    enforcer = _enforcer(pm, max_tool_calls_per_task=10)

    enforcer.pre_invocation("1.1", "developer", 900.0)
    enforcer.post_invocation("1.1", "developer", _result(tool_calls=6))
    enforcer.pre_invocation("1.1", "test_engineer", 900.0)
    enforcer.post_invocation("1.1", "test_engineer", _result(tool_calls=4))  # exactly at the limit
    assert enforcer.usage("1.1").tool_calls == 10

    with pytest.raises(GuardrailExceededError) as used_up:
        enforcer.pre_invocation("1.1", "reviewer", 900.0)
    assert used_up.value.limit == "tool_calls"
    assert "no tool calls left for the reviewer call (10 of 10 used)" in used_up.value.message

    other = _enforcer(pm, max_tool_calls_per_task=10)
    other.pre_invocation("1.2", "developer", 900.0)
    with pytest.raises(GuardrailExceededError) as over:
        other.post_invocation("1.2", "developer", _result(tool_calls=11))
    assert over.value.limit == "tool_calls"
    assert "11 tool calls, over the limit of 10" in over.value.message


def test_usage_is_recorded_in_the_ledger_and_a_new_process_starts_from_it(pm: PlanManager) -> None:
    clock = FakeClock()
    first = _enforcer(pm, clock, max_tool_calls_per_task=10, max_duration_s_per_task=900.0)
    first.pre_invocation("1.1", "developer", 900.0)
    clock.advance(800.0)
    first.post_invocation("1.1", "developer", _result(tool_calls=7, cost_usd=0.5))
    recorded = pm.usage_for("1.1")
    assert (recorded.calls, recorded.tool_calls, recorded.seconds) == (1, 7, 800.0)
    assert pm.cost_usd_for("1.1") == 0.5

    # A second process (an inline resume, a crash resume) has only the ledger to go by.
    later = FakeClock()
    second = _enforcer(pm, later, max_tool_calls_per_task=10, max_duration_s_per_task=900.0)
    assert second.usage("1.1") == TaskUsage(
        task_id="1.1", calls=1, tool_calls=7, duration_s=800.0, cost_usd=0.5
    )
    assert second.pre_invocation("1.1", "developer", 900.0) == pytest.approx(100.0)
    later.advance(20.0)
    second.post_invocation("1.1", "developer", _result(tool_calls=2))
    assert second.usage("1.1") == TaskUsage(
        task_id="1.1", calls=2, tool_calls=9, duration_s=820.0, cost_usd=0.5
    )
    with pytest.raises(GuardrailExceededError, match="12 tool calls, over the limit of 10"):
        second.post_invocation("1.1", "developer", _result(tool_calls=3))
    # The breaching call was recorded before the limit said no: a third process refuses at once.
    third = _enforcer(pm, FakeClock(), max_tool_calls_per_task=10)
    with pytest.raises(GuardrailExceededError, match="no tool calls left"):
        third.pre_invocation("1.1", "developer", 900.0)


def test_usage_survives_a_reopened_ledger(repo: Path) -> None:
    with PlanManager(repo) as manager:
        manager.init_plan(make_plan(1))
        manager.record_usage("1.1", "developer", tool_calls=4, seconds=12.5, cost_usd=None)
    with PlanManager(repo) as reopened:
        usage = reopened.usage_for("1.1")
        assert (usage.calls, usage.tool_calls, usage.seconds) == (1, 4, 12.5)
        assert reopened.cost_usd_total == 0.0
    replayed = PlanManager(repo, use_snapshot=False)
    replayed.load()
    assert replayed.usage_for("1.1").tool_calls == 4
    replayed.close()


def test_diff_limit_judges_the_current_diff_not_a_running_sum(pm: PlanManager) -> None:
    enforcer = _enforcer(pm, max_diff_bytes=1000)

    # Three attempts of 600 bytes each: 1800 bytes re-counted, but never more than 600 at a time.
    assert [enforcer.diff_size_problem(600) for _ in range(3)] == [None] * 3
    assert enforcer.diff_size_problem(1000) is None

    problem = enforcer.diff_size_problem(1001)
    assert problem is not None and "diff is 1001 bytes, over the limit of 1000" in problem
    assert "guardrails.max_diff_bytes" in problem
    assert enforcer.diff_size_problem(10) is None  # a smaller retry is back under the limit


def test_cost_is_in_the_ledger_before_the_budget_breach_is_raised(pm: PlanManager, repo: Path) -> None:
    enforcer = _enforcer(pm, cost_budget_usd_per_plan=1.0)

    enforcer.pre_invocation("1.1", "developer", 900.0)
    enforcer.post_invocation("1.1", "developer", _result(cost_usd=0.6))
    enforcer.pre_invocation("1.1", "judge", 900.0)
    with pytest.raises(BudgetExceededError) as caught:
        enforcer.post_invocation("1.1", "judge", _result(cost_usd=0.55))

    error = caught.value
    assert error.exit_code == EXIT_SUSPENDED == 3
    assert error.spent_usd == pytest.approx(1.15)
    assert error.budget_usd == 1.0
    assert re.fullmatch(
        r"budget reached: \$1\.15 of \$1\.00; raise guardrails\.cost_budget_usd_per_plan "
        r"\(e\.g\. AUTODEV_GUARDRAILS__COST_BUDGET_USD_PER_PLAN=\d+\.\d\d\) and run `autodev resume`",
        error.message,
    )
    # Not a GuardrailExceededError: the orchestrator must suspend the run, not block the task.
    assert not isinstance(error, GuardrailExceededError)
    assert pm.cost_usd_total == pytest.approx(1.15)
    assert pm.cost_usd_for("1.1") == pytest.approx(1.15)

    with pytest.raises(BudgetExceededError):
        enforcer.pre_invocation("1.2", "developer", 900.0)
    pm.close()

    # The running total lives in the ledger: a new process is still over the budget.
    with PlanManager(repo) as reopened:
        assert reopened.cost_usd_total == pytest.approx(1.15)
        resumed = _enforcer(reopened, cost_budget_usd_per_plan=1.0)
        with pytest.raises(BudgetExceededError, match=r"budget reached: \$1\.15 of \$1\.00"):
            resumed.pre_invocation("1.2", "developer", 900.0)
        raised = _enforcer(reopened, cost_budget_usd_per_plan=2.0)
        assert raised.pre_invocation("1.2", "developer", 900.0) == 900.0


def test_budget_breach_wins_over_a_per_task_breach(pm: PlanManager) -> None:
    enforcer = _enforcer(pm, cost_budget_usd_per_plan=0.5, max_tool_calls_per_task=1)
    enforcer.pre_invocation("1.1", "developer", 900.0)
    with pytest.raises(BudgetExceededError):
        enforcer.post_invocation("1.1", "developer", _result(tool_calls=5, cost_usd=0.5))
    assert pm.cost_usd_total == pytest.approx(0.5)


def test_without_a_budget_unpriced_calls_record_their_usage_as_unknown_cost(pm: PlanManager) -> None:
    enforcer = _enforcer(pm)
    head = pm.ledger_head

    for _ in range(3):
        enforcer.pre_invocation("1.1", "developer", 900.0)
        enforcer.post_invocation("1.1", "developer", _result(tool_calls=1, cost_usd=None))

    assert pm.ledger_head.seq == head.seq + 3
    assert pm.cost_usd_total == 0.0
    assert pm.unknown_cost_calls == 3
    assert pm.usage_for("1.1").unknown_cost_calls == 3
    assert enforcer.usage("1.1").calls == 3
    assert pm.usage_for("1.1").tool_calls == 3


def test_under_a_budget_an_unknown_cost_refuses_the_next_call(pm: PlanManager) -> None:
    enforcer = _enforcer(pm, cost_budget_usd_per_plan=5.0)
    unpriced = AgentResult(success=True, model="gpt-5.5", tokens_in=1000, tokens_out=100)

    # The call itself is kept: its work is done and paid for.
    enforcer.post_invocation("1.1", "developer", unpriced)
    with pytest.raises(CostUnknownError) as caught:
        enforcer.pre_invocation("1.1", "reviewer", 900.0)

    assert caught.value.exit_code == EXIT_SUSPENDED
    assert isinstance(caught.value, BudgetExceededError)
    assert '[price_table."gpt-5.5"]' in caught.value.message
    assert "guardrails.unknown_cost" in caught.value.message
    # Recorded before the refusal: nothing about the call is lost.
    assert pm.unknown_cost_calls == 1
    entry = list(pm.usage_entries())[-1]
    assert entry.payload["model"] == "gpt-5.5" and "cost_usd" not in entry.payload


def test_warn_counts_an_unknown_cost_apart_and_goes_on(pm: PlanManager) -> None:
    enforcer = _enforcer(pm, cost_budget_usd_per_plan=1.0, unknown_cost="warn")

    enforcer.post_invocation("1.1", "developer", _result(cost_usd=0.5))
    enforcer.post_invocation("1.1", "developer", _result(cost_usd=None))

    assert pm.cost_usd_total == pytest.approx(0.5)
    assert pm.unknown_cost_calls == 1
    with pytest.raises(BudgetExceededError):
        enforcer.post_invocation("1.1", "developer", _result(cost_usd=0.5))


def test_estimate_prices_unknown_tokens_at_the_fallback_price(pm: PlanManager) -> None:
    enforcer = _enforcer(
        pm,
        cost_budget_usd_per_plan=1.0,
        unknown_cost="estimate",
        unknown_model_price={"input_per_mtok": 10.0, "output_per_mtok": 100.0},
    )
    unpriced = AgentResult(success=True, model="mystery", tokens_in=20_000, tokens_out=1_000)
    no_tokens = AgentResult(success=True, model="mystery")

    enforcer.post_invocation("1.1", "developer", unpriced)
    enforcer.post_invocation("1.1", "developer", no_tokens)

    assert pm.cost_usd_total == pytest.approx(0.3)
    assert pm.usage_for("1.1").estimated_cost_usd == pytest.approx(0.3)
    assert pm.estimated_cost_usd == pytest.approx(0.3)
    # A call with no token counts cannot be estimated: it stays unknown, and the run goes on.
    assert pm.unknown_cost_calls == 1
    first, second = list(pm.usage_entries())[-2:]
    assert first.payload["cost_estimated"] is True
    assert "cost_usd" not in second.payload


def test_a_call_the_provider_refused_costs_nothing_rather_than_an_unknown_amount(pm: PlanManager) -> None:
    enforcer = _enforcer(pm, cost_budget_usd_per_plan=1.0)
    refused = AgentResult.failure("rate_limited", "429 Too Many Requests")

    enforcer.post_invocation("1.1", "developer", refused)

    assert pm.unknown_cost_calls == 0
    assert list(pm.usage_entries())[-1].payload["cost_usd"] == 0.0


def test_each_call_is_recorded_with_its_phase_step_model_tokens_and_duration(pm: PlanManager) -> None:
    enforcer = _enforcer(pm)
    result = AgentResult(
        success=True,
        cost_usd=0.25,
        cost_estimated=True,
        model="claude-sonnet-5-5",
        tokens_in=3100,
        tokens_cached=2000,
        tokens_cache_write=1000,
        tokens_out=10,
        duration_s=12.5,
        tool_calls=2,
    )

    enforcer.post_invocation("1.1", "reviewer", result, phase="execute", step="review", attempt=2)

    payload = list(pm.usage_entries())[-1].payload
    assert payload == {
        "task_id": "1.1",
        "role": "reviewer",
        "tool_calls": 2,
        "seconds": payload["seconds"],
        "cost_usd": 0.25,
        "phase": "execute",
        "step": "review",
        "attempt": 2,
        "model": "claude-sonnet-5-5",
        "tokens_in": 3100,
        "tokens_out": 10,
        "tokens_cache_read": 2000,
        "tokens_cache_write": 1000,
        "call_s": 12.5,
        "cost_estimated": True,
    }


def test_budget_is_not_missed_by_float_rounding(pm: PlanManager) -> None:
    enforcer = _enforcer(pm, cost_budget_usd_per_plan=1.0)
    for _ in range(9):
        enforcer.post_invocation("1.1", "developer", _result(cost_usd=0.1))
    # Ten times 0.1 adds up to 0.9999999999999999 in floating point; that is the budget, not under it.
    with pytest.raises(BudgetExceededError, match=r"\$1\.00 of \$1\.00"):
        enforcer.post_invocation("1.1", "developer", _result(cost_usd=0.1))
    assert pm.cost_usd_total < 1.0


def test_usage_of_a_task_without_calls_is_zero(pm: PlanManager) -> None:
    enforcer = _enforcer(pm)
    assert enforcer.usage("1.3") == TaskUsage(
        task_id="1.3", calls=0, tool_calls=0, duration_s=0.0, cost_usd=0.0
    )


def test_waiting_for_the_provider_is_not_the_tasks_time(pm: PlanManager) -> None:
    clock = FakeClock()
    enforcer = _enforcer(pm, clock, max_duration_s_per_task=100.0)

    enforcer.pre_invocation("1.1", "developer", 900.0)
    clock.advance(10)
    enforcer.post_invocation("1.1", "developer", AgentResult.failure("rate_limited", "429"))
    clock.advance(60)  # the back-off
    enforcer.exclude_wait("1.1", 60)
    assert enforcer.pre_invocation("1.1", "developer", 900.0) == pytest.approx(90.0)
    clock.advance(5)
    enforcer.post_invocation("1.1", "developer", _result())

    assert enforcer.usage("1.1").duration_s == pytest.approx(15.0)
    assert pm.usage_for("1.1").seconds == pytest.approx(15.0)
