"""Lanes of work and their pick order: which pending task each lane takes next, and why.

A task belongs to the lane whose ``efforts`` hold its ``Effort`` (no effort: the lane holding ``<1h``); a
pending task bigger than ``slice_above`` is a *slice job*, which only the lane with ``slices = true`` takes.
A task is *pickable* when it is pending and every task it depends on is complete or skipped.

The *effective priority* of a task is the best (lowest ``P``) of its own and that of every open task waiting
on it, directly or not: a P3 task that a P0 task waits on is as urgent as the P0 task. A task with no
``Priority:`` line counts as P3. The two pick policies order the pickable tasks of a lane by these keys:

- ``unblock``: tasks other open tasks wait on first; then more (transitive) waiters first; then effective
  priority; then plan order;
- ``priority``: effective priority first; then tasks a task of another lane waits on; then more direct
  waiters first; then plan order.

``LaneView`` computes all of it once for a plan (linear in tasks and dependency edges, plus the transitive
waiters of each task) and answers per lane.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest

from autodev.config.schema import AutodevConfig
from autodev.state.schemas import EFFORTS, PRIORITIES, Effort, Task
from autodev.state.vocabulary import DONE_STATUSES, IN_FLIGHT_STATUSES

__all__ = ["LaneCounts", "LaneOrder", "LaneView", "Pick"]

# A task without a Priority line is picked after those somebody prioritised.
_UNSET_PRIORITY = len(PRIORITIES) - 1
_SATISFIED = frozenset({"complete", "skipped"})


@dataclass(frozen=True, slots=True)
class Pick:
    """A task a lane may take now; ``slice_job`` when it is to be split rather than implemented."""

    task_id: str
    slice_job: bool = False

    def __str__(self) -> str:
        return f"slice:{self.task_id}" if self.slice_job else self.task_id


@dataclass(frozen=True, slots=True)
class LaneCounts:
    """One lane at a glance: its pickable tasks (of them slice jobs) and its tasks still waiting."""

    lane: str
    pickable: int
    slices: int
    waiting: int

    def __str__(self) -> str:
        slices = f" ({self.slices} slice{'s' if self.slices != 1 else ''})" if self.slices else ""
        return f"{self.lane}: {self.pickable} pickable{slices} · {self.waiting} waiting"


class LaneView:
    """The plan's tasks seen through ``config``'s lanes (see the module docstring)."""

    def __init__(self, tasks: Sequence[Task], config: AutodevConfig) -> None:
        self._config = config
        self._tasks = list(tasks)
        self._index = {task.id: n for n, task in enumerate(self._tasks)}
        by_id = {task.id: task for task in self._tasks}
        open_ids = {task.id for task in self._tasks if task.status not in DONE_STATUSES}
        self._direct: dict[str, list[str]] = {task.id: [] for task in self._tasks}
        for task in self._tasks:
            if task.id in open_ids:
                for dep in task.depends_on:
                    if dep in self._direct:
                        self._direct[dep].append(task.id)
        self._waiters = {task_id: self._all_waiters(task_id) for task_id in self._direct}
        # A task that has slices (open or done) is never a slice job again.
        self._sliced = {task.parent for task in self._tasks if task.parent is not None}
        self._lane = {task.id: self._lane_of(task) for task in self._tasks}
        self._priority = {
            task.id: min([_priority(task), *(_priority(by_id[waiter]) for waiter in self._waiters[task.id])])
            for task in self._tasks
        }
        self._pickable = {
            task.id
            for task in self._tasks
            if task.status == "pending"
            and all(by_id[dep].status in _SATISFIED for dep in task.depends_on if dep in by_id)
        }

    # --- queries ----------------------------------------------------------------------------------------

    def lane_of(self, task_id: str) -> str:
        return self._lane[task_id]

    def is_slice_job(self, task_id: str) -> bool:
        task = self._tasks[self._index[task_id]]
        return (
            task.status == "pending"
            and task_id not in self._sliced
            and _bigger_than(task, self._config.slice_above)
        )

    def effective_priority(self, task_id: str) -> str:
        return PRIORITIES[self._priority[task_id]]

    def waiters(self, task_id: str) -> frozenset[str]:
        """The open tasks waiting on ``task_id``, directly or through others."""
        return self._waiters[task_id]

    def order(self, lane: str, *, phase_id: str | None = None) -> list[Pick]:
        """The lane's pickable tasks in its pick order (slice jobs included on the slicing lane); only
        those of ``phase_id`` when given."""
        settings = self._config.lanes[lane]
        picks = [
            task.id
            for task in self._tasks
            if task.id in self._pickable
            and self._lane[task.id] == lane
            and (phase_id is None or task.phase_id == phase_id)
        ]
        self._sort(picks, settings.order, lane)
        return [Pick(task_id, self.is_slice_job(task_id)) for task_id in picks]

    def merged_order(self) -> list[Pick]:
        """Every lane's pickable tasks in one list, slice jobs included, in the ``priority`` order (a task of
        another lane waiting on one counts for it): what a session that works every lane takes next."""
        picks = [task.id for task in self._tasks if task.id in self._pickable]
        self._sort(picks, "priority", None)
        return [Pick(task_id, self.is_slice_job(task_id)) for task_id in picks]

    def _sort(self, picks: list[str], order: str, lane: str | None) -> None:
        if order == "unblock":
            picks.sort(
                key=lambda task_id: (
                    not self._direct[task_id],
                    -len(self._waiters[task_id]),
                    self._priority[task_id],
                    self._index[task_id],
                )
            )
        else:
            picks.sort(
                key=lambda task_id: (
                    self._priority[task_id],
                    not any(
                        self._lane[waiter] != (lane or self._lane[task_id])
                        for waiter in self._waiters[task_id]
                    ),
                    -len(self._direct[task_id]),
                    self._index[task_id],
                )
            )

    def is_pickable(self, task_id: str) -> bool:
        return task_id in self._pickable

    def next_for(self, lane: str) -> Pick | None:
        """What ``lane`` takes next: its first pick, else its fallback lane's (and so on)."""
        current: str | None = lane
        while current is not None:
            picks = self.order(current)
            if picks:
                return picks[0]
            current = self._config.lanes[current].fallback
        return None

    def counts(self) -> list[LaneCounts]:
        """Per configured lane: pickable tasks (slice jobs among them) and pending tasks still waiting."""
        rows = []
        for lane in self._config.lanes:
            picks = self.order(lane)
            waiting = sum(
                1
                for task in self._tasks
                if task.status == "pending" and task.id not in self._pickable and self._lane[task.id] == lane
            )
            rows.append(LaneCounts(lane, len(picks), sum(pick.slice_job for pick in picks), waiting))
        return rows

    # --- internals --------------------------------------------------------------------------------------

    def _lane_of(self, task: Task) -> str:
        return self._config.lane_of(task.effort, slice_job=_bigger_than(task, self._config.slice_above))

    def _all_waiters(self, task_id: str) -> frozenset[str]:
        seen: set[str] = set()
        stack = list(self._direct[task_id])
        while stack:
            waiter = stack.pop()
            if waiter not in seen:
                seen.add(waiter)
                stack.extend(self._direct.get(waiter, ()))
        return frozenset(seen)


