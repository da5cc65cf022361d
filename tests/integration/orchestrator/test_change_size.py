"""A change over the size limits fails the attempt of the role that made it, whichever limit it meets: what
its files add (checked before anything is staged) or the size of its diff (a large deletion adds nothing)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from support.git_calls import git_started
from support.parallel import (
    Spec,
    WatchedAdapter,
    entries_for,
    git_repo,
    orchestrator,
    own_file,
    plan_of,
    save_plan,
    script_of,
)

from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import Task

BIG = "".join(f"LINE_{n} = {n}\n" for n in range(400))  # about 5 KB


def test_a_diff_over_the_limit_sends_the_task_back_to_its_developer(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo", {"README.md": "project\n", "src/big.py": BIG})
    save_plan(root, plan_of([Spec("1.1", files=("src/big.py", own_file("1.1")))]))
    entries = entries_for()
    entries.append(
        {
            "role": "developer",
            "task_id": "1.1",
            "responses": [
                {"text": "removed what looked unused", "edits": [{"path": "src/big.py", "delete": True}]},
                {
                    "text": "put it back, changed only my file",
                    "edits": [
                        {"path": "src/big.py", "content": BIG},
                        {"path": own_file("1.1"), "content": "VALUE = '1.1'\n"},
                    ],
                },
            ],
        }
    )
    adapter = WatchedAdapter(script=script_of(entries))

    anyio.run(orchestrator(root, adapter, 1, **{"guardrails.max_diff_bytes": 2_000}).execute)

    task = PlanManager.open(root, readonly=True).get_task("1.1")
    assert (task.status, task.retry_count) == ("complete", 1)
    second = [call for call in adapter.calls if call.role == "developer"][1]
    assert "over the limit of 2000" in second.prompt and "guardrails.max_diff_bytes" in second.prompt
    assert (root / "src" / "big.py").read_text() == BIG


def _one_line_added_to_big_py(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_file_bytes: int
) -> tuple[Path, Task, list[tuple[str, ...]]]:
    """Task 1.1 adds one line to the 5 KB ``src/big.py``: the repository, the task as it ended, and the
    base-size lookups its run made."""
    root = git_repo(tmp_path / "repo", {"README.md": "project\n", "src/big.py": BIG})
    save_plan(root, plan_of([Spec("1.1", files=("src/big.py",))]))
    entries = entries_for()
    edit = {"path": "src/big.py", "content": BIG + "EXTRA = 1\n"}
    entries.append({"role": "developer", "task_id": "1.1", "responses": [{"text": "done", "edits": [edit]}]})
    started = git_started(monkeypatch)
    config = {"guardrails.max_file_bytes": max_file_bytes}
    anyio.run(orchestrator(root, WatchedAdapter(script=script_of(entries)), 1, **config).execute)
    # The lookup of the base's sizes (``GitRepo.added_bytes``).
    asked = [args for args in started if "--batch-check=%(objecttype) %(objectsize)" in args]
    return root, PlanManager.open(root, readonly=True).get_task("1.1"), asked


def test_a_change_whose_files_are_within_the_limits_whole_is_not_weighed_against_its_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, task, asked = _one_line_added_to_big_py(tmp_path, monkeypatch, max_file_bytes=100_000)

    assert task.status == "complete"
    assert asked == []


def test_a_large_file_changed_a_little_is_weighed_by_what_it_adds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The file is over max_file_bytes whole; what the change adds to it is not.
    root, task, asked = _one_line_added_to_big_py(tmp_path, monkeypatch, max_file_bytes=1_000)

    assert (task.status, task.retry_count) == ("complete", 0)
    assert asked, "the base's size of src/big.py was never asked for"
    assert (root / "src" / "big.py").read_text() == BIG + "EXTRA = 1\n"
