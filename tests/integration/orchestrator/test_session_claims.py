"""A run and the agent sessions' claims: a task a live session claimed is theirs (skipped, its files held),
the run's own claims are worked and dropped when done, a gone session's claim holds nothing, and a landing
says which tasks of other lanes it made pickable."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from support.parallel import (
    Spec,
    WatchedAdapter,
    entries_for,
    git_repo,
    orchestrator,
    plan_of,
    save_plan,
    script_of,
)

from autodev.errors import AutodevError
from autodev.orchestrator.events import ProgressEvent
from autodev.state.claims import ClaimStore, SessionIdentity
from autodev.state.plan_manager import PlanManager


@pytest.fixture
def other_session() -> Iterator[SessionIdentity]:
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield SessionIdentity(pid=sleeper.pid, session="other")
    sleeper.kill()
    sleeper.wait()


def _repo(tmp_path: Path) -> Path:
    root = git_repo(tmp_path / "repo")
    plan = plan_of([Spec("a"), Spec("b"), Spec("c", deps=("a",)), Spec("d", files=("src/t_a.py",))])
    save_plan(root, plan)
    return root


def _statuses(root: Path) -> dict[str, str]:
    return {task.id: task.status for task in PlanManager.open(root, readonly=True).tasks()}


def test_a_task_a_live_session_claimed_is_left_to_it(
    tmp_path: Path, other_session: SessionIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTODEV_SESSION_ID", "this-run")
    root = _repo(tmp_path)
    store = ClaimStore(root / ".autodev")
    store.claim("a", lane="fast", model="opus", me=other_session)
    adapter = WatchedAdapter(script=script_of(entries_for()))

    anyio.run(orchestrator(root, adapter, 2).execute)

    # a is the other session's; c waits on it; d shares a's file, which that session holds.
    assert _statuses(root) == {"a": "pending", "b": "complete", "c": "pending", "d": "pending"}
    assert "a" not in {task for task, _ in adapter.started}
    assert set(store.claims()) == {"a"}
    with pytest.raises(
        AutodevError, match=r"task a is claimed by session other \(pid \d+\), which is still running"
    ):
        anyio.run(lambda: orchestrator(root, adapter, 1).execute(task_id="a"))


def test_the_runs_own_claim_is_worked_and_dropped_and_a_gone_sessions_claim_holds_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTODEV_SESSION_ID", "me")
    root = _repo(tmp_path)
    store = ClaimStore(root / ".autodev")
    store.claim("a", lane="fast", model="opus", me=SessionIdentity(pid=1, session="me"))
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    store.claim("b", lane="fast", model="opus", me=SessionIdentity(pid=int(gone.stdout), session="gone"))

    anyio.run(orchestrator(root, WatchedAdapter(script=script_of(entries_for())), 2).execute)

    assert set(_statuses(root).values()) == {"complete"}
    assert store.claims() == {}


def test_a_landing_names_the_tasks_of_other_lanes_it_made_pickable(
    tmp_path: Path, other_session: SessionIdentity
) -> None:
    root = git_repo(tmp_path / "repo")
    plan = plan_of([Spec("small"), Spec("slow", deps=("small",)), Spec("slow2", deps=("small",))])
    plan.phases[0].tasks = [
        task.model_copy(update={"effort": "<1h" if task.id == "small" else "1h"})
        for task in plan.phases[0].tasks
    ]
    save_plan(root, plan)
    ClaimStore(root / ".autodev").register("slow", "opus", other_session)
    notes: list[str] = []

    def listen(event: ProgressEvent) -> None:
        if event.kind == "note" and event.task_id == "small":
            notes.append(event.message)

    orchestrated = orchestrator(root, WatchedAdapter(script=script_of(entries_for())), 1)
    orchestrated.listener = listen
    anyio.run(orchestrated.execute)

    assert [note for note in notes if "pickable" in note] == [
        f"notify slow session other (pid {other_session.pid}): now pickable slow",
        f"notify slow session other (pid {other_session.pid}): now pickable slow2",
    ]


def test_a_task_in_flight_for_a_live_session_is_not_taken_over(
    tmp_path: Path, other_session: SessionIdentity, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTODEV_SESSION_ID", "this-run")
    root = _repo(tmp_path)
    with PlanManager.open(root) as manager:
        manager.update_task_status("b", "in_progress")  # that session's run stopped there
    store = ClaimStore(root / ".autodev")
    store.claim("b", lane="fast", model="opus", me=other_session)
    adapter = WatchedAdapter(script=script_of(entries_for()))

    anyio.run(orchestrator(root, adapter, 2).execute)

    assert _statuses(root)["b"] == "in_progress"
    assert "b" not in {task for task, _ in adapter.started}
    assert set(store.claims()) == {"b"}
