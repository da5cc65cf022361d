"""Accepted results as canonical evidence records: each completed task's record comes from git and AutoDev's
own checks, carries the id of the ledger entry that recorded it (``E<seq>``), and is handed to the tasks
that run after it; a caller may pick an ordered subset by id, and a reference that cannot be used is refused
before any agent starts, with nothing recorded. Scripted agents, real git, real QA tools."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest
from support.orchestration import Recorder, config_for, demo_project

from autodev.adapters.scripted import ScriptedAdapter
from autodev.orchestrator import Orchestrator
from autodev.orchestrator.execute.results import EvidenceReferenceError
from autodev.state.paths import AutodevPaths
from autodev.state.plan_manager import PlanManager
from autodev.state.status_reader import read_status

FAST_GATES = {"qa_gates.secretscan.enabled": False, "qa_gates.build.enabled": False}
HEADER = "RESULTS OTHER TASKS OF THIS RUN DELIVERED"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout.strip()


def _planned(tmp_path: Path, **overrides: object) -> tuple[Path, Orchestrator, ScriptedAdapter]:
    """The demo's plan saved from its architect's markdown, nothing run yet."""
    setup = demo_project(tmp_path)
    architect = next(entry for entry in setup.script.entries if entry.role == "architect")
    plan = tmp_path / "plan.md"
    plan.write_text(architect.text, encoding="utf-8")
    adapter = ScriptedAdapter(script=setup.script)
    orch = Orchestrator(
        setup.repo_root,
        config=config_for(setup.repo_root, **FAST_GATES, **overrides),
        adapter=adapter,
        listener=Recorder(),
        write_scope="**",
    )
    orch.plan_from_markdown(plan)
    return setup.repo_root, orch, adapter


def _prompts(adapter: ScriptedAdapter, task_id: str) -> list[str]:
    return [call.prompt for call in adapter.calls if call.task_id == task_id]


def test_each_completed_task_leaves_a_record_from_git_and_later_tasks_are_given_it(tmp_path: Path) -> None:
    root, orch, adapter = _planned(tmp_path)

    tasks = anyio.run(orch.execute)

    assert [task.status for task in tasks] == ["complete", "complete"]
    results = read_status(root)["results"]
    assert [record["task_id"] for record in results] == ["1.1", "1.2"]
    first = results[0]
    assert first["id"].startswith("E") and int(first["id"][1:]) > 0
    commit = PlanManager.open(root, readonly=True).get_task("1.1").commit
    assert commit is not None and first["commit"] == commit
    assert first["files"] == _git(root, "show", "--name-only", "--format=", commit).splitlines()
    assert first["insertions"] > 0 and first["verdict"] == "verified"
    # The record's id is the ledger entry that recorded the task complete.
    with PlanManager.open(root, readonly=True) as plans:
        entry = next(e for e in plans.ledger.entries() if e.seq == int(first["id"][1:]))
    assert (entry.op, entry.payload["to"], entry.payload["task_id"]) == ("task_status", "complete", "1.1")
    # 1.1 ran first and was told of nothing; every call of 1.2 was told of 1.1's record, not its own.
    assert not any(HEADER in prompt for prompt in _prompts(adapter, "1.1"))
    later = _prompts(adapter, "1.2")
    assert later and all(f"- {first['id']} task 1.1 " in prompt for prompt in later)
    assert all(f"commit {commit[:10]}" in prompt and "task 1.2 (" not in prompt for prompt in later)


def test_a_chosen_subset_is_given_in_its_order_and_none_is_a_choice(tmp_path: Path) -> None:
    root, orch, adapter = _planned(tmp_path, sibling_results=0)
    anyio.run(lambda: orch.execute("1.1"))
    (record,) = read_status(root)["results"]
    assert record["output"] == "in_place"  # one task asked for: it worked in the main checkout
    assert not any(HEADER in prompt for prompt in _prompts(adapter, "1.1"))

    anyio.run(lambda: orch.execute("1.2", evidence=[record["id"]]))

    later = _prompts(adapter, "1.2")
    assert later
    assert all(HEADER in prompt and f"- {record['id']} task 1.1 " in prompt for prompt in later)


@pytest.mark.parametrize(
    ("references", "message"),
    [
        (["12"], "evidence reference '12' is malformed"),
        (["E0"], "evidence reference 'E0' is malformed"),
        (["{first}", "{first}"], "evidence {first} is named twice"),
        (["E999999"], "evidence E999999 does not exist: the ledger ends at entry"),
        (["E1"], "evidence E1 is foreign: ledger entry 1 is not an accepted result of this plan"),
    ],
)
def test_a_reference_that_cannot_be_used_is_refused_before_anything_runs(
    tmp_path: Path, references: list[str], message: str
) -> None:
    root, orch, adapter = _planned(tmp_path)
    anyio.run(lambda: orch.execute("1.1"))
    first = read_status(root)["results"][0]["id"]
    ledger = AutodevPaths(root).ledger
    before, calls = ledger.read_bytes(), len(adapter.calls)

    with pytest.raises(EvidenceReferenceError, match=message.format(first=first)):
        anyio.run(lambda: orch.execute("1.2", evidence=[r.format(first=first) for r in references]))

    assert ledger.read_bytes() == before and len(adapter.calls) == calls


def test_a_record_whose_commit_left_the_branch_is_abandoned(tmp_path: Path) -> None:
    root, orch, _ = _planned(tmp_path)
    anyio.run(lambda: orch.execute("1.1"))
    record = read_status(root)["results"][0]
    _git(root, "reset", "-q", "--hard", f"{record['commit']}^")

    abandoned = f"evidence {record['id']} is abandoned: task 1.1's commit"
    with pytest.raises(EvidenceReferenceError, match=abandoned):
        anyio.run(lambda: orch.execute("1.2", evidence=[record["id"]]))
