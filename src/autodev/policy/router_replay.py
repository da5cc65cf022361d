"""What became of the routed calls, derived from what the ledger already records, and the offline report.

Nothing is recorded for an outcome: ``derive`` reads the ``route`` of each ``delegation_decided`` entry
and the entries that follow it. The call's own ``usage_recorded`` entry (same task and role, next in
order) gives its seconds, cost and model. Its outcome is that of the task attempt it served: ``passed``
when the task completed, ``retried`` when it got another attempt (``task_retry``, an automatic retry),
``blocked`` when it was blocked; a plan-phase call passed when its plan step was recorded done. An attempt
that has not ended, or was rolled back, has no outcome yet, and nothing else is claimed.

``report`` folds the calls into what ``autodev router replay`` prints: coverage, shadow alternatives, the
recommendations a preferences file changes (re-recommended from the candidates and predictions recorded
then), outcomes, pass rate, latency, cost, retries, human interventions and policy violations. It is a
sensitivity report over recorded predictions, not a claim about what another route would have produced.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autodev.adapters.sandbox import SANDBOXES
from autodev.config.schema import PolicySettings
from autodev.policy.decisions import PolicyInputs, decide
from autodev.policy.replay import InvalidRecord, LoggedDecision
from autodev.policy.router import (
    AUTONOMY_MANUAL_SHARE,
    AUTONOMY_OUTCOMES,
    ROUTER_VERSION,
    Preferences,
    RouteRecord,
    recommend,
)

__all__ = [
    "ROUTER_OPS",
    "Autonomy",
    "Derived",
    "RoutedCall",
    "RouterReport",
    "autonomy",
    "derive",
    "report",
]

Outcome = Literal["passed", "retried", "blocked"]

# The ledger ops ``derive`` reads; everything else is skipped unread.
ROUTER_OPS = frozenset(
    {
        "delegation_decided",
        "usage_recorded",
        "task_status",
        "task_retry",
        "tasks_blocked",
        "automatic_retry_granted",
        "task_reverted",
        "plan_init",
        "plan_step_done",
        "approval_requested",
        "check_waived",
        "task_retried",
        "task_model_set",
    }
)
# The decisions under which the call was made.
_RAN = frozenset({"execute", "resume_worker", "spawn"})


@dataclass(slots=True)
class RoutedCall:
    """One routed decision, what its call used, and how its attempt ended (None: not yet, or not known)."""

    seq: int
    task_id: str
    role: str
    family: str
    inputs: dict[str, Any]
    decision: str
    record: RouteRecord
    call_s: float | None = None
    cost_usd: float | None = None
    used: bool = False
    outcome: Outcome | None = None

    @property
    def ran(self) -> bool:
        return self.decision in _RAN


@dataclass(slots=True)
class Derived:
    """The routed calls of a ledger, and what the ledger says around them."""

    calls: list[RoutedCall] = field(default_factory=list)
    legacy_skipped: int = 0
    not_routed: int = 0
    invalid: list[InvalidRecord] = field(default_factory=list)
    retries: int = 0
    interventions: Counter[str] = field(default_factory=Counter)
    outside_write_scope: int = 0


def _usage_key(task_id: str) -> str:
    # Plan-phase calls are budgeted per role ("plan:<role>"); their decisions name the plan ("plan").
    return "plan" if task_id.startswith("plan:") else task_id


def derive(entries: Iterable[LoggedDecision]) -> Derived:
    """Every routed call of ``entries`` (ledger order, ``ROUTER_OPS`` at least) with its usage and outcome."""
    found = Derived()
    routing = False  # a route was recorded: what follows is this feature's
    decided = False  # a decision was logged at all
    awaiting_usage: defaultdict[tuple[str, str], deque[RoutedCall]] = defaultdict(deque)
    open_attempts: defaultdict[str, list[RoutedCall]] = defaultdict(list)
    open_plan_steps: defaultdict[str, list[RoutedCall]] = defaultdict(list)

    def end(task_id: str, outcome: Outcome | None) -> None:
        for call in open_attempts.pop(task_id, []):
            call.outcome = outcome

    for entry in entries:
        op, payload = entry.op, entry.payload
        if op == "delegation_decided":
            decided = True
            if "route" not in payload:
                if routing:
                    found.not_routed += 1
                else:
                    found.legacy_skipped += 1
                continue
            routing = True
            call = _routed(entry, found)
            if call is None:
                continue
            found.calls.append(call)
            if call.ran:
                awaiting_usage[(call.task_id, call.role)].append(call)
                if call.task_id == "plan":
                    open_plan_steps[call.role].append(call)
                else:
                    open_attempts[call.task_id].append(call)
        elif op == "usage_recorded":
            if not decided:
                found.legacy_skipped += 1  # an agent call made before decisions were logged
                continue
            waiting = awaiting_usage.get(
                (_usage_key(str(payload.get("task_id", ""))), str(payload.get("role")))
            )
            if waiting:
                call = waiting.popleft()
                call.used = True
                seconds = payload.get("call_s")
                call.call_s = float(seconds) if isinstance(seconds, int | float) else None
                cost = payload.get("cost_usd")
                call.cost_usd = float(cost) if isinstance(cost, int | float) else None
        elif not routing:
            continue
        elif op == "task_retry" or op == "automatic_retry_granted":
            found.retries += 1
            end(str(payload.get("task_id")), "retried")
        elif op == "task_status":
            target = payload.get("to")
            if target == "complete":
                end(str(payload.get("task_id")), "passed")
            elif target == "blocked":
                end(str(payload.get("task_id")), "blocked")
                found.outside_write_scope += "outside_write_scope" in str(payload.get("reason", ""))
        elif op == "tasks_blocked":
            for item in payload.get("tasks", []):
                end(str(item.get("id")), "blocked")
        elif op == "task_reverted":
            end(str(payload.get("task_id")), None)
        elif op == "plan_init":
            open_attempts.clear()
            open_plan_steps.clear()
        elif op == "plan_step_done":
            for call in open_plan_steps.pop(str(payload.get("role")), []):
                call.outcome = "passed"
        elif op == "approval_requested":
            found.interventions["approvals_requested"] += 1
        elif op == "check_waived":
            found.interventions["waivers"] += 1
        elif op == "task_retried":
            found.interventions["retries_by_hand"] += 1
        elif op == "task_model_set" and payload.get("by") == "user":
            found.interventions["model_changes_by_hand"] += 1
    return found


def _routed(entry: LoggedDecision, found: Derived) -> RoutedCall | None:
    try:
        raw = entry.payload["route"]
        version = raw.get("version") if isinstance(raw, dict) else None
        if version != ROUTER_VERSION:
            raise ValueError(f"route version {version!r} is not {ROUTER_VERSION}")
        record = RouteRecord.model_validate(raw)
        count = len(record.candidates)
        indexes = (record.baseline, record.executed, record.recommended)
        if any(index is not None and not 0 <= index < count for index in indexes):
            raise ValueError("a route index names no candidate")
        inputs = entry.payload["inputs"]
        decision = entry.payload["decision"]
        return RoutedCall(
            seq=entry.seq,
            task_id=str(inputs["task_id"]),
            role=str(inputs["role"]),
            family=str(inputs["family"]),
            inputs=dict(inputs),
            decision=str(decision["route"]),
            record=record,
        )
    except (KeyError, TypeError, ValueError, ValidationError) as exc:
        problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        found.invalid.append(InvalidRecord(seq=entry.seq, problem=problem))
        return None


class Autonomy(BaseModel):
    """Whether ``router.mode = autonomous`` may be set: enough completed shadow outcomes, few manual."""

    model_config = ConfigDict(extra="forbid")

    shadow_outcomes: int
    manual_selections: int
    needed: int = AUTONOMY_OUTCOMES
    max_manual_share: float = AUTONOMY_MANUAL_SHARE

    @property
    def manual_share(self) -> float:
        return self.manual_selections / self.shadow_outcomes if self.shadow_outcomes else 0.0

    @property
    def allowed(self) -> bool:
        return self.shadow_outcomes >= self.needed and self.manual_share < self.max_manual_share

    def summary(self) -> str:
        return (
            f"{self.shadow_outcomes} completed shadow outcome(s), {self.manual_selections} of them manual "
            f"({self.manual_share:.1%}); autonomous needs {self.needed} with under "
            f"{self.max_manual_share:.0%} manual"
        )


def autonomy(derived: Derived) -> Autonomy:
    """The counts the autonomous gate looks at: calls routed in shadow mode whose attempt ended, and of
    those the ones a person's pin held away from the recommendation."""
    completed = [
        call
        for call in derived.calls
        if call.ran and call.record.mode == "shadow" and call.outcome is not None
    ]
    return Autonomy(
        shadow_outcomes=len(completed), manual_selections=sum(bool(call.record.manual) for call in completed)
    )


