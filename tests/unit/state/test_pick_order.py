"""Which ready tasks are offered first: plan order, or the heads of the longest chains of dependents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from support.parallel import Spec, plan_of

from autodev.state.plan_manager import PlanManager
from autodev.state.scheduling import LongestChainFirst, scheduler_for
from autodev.state.schemas import Task


def test_longest_chain_first_offers_the_critical_path_and_keeps_plan_order_for_ties(tmp_path: Path) -> None:
    specs = [
        Spec("1.1"),
        Spec("1.2"),
        Spec("1.3", deps=("1.2",)),
        Spec("1.4", deps=("1.3",)),
        Spec("1.5"),
        Spec("1.6", deps=("1.5",)),
    ]
    chains = scheduler_for(workers=2)
    assert isinstance(chains, LongestChainFirst)
    with PlanManager.open(tmp_path) as manager:
        manager.init_plan(plan_of(specs))
        in_plan_order = [t.id for t in manager.next_pending_tasks(3)]
        chains_first = [t.id for t in manager.next_pending_tasks(3, scheduler=chains)]
        assert in_plan_order == ["1.1", "1.2", "1.5"]
        assert chains_first == ["1.2", "1.5", "1.1"]  # chains of 3, 2 and 1 task(s)
        assert [t.id for t in manager.next_pending_tasks(1, ["1.2"], scheduler=chains)] == ["1.5"]


def test_longest_chain_first_follows_dependencies_that_point_to_a_later_phase(tmp_path: Path) -> None:
    # Cross-phase plans may depend on a later phase's task: the chain 2.1 -> 1.2 -> 1.3 still counts.
    specs = [Spec("1.1"), Spec("1.2", deps=("2.1",)), Spec("1.3", deps=("1.2",)), Spec("2.1", phase="2")]
    with PlanManager.open(tmp_path) as manager:
        manager.init_plan(plan_of(specs))
        assert [t.id for t in manager.next_pending_tasks(1, scheduler=LongestChainFirst())] == ["2.1"]


class CountingOrder:
    """Plan order, counting how often the plan manager asks for it."""

    follows_statuses = False

    def __init__(self) -> None:
        self.asked = 0

    def order(self, tasks: Sequence[Task], children: Mapping[str, Sequence[str]]) -> Sequence[Task]:
        self.asked += 1
        return tasks


def _finish(manager: PlanManager, task_id: str) -> None:
    for status in ("in_progress", "coded", "auto_gated", "reviewed", "tested", "tournamented", "complete"):
        manager.update_task_status(task_id, status)


def test_an_order_that_ignores_statuses_is_asked_once_while_the_plan_keeps_its_tasks(tmp_path: Path) -> None:
    # The dispatcher asks after every task: ordering the whole plan each time made a run quadratic.
    order = CountingOrder()
    with PlanManager.open(tmp_path) as manager:
        manager.init_plan(plan_of([Spec(f"1.{n}") for n in range(1, 7)]))
        for n in range(1, 5):
            assert [t.id for t in manager.next_pending_tasks(1, scheduler=order)] == [f"1.{n}"]
            _finish(manager, f"1.{n}")
        assert order.asked == 1
        # Tasks added to the plan (slices here) are a new order.
        manager.add_tasks(
            [Task(id="1.6.1", phase_id="1", title="Slice")], phase_id="1", parent="1.6", by="a", reason="r"
        )
        assert [t.id for t in manager.next_pending_tasks(3, scheduler=order)] == ["1.5", "1.6.1"]
        assert order.asked == 2


def test_a_task_sent_back_to_pending_is_offered_again_before_later_ones(tmp_path: Path) -> None:
    order = CountingOrder()
    with PlanManager.open(tmp_path) as manager:
        manager.init_plan(plan_of([Spec("1.1"), Spec("1.2"), Spec("1.3")]))
        manager.update_task_status("1.1", "in_progress")
        manager.update_task_status("1.2", "in_progress")
        assert [t.id for t in manager.next_pending_tasks(5, scheduler=order)] == ["1.3"]
        # A speculative start rolled back, a lost worktree: the task is pending again, ahead of 1.3.
        manager.revert_task_to_pending("1.1", "rolled back")
        assert [t.id for t in manager.next_pending_tasks(5, scheduler=order)] == ["1.1", "1.3"]
        assert order.asked == 1


def test_an_order_that_follows_statuses_is_asked_every_time(tmp_path: Path) -> None:
    order = CountingOrder()
    order.follows_statuses = True
    with PlanManager.open(tmp_path) as manager:
        manager.init_plan(plan_of([Spec("1.1"), Spec("1.2")]))
        manager.next_pending_tasks(1, scheduler=order)
        manager.next_pending_tasks(1, scheduler=order)
        assert order.asked == 2


def test_a_task_frees_a_dependent_only_when_it_is_that_ones_last_open_dependency(tmp_path: Path) -> None:
    """What a landing asks before it has a worktree readied at its commit for the task it frees."""
    specs = [
        Spec("1.1"),
        Spec("1.2"),
        Spec("1.3", deps=("1.1", "1.2")),
        Spec("1.4", deps=("1.2",)),
        Spec("1.5"),
    ]
    with PlanManager.open(tmp_path) as manager:
        manager.init_plan(plan_of(specs))
        assert not manager.frees_a_task("1.1")  # 1.3 still waits on 1.2
        assert manager.frees_a_task("1.2")  # 1.4 waits on nothing else
        assert not manager.frees_a_task("1.5")  # nothing depends on it
        _finish(manager, "1.2")
        assert manager.frees_a_task("1.1")  # now 1.3's last open dependency
        manager.update_task_status("1.3", "in_progress")
        assert not manager.frees_a_task("1.1")  # started already: nothing left to free
