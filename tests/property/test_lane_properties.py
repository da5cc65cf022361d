"""The lanes' pick order on random plans, and the lane rules on random configurations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from autodev.config import load_config
from autodev.config.schema import AutodevConfig
from autodev.orchestrator.lanes import LaneView
from autodev.state.schemas import EFFORTS, PRIORITIES, Task

STATUSES = ["pending", "pending", "pending", "complete", "skipped", "in_progress", "blocked"]


@st.composite
def plans(draw: st.DrawFn) -> list[Task]:
    count = draw(st.integers(min_value=1, max_value=25))
    tasks = []
    for n in range(count):
        deps = draw(st.sets(st.integers(min_value=0, max_value=n - 1), max_size=3)) if n else set()
        tasks.append(
            Task(
                id=f"t{n}",
                phase_id="1",
                title=f"task {n}",
                status=draw(st.sampled_from(STATUSES)),
                depends_on=[f"t{d}" for d in sorted(deps)],
                effort=draw(st.sampled_from([None, *EFFORTS])),
                priority=draw(st.sampled_from([None, *PRIORITIES])),
            )
        )
    # Some big tasks were sliced: tasks they depend on are their slices (each task a slice of one parent).
    parent_of: dict[str, str] = {}
    for task in tasks:
        if _big(task) and task.depends_on and draw(st.booleans()):
            for dep in task.depends_on:
                parent_of.setdefault(dep, task.id)
    return [task.model_copy(update={"parent": parent_of.get(task.id)}) for task in tasks]


def _big(task: Task) -> bool:
    return task.effort is not None and EFFORTS.index(task.effort) > EFFORTS.index(AutodevConfig().slice_above)


def _rank(priority: str) -> int:
    return PRIORITIES.index(priority)


@settings(max_examples=200, deadline=None)
@given(plans())
def test_every_pickable_task_is_offered_by_exactly_one_lane_in_its_policys_order(tasks: list[Task]) -> None:
    config = AutodevConfig()
    view = LaneView(tasks, config)
    by_id = {task.id: task for task in tasks}
    offered: dict[str, str] = {}
    for lane, lane_settings in config.lanes.items():
        picks = view.order(lane)
        for pick in picks:
            task = by_id[pick.task_id]
            assert pick.task_id not in offered, "offered by two lanes"
            offered[pick.task_id] = lane
            assert task.status == "pending"
            assert all(by_id[dep].status in ("complete", "skipped") for dep in task.depends_on)
            assert view.lane_of(task.id) == lane
            # Bigger than slice_above: on the slicing lane only, and a slice job unless already sliced.
            sliced = any(other.parent == task.id for other in tasks)
            assert pick.slice_job == (_big(task) and not sliced)
            assert not _big(task) or lane_settings.slices
        ids = [pick.task_id for pick in picks]
        if lane_settings.order == "unblock":
            waited_on = [bool(view.waiters(task_id)) for task_id in ids]
            assert waited_on == sorted(waited_on, reverse=True), "a task nobody waits on came first"
        else:
            ranks = [_rank(view.effective_priority(task_id)) for task_id in ids]
            assert ranks == sorted(ranks)
    ready = {
        task.id
        for task in tasks
        if task.status == "pending"
        and all(by_id[d].status in ("complete", "skipped") for d in task.depends_on)
    }
    assert set(offered) == ready


@settings(max_examples=200, deadline=None)
@given(plans())
def test_a_task_is_as_urgent_as_the_most_urgent_task_waiting_on_it(tasks: list[Task]) -> None:
    view = LaneView(tasks, AutodevConfig())
    by_id = {task.id: task for task in tasks}
    for task in tasks:
        effective = _rank(view.effective_priority(task.id))
        own = _rank(task.priority) if task.priority else len(PRIORITIES) - 1
        assert effective <= own
        for waiter in view.waiters(task.id):
            assert by_id[waiter].status not in ("complete", "skipped")
            assert effective <= _rank(view.effective_priority(waiter))


lane_names = st.sampled_from(["fast", "slow", "long", "x-1", "Bad", "all", "9lane"])


@st.composite
def lane_configs(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(lane_names, min_size=1, max_size=3, unique=True))
    lanes: dict[str, Any] = {}
    for name in names:
        lane: dict[str, Any] = {
            "efforts": draw(st.lists(st.sampled_from(EFFORTS), min_size=1, max_size=3, unique=True)),
            "order": draw(st.sampled_from(["unblock", "priority"])),
        }
        if draw(st.booleans()):
            lane["fallback"] = draw(st.sampled_from([*names, "nowhere"]))
        if draw(st.booleans()):
            lane["slices"] = draw(st.booleans())
        lanes[name] = lane
    return {"slice_above": draw(st.sampled_from(EFFORTS)), "lanes": lanes}


def _follows_the_rules(config: AutodevConfig) -> None:
    limit = EFFORTS.index(config.slice_above)
    owners: dict[str, str] = {}
    for name, lane in config.lanes.items():
        assert name[0].islower() and name != "all"
        for effort in lane.efforts:
            assert EFFORTS.index(effort) <= limit
            assert effort not in owners
            owners[effort] = name
        if lane.fallback is not None:
            assert lane.fallback in config.lanes
    assert set(owners) == set(EFFORTS[: limit + 1])
    assert sum(lane.slices for lane in config.lanes.values()) == 1
    for name in config.lanes:
        seen = {name}
        current = config.lanes[name].fallback
        while current is not None:
            assert current not in seen
            seen.add(current)
            current = config.lanes[current].fallback


@settings(max_examples=300, deadline=None)
@given(lane_configs())
def test_a_lane_configuration_is_accepted_only_when_it_follows_every_rule(raw: dict[str, Any]) -> None:
    try:
        config = AutodevConfig.model_validate(raw)
    except ValidationError as exc:
        assert "lanes" in str(exc) or "slice_above" in str(exc)
        return
    _follows_the_rules(config)


@pytest.mark.parametrize(
    ("lanes", "message"),
    [
        ({"Fast": {"efforts": ["<1h", "1h"]}}, "a lane name is a lower-case letter"),
        ({"all": {"efforts": ["<1h", "1h"]}}, "'all' is reserved"),
        ({"fast": {"efforts": ["<1h", "5h"]}}, "effort 5h is above slice_above"),
        ({"a": {"efforts": ["<1h", "1h"]}, "b": {"efforts": ["1h"]}}, "effort 1h is already lane a's"),
        ({"fast": {"efforts": ["<1h"]}}, "no lane takes effort 1h"),
        ({"fast": {"efforts": ["<1h", "1h"], "fallback": "slow"}}, "fallback 'slow' is not a lane"),
        (
            {"a": {"efforts": ["<1h"], "fallback": "b"}, "b": {"efforts": ["1h"], "fallback": "a"}},
            "a -> b -> a go round in a cycle",
        ),
        (
            {"a": {"efforts": ["<1h"], "slices": True}, "b": {"efforts": ["1h"], "slices": True}},
            "only one lane may take slice jobs",
        ),
        ({"fast": {"efforts": ["<1h", "1h"], "speed": 3}}, "speed"),
    ],
)
def test_each_lane_rule_is_an_error_saying_what_to_fix(lanes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        AutodevConfig.model_validate({"lanes": lanes})


def test_defining_a_lane_replaces_the_default_set_and_the_lane_of_small_tasks_slices() -> None:
    config = AutodevConfig.model_validate({"lanes": {"all-work": {"efforts": ["<1h", "1h"]}}})

    assert list(config.lanes) == ["all-work"]
    assert config.lanes["all-work"].slices
    assert config.lane_of(None) == config.lane_of("1h") == config.lane_of("<1h") == "all-work"


def test_a_lane_table_in_a_config_file_replaces_the_default_set(tmp_path: Path) -> None:
    (tmp_path / ".autodev").mkdir()
    (tmp_path / ".autodev" / "config.toml").write_text(
        '[lanes.all-work]\nefforts = ["<1h", "1h"]\norder = "priority"\n'
    )

    config = load_config(tmp_path, env={})

    assert list(config.lanes) == ["all-work"]
    assert config.lanes["all-work"].order == "priority" and config.lanes["all-work"].slices


def test_a_key_inside_a_lane_from_the_environment_merges_into_the_lanes_there_are(tmp_path: Path) -> None:
    config = load_config(tmp_path, env={"AUTODEV_LANES__FAST__CONCURRENCY": "2"})
    assert list(config.lanes) == ["fast", "slow"]
    assert config.lanes["fast"].concurrency == 2 and config.lanes["fast"].efforts == ["<1h"]

    (tmp_path / ".autodev").mkdir()
    (tmp_path / ".autodev" / "config.toml").write_text('[lanes.work]\nefforts = ["<1h", "1h"]\n')
    config = load_config(tmp_path, env={"AUTODEV_LANES__WORK__CONCURRENCY": "3"})
    assert list(config.lanes) == ["work"] and config.lanes["work"].concurrency == 3
