"""Several agent sessions on one plan: ``autodev next`` picks and claims a task for the session asking.

A session takes tasks whose Model is at most its own (``--as``; none given: haiku only, with a hint): from
one lane in that lane's pick order, or from every lane in the ``priority`` order. A task another live session
claimed is skipped; a claim whose session is gone, or whose task is no longer pending, is not a claim. The
choice and the claim happen under the claims lock, so two sessions asking at once get different tasks.

Beside the pick, ``next`` says what the session's lanes wait for in other lanes (and who works those), and a
run that lands a task says which tasks of other lanes it made pickable, so that the sessions of those lanes
can be told. Orchestrated workers run each task on the task's own Model, whatever session started the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from autodev.config.schema import AutodevConfig
from autodev.orchestrator.lanes import LaneView, Pick
from autodev.state.claims import ALL_LANES, Claim, ClaimStore, SessionIdentity, SessionRecord
from autodev.state.plan_markdown import TIER_NAMES
from autodev.state.schemas import DEFAULT_TASK_TIER, MODEL_TIERS, ModelTier, Task
from autodev.state.vocabulary import DONE_STATUSES

__all__ = ["NextTask", "foreign_claims", "now_pickable_lines", "take_next", "waiting_lines"]

_MAX_WAITING_LINES = 10


@dataclass(slots=True)
class NextTask:
    """What ``take_next`` found: the task claimed (None: nothing to take now) and the lines to print."""

    pick: Pick | None
    task: Task | None
    lane: str | None
    lines: list[str] = field(default_factory=list)


def foreign_claims(store: ClaimStore, me: SessionIdentity, tasks: Sequence[Task]) -> dict[str, Claim]:
    """The live claims of other sessions on tasks that are still open, by task id."""
    open_ids = {task.id for task in tasks if task.status not in DONE_STATUSES}
    return {
        task_id: claim
        for task_id, claim in store.claims().items()
        if task_id in open_ids and claim.alive and not me.owns(claim)
    }


def take_next(
    tasks: Sequence[Task],
    config: AutodevConfig,
    store: ClaimStore,
    me: SessionIdentity,
    *,
    lane: str | None,
    session_tier: ModelTier | None,
) -> NextTask:
    """Pick the next task ``me`` may take and claim it (see the module docstring)."""
    lines: list[str] = []
    if me.pid_from_parent:
        lines.append(
            f"no AUTODEV_SESSION_PID (or CLAUDE_PID): the claim lasts while process {me.pid}, which ran "
            "autodev, runs; set it to the agent session's pid"
        )
    if session_tier is None:
        lines.append("no --as given: taking haiku tasks only (pass --as sonnet or --as opus to take more)")
    tier = session_tier or "fast"
    view = LaneView(tasks, config)
    by_id = {task.id: task for task in tasks}
    with store.locked():
        held = store.register(lane or ALL_LANES, TIER_NAMES[tier], me)
        if held is not None:
            lines.append(f"another live {lane or ALL_LANES} session holds this lane: {held.who()}")
        # A claim on a task that is no longer open is void: its session finished or left it.
        for task_id in store.claims():
            if task_id not in by_id or by_id[task_id].status in DONE_STATUSES:
                store.release(task_id)
        own = next(
            (
                claim
                for task_id, claim in store.claims().items()
                if me.owns(claim) and (lane is None or claim.lane == lane) and task_id in by_id
            ),
            None,
        )
        if own is not None:  # asked again: the task it already claimed, while it is open
            lines += waiting_lines(view, tasks, lane, store.sessions())
            return NextTask(Pick(own.id, view.is_slice_job(own.id)), by_id[own.id], own.lane, lines)
        taken = foreign_claims(store, me, tasks)
        candidates = view.order(lane) if lane is not None else view.merged_order()
        if not config.cross_phase_parallelism_enabled:
            # Phases in order: a session takes from the first unfinished phase, as a run does.
            phase = next((task.phase_id for task in tasks if task.status not in DONE_STATUSES), None)
            candidates = [pick for pick in candidates if by_id[pick.task_id].phase_id == phase]
        for pick in candidates:
            task = by_id[pick.task_id]
            if MODEL_TIERS.index(task.model or DEFAULT_TASK_TIER) > MODEL_TIERS.index(tier):
                continue
            if pick.task_id in taken:
                continue
            task_lane = view.lane_of(task.id)
            store.claim(task.id, lane=task_lane, model=TIER_NAMES[tier], me=me)
            lines += waiting_lines(view, tasks, lane, store.sessions())
            return NextTask(pick, task, task_lane, lines)
        lines += waiting_lines(view, tasks, lane, store.sessions())
    return NextTask(None, None, None, lines)


def waiting_lines(
    view: LaneView, tasks: Sequence[Task], lane: str | None, sessions: Mapping[str, SessionRecord]
) -> list[str]:
    """Pending tasks of ``lane`` (every lane: None) that wait on an open task of another lane, and who
    works that lane."""
    by_id = {task.id: task for task in tasks}
    lines: list[str] = []
    for task in tasks:
        if task.status != "pending" or view.is_pickable(task.id):
            continue
        if lane is not None and view.lane_of(task.id) != lane:
            continue
        for dep in task.depends_on:
            other = by_id.get(dep)
            if other is None or other.status in DONE_STATUSES:
                continue
            other_lane = view.lane_of(dep)
            if other_lane == view.lane_of(task.id):
                continue
            holder = sessions.get(other_lane)
            if holder is not None and holder.alive:
                tell = f"{holder.who()} works the {other_lane} lane: ask it to take {dep}"
            else:
                tell = f"no {other_lane} session: tell the owner"
            lines.append(f"{task.id} waits on {dep} ({other_lane} lane) → {tell}")
            if len(lines) >= _MAX_WAITING_LINES:
                return lines
    return lines


def now_pickable_lines(
    landed: Task, tasks: Sequence[Task], config: AutodevConfig, sessions: Mapping[str, SessionRecord]
) -> list[str]:
    """After ``landed`` completed: per task of another lane that it made pickable, whom to tell."""
    view = LaneView(tasks, config)
    own_lane = view.lane_of(landed.id)
    lines = []
    for task in tasks:
        if landed.id not in task.depends_on or not view.is_pickable(task.id):
            continue
        lane = view.lane_of(task.id)
        if lane == own_lane:
            continue
        holder = sessions.get(lane)
        if holder is not None and holder.alive:
            lines.append(f"notify {lane} {holder.who()}: now pickable {task.id}")
        else:
            lines.append(f"{lane} work now pickable: {task.id} (no session: tell the owner)")
    return lines
