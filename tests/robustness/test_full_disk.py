"""A disk that fills up during a run: on a real small file system (a tmpfs the test mounts), at the moments
it was seen to hurt. The run stops resumably (exit 3, the step and the errno named), no task is blocked for
it, and ``autodev resume`` finishes the work once there is space again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.hostile import HostileAgent, default_steps, log, planned, run_autodev
from support.projects import TRIPLE, mini_project

pytestmark = pytest.mark.slow

# Fills the file system holding $1 to the last byte: one big file, then small ones for what is left.
FILL = (
    'dd if=/dev/zero of="$1/filler" bs=64k 2>/dev/null; '
    'for i in $(seq 64); do head -c 4096 /dev/zero > "$1/filler-$i" 2>/dev/null || break; done; true'
)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 48 MiB tmpfs mounted for the test (skipped where mounting is not permitted)."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'mount failed'})")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill_step(where: Path) -> str:
    return f"/bin/sh -c '{FILL}' fill {where}"


def _free(where: Path) -> None:
    for path in where.glob("filler*"):
        path.unlink()


def _status(repo: Path, agent: HostileAgent) -> dict[str, str]:
    result = run_autodev(repo, agent, "status", "--json")
    data = json.loads(result.stdout)
    return {task["id"]: task["status"] for task in data["tasks"]}


def test_a_disk_full_during_an_evidence_write_pauses_and_resume_finishes(
    tmp_path: Path, small_fs: Path
) -> None:
    repo = planned(mini_project(small_fs / "repo"))
    steps = default_steps()
    first = dict(steps["test_engineer"][0])
    steps["test_engineer"] = [{**first, "shell": _fill_step(small_fs)}, first]
    agent = HostileAgent(tmp_path / "agent", repo, steps)

    stopped = run_autodev(repo, agent, "execute", "--platform", "cursor", "--no-tournament")

    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    assert "ENOSPC" in stopped.stderr and "autodev resume" in stopped.stderr
    assert _status(repo, agent)["1.1"] not in ("blocked", "complete")
    _free(small_fs)

    resumed = run_autodev(repo, agent, "resume", "--platform", "cursor")

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _status(repo, agent)["1.1"] == "complete"
    assert log(repo) == ["autodev: 1.1 Add triple", "mini: initial version"]
    assert run_autodev(repo, agent, "ledger", "verify").returncode == 0


def _split_state(repo: Path, elsewhere: Path) -> None:
    """``.autodev`` on another file system than the repository (a symlink): a full repository disk then
    hits git, not AutoDev's state."""
    state = repo / ".autodev"
    shutil.move(str(state), str(elsewhere))
    os.symlink(elsewhere, state)
    (repo / ".git" / "info" / "exclude").write_text(".autodev\n")  # as most users ignore it


def test_a_disk_full_during_the_commit_pauses_and_resume_commits(tmp_path: Path, small_fs: Path) -> None:
    repo = planned(mini_project(small_fs / "repo"))
    _split_state(repo, tmp_path / "state")
    steps = default_steps()
    # The test engineer adds nothing (its objects would be written before the commit) and fills the disk.
    steps["test_engineer"] = [
        {"shell": _fill_step(small_fs), "text": "RESULTS: passed=1 failed=0 total=1"},
        {"text": "RESULTS: passed=1 failed=0 total=1"},
    ]
    agent = HostileAgent(tmp_path / "agent", repo, steps)

    stopped = run_autodev(repo, agent, "execute", "--platform", "cursor", "--no-tournament")

    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    assert "ENOSPC" in stopped.stderr and "commit" in stopped.stderr
    assert _status(repo, agent)["1.1"] == "tournamented"  # every check passed; only the commit is left
    _free(small_fs)

    resumed = run_autodev(repo, agent, "resume", "--platform", "cursor")

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _status(repo, agent)["1.1"] == "complete"
    assert log(repo) == ["autodev: 1.1 Add triple", "mini: initial version"]
    assert (repo / "mini" / "core.py").read_text() == TRIPLE


def test_a_full_disk_during_git_worktree_add_pauses_and_resume_starts_the_task(
    tmp_path: Path, small_fs: Path
) -> None:
    repo = planned(mini_project(small_fs / "repo"))
    _split_state(repo, tmp_path / "state")
    (tmp_path / "state" / "config.toml").write_text(
        "worktree_pool_enabled = false\n[tournaments]\nexecute_max_parallel_tasks = 2\n"
    )
    agent = HostileAgent(tmp_path / "agent", repo, default_steps())
    # The user's disk is full before the run: git cannot write the worktree's admin files.
    subprocess.run(["/bin/sh", "-c", FILL, "fill", str(small_fs)], check=True)

    stopped = run_autodev(repo, agent, "execute", "--platform", "cursor", "--no-tournament")

    assert stopped.returncode == 3, stopped.stdout + stopped.stderr
    assert "ENOSPC" in stopped.stderr
    assert _status(repo, agent)["1.1"] != "blocked"
    _free(small_fs)

    resumed = run_autodev(repo, agent, "resume", "--platform", "cursor")

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert _status(repo, agent)["1.1"] == "complete"
