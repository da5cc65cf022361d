"""What the run report shows, read from the ledger and the evidence files only (never from a live run), so a
report can be made for any past, killed or resumed run, read-only, beside a live one.

The timeline comes from the ledger's own timestamps: each task's status changes mark the end of one step and
the start of the next (developer → gates → review → tests → tournament and completion → merge), a retry sends
the task back to the developer for a new attempt, and a block ends it. Each step is coloured by how it ended:
it moved the task on (``pass``), sent it back or blocked it (``fail``), or had not ended when the ledger did
(``open``). The critical path is the chain of dependencies that ended last.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from autodev.config import AutodevConfig
from autodev.errors import EvidenceError, StateError
from autodev.files import MAX_INPUT_FILE_BYTES, led_by, read_bounded_text
from autodev.state.evidence import read_evidence
from autodev.state.paths import AutodevPaths
from autodev.state.plan_manager import EvidenceRef, PlanManager
from autodev.state.schemas import (
    CompletionEvidence,
    CriticEvidence,
    GateEvidence,
    ReviewEvidence,
    Task,
    TestEvidence,
    TournamentEvidence,
)

__all__ = [
    "GateRow",
    "ReportData",
    "ReviewRow",
    "Segment",
    "TaskView",
    "TournamentPass",
    "cost_rows",
    "gather",
]

Outcome = Literal["pass", "fail", "open"]
# The step a task is in while it has a status, and the step's name on the timeline.
_STEP_OF = {
    "in_progress": "developer",
    "coded": "gates",
    "auto_gated": "review",
    "reviewed": "tests",
    "tested": "completion",
    "tournamented": "merge",
}
# A diff bigger than this is cut in the page (the evidence file keeps all of it).
_DIFF_CHARS = 200_000


@dataclass(frozen=True, slots=True)
class Segment:
    """One step of one attempt on the timeline, in seconds since the run's first entry."""

    step: str
    attempt: int
    start: float
    end: float
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class GateRow:
    gate: str
    status: str
    argv: str
    excerpt: str


@dataclass(frozen=True, slots=True)
class ReviewRow:
    attempt: int
    verdict: str
    issues: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class TournamentPass:
    """One pass of a task's implementation tournament: what was decided, the Borda points of each
    candidate (most first) and each judge as ``(number, counted, ranking best first, why not counted)``."""

    number: int
    status: str
    winner: str | None
    margin: int | None
    scores: tuple[tuple[str, int], ...]
    judges: tuple[tuple[int, bool, tuple[str, ...], str], ...]

    @classmethod
    def from_summary(cls, summary: dict[str, Any]) -> TournamentPass:
        """From one entry of ``TournamentEvidence.history``; fields a record lacks read as empty."""
        scores = summary.get("scores") or {}
        judges = summary.get("judges") or []
        return cls(
            number=int(summary.get("pass_no") or 0),
            status=str(summary.get("status") or ""),
            winner=summary.get("winner"),
            margin=summary.get("margin"),
            scores=tuple(
                sorted(((str(k), int(v)) for k, v in scores.items()), key=lambda kv: (-kv[1], kv[0]))
            ),
            judges=tuple(
                (
                    int(judge.get("judge_no") or 0),
                    bool(judge.get("valid")) and bool(judge.get("ranking")),
                    tuple(str(candidate) for candidate in judge.get("ranking") or ()),
                    str(judge.get("reason") or ""),
                )
                for judge in judges
                if isinstance(judge, dict)
            ),
        )


@dataclass(slots=True)
class TaskView:
    """One task as the report shows it."""

    task: Task
    segments: list[Segment] = field(default_factory=list)
    critical: bool = False
    cost_by_role: dict[str, float] = field(default_factory=dict)
    tokens_by_role: dict[str, int] = field(default_factory=dict)
    diff: str = ""
    gates: list[GateRow] = field(default_factory=list)
    reviews: list[ReviewRow] = field(default_factory=list)
    tests: str = ""
    proof: str = ""
    proof_checks: list[tuple[str, str, str]] = field(default_factory=list)
    critic: str = ""
    tournament: str = ""
    tournament_passes: list[TournamentPass] = field(default_factory=list)
    lane: str | None = None

    @property
    def attempts(self) -> int:
        return max((segment.attempt for segment in self.segments), default=0)


