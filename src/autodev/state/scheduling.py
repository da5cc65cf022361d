"""Which ready tasks start first: the scheduler seam.

The plan manager knows which pending tasks *may* start (every dependency done, no file held by a task in
flight); a ``TaskScheduler`` says in which order they are offered, so that a task that would take the files
of a better one is not picked first. Today's two policies:

- ``PlanOrder``: phase, then position in the phase: what one worker does, and what a reader of the plan
  expects;
- ``LongestChainFirst``: the tasks heading the longest chains of dependents first (the critical path, ties
  in plan order): with several workers the run ends soonest when the longest chain never waits.

``scheduler_for`` picks between them. Lanes and other policies are further implementations of the protocol.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from autodev.state.schemas import Task

__all__ = ["LongestChainFirst", "PlanOrder", "TaskScheduler", "scheduler_for"]


class TaskScheduler(Protocol):
    """Orders a plan's tasks for picking; must not change them."""

    @property
    def follows_statuses(self) -> bool:
        """Whether the order depends on the tasks' statuses or on anything else that changes during a run.
        False: the same plan (and ``children`` mapping) is always offered in the same order, which the plan
        manager then keeps instead of asking again after every task."""
        ...

    def order(self, tasks: Sequence[Task], children: Mapping[str, Sequence[str]]) -> Sequence[Task]:
        """``tasks`` (every task of the plan, in plan order) in the order they are offered to start.
        ``children`` maps a task id to the ids of the tasks that depend on it."""
        ...


class PlanOrder:
    """Phase, then position in the phase."""

    follows_statuses = False

    def order(self, tasks: Sequence[Task], children: Mapping[str, Sequence[str]]) -> Sequence[Task]:
        return tasks


class LongestChainFirst:
    """The heads of the longest chains of dependents first, ties in plan order.

    Statuses change while the graph does not: the order (as positions in plan order) is computed once per
    ``children`` mapping, which the plan manager builds anew for each plan, and then only indexed.
    """

    follows_statuses = False

    def __init__(self) -> None:
        self._children: Mapping[str, Sequence[str]] | None = None
        self._positions: list[int] = []

    def order(self, tasks: Sequence[Task], children: Mapping[str, Sequence[str]]) -> Sequence[Task]:
        if children is not self._children or len(self._positions) != len(tasks):
            self._children, self._positions = children, _by_chain_length(tasks, children)
        return [tasks[position] for position in self._positions]


def _by_chain_length(tasks: Sequence[Task], children: Mapping[str, Sequence[str]]) -> list[int]:
    """Positions in ``tasks``, longest chain of dependents first, ties in plan order."""
    chain: dict[str, int] = {}
    for task in reversed(tasks):  # dependents come later in a valid plan's order...
        below = [chain.get(child, 0) for child in children.get(task.id, ())]
        chain[task.id] = 1 + max(below, default=0)
    # ...but a cross-phase plan may point backwards: finish the longest paths by relaxation.
    changed = True
    while changed:
        changed = False
        for task in tasks:
            longest = 1 + max((chain[child] for child in children.get(task.id, ())), default=0)
            if longest > chain[task.id]:
                chain[task.id], changed = longest, True
    return sorted(range(len(tasks)), key=lambda index: (-chain[tasks[index].id], index))


def scheduler_for(workers: int) -> TaskScheduler:
    """Plan order for one worker; with more, the longest chain first."""
    return LongestChainFirst() if workers > 1 else PlanOrder()
