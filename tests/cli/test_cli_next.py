"""``autodev next`` for several agent sessions on one plan, through the installed executable: claims that no
two sessions share (also when they ask at the same instant), claims of gone sessions ignored, a session's
Model ceiling, lanes and their sessions, and what a lane waits for."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import AUTODEV, assert_clean_error, autodev, clean_env
from support.projects import mini_project

PLAN = """# Plan: Sessions

## Phase 1: Work

### Task 1.1: Small blocker
- Model: haiku
- Effort: <1h
- Priority: P3

### Task 1.2: Small, alone
- Model: haiku
- Effort: <1h
- Priority: P1

### Task 1.3: Slow and urgent
- Model: sonnet
- Effort: 1h
- Priority: P0
- Depends: 1.1

### Task 1.4: Slow, whenever
- Model: opus
- Effort: 1h
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = mini_project(tmp_path / "mini")
    plan = tmp_path / "plan.md"
    plan.write_text(PLAN)
    assert autodev(root, "plan", "--from-markdown", str(plan)).code == 0
    return root


@pytest.fixture
def live_pids() -> Iterator[list[int]]:
    """Processes that stand for running agent sessions."""
    sleepers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(4)]
    yield [sleeper.pid for sleeper in sleepers]
    for sleeper in sleepers:
        sleeper.kill()
        sleeper.wait()


def _as(session: str, pid: int) -> dict[str, str]:
    return {"AUTODEV_SESSION_ID": session, "AUTODEV_SESSION_PID": str(pid)}


def _claims(repo: Path) -> dict[str, dict[str, object]]:
    folder = repo / ".autodev" / "claims"
    return {path.stem: json.loads(path.read_text()) for path in folder.glob("*.json")}


def test_next_claims_the_first_task_in_priority_order_and_another_session_gets_another(
    repo: Path, live_pids: list[int]
) -> None:
    first = autodev(repo, "next", "--as", "opus", env=_as("A", live_pids[0]))
    second = autodev(repo, "next", "--as", "opus", env=_as("B", live_pids[1]))

    assert first.code == 0, first.err
    # 1.1 is as urgent as the P0 task waiting on it; then 1.2 (P1).
    assert first.out.splitlines()[:3] == [
        "1.1: Small blocker (lane fast · Model haiku · Effort <1h · P0)",
        f"claimed for session A (pid {live_pids[0]})",
        "run it: autodev execute --task-id 1.1 --platform inline",
    ]
    assert second.out.splitlines()[0].startswith("1.2: Small, alone")
    claims = _claims(repo)
    assert set(claims) == {"1.1", "1.2"}
    assert {key: claims["1.1"][key] for key in ("id", "lane", "model", "pid", "session")} == {
        "id": "1.1",
        "lane": "fast",
        "model": "opus",
        "pid": live_pids[0],
        "session": "A",
    }
    # Asking again, a session gets the task it already claimed.
    again = autodev(repo, "next", "--as", "opus", env=_as("A", live_pids[0]))
    assert again.out.splitlines()[0].startswith("1.1:")


def test_a_claim_of_a_session_that_is_gone_does_not_hold_its_task(repo: Path, live_pids: list[int]) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    autodev(repo, "next", "--as", "opus", env=_as("gone", int(gone.stdout)))

    taken = autodev(repo, "next", "--as", "opus", env=_as("B", live_pids[0]))

    assert taken.out.splitlines()[0].startswith("1.1:")
    assert _claims(repo)["1.1"]["session"] == "B"


def test_a_session_takes_tasks_up_to_its_own_model_haiku_without_as(repo: Path, live_pids: list[int]) -> None:
    for n in range(2):
        autodev(repo, "next", env=_as(f"h{n}", live_pids[n]))
    nothing = autodev(repo, "next", env=_as("h3", live_pids[2]))
    sonnet = autodev(repo, "next", "--lane", "slow", "--as", "sonnet", env=_as("s", live_pids[3]))

    lines = nothing.out.splitlines()
    assert lines[0] == "nothing to take now"
    assert "no --as given: taking haiku tasks only" in lines[1]
    # The slow lane's only pickable task is opus (1.3 waits on 1.1): a sonnet session takes nothing there.
    assert sonnet.out.splitlines()[0] == "nothing to take now in the slow lane"
    assert set(_claims(repo)) == {"1.1", "1.2"}


