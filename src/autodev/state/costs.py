"""What the current plan's agent calls cost, summed from the ledger: the figures of ``autodev cost``.

Every agent call is one ``usage_recorded`` entry (``GuardrailEnforcer.post_invocation``); ``cost_report``
folds the current plan's entries (``PlanManager.usage_entries``) into a total and one row per task, role,
model or phase. Nothing is taken from anywhere else, so the totals are the ledger's records by
construction, and a report read after a crash is the same as one read before it.

Three kinds of cost figure are kept apart, because a user deciding what a run cost needs to know which
numbers are the provider's and which are ours:

- ``cost_usd``: the sum of every known cost, the CLI's own figures and AutoDev's estimates alike;
- ``estimated_usd``: the part of ``cost_usd`` AutoDev computed from token counts and a price table;
- ``unknown_calls``: calls whose cost nobody knows. They add nothing to ``cost_usd``; a row made only of
  them has ``cost_usd`` None, never 0.

Records written before calls carried their phase, model and tokens group under ``phase`` ``plan`` or
``execute`` by their task key and under the model ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

from autodev.state.ledger import LedgerEntry

__all__ = ["GROUPINGS", "CostReport", "CostRow", "Grouping", "TaskFacts", "cost_report"]

Grouping = Literal["task", "role", "model", "phase", "lane", "effort"]
GROUPINGS: tuple[Grouping, ...] = get_args(Grouping)

# What the calls of the plan phase are filed under when grouped by task (their ledger key is
# ``plan:<role>``: each plan-phase role has limits of its own).
PLAN_PHASE_KEY = "plan"


@dataclass(frozen=True, slots=True)
class TaskFacts:
    """What a row by lane or effort needs to know of a task: its lane and its effort (None: not given)."""

    lane: str
    effort: str | None


@dataclass(slots=True)
class CostRow:
    """The calls of one task, role, model or phase (``key``), or of the whole plan."""

    key: str | None
    calls: int = 0
    cost_usd: float | None = None
    estimated_usd: float = 0.0
    unknown_calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    tokens_cache_read: int = 0
    tokens_cache_write: int = 0
    # Calls that reported no token counts at all (Cursor's CLI reports none).
    calls_without_tokens: int = 0
    duration_s: float = 0.0
    tool_calls: int = 0

    def add(self, payload: dict[str, Any]) -> None:
        self.calls += 1
        self.tool_calls += _count(payload.get("tool_calls"))
        cost = payload.get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            self.cost_usd = (self.cost_usd or 0.0) + float(cost)
            if payload.get("cost_estimated"):
                self.estimated_usd += float(cost)
        else:
            self.unknown_calls += 1
        if "tokens_in" not in payload and "tokens_out" not in payload:
            self.calls_without_tokens += 1
        self.tokens_in += _count(payload.get("tokens_in"))
        self.tokens_out += _count(payload.get("tokens_out"))
        self.tokens_cache_read += _count(payload.get("tokens_cache_read"))
        self.tokens_cache_write += _count(payload.get("tokens_cache_write"))
        call_s = payload.get("call_s")
        if isinstance(call_s, int | float) and not isinstance(call_s, bool):
            self.duration_s += float(call_s)

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["cost_usd"] = None if self.cost_usd is None else round(self.cost_usd, 6)
        data["estimated_usd"] = round(self.estimated_usd, 6)
        data["duration_s"] = round(self.duration_s, 3)
        return data


@dataclass(slots=True)
class CostReport:
    """The plan's total and its rows, largest known cost first (then by key)."""

    by: str
    total: CostRow
    rows: list[CostRow] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"by": self.by, "total": self.total.as_json(), "rows": [row.as_json() for row in self.rows]}


def cost_report(
    entries: Iterable[LedgerEntry],
    by: Grouping | Sequence[Grouping] = "task",
    *,
    tasks: Mapping[str, TaskFacts] | None = None,
) -> CostReport:
    """Fold ``usage_recorded`` entries into the plan's total and one row per ``by`` key (several keys:
    one row per combination, its key the values joined by `` · ``). ``lane`` and ``effort`` are the task's,
    from ``tasks`` (a call of no task of it, the plan phase's, has neither)."""
    groupings: tuple[Grouping, ...] = (by,) if isinstance(by, str) else tuple(by)
    total = CostRow(key=None)
    rows: dict[str | None, CostRow] = {}
    for entry in entries:
        if entry.op != "usage_recorded":
            continue
        payload = entry.payload
        total.add(payload)
        values = [_key(payload, grouping, tasks or {}) for grouping in groupings]
        key = values[0] if len(values) == 1 else " · ".join(value or "-" for value in values)
        row = rows.get(key)
        if row is None:
            row = rows[key] = CostRow(key=key)
        row.add(payload)
    ordered = sorted(
        rows.values(), key=lambda row: (-(row.cost_usd or 0.0), -row.unknown_calls, str(row.key))
    )
    return CostReport(by=",".join(groupings), total=total, rows=ordered)


def _key(payload: dict[str, Any], by: Grouping, tasks: Mapping[str, TaskFacts]) -> str | None:
    task_id = str(payload.get("task_id", ""))
    phase = payload.get("phase")
    if not isinstance(phase, str):
        phase = "plan" if task_id.startswith(f"{PLAN_PHASE_KEY}:") else "execute"
    if by == "task":
        return PLAN_PHASE_KEY if phase == "plan" else task_id
    if by == "phase":
        return phase
    if by in ("lane", "effort"):
        facts = tasks.get(task_id)
        return None if facts is None else (facts.lane if by == "lane" else facts.effort)
    value = payload.get(by)
    return value if isinstance(value, str) else None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
