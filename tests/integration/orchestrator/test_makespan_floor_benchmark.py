"""The makespan floor's dispatcher on a small DAG: every task lands its file on the branch through the git
commands a task of ``bench/makespan.py`` runs, and ``--git off`` starts none (``bench/makespan_floor.py``
runs the same measurement on the 60-task DAG)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).parents[3] / "bench"))
import makespan
import makespan_floor


@pytest.mark.parametrize("git", [True, False])
def test_the_floor_lands_every_task_with_a_tasks_git_commands_or_none(git: bool) -> None:
    tasks = makespan.dag_plan(8, seed=3).iter_tasks()
    assert any(task.depends_on for task in tasks)

    run_result = anyio.run(functools.partial(makespan_floor.measure, tasks, 0.0, 3, git=git, syncs=False))

    assert run_result["problems"] == []
    commands = run_result["git_ms_median"]
    assert isinstance(commands, dict)
    if git:
        # The snapshot (its tree and its diff written from the file, as AutoDev writes a new file's), the
        # fast-forward and the look after it for every task; the replays where the branch moved are
        # written in-process, as AutoDev writes a change no landing met.
        assert {"add", "restore", "status"} <= set(commands)
        assert not {"write-tree", "diff", "merge-tree"} & set(commands)
        assert run_result["git_processes_per_task"] >= 3
    else:
        assert commands == {} and run_result["git_processes_per_task"] == 0


def test_the_floor_with_its_snapshots_written_by_git_adds_a_write_tree_and_a_diff_to_every_task() -> None:
    tasks = makespan.dag_plan(8, seed=3).iter_tasks()

    def measure(snapshot: makespan_floor.Snapshot) -> dict[str, object]:
        run = functools.partial(
            makespan_floor.measure, tasks, 0.0, 3, git=True, syncs=False, snapshot=snapshot
        )
        result: dict[str, object] = anyio.run(run)
        return result

    from_files, by_git = measure("files"), measure("write-tree")

    assert by_git["problems"] == []
    commands = by_git["git_ms_median"]
    assert isinstance(commands, dict) and {"add", "write-tree", "diff"} <= set(commands)
    processes, fewer = by_git["git_processes_per_task"], from_files["git_processes_per_task"]
    assert isinstance(processes, float) and isinstance(fewer, float)
    assert processes == pytest.approx(fewer + 2)


def test_the_floor_with_its_snapshots_written_in_process_lands_every_task_without_add_or_write_tree() -> None:
    tasks = makespan.dag_plan(8, seed=3).iter_tasks()

    run_result = anyio.run(
        functools.partial(makespan_floor.measure, tasks, 0.0, 3, git=True, syncs=False, snapshot="in-process")
    )

    assert run_result["problems"] == []  # every task's file is on the branch, through the trees written
    commands = run_result["git_ms_median"]
    assert isinstance(commands, dict)
    assert "restore" in commands  # the landings still write the main checkout through git
    assert not {"add", "write-tree", "diff", "merge-tree"} & set(commands)
