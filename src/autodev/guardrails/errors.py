"""The guardrails' own errors: a plan over its cost budget, and a task stuck repeating itself.

``BudgetExceededError`` is deliberately not a ``GuardrailExceededError``: the orchestrator blocks a task on a
``GuardrailExceededError``, whereas a spent budget is a property of the whole plan and no task's fault. The
run suspends with exit code 3 and everything recorded so far stays in place for ``autodev resume``.
"""

from __future__ import annotations

from autodev.config.template import format_toml_key
from autodev.errors import EXIT_SUSPENDED, AutodevError, GuardrailExceededError
from autodev.guardrails.loop_detector import LOOP_DETECTED_REASON

__all__ = ["BudgetExceededError", "CostUnknownError", "LoopDetectedError"]


class BudgetExceededError(AutodevError):
    """The plan's recorded agent cost reached ``guardrails.cost_budget_usd_per_plan``; the run suspends."""

    exit_code = EXIT_SUSPENDED

    def __init__(self, spent_usd: float, budget_usd: float) -> None:
        self.spent_usd = spent_usd
        self.budget_usd = budget_usd
        # Suggest room for as much again as was spent: a concrete value is easier to act on than "...".
        suggested = spent_usd + budget_usd
        super().__init__(
            f"budget reached: ${spent_usd:.2f} of ${budget_usd:.2f}; raise "
            f"guardrails.cost_budget_usd_per_plan (e.g. AUTODEV_GUARDRAILS__COST_BUDGET_USD_PER_PLAN="
            f"{suggested:.2f}) and run `autodev resume`"
        )


class CostUnknownError(BudgetExceededError):
    """A call's cost is unknown while a budget is set and ``guardrails.unknown_cost`` is ``refuse``: the
    budget cannot be enforced, so the run suspends (exit 3) as it would at the budget itself."""

    def __init__(
        self,
        spent_usd: float,
        budget_usd: float,
        *,
        task_id: str,
        role: str,
        model: str | None,
        tokens_known: bool,
    ) -> None:
        self.spent_usd = spent_usd
        self.budget_usd = budget_usd
        self.model = model
        on = f" on model {model}" if model else ""
        if tokens_known and model:
            why = "the CLI reported no cost and the price table has no price for the model"
            fix = (
                f"add its price as [{format_toml_key(('price_table', model))}] in .autodev/config.toml "
                "(input_per_mtok, output_per_mtok), or set"
            )
        else:
            why = "the CLI reported neither a cost nor token counts for it"
            fix = "set"
        AutodevError.__init__(
            self,
            f"the cost of the {role} call of {task_id}{on} is unknown ({why}), so the budget of "
            f"${budget_usd:.2f} cannot be enforced; {fix} guardrails.unknown_cost to warn or estimate, "
            "then run `autodev resume`",
        )


class LoopDetectedError(GuardrailExceededError):
    """An agent role returned the same output for the same task too many times in a row.

    ``LoopDetector`` itself only reports a loop; this error is for callers that prefer raising. It is a
    ``GuardrailExceededError`` with ``limit="loop_detected"`` so that the one handler that blocks a task on
    a guardrail breach blocks it with that reason too.
    """

    def __init__(self, message: str, *, task_id: str | None = None, role: str | None = None) -> None:
        self.role = role
        super().__init__(message, task_id=task_id, limit=LOOP_DETECTED_REASON)