def test_next_says_what_its_lane_waits_for_and_who_works_that_lane(repo: Path, live_pids: list[int]) -> None:
    slow = autodev(repo, "next", "--lane", "slow", "--as", "opus", env=_as("S", live_pids[0]))
    assert slow.out.splitlines()[0].startswith("1.4:")
    assert "1.3 waits on 1.1 (fast lane) → no fast session: tell the owner" in slow.out

    autodev(repo, "next", "--lane", "fast", "--as", "opus", env=_as("F", live_pids[1]))
    again = autodev(repo, "next", "--lane", "slow", "--as", "opus", env=_as("S", live_pids[0]))
    assert f"1.3 waits on 1.1 (fast lane) → session F (pid {live_pids[1]}) works the fast lane" in again.out
    # A second live session on the slow lane is told who holds it; the lane keeps its session.
    other = autodev(repo, "next", "--lane", "slow", "--as", "opus", env=_as("T", live_pids[2]))
    assert f"another live slow session holds this lane: session S (pid {live_pids[0]})" in other.out


def test_lanes_shows_each_lanes_session_and_unregister_drops_this_sessions(
    repo: Path, live_pids: list[int]
) -> None:
    autodev(repo, "next", "--lane", "fast", "--as", "opus", env=_as("F", live_pids[0]))

    shown = autodev(repo, "lanes").out.splitlines()
    assert shown[0].endswith(f"· session F (pid {live_pids[0]}) (alive)")
    assert shown[1].endswith("· no session")

    dropped = autodev(repo, "lanes", "--unregister", env=_as("F", live_pids[0]))
    assert dropped.out.strip() == "unregistered from: fast"
    assert autodev(repo, "lanes").out.splitlines()[0].endswith("· no session")


def test_two_sessions_asking_at_the_same_instant_never_get_the_same_task(
    tmp_path: Path, live_pids: list[int]
) -> None:
    root = mini_project(tmp_path / "many")
    tasks = "".join(f"\n### Task 1.{n}: Chore {n}\n- Model: haiku\n- Effort: <1h\n" for n in range(1, 9))
    plan = tmp_path / "plan.md"
    plan.write_text(f"# Plan: Chores\n\n## Phase 1: Chores\n{tasks}")
    assert autodev(root, "plan", "--from-markdown", str(plan)).code == 0

    taken: list[str] = []
    for round_ in range(4):
        procs = [
            subprocess.Popen(
                [str(AUTODEV), "next"],
                cwd=root,
                env={**clean_env(), **_as(f"s{round_}-{n}", live_pids[n])},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(2)
        ]
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            taken.append(out.split(":", 1)[0])

    assert sorted(taken) == [f"1.{n}" for n in range(1, 9)]
    assert len(_claims(root)) == 8


def test_an_unknown_lane_is_a_one_line_error(repo: Path) -> None:
    assert_clean_error(autodev(repo, "next", "--lane", "medium"))
    assert not (repo / ".autodev" / "claims").exists() or not _claims(repo)


def test_claims_are_never_committed(repo: Path, live_pids: list[int]) -> None:
    autodev(repo, "next", "--as", "opus", env=_as("A", live_pids[0]))

    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    assert ".autodev" not in status
    assert os.path.isdir(repo / ".autodev" / "sessions")


def test_without_a_session_pid_next_says_how_long_the_claim_lasts(repo: Path) -> None:
    result = autodev(repo, "next", "--as", "opus", env={"AUTODEV_SESSION_ID": "A"})

    assert "no AUTODEV_SESSION_PID (or CLAUDE_PID): the claim lasts while process" in result.out


def test_with_phases_in_order_next_takes_from_the_first_unfinished_phase(
    tmp_path: Path, live_pids: list[int]
) -> None:
    root = mini_project(tmp_path / "phased")
    plan = tmp_path / "plan.md"
    plan.write_text(
        "# Plan: Phased\n\n## Phase 1: First\n\n### Task 1.1: One\n- Model: haiku\n\n"
        "## Phase 2: Second\n\n### Task 2.1: Urgent later\n- Model: haiku\n- Priority: P0\n"
    )
    assert autodev(root, "plan", "--from-markdown", str(plan)).code == 0

    first = autodev(root, "next", env=_as("A", live_pids[0]))
    second = autodev(root, "next", env=_as("B", live_pids[1]))

    assert first.out.splitlines()[0].startswith("1.1:")
    assert "nothing to take now" in second.out
