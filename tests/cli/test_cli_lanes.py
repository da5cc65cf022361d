"""``autodev lanes`` and ``autodev list`` through the installed executable, on a plan with efforts and
priorities and the default lanes (fast: <1h, unblock first, slice jobs; slow: 1h, priority first)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import assert_clean_error, autodev
from support.projects import mini_project

PLAN = """# Plan: Lanes

## Phase 1: Work

### Task 1.1: Small blocker
- Effort: <1h
- Priority: P3

### Task 1.2: Small, alone
- Effort: <1h
- Priority: P1

### Task 1.3: Slow and urgent
- Effort: 1h
- Priority: P0
- Depends: 1.1

### Task 1.4: Slow, whenever
- Effort: 1h

### Task 1.5: Too big to do in one go
- Effort: 1d
- Priority: P2
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = mini_project(tmp_path / "mini")
    plan = tmp_path / "plan.md"
    plan.write_text(PLAN)
    assert autodev(root, "plan", "--from-markdown", str(plan)).code == 0
    return root


def test_lanes_counts_what_each_lane_may_take_and_what_waits(repo: Path) -> None:
    result = autodev(repo, "lanes")

    assert result.code == 0, result.err
    assert result.out.splitlines() == [
        "fast: 3 pickable (1 slice) · 0 waiting · no session",
        "slow: 1 pickable · 1 waiting · no session",
    ]


def test_the_runner_order_of_each_lane_follows_its_policy(repo: Path) -> None:
    fast = autodev(repo, "list", "--lane", "fast", "--runner")
    slow = autodev(repo, "list", "--lane", "slow", "--runner")

    # unblock: 1.1 first (a P0 task waits on it, so it is as urgent as P0), then by effective priority.
    assert fast.out.splitlines() == ["1.1", "1.2", "slice:1.5"]
    assert slow.out.splitlines() == ["1.4"]


def test_list_shows_lane_model_effort_and_effective_priority(repo: Path) -> None:
    rows = [line.split("\t") for line in autodev(repo, "list").out.splitlines()]

    assert rows[0] == ["1.1", "fast", "opus", "<1h", "P0", "pending"]
    assert rows[4] == ["1.5", "fast slice", "opus", "1d", "P2", "pending"]


def test_an_unknown_lane_is_a_one_line_error(repo: Path) -> None:
    assert_clean_error(autodev(repo, "list", "--lane", "medium", "--runner"))


def test_status_shows_each_tasks_lane_and_whether_it_is_a_slice_job(repo: Path) -> None:
    tasks = {task["id"]: task for task in json.loads(autodev(repo, "status", "--json").out)["tasks"]}
    table = autodev(repo, "status", "--all").out

    assert {task_id: (task["lane"], task["slice_job"]) for task_id, task in tasks.items()} == {
        "1.1": ("fast", False),
        "1.2": ("fast", False),
        "1.3": ("slow", False),
        "1.4": ("slow", False),
        "1.5": ("fast", True),
    }
    assert tasks["1.5"]["effort"] == "1d" and tasks["1.5"]["model"] is None
    assert "Lane" in table and "fast (slice)" in table


def test_status_still_answers_when_the_configuration_does_not_load(repo: Path) -> None:
    (repo / ".autodev" / "config.toml").write_text("[lanes.fast]\nefforts = ['1w']\n")

    result = autodev(repo, "status", "--json")

    assert result.code == 0, result.err
    assert {task["lane"] for task in json.loads(result.out)["tasks"]} == {None}