class Figures(BaseModel):
    """Outcomes and what the calls used."""

    model_config = ConfigDict(extra="forbid")

    passed: int = 0
    retried: int = 0
    blocked: int = 0
    open: int = 0
    pass_rate: float | None = None
    latency_s_total: float = 0.0
    latency_s_mean: float | None = None
    latency_s_median: float | None = None
    cost_usd_known: float = 0.0
    calls_cost_unknown: int = 0
    normalized_cost_units: int = 0


class RouterReport(BaseModel):
    """What ``autodev router replay`` prints (``--json``: this object)."""

    model_config = ConfigDict(extra="forbid")

    routes: int = 0
    recommended: int = 0
    coverage: float | None = None
    calls: int = 0
    shadow_alternatives: int = 0
    manual_selections: int = 0
    changed_recommendations: int = 0
    changes: dict[str, int] = Field(default_factory=dict)
    pins_refused: dict[str, int] = Field(default_factory=dict)
    figures: Figures = Field(default_factory=Figures)
    retries: int = 0
    interventions: dict[str, int] = Field(default_factory=dict)
    policy_violations: dict[str, int] = Field(default_factory=dict)
    by_family: dict[str, dict[str, int]] = Field(default_factory=dict)
    autonomy: Autonomy
    legacy_skipped: int = 0
    not_routed: int = 0
    invalid: list[InvalidRecord] = Field(default_factory=list)
    note: str = (
        "an offline sensitivity report: recommendations re-made from the candidates and predictions recorded "
        "with each call; it is not a causal claim about what another route would have produced"
    )


