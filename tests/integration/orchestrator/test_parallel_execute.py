"""The parallel execute phase on real git: worker pool, isolation, conflicts, phases, speculation, pool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.git_calls import command_names, git_started
from support.parallel import (
    Spec,
    WatchedAdapter,
    entries_for,
    git,
    git_repo,
    index_format,
    ledger_ops,
    orchestrator,
    own_file,
    plan_of,
    save_plan,
    script_of,
)

from autodev.adapters.base import AgentInvocation, AgentResult
from autodev.errors import PlanParseError
from autodev.guardrails import BudgetExceededError
from autodev.state.plan_manager import PlanManager
from autodev.workspace import changes
from autodev.workspace.worktree_pool import WorktreePool


def _manager(root: Path) -> PlanManager:
    return PlanManager.open(root, readonly=True)


def _no_leftovers(root: Path) -> None:
    assert git(root, "worktree", "list").count("\n") == 1
    assert git(root, "for-each-ref", "refs/autodev") == ""
    assert git(root, "status", "--porcelain", "--", ".", ":(exclude).autodev") == ""


def test_independent_tasks_run_at_once_in_their_own_worktrees_and_all_land(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec(f"1.{i}") for i in range(1, 7)]))
    adapter = WatchedAdapter(script=script_of(entries_for(), latency_s=0.05), gather=3)
    tasks = anyio.run(orchestrator(root, adapter, 3).execute)
    assert [t.status for t in tasks] == ["complete"] * 6
    assert adapter.max_tasks_at_once == 3
    # Every task's change is its own commit on the branch, and the final tree holds all six files.
    subjects = git(root, "log", "--format=%s").splitlines()
    assert sorted(s for s in subjects if s.startswith("autodev:")) == [
        f"autodev: 1.{i} Task 1.{i}" for i in range(1, 7)
    ]
    for i in range(1, 7):
        assert (root / own_file(f"1.{i}")).read_text() == f"VALUE = '1.{i}'\n"
        changed = git(
            root, "show", "--name-only", "--format=", _manager(root).get_task(f"1.{i}").commit or ""
        )
        assert changed.split() == [own_file(f"1.{i}")]
    # The developers really worked elsewhere than the main tree.
    developer_dirs = {call.cwd for call in adapter.calls if call.role == "developer"}
    assert root not in developer_dirs and len(developer_dirs) >= 3
    _no_leftovers(root)


def test_no_task_starts_before_its_dependencies_and_no_two_share_a_file(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    specs = [
        Spec("1.1"),
        Spec("1.2"),
        Spec("1.3", deps=("1.1",)),
        Spec("1.4", deps=("1.1", "1.2")),
        Spec("1.5", files=("src/shared.py",)),
        Spec("1.6", files=("src/shared.py",)),
    ]
    save_plan(root, plan_of(specs))
    entries = entries_for()
    for task_id in ("1.5", "1.6"):
        entries.append(
            {
                "role": "developer",
                "task_id": task_id,
                "text": "done",
                "edits": [{"path": f"src/shared_{task_id}.py", "content": "X = 1\n"}],
            }
        )
    adapter = WatchedAdapter(script=script_of(entries, latency_s=0.03))
    tasks = anyio.run(orchestrator(root, adapter, 4).execute)
    assert {t.status for t in tasks} == {"complete"}
    assert frozenset({"1.5", "1.6"}) not in adapter.overlaps
    order = [task for task, role in adapter.started if role == "developer"]
    finished = {task: index for index, (task, role) in enumerate(adapter.started) if role == "test_engineer"}
    assert order.index("1.3") > 0 and finished["1.1"] < adapter.started.index(("1.3", "developer"))
    assert finished["1.2"] < adapter.started.index(("1.4", "developer"))
    _no_leftovers(root)


def test_textual_conflict_sends_one_task_back_and_both_changes_end_up_present(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo", {"shared.txt": "top\nmiddle\nbottom\n"})
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2")]))
    # Both developers also rewrite the same (undeclared) line: whichever merges second conflicts.
    first = {"path": "shared.txt", "content": "top\nmiddle by 1.1\nbottom\n"}
    second = {"path": "shared.txt", "content": "top\nmiddle by 1.2\nbottom\n"}
    both = {"path": "shared.txt", "content": "top\nmiddle by 1.1\nmiddle by 1.2\nbottom\n"}
    entries = entries_for()
    for task_id, mine in (("1.1", first), ("1.2", second)):
        own = {"path": "src/t_{task_id}.py", "content": "VALUE = '{task_id}'\n"}
        entries.append(
            {"role": "developer", "task_id": task_id, "attempt": 1, "text": "v1", "edits": [own, mine]}
        )
        entries.append(
            {"role": "developer", "task_id": task_id, "attempt": 2, "text": "v2", "edits": [own, both]}
        )
    adapter = WatchedAdapter(script=script_of(entries, latency_s=0.03))
    tasks = anyio.run(orchestrator(root, adapter, 2).execute)
    assert [t.status for t in tasks] == ["complete", "complete"]
    retried = [t for t in tasks if t.retry_count == 1]
    assert len(retried) == 1 and "conflicts with work merged meanwhile" in retried[0].last_issues[0]
    assert "shared.txt" in retried[0].last_issues[0]
    # The retried developer was told, on a fresh base that holds the other task's change.
    second_try = [c for c in adapter.calls if c.role == "developer" and c.attempt == 2]
    assert len(second_try) == 1 and "conflicts with work merged meanwhile" in second_try[0].prompt
    assert (root / "shared.txt").read_text() == "top\nmiddle by 1.1\nmiddle by 1.2\nbottom\n"
    assert (root / own_file("1.1")).exists() and (root / own_file("1.2")).exists()
    _no_leftovers(root)


def test_an_exception_in_one_worker_blocks_its_task_and_descendants_only(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    specs = [Spec("1.1"), Spec("1.2", deps=("1.1",)), Spec("1.3", deps=("1.2",)), Spec("1.4"), Spec("1.5")]
    save_plan(root, plan_of(specs))
    adapter = WatchedAdapter(script=script_of(entries_for(), latency_s=0.02), raise_for=["1.1"])
    anyio.run(orchestrator(root, adapter, 3).execute)
    manager = _manager(root)
    assert [manager.get_task(t).status for t in ("1.1", "1.2", "1.3", "1.4", "1.5")] == [
        "blocked",
        "blocked",
        "blocked",
        "complete",
        "complete",
    ]
    assert "agent for 1.1 crashed" in (manager.get_task("1.1").blocked_reason or "")
    assert "dependency 1.1" in (manager.get_task("1.3").blocked_reason or "")
    _no_leftovers(root)


def test_per_phase_mode_finishes_a_phase_before_the_next_starts(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2"), Spec("2.1", phase="2"), Spec("2.2", phase="2")]))
    adapter = WatchedAdapter(script=script_of(entries_for(), latency_s=0.03))
    anyio.run(orchestrator(root, adapter, 4).execute)
    last_of_phase_one = max(i for i, (task, _) in enumerate(adapter.started) if task.startswith("1."))
    first_of_phase_two = min(i for i, (task, _) in enumerate(adapter.started) if task.startswith("2."))
    assert last_of_phase_one < first_of_phase_two
    plan = _manager(root).plan
    assert plan.phases[0].end_checkpoint_commit == plan.phases[1].baseline_commit


def test_a_dependency_on_a_later_phase_is_refused_before_anything_starts(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1", deps=("2.1",)), Spec("2.1", phase="2")]))
    before = (root / ".autodev" / "ledger.jsonl").read_bytes()
    adapter = WatchedAdapter(script=script_of(entries_for()))
    with pytest.raises(PlanParseError, match=r"task 1.1 \(phase 1\) depends on 2.1 of a later phase"):
        anyio.run(orchestrator(root, adapter, 2).execute)
    assert adapter.calls == []
    # Refused before anything was recorded (the session line aside, nothing about tasks).
    ops = [op["op"] for op in ledger_ops(root)][len(before.splitlines()) :]
    assert "task_status" not in ops
    # The cross-phase dispatcher accepts the same plan and runs it to the end.
    tasks = anyio.run(orchestrator(root, adapter, 2, cross_phase_parallelism_enabled=True).execute)
    assert {t.status for t in tasks} == {"complete"}


def test_cross_phase_review_ranges_are_exact_while_the_next_phase_commits(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    # 1.2 is slow; phase 2's task is independent and merges while phase 1 is still in flight.
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2"), Spec("2.1", phase="2")]))
    entries = entries_for()
    entries.append(
        {
            "role": "test_engineer",
            "task_id": "1.2",
            "text": "RESULTS: passed=0 failed=0 total=0",
            "latency_s": 0.6,
        }
    )
    adapter = WatchedAdapter(script=script_of(entries, latency_s=0.02))
    anyio.run(orchestrator(root, adapter, 3, cross_phase_parallelism_enabled=True).execute)
    manager = _manager(root)
    commits: dict[str, str] = {}
    for task_id in ("1.1", "1.2", "2.1"):
        commit = manager.get_task(task_id).commit
        assert commit is not None, task_id
        commits[task_id] = commit
    history = git(root, "rev-list", "--reverse", "HEAD").split()
    # Phase 2 merged before phase 1 finished: its commit sits inside phase 1's range.
    assert history.index(commits["2.1"]) < history.index(commits["1.2"])
    phase_one, phase_two = manager.plan.phases
    assert phase_one.end_checkpoint_commit == commits["1.2"]
    assert phase_two.end_checkpoint_commit == commits["2.1"]
    review = manager.evidence_for("plan")
    paths = {ref.attempt: root / ref.path for ref in review if ref.kind == "phase_review"}
    first = json.loads(paths[1].read_text())
    assert first["baseline_commit"] == history[0]
    assert sorted(first["commits"]) == sorted([commits["1.1"], commits["1.2"]])
    assert first["foreign_commits"] == [commits["2.1"]]
    assert first["files_changed"] == [own_file("1.1"), own_file("1.2")]
    assert own_file("2.1") not in first["diff"] and own_file("1.2") in first["diff"]


def test_speculative_child_is_rolled_back_when_its_parent_fails_and_runs_again_later(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2", deps=("1.1",))]))
    entries = entries_for()
    entries.append(
        {
            "role": "reviewer",
            "task_id": "1.1",
            "responses": [
                {"text": "VERDICT: NEEDS_CHANGES\nISSUES:\n- again", "latency_s": 0.3},
                {"text": "VERDICT: APPROVED"},
            ],
        }
    )
    entries.append(
        {
            "role": "developer",
            "task_id": "1.2",
            "text": "done",
            "latency_s": 0.5,
            "edits": [{"path": "src/t_{task_id}.py", "content": "VALUE = '{task_id}'\n"}],
        }
    )
    adapter = WatchedAdapter(script=script_of(entries, latency_s=0.02))
    anyio.run(orchestrator(root, adapter, 2, speculative_execution_enabled=True).execute)
    ops = ledger_ops(root)
    names = [op["op"] for op in ops]
    assert "speculative_started" in names and "speculative_rolled_back" in names
    rolled = next(op for op in ops if op["op"] == "speculative_rolled_back")["payload"]
    assert rolled["task_id"] == "1.2" and rolled["parent_task_id"] == "1.1"
    # The child started twice: speculatively, then for real once 1.1 completed; both land.
    assert [t for t, role in adapter.started if role == "developer"].count("1.2") == 2
    manager = _manager(root)
    assert manager.get_task("1.2").status == "complete" and manager.get_task("1.1").retry_count == 1
    history = git(root, "log", "--format=%s").splitlines()
    assert history.index("autodev: 1.2 Task 1.2") < history.index("autodev: 1.1 Task 1.1")
    _no_leftovers(root)


def test_speculative_child_is_kept_when_its_parent_succeeds(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2", deps=("1.1",))]))
    entries = entries_for()
    entries.append({"role": "reviewer", "task_id": "1.1", "text": "VERDICT: APPROVED", "latency_s": 0.3})
    # The child starts at once beside its parent (a slot is free): their first calls meet, whatever the load.
    adapter = WatchedAdapter(script=script_of(entries, latency_s=0.02), gather=2)
    anyio.run(orchestrator(root, adapter, 2, speculative_execution_enabled=True).execute)
    names = [op["op"] for op in ledger_ops(root)]
    assert "speculative_started" in names and "speculative_committed" in names
    assert "speculative_rolled_back" not in names
    assert [t for t, role in adapter.started if role == "developer"].count("1.2") == 1
    assert frozenset({"1.1", "1.2"}) in adapter.overlaps
    history = git(root, "log", "--format=%s").splitlines()
    # The child merged after its parent, on top of it.
    assert history.index("autodev: 1.2 Task 1.2") < history.index("autodev: 1.1 Task 1.1")
    _no_leftovers(root)


@pytest.mark.parametrize("tracking", [True, False], ids=["watched", "full-scans"])
def test_the_worktree_pool_runs_a_plan_and_leaves_nothing_behind(tmp_path: Path, tracking: bool) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec(f"1.{i}") for i in range(1, 6)]))
    adapter = WatchedAdapter(script=script_of(entries_for(), latency_s=0.02))
    run = orchestrator(root, adapter, 2, worktree_pool_enabled=True, change_tracking_enabled=tracking)
    tasks = anyio.run(run.execute)
    assert {t.status for t in tasks} == {"complete"}
    pool_dirs = {call.cwd.name for call in adapter.calls if call.role == "developer"}
    # Two tasks at once, and the spare each landing readies for the next task: never a worktree of its own.
    assert pool_dirs <= {"pool-0", "pool-1", "pool-2"}
    for i in range(1, 6):
        assert (root / own_file(f"1.{i}")).read_text() == f"VALUE = '1.{i}'\n"
    _no_leftovers(root)
    assert changes.watched(root) is None  # the run stopped following the checkout when it ended


class WorktreesSeenLast(WatchedAdapter):
    """Waits, in the last task's last call, until the repository has no worktree but that task's (10 s at
    most), and records what it saw."""

    def __init__(self, last_task: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.last_task = last_task
        self.seen: list[str] = []

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        if inv.task_id == self.last_task and inv.role == "test_engineer":
            for _ in range(200):
                self.seen = [
                    line.removeprefix("worktree ")
                    for line in git(inv.cwd, "worktree", "list", "--porcelain").splitlines()
                    if line.startswith("worktree ")
                ]
                if len(self.seen) <= 2:
                    break
                await anyio.sleep(0.05)
        return await super().execute(inv)


def test_once_no_task_is_left_to_start_the_idle_pool_worktrees_go_while_the_last_ones_work(
    tmp_path: Path,
) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2"), Spec("1.3", deps=("1.1", "1.2"))]))
    adapter = WorktreesSeenLast("1.3", script=script_of(entries_for(), latency_s=0.02), gather=2)
    run = orchestrator(root, adapter, 3, worktree_pool_enabled=True)

    tasks = anyio.run(run.execute)

    assert {t.status for t in tasks} == {"complete"}
    last_copy = next(call.cwd for call in adapter.calls if call.task_id == "1.3")
    assert last_copy.name.startswith("pool-")
    # Two pool worktrees served 1.1 and 1.2; the one 1.3 did not take was removed while 1.3 worked.
    assert sorted(adapter.seen) == sorted([str(root.resolve()), str(last_copy.resolve())])
    _no_leftovers(root)


class CommitsPreparedSeen(WatchedAdapter):
    """Waits in the first developer call, up to 5 s, for AutoDev to ask git for the commits' identities."""

    def __init__(self, git_commands: list[tuple[str, ...]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.git_commands = git_commands
        self.asked_while_working: bool | None = None

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        if inv.role == "developer" and self.asked_while_working is None:
            for _ in range(250):  # git runs in a worker thread: polled, as nothing on the loop says when
                if "var" in command_names(self.git_commands):
                    break
                await anyio.sleep(0.02)
            self.asked_while_working = "var" in command_names(self.git_commands)
        return await super().execute(inv)


def test_what_the_commits_need_from_git_is_asked_while_the_first_agents_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2")]))
    started = git_started(monkeypatch)
    adapter = CommitsPreparedSeen(started, script=script_of(entries_for()))
    run = orchestrator(root, adapter, 2)

    tasks = anyio.run(run.execute)

    assert {t.status for t in tasks} == {"complete"}
    # Not on the first landing's way: asked once, before any task had anything to commit.
    assert adapter.asked_while_working is True
    assert command_names(started).count("var") == 2  # the author's and the committer's identity


class IndexFormatSeen(WatchedAdapter):
    """Records the format of the index of each developer's working copy while it works."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.index_formats: set[str] = set()

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        if inv.role == "developer":
            self.index_formats.add(index_format(inv.cwd))
        return await super().execute(inv)


@pytest.mark.parametrize(("split_from", "expected"), [(1, "split"), (0, "whole")])
def test_a_large_repository_s_task_worktrees_work_on_a_split_index(
    tmp_path: Path, split_from: int, expected: str
) -> None:
    # A repository of a few files stands for a large one by a threshold of one entry.
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec(f"1.{i}") for i in range(1, 5)]))
    adapter = IndexFormatSeen(script=script_of(entries_for(), latency_s=0.02))
    run = orchestrator(root, adapter, 2, worktree_split_index_min_files=split_from)
    assert {t.status for t in anyio.run(run.execute)} == {"complete"}
    assert adapter.index_formats == {expected}
    for i in range(1, 5):
        assert (root / own_file(f"1.{i}")).read_text() == f"VALUE = '1.{i}'\n"
    assert index_format(root) == "whole"  # the user's index is never split
    _no_leftovers(root)
    assert not list((root / ".git").rglob("sharedindex.*"))


def test_a_stopped_parallel_run_resumes_each_task_in_its_worktree_even_one_at_a_time(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec(f"1.{i}") for i in range(1, 5)]))
    entries = [dict(entry, cost_usd=1.0) for entry in entries_for()]
    adapter = WatchedAdapter(script=script_of(entries, latency_s=0.05))
    # The budget runs out while four tasks are in flight, each in its own worktree.
    budget = {"guardrails.cost_budget_usd_per_plan": 5.0}
    with pytest.raises(BudgetExceededError):
        anyio.run(orchestrator(root, adapter, 4, **budget).execute)
    manager = _manager(root)
    in_flight = [t for t in manager.tasks() if t.status not in ("pending", "complete", "blocked")]
    assert in_flight and all(t.worktree for t in in_flight)
    assert all((root / (t.worktree or "")).is_dir() for t in in_flight)
    # Resumed one task at a time, the interrupted tasks finish in their worktrees and land on the branch.
    more = {"guardrails.cost_budget_usd_per_plan": 100.0}
    tasks = anyio.run(orchestrator(root, WatchedAdapter(script=script_of(entries)), 1, **more).execute)
    assert {t.status for t in _manager(root).tasks()} == {"complete"}
    assert {t.id for t in tasks} == {"1.1", "1.2", "1.3", "1.4"}
    for i in range(1, 5):
        assert (root / own_file(f"1.{i}")).read_text() == f"VALUE = '1.{i}'\n"
    assert len([s for s in git(root, "log", "--format=%s").splitlines() if s.startswith("autodev:")]) == 4
    _no_leftovers(root)


def test_phase_review_reads_the_phase_change_when_enabled(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2"), Spec("2.1", phase="2")]))
    entries = entries_for()
    entries.append(
        {"role": "reviewer", "task_id": "plan", "text": "VERDICT: NEEDS_CHANGES\nISSUES:\n- 1.2 misses docs"}
    )
    adapter = WatchedAdapter(script=script_of(entries))
    anyio.run(orchestrator(root, adapter, 2, phase_review_enabled=True).execute)
    reviews = [call for call in adapter.calls if call.role == "reviewer" and call.task_id == "plan"]
    assert len(reviews) == 2  # one per phase
    assert own_file("1.2") in reviews[0].prompt and own_file("2.1") not in reviews[0].prompt
    refs = {ref.attempt: ref for ref in _manager(root).evidence_for("plan") if ref.kind == "phase_review"}
    first = json.loads((root / refs[1].path).read_text())
    assert (first["reviewed"], first["verdict"], first["issues"]) == (
        True,
        "NEEDS_CHANGES",
        ["1.2 misses docs"],
    )
    # Advisory: the phase's tasks stay complete.
    assert {t.status for t in _manager(root).tasks()} == {"complete"}


_SPECULATIVE = {"speculative_execution_enabled": True}


def _stopped_with_a_speculative_child_in_flight(root: Path) -> list[dict[str, object]]:
    """Run 1.1 and its child 1.2 until the budget stops the run with both mid-flight; the script entries."""
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2", deps=("1.1",))]))
    entries = [dict(entry, cost_usd=1.0) for entry in entries_for()]
    # The parent's developer is slow enough for the child to start speculatively beside it.
    entries.append(
        {
            "role": "developer",
            "task_id": "1.1",
            "text": "done",
            "cost_usd": 1.0,
            "latency_s": 0.3,
            "edits": [{"path": "src/t_{task_id}.py", "content": "VALUE = '{task_id}'\n"}],
        }
    )
    stop_early = {"guardrails.cost_budget_usd_per_plan": 2.0, **_SPECULATIVE}
    with pytest.raises(BudgetExceededError):
        anyio.run(
            orchestrator(root, WatchedAdapter(script=script_of(entries, 0.05)), 2, **stop_early).execute
        )
    manager = _manager(root)
    assert manager.get_task("1.2").status not in ("pending", "complete")  # the child is mid-flight
    assert manager.get_task("1.1").status not in ("pending", "complete")
    return entries


def _resume(root: Path, entries: list[dict[str, object]]) -> WatchedAdapter:
    adapter = WatchedAdapter(script=script_of(entries, 0.05))
    more = {"guardrails.cost_budget_usd_per_plan": 100.0, **_SPECULATIVE}
    anyio.run(orchestrator(root, adapter, 2, **more).execute)
    return adapter


def test_a_speculative_child_interrupted_with_its_parent_is_taken_up_again_on_resume(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    entries = _stopped_with_a_speculative_child_in_flight(root)
    adapter = _resume(root, entries)
    assert {t.status for t in _manager(root).tasks()} == {"complete"}
    names = [op["op"] for op in ledger_ops(root)]
    assert names.count("speculative_started") == 1 and names.count("speculative_committed") == 1
    assert "speculative_rolled_back" not in names
    # Resumed, the child did not start over, and it merged after its parent.
    assert ("1.2", "developer") not in adapter.started
    history = git(root, "log", "--format=%s").splitlines()
    assert history.index("autodev: 1.2 Task 1.2") < history.index("autodev: 1.1 Task 1.1")
    _no_leftovers(root)


def test_a_resumed_speculative_child_whose_parent_failed_meanwhile_waits_for_its_parent(
    tmp_path: Path,
) -> None:
    root = git_repo(tmp_path / "repo")
    entries = _stopped_with_a_speculative_child_in_flight(root)
    # The parent's first attempt failed just as the run stopped: the speculation is lost.
    with PlanManager(root) as manager:
        manager.mark_task_retry("1.1", ["review: again"])
    adapter = _resume(root, entries)

    assert {t.status for t in _manager(root).tasks()} == {"complete"}
    ops = ledger_ops(root)
    rolled = [op["payload"] for op in ops if op["op"] == "speculative_rolled_back"]
    assert [(op["task_id"], op["parent_task_id"]) for op in rolled] == [("1.2", "1.1")]
    # The child started again from its parent's commit, and merged after it.
    assert ("1.2", "developer") in adapter.started
    history = git(root, "log", "--format=%s").splitlines()
    assert history.index("autodev: 1.2 Task 1.2") < history.index("autodev: 1.1 Task 1.1")
    _no_leftovers(root)


def test_a_landing_that_frees_a_task_has_the_pool_ready_a_worktree_at_its_commit_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2", deps=("1.1",)), Spec("1.3", deps=("1.2",))]))
    announced: list[tuple[str, str]] = []
    real = WorktreePool.advance

    async def recording(pool: WorktreePool, base: str) -> None:
        announced.append((base, git(root, "rev-parse", "HEAD").strip()))
        await real(pool, base)

    monkeypatch.setattr(WorktreePool, "advance", recording)
    adapter = WatchedAdapter(script=script_of(entries_for(), latency_s=0.02))

    tasks = anyio.run(orchestrator(root, adapter, 2, worktree_pool_enabled=True).execute)

    assert {t.status for t in tasks} == {"complete"}
    # 1.1 and 1.2 each free the next task; 1.3 frees none, and nothing is readied for nobody.
    commits = [_manager(root).get_task(task_id).commit for task_id in ("1.1", "1.2")]
    assert [base for base, _ in announced] == commits
    # Each named before the branch moved to it, so the reset beside the fast-forward is not late.
    assert all(head != base for base, head in announced)
    # The dependents still worked on their parent's change.
    for task_id, parent in (("1.2", "1.1"), ("1.3", "1.2")):
        cwd = next(call.cwd for call in adapter.calls if call.task_id == task_id)
        assert cwd.name.startswith("pool-")
        assert _manager(root).get_task(task_id).base_commit == _manager(root).get_task(parent).commit
    _no_leftovers(root)


def test_a_pool_that_fails_to_ready_a_worktree_stops_no_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2", deps=("1.1",)), Spec("1.3")]))

    async def failing(pool: WorktreePool, base: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(WorktreePool, "advance", failing)
    adapter = WatchedAdapter(script=script_of(entries_for(), latency_s=0.02))

    tasks = anyio.run(orchestrator(root, adapter, 2, worktree_pool_enabled=True).execute)

    assert {t.status for t in tasks} == {"complete"}  # each claim resets its worktree itself
    _no_leftovers(root)