@dataclass(slots=True)
class ReportData:
    """Everything the page shows."""

    title: str
    plan_id: str
    intent: str
    phases: list[tuple[str, str, list[TaskView]]]
    span_s: float
    agent_s: float
    cost_usd: float
    tokens_in: int
    tokens_out: int
    cost_by_role_model: dict[tuple[str, str], float]
    tokens_by_role_model: dict[tuple[str, str], int]
    budget_usd: float | None
    started_at: str
    totals: dict[str, int] = field(default_factory=dict)

    @property
    def tasks(self) -> list[TaskView]:
        return [view for _, _, views in self.phases for view in views]

    @property
    def parallelism(self) -> float:
        """How many tasks were at work at once on average: the tasks' busy time over the run's span."""
        busy = sum(segment.end - segment.start for view in self.tasks for segment in view.segments)
        return busy / self.span_s if self.span_s > 0 else 0.0


# The ledger ops that move a task from one status to another.
_MOVES = frozenset({"task_status", "task_retry", "task_retried", "task_reverted"})


def _target(op: str, payload: dict[str, Any], now: str) -> str:
    """The status ``op`` leaves the task in: a retry of a role's own step stays where it is."""
    if op == "task_reverted":
        return "pending"
    if op == "task_retried":
        return "in_progress"
    return str(payload.get("to") or now)


def _seconds(ts: str, origin: datetime) -> float:
    return (datetime.fromisoformat(ts) - origin).total_seconds()


def gather(repo_root: Path, config: AutodevConfig | None = None) -> ReportData:
    """The report of the repository's current plan, from its ledger and evidence (read-only); ``config`` gives
    the lanes and the budget (none without it)."""
    paths = AutodevPaths(repo_root)
    with PlanManager.open(repo_root, readonly=True) as plans:
        plan = plans.plan
        views = {task.id: TaskView(task) for task in plans.tasks()}
        refs = {task_id: plans.evidence_for(task_id) for task_id in views}
        entries = list(plans.ledger.entries())
    origin = datetime.fromisoformat(entries[0].ts) if entries else datetime.now()
    last = _seconds(entries[-1].ts, origin) if entries else 0.0
    # Each task's open step (step, attempt, start), its status and its attempt as the ledger goes.
    open_steps: dict[str, tuple[str, int, float]] = {}
    status_now: dict[str, str] = {}
    attempts: dict[str, int] = {}
    cost_by_role_model: dict[tuple[str, str], float] = defaultdict(float)
    tokens_by_role_model: dict[tuple[str, str], int] = defaultdict(int)
    agent_s = cost = 0.0
    tokens_in = tokens_out = 0
    for entry in entries:
        payload = entry.payload
        task_id = str(payload.get("task_id", ""))
        when = _seconds(entry.ts, origin)
        if entry.op == "usage_recorded":
            usd = float(payload.get("cost_usd") or 0.0)
            role = str(payload.get("role", "?"))
            cost += usd
            agent_s += float(payload.get("call_s") or 0.0)
            tokens_in += int(payload.get("tokens_in") or 0)
            tokens_out += int(payload.get("tokens_out") or 0)
            key = (role, str(payload.get("model") or "unknown"))
            tokens = int(payload.get("tokens_in") or 0) + int(payload.get("tokens_out") or 0)
            cost_by_role_model[key] += usd
            tokens_by_role_model[key] += tokens
            view = views.get(task_id)
            if view is not None:
                view.cost_by_role[role] = view.cost_by_role.get(role, 0.0) + usd
                view.tokens_by_role[role] = view.tokens_by_role.get(role, 0) + tokens
            continue
        if task_id not in views or entry.op not in _MOVES:
            continue
        view = views[task_id]
        current = open_steps.pop(task_id, None)
        target = _target(entry.op, payload, status_now.get(task_id, "pending"))
        if current is not None:
            step, attempt, start = current
            moved_on = entry.op == "task_status" and target not in ("blocked", "pending", "skipped")
            view.segments.append(Segment(step, attempt, start, when, "pass" if moved_on else "fail"))
        status_now[task_id] = target
        if target in _STEP_OF:
            if "retry_count" in payload:
                attempts[task_id] = int(payload["retry_count"]) + 1
            elif entry.op == "task_reverted" or task_id not in attempts:
                attempts[task_id] = 1
            open_steps[task_id] = (_STEP_OF[target], attempts[task_id], when)
    for task_id, (step, attempt, start) in open_steps.items():
        views[task_id].segments.append(Segment(step, attempt, start, last, "open"))
    for task_id, view in views.items():
        _read_evidence(paths, view, refs[task_id])
        if view.tournament:
            # The tournament runs in the step between the tests and the merge, before the completion check.
            view.segments = [
                replace(segment, step="tournament") if segment.step == "completion" else segment
                for segment in view.segments
            ]
        if config is not None and view.task.effort is not None:
            view.lane = config.lane_of(view.task.effort, slice_job=False)
    _mark_critical_path(views)
    totals: dict[str, int] = defaultdict(int)
    for view in views.values():
        totals[view.task.status] += 1
    totals["retries"] = sum(view.task.retry_count for view in views.values())
    phases = [
        (phase.id, phase.title, [views[task.id] for task in phase.tasks if task.id in views])
        for phase in plan.phases
    ]
    return ReportData(
        title=plan.title or plan.plan_id,
        plan_id=plan.plan_id,
        intent=_intent(paths),
        phases=phases,
        span_s=last,
        agent_s=agent_s,
        cost_usd=cost,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost_by_role_model=dict(cost_by_role_model),
        tokens_by_role_model=dict(tokens_by_role_model),
        budget_usd=config.guardrails.cost_budget_usd_per_plan if config is not None else None,
        started_at=entries[0].ts if entries else "",
        totals=dict(totals),
    )


