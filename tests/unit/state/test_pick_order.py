"""Which ready tasks are offered first: plan order, or the heads of the longest chains of dependents."""

from __future__ import annotations

from pathlib import Path

from support.parallel import Spec, plan_of

from autodev.state.plan_manager import PlanManager
from autodev.state.scheduling import LongestChainFirst, scheduler_for


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
