"""Processes that leave their call's process group are still found: by their tag, or as adopted orphans."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest
from support.processes import running

from autodev import processes
from autodev.processes import (
    TAG_VARIABLE,
    call_tag,
    kill_adopted,
    kill_tagged,
    own_child,
    repository_tag,
    starting_child,
    starting_child_soon,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def test_a_process_that_moved_to_a_session_of_its_own_is_found_by_its_tag(tmp_path: Path) -> None:
    tag = call_tag(tmp_path)
    other = call_tag(tmp_path)
    env = {**os.environ, TAG_VARIABLE: tag}
    hidden = subprocess.Popen(["setsid", "sleep", "60"], env=env, start_new_session=True)
    bystander = subprocess.Popen(["sleep", "60"], env={**os.environ, TAG_VARIABLE: other})
    try:
        time.sleep(0.2)  # setsid has exec'd sleep by now
        killed = kill_tagged(tag)

        # setsid forked (it led a process group already): the sleep it left behind is what was found.
        assert killed and bystander.pid not in killed
        deadline = time.monotonic() + 5  # SIGKILL lands asynchronously: a loaded machine takes a moment
        while [pid for pid in killed if running(pid)] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in killed if running(pid)]
        assert running(bystander.pid)
        assert bystander.pid in kill_tagged(repository_tag(tmp_path) + ":", prefix=True)
    finally:
        for process in (hidden, bystander):
            process.kill()
            process.wait()


def test_the_repository_part_of_a_tag_is_stable_and_differs_between_repositories(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / ".autodev", tmp_path / "b" / ".autodev"
    assert call_tag(first).split(":")[0] == repository_tag(first) == repository_tag(first)
    assert repository_tag(first) != repository_tag(second)
    assert call_tag(first) != call_tag(first)


def _exited_untagged() -> subprocess.Popen[bytes]:
    """A child in a session of its own, untagged, that has exited and was not waited for: a zombie, whose
    environment cannot be read, as an orphan that exited looks to a search for orphans."""
    env = {name: value for name, value in os.environ.items() if name != TAG_VARIABLE}
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], env=env, start_new_session=True)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    return child


def test_a_child_its_caller_has_not_waited_for_is_not_taken_for_an_orphan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(processes._Subreaper, "active", True)
    mine, orphan_like = _exited_untagged(), _exited_untagged()
    # Only these two are looked at: the test process may have other children of other tests.
    monkeypatch.setattr(processes, "_pids", lambda: [mine.pid, orphan_like.pid])

    with own_child(mine.pid):
        killed = kill_adopted()

    assert killed == [orphan_like.pid]
    assert mine.wait(timeout=10) == 3  # its exit status is still the caller's to read
    orphan_like.wait(timeout=10)  # reaped by the search: the Popen learns that it is gone


def test_a_search_for_orphans_waits_for_a_child_being_started(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes._Subreaper, "active", True)
    monkeypatch.setattr(processes, "_pids", list)
    searched = threading.Event()

    def look() -> None:
        kill_adopted()
        searched.set()

    search = threading.Thread(target=look)

    with starting_child():
        search.start()
        assert not searched.wait(0.3)
    assert searched.wait(10)
    search.join()


@pytest.mark.asyncio
async def test_a_start_on_the_event_loop_waits_for_a_search_without_stopping_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(processes._Subreaper, "active", True)
    looking, may_finish = threading.Event(), threading.Event()

    def slow_listing() -> list[int]:
        looking.set()
        may_finish.wait(10)
        return []

    monkeypatch.setattr(processes, "_pids", slow_listing)
    search = threading.Thread(target=kill_adopted)
    search.start()
    assert looking.wait(10)
    steps: list[str] = []

    async def start() -> None:
        async with starting_child_soon():
            steps.append("started")

    async def other_work() -> None:
        for _ in range(5):
            await anyio.sleep(0.02)
        steps.append("other work done")  # the loop went on while the start waited
        may_finish.set()

    async with anyio.create_task_group() as group:
        group.start_soon(start)
        group.start_soon(other_work)
    search.join(10)
    # The start came after the search had stopped looking, and the loop ran other work meanwhile.
    assert steps == ["other work done", "started"]
    assert processes._Children.starting == 0


def _sleeping(env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "60"], env=env)


def test_the_tag_is_read_wherever_it_sits_in_a_large_environment(tmp_path: Path) -> None:
    """The environment block is searched as bytes: the tag is found as the first entry and as the last of
    a large block; a value that only contains the tag's name, or a variable whose name ends in it, is no
    tag."""
    tag, other = call_tag(tmp_path), call_tag(tmp_path)
    large = {f"FILLER_{index}": "x" * 200 for index in range(1_000)}  # about 200 KB, several reads
    first = _sleeping({TAG_VARIABLE: tag, **large, "PATH": os.environ["PATH"]})
    last = _sleeping({**large, "PATH": os.environ["PATH"], TAG_VARIABLE: tag})
    named_in_a_value = _sleeping({"PATH": os.environ["PATH"], "NOTE": f"{TAG_VARIABLE}={tag}"})
    untagged = _sleeping({"PATH": os.environ["PATH"], f"X{TAG_VARIABLE}": tag})
    processes_started = (first, last, named_in_a_value, untagged)
    try:
        assert processes._tag_of(first.pid) == tag
        assert processes._tag_of(last.pid) == tag
        assert processes._tag_of(named_in_a_value.pid) is None
        assert processes._tag_of(untagged.pid) is None
        assert processes._tag_of(os.getpid()) == os.environ.get(TAG_VARIABLE)
        assert processes._tag_of(2**22 + 7) is None  # no such process
        assert sorted(kill_tagged(tag)) == sorted([first.pid, last.pid])
        assert not kill_tagged(other)
    finally:
        for process in processes_started:
            process.kill()
            process.wait()


def test_one_look_stops_the_processes_of_every_tag_asked_for(tmp_path: Path) -> None:
    """The run lock stops what a killed run left under the repository and under each worktree's state
    directory: all of them in one pass over the processes."""
    main, worktree, elsewhere = (tmp_path / name / ".autodev" for name in ("main", "worktree", "other"))
    started = {
        name: _sleeping({**os.environ, TAG_VARIABLE: call_tag(state_dir)})
        for name, state_dir in (("main", main), ("worktree", worktree), ("elsewhere", elsewhere))
    }
    try:
        stopped = kill_tagged(tuple(repository_tag(path) + ":" for path in (main, worktree)), prefix=True)
        assert sorted(stopped) == sorted([started["main"].pid, started["worktree"].pid])
        assert running(started["elsewhere"].pid)
    finally:
        for process in started.values():
            process.kill()
            process.wait()