def _intent(paths: AutodevPaths) -> str:
    try:
        return read_bounded_text(
            paths.spec,
            limit=MAX_INPUT_FILE_BYTES,
            what="the saved intent",
            follow_symlinks=False,
            error=led_by(paths.spec, StateError),
        )
    except (OSError, StateError):
        return ""  # a plan saved from markdown has no intent of its own


def _of_kind(refs: list[EvidenceRef], kind: str) -> list[EvidenceRef]:
    return [ref for ref in refs if ref.kind == kind]


def _read_evidence(paths: AutodevPaths, view: TaskView, refs: list[EvidenceRef]) -> None:
    """The task's diff, its last gates, every review, its tests, its proof and the critic's diagnosis."""
    root = paths.repo_root
    patches = _of_kind(refs, "patch") or _of_kind(refs, "developer_patch")
    if patches:
        try:
            text = (root / patches[-1].path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        view.diff = (
            text
            if len(text) <= _DIFF_CHARS
            else text[:_DIFF_CHARS] + "\n… (cut; the evidence file has it all)"
        )
    for ref in refs:
        if ref.kind not in ("gates", "review", "test", "completion", "critic", "tournament"):
            continue
        try:
            evidence = read_evidence(root / ref.path)
        except EvidenceError:
            continue
        if isinstance(evidence, GateEvidence):
            view.gates = [
                GateRow(
                    check.gate,
                    check.status,
                    " ".join(check.runs[-1].argv) if check.runs else "",
                    (check.runs[-1].output_excerpt if check.runs else "") or (check.reason or ""),
                )
                for check in evidence.checks
            ]
        elif isinstance(evidence, ReviewEvidence):
            verdict = evidence.verdict or "no verdict"
            view.reviews.append(ReviewRow(evidence.attempt, verdict, tuple(evidence.issues)))
        elif isinstance(evidence, TestEvidence):
            run = (
                f"AutoDev's run: {evidence.run_passed} passed, {evidence.run_failed} failed"
                if evidence.run_total is not None
                else f"AutoDev's run: {evidence.run_status or 'not run'}"
            )
            claimed = f"claimed: {evidence.passed} passed, {evidence.failed} failed of {evidence.total}"
            view.tests = f"{claimed}; {run}" + ("" if evidence.agrees in (None, True) else " (they disagree)")
        elif isinstance(evidence, CompletionEvidence):
            view.proof = f"{evidence.verdict} (revision {evidence.revision[:12]})"
            view.proof_checks = [(check.id, check.status, check.reason or "") for check in evidence.checks]
        elif isinstance(evidence, TournamentEvidence):
            ending = "converged" if evidence.converged else "stopped at its pass limit"
            view.tournament = f"{evidence.passes} pass(es), winner {evidence.winner}, {ending}"
            view.tournament_passes = [
                TournamentPass.from_summary(entry) for entry in evidence.history if isinstance(entry, dict)
            ]
        elif isinstance(evidence, CriticEvidence):
            parts = [evidence.recommendation or "", *evidence.issues]
            view.critic = "; ".join(part for part in parts if part)


def _mark_critical_path(views: dict[str, TaskView]) -> None:
    """Mark the chain of dependencies that ended last: from the task that finished last, back through the
    dependency each step waited for longest."""
    ends = {task_id: max((s.end for s in view.segments), default=0.0) for task_id, view in views.items()}
    if not ends:
        return
    current: str | None = max(ends, key=lambda task_id: ends[task_id])
    while current is not None:
        views[current].critical = True
        deps = [dep for dep in views[current].task.depends_on if dep in views]
        current = max(deps, key=lambda dep: ends[dep]) if deps else None


def cost_rows(data: ReportData) -> list[tuple[str, str, float, int]]:
    """``(role, model, usd, tokens)`` rows of the cost chart, the most costly first."""
    rows = [
        (role, model, usd, data.tokens_by_role_model.get((role, model), 0))
        for (role, model), usd in data.cost_by_role_model.items()
    ]
    return sorted(rows, key=lambda row: (-row[2], -row[3], row[0], row[1]))