def report(derived: Derived, policy: PolicySettings, preferences: Preferences | None = None) -> RouterReport:
    """Fold ``derived`` into the replay report, re-recommending every route under ``preferences``."""
    out = RouterReport(autonomy=autonomy(derived))
    changes: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    families: defaultdict[str, Counter[str]] = defaultdict(Counter)
    rejected = 0
    latencies: list[float] = []
    figures = Figures()
    for call in derived.calls:
        record = call.record
        out.routes += 1
        recommended = record.recommended
        if preferences is not None:
            recommended, why = recommend(record.candidates, record.baseline, call.family, preferences)
            if why is not None:
                refused[why] += 1
            if recommended != record.recommended:
                before, after = record.candidate(record.recommended), record.candidate(recommended)
                changes[f"{before.key if before else 'none'} -> {after.key if after else 'none'}"] += 1
        out.recommended += recommended is not None
        rejected += _rejected_by_policy(call, recommended, policy)
        family = families[call.family]
        family["routes"] += 1
        if not call.ran:
            continue
        out.calls += 1
        out.shadow_alternatives += recommended is not None and recommended != record.executed
        out.manual_selections += bool(record.manual)
        figures.normalized_cost_units += policy.units(record.candidates[record.executed].tier)
        if call.outcome is None:
            figures.open += 1
        else:
            setattr(figures, call.outcome, getattr(figures, call.outcome) + 1)
            family["ended"] += 1
            family["passed"] += call.outcome == "passed"
        if call.call_s is not None:
            latencies.append(call.call_s)
        if call.cost_usd is not None:
            figures.cost_usd_known += call.cost_usd
        elif call.used:
            figures.calls_cost_unknown += 1
    ended = figures.passed + figures.retried + figures.blocked
    figures.pass_rate = round(figures.passed / ended, 3) if ended else None
    if latencies:
        figures.latency_s_total = round(sum(latencies), 3)
        figures.latency_s_mean = round(statistics.fmean(latencies), 3)
        figures.latency_s_median = round(statistics.median(latencies), 3)
    figures.cost_usd_known = round(figures.cost_usd_known, 6)
    out.coverage = round(out.recommended / out.routes, 3) if out.routes else None
    out.changed_recommendations = sum(changes.values())
    out.changes = dict(sorted(changes.items()))
    out.pins_refused = dict(sorted(refused.items()))
    out.figures = figures
    out.retries = derived.retries
    out.interventions = {
        key: derived.interventions[key]
        for key in ("approvals_requested", "waivers", "retries_by_hand", "model_changes_by_hand")
    }
    out.policy_violations = {
        "recommendation_rejected_by_policy": rejected,
        "outside_write_scope": derived.outside_write_scope,
    }
    out.by_family = {name: dict(sorted(counts.items())) for name, counts in sorted(families.items())}
    out.legacy_skipped = derived.legacy_skipped
    out.not_routed = derived.not_routed
    out.invalid = list(derived.invalid)
    return out


def _rejected_by_policy(call: RoutedCall, recommended: int | None, policy: PolicySettings) -> bool:
    """Whether the delegation policy rejects the recommended route of ``call``: as recorded when the call
    was given that route, else re-decided from the call's recorded inputs on the recommended platform and
    tier, with the workers that were under way then."""
    record = call.record
    if recommended is None:
        return False
    if recommended == record.executed:
        return call.decision == "reject"
    chosen = record.candidates[recommended]
    try:
        inputs = PolicyInputs.model_validate(call.inputs)
    except ValidationError:
        return False
    sandbox = SANDBOXES.get(chosen.platform)
    update: dict[str, Any] = {"harness": chosen.platform, "warm_session": None}
    if sandbox is not None:
        update["harness_modes"] = tuple(sorted(sandbox.modes))
    if inputs.write_mode != "read_only":
        update["tier"] = chosen.tier
    return decide(inputs.model_copy(update=update), policy).route == "reject"
