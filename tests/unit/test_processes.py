"""Processes that leave their call's process group are still found: by their tag, or as adopted orphans."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.processes import running

from autodev.processes import TAG_VARIABLE, call_tag, kill_tagged, repository_tag

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
