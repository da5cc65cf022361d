"""The makespan benchmark on a small DAG, run by AutoDev with real git: every task's file lands, the git
processes it counts are the run's own (``run_git_now`` is AutoDev's again afterwards), and the landings
whose branch moved are replayed in-process, since each task adds a file of its own
(``bench/makespan.py`` runs the same measurement on the 60-task DAG)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from autodev.workspace import git as git_module
from autodev.workspace.trees import splice_tree

sys.path.insert(0, str(Path(__file__).parents[3] / "bench"))
import makespan


def test_the_makespan_benchmark_counts_the_runs_git_processes_and_replays_without_merge_tree(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spliced: list[str | None] = []

    def counting_splice(*args: Any) -> str | None:
        spliced.append(splice_tree(*args))
        return spliced[-1]

    monkeypatch.setattr(git_module, "splice_tree", counting_splice)
    real_run_git_now = git_module.run_git_now
    plan = makespan.dag_plan(8, seed=3)

    run = makespan.measure(plan, 0.05, 4)

    assert run["problems"] == []
    assert git_module.run_git_now is real_run_git_now
    commands = run["git_commands_per_task"]
    assert isinstance(commands, dict)
    assert {"add", "write-tree", "diff", "restore"} <= set(commands)
    assert run["git_processes_per_task"] == pytest.approx(sum(commands.values()), abs=0.1)
    # Tasks landed on a branch that had moved, and each replay was written without git.
    assert spliced and None not in spliced
    assert "merge-tree" not in commands
    # What the machine cost just before and just after the run, outside its timed part.
    assert set(run["machine"]) == {"before", "after"}