def _priority(task: Task) -> int:
    return PRIORITIES.index(task.priority) if task.priority is not None else _UNSET_PRIORITY


def _bigger_than(task: Task, slice_above: Effort) -> bool:
    return task.effort is not None and EFFORTS.index(task.effort) > EFFORTS.index(slice_above)


class LaneOrder:
    """The execute phase's ``TaskScheduler`` when ``lanes_enabled``: each lane offers as many of its picks
    as its ``concurrency`` leaves room for (a lane with nothing pickable offers its fallback's), and the
    lanes take turns, so that one lane's queue cannot hold every worker.

    A task in flight counts toward the lane its effort belongs to, and so does a pending task the dispatcher
    ``held`` (one being sliced, one an agent session claimed): it takes that lane's room and is not offered.
    The order is computed anew at each call (``LaneView`` over the whole plan); the plan manager then drops
    what cannot start (held files).
    """

    follows_statuses = True  # each lane's room is what its tasks in flight leave

    def __init__(self, config: AutodevConfig) -> None:
        self._config = config
        self.held: frozenset[str] = frozenset()

    def order(self, tasks: Sequence[Task], children: Mapping[str, Sequence[str]]) -> Sequence[Task]:
        view = LaneView(tasks, self._config)
        busy = Counter(
            view.lane_of(task.id)
            for task in tasks
            if task.status in IN_FLIGHT_STATUSES or task.id in self.held
        )
        # One phase at a time unless phases may overlap: the first with an unfinished task, as the
        # dispatcher's per-phase mode has it (a lane's room must not go to tasks that cannot start yet).
        phase = None
        if not self._config.cross_phase_parallelism_enabled:
            phase = next((task.phase_id for task in tasks if task.status not in DONE_STATUSES), None)
        queued: set[str] = set(self.held)
        queues: list[list[str]] = []
        for lane, settings in self._config.lanes.items():
            room = settings.concurrency - busy[lane]
            if room <= 0:
                continue
            picks = self._picks(view, lane, queued, phase)[:room]
            queued.update(picks)
            queues.append(picks)
        by_id = {task.id: task for task in tasks}
        return [by_id[task_id] for turn in zip_longest(*queues) for task_id in turn if task_id is not None]

    def _picks(self, view: LaneView, lane: str, taken: set[str], phase: str | None) -> list[str]:
        current: str | None = lane
        while current is not None:
            picks = [
                pick.task_id for pick in view.order(current, phase_id=phase) if pick.task_id not in taken
            ]
            if picks:
                return picks
            current = self._config.lanes[current].fallback
        return []
