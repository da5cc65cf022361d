"""Isolated writers and the adoption of their verified changes.

With ``write_mode = isolated`` even a lone task works in a worktree of its own and its verified change lands
on the main checkout as a strict fast-forward. When landing would overwrite somebody's work (here: the user
creates the file the task adds, right before it lands), the change is kept and waits as ``pending_adoption``:
the run ends with exit 3 naming it, the user's file untouched, the dependents waiting; ``adopt`` lands it
once the way is clear, ``discard`` gives it up with the change kept for ``retry``, and a later run adopts it
by itself. Scripted agents, real git, real QA tools, the real executor wrapped only to play the user's edit.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.orchestration import Recorder, config_for, demo_project, git_log

from autodev.adapters.scripted import ScriptedAdapter
from autodev.orchestrator import Orchestrator
from autodev.orchestrator.execute.adoption import AdoptionPendingError, AdoptionRefusedError
from autodev.orchestrator.execute.executor import LocalExecutor
from autodev.orchestrator.execute.task_flow import TaskContext
from autodev.orchestrator.run_context import RunContext
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import Task
from autodev.state.status_reader import read_status

FAST_GATES = {"qa_gates.secretscan.enabled": False, "qa_gates.build.enabled": False}
USERS_DRAFT = "# the user's own draft of slug.py\n"
TASK_FILE = "textutils/slug.py"
LANDED = ["autodev: 1.2 Export slugify from the package", "autodev: 1.1 Implement slugify"]


class UserWritesBeforeLanding(LocalExecutor):
    """The real flow; right before task 1.1 lands, the user creates the file it adds in the main checkout."""

    async def run_task(self, session: RunContext, task_id: str, context: TaskContext) -> Task:
        original = context.before_integration

        async def user_edits_then_land() -> None:
            await original()
            if task_id == "1.1":
                (session.repo_root / TASK_FILE).write_text(USERS_DRAFT)

        context.before_integration = user_edits_then_land
        return await super().run_task(session, task_id, context)


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()


def _orchestrator(tmp_path: Path, executor: Any = None) -> tuple[Path, Orchestrator]:
    setup = demo_project(tmp_path)
    architect = next(entry for entry in setup.script.entries if entry.role == "architect")
    plan = tmp_path / "plan.md"
    plan.write_text(architect.text, encoding="utf-8")
    orch = Orchestrator(
        setup.repo_root,
        config=config_for(setup.repo_root, write_mode="isolated", **FAST_GATES),
        adapter=ScriptedAdapter(script=setup.script),
        listener=Recorder(),
        write_scope="**",
        executor=executor,
    )
    orch.plan_from_markdown(plan)
    return setup.repo_root, orch


def _statuses(root: Path) -> dict[str, str]:
    return {task.id: task.status for task in PlanManager.open(root, readonly=True).tasks()}


def test_a_lone_isolated_writer_works_in_its_own_worktree_and_lands_the_same_commits(tmp_path: Path) -> None:
    root, orch = _orchestrator(tmp_path)

    tasks = anyio.run(orch.execute)

    assert [task.status for task in tasks] == ["complete", "complete"]
    assert git_log(root)[:2] == [
        "autodev: 1.2 Export slugify from the package",
        "autodev: 1.1 Implement slugify",
    ]
    with PlanManager.open(root, readonly=True) as plans:
        started = [
            entry.payload
            for entry in plans.ledger.entries()
            if entry.op == "task_status" and entry.payload["to"] == "in_progress"
        ]
    # Each task was bound to a worktree of its own at launch, never to the main checkout.
    assert {payload["task_id"] for payload in started} == {"1.1", "1.2"}
    assert all(payload.get("worktree") for payload in started)
    assert _git(root, "status", "--porcelain") == ""
    assert [record["output"] for record in read_status(root)["results"]] == ["adopted", "adopted"]


def test_a_change_that_would_overwrite_the_users_file_waits_and_is_adopted(
    tmp_path: Path,
) -> None:
    root, orch = _orchestrator(tmp_path, UserWritesBeforeLanding())
    before = git_log(root)

    with pytest.raises(AdoptionPendingError, match=r"1 verified change\(s\) wait for adoption \(1\.1\)"):
        anyio.run(orch.execute)

    assert (root / TASK_FILE).read_text() == USERS_DRAFT  # never overwritten
    assert git_log(root) == before
    assert _statuses(root) == {"1.1": "tournamented", "1.2": "pending"}
    status = read_status(root)
    task = next(task for task in status["tasks"] if task["id"] == "1.1")
    assert task["adoption"]["state"] == "pending_adoption" and TASK_FILE in task["adoption"]["reason"]
    (waiting,) = status["in_flight"]
    assert (waiting["lifecycle"], waiting["waiting"][:9]) == ("waiting", "adoption:")
    kept = _git(root, "rev-parse", "refs/autodev/adopt/1.1")
    assert kept == task["adoption"]["commit"]
    # The worktree the change was made in outlives the run while the change waits.
    made_in = root / task["adoption"]["worktree"]
    assert _git(made_in, "rev-parse", "HEAD") == kept

    # While the user's file is in the way, adoption is refused and the change still waits.
    with pytest.raises(AdoptionRefusedError, match="still waits for adoption"):
        anyio.run(lambda: orch.adopt("1.1"))
    assert (root / TASK_FILE).read_text() == USERS_DRAFT
    assert _statuses(root)["1.1"] == "tournamented"

    (root / TASK_FILE).unlink()
    commit = anyio.run(lambda: orch.adopt("1.1"))

    assert git_log(root)[0] == "autodev: 1.1 Implement slugify" and _git(root, "rev-parse", "HEAD") == commit
    assert _statuses(root) == {"1.1": "complete", "1.2": "pending"}
    (record,) = read_status(root)["results"]
    assert (record["task_id"], record["output"], record["commit"]) == ("1.1", "adopted", commit)
    assert _git(root, "for-each-ref", "refs/autodev/adopt") == ""
    # What waited on it runs now; the adopted change's worktree is gone once that run has started.
    assert [task.status for task in anyio.run(orch.execute)] == ["complete"]
    assert not made_in.exists()


def test_a_later_run_adopts_a_waiting_change_by_itself(tmp_path: Path) -> None:
    root, orch = _orchestrator(tmp_path, UserWritesBeforeLanding())
    with pytest.raises(AdoptionPendingError):
        anyio.run(orch.execute)
    (root / TASK_FILE).unlink()  # the user moves their draft away

    tasks = anyio.run(orch.execute)

    assert {task.id: task.status for task in tasks} == {"1.1": "complete", "1.2": "complete"}
    assert git_log(root)[:2] == [
        "autodev: 1.2 Export slugify from the package",
        "autodev: 1.1 Implement slugify",
    ]


def test_a_discarded_change_blocks_its_task_and_is_kept_for_retry(tmp_path: Path) -> None:
    root, orch = _orchestrator(tmp_path, UserWritesBeforeLanding())
    with pytest.raises(AdoptionPendingError):
        anyio.run(orch.execute)
    kept = _git(root, "rev-parse", "refs/autodev/adopt/1.1")

    anyio.run(lambda: orch.discard("1.1", "the user wrote it by hand"))

    assert _statuses(root) == {"1.1": "blocked", "1.2": "blocked"}
    with PlanManager.open(root, readonly=True) as plans:
        assert plans.get_task("1.1").blocked_reason == "discarded: the user wrote it by hand"
        adoption = plans.adoption("1.1")
    assert adoption is not None and adoption.state == "discarded"
    assert _git(root, "rev-parse", "refs/autodev/blocked/1.1") == kept
    assert (root / TASK_FILE).read_text() == USERS_DRAFT
    with pytest.raises(Exception, match="no change waiting for adoption"):
        anyio.run(lambda: orch.adopt("1.1"))
