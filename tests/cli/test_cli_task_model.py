"""A task's Model level through the installed executable: read from the plan, shown by status, changed with
``autodev task set``, recorded in the ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import assert_clean_error, autodev
from support.projects import mini_project

PLAN = """# Plan: Two levels

## Phase 1: Helpers

### Task 1.1: Rename a helper
- Files: mini/helper.py
- Model: haiku  (a rename)

### Task 1.2: Design the cache
- Files: mini/cache.py
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = mini_project(tmp_path / "mini")
    plan = tmp_path / "plan.md"
    plan.write_text(PLAN)
    saved = autodev(root, "plan", "--from-markdown", str(plan))
    assert saved.code == 0, saved.err
    assert "warning: " in saved.out and "'(a rename)' after the Model value is ignored" in saved.out
    return root


def _models(root: Path) -> dict[str, str | None]:
    status = json.loads(autodev(root, "status", "--json").out)
    return {task["id"]: task["model"] for task in status["tasks"]}


def test_status_shows_each_tasks_level(repo: Path) -> None:
    assert _models(repo) == {"1.1": "fast", "1.2": None}
    table = autodev(repo, "status", "--all").out
    assert "haiku" in table and "opus" in table


def test_task_set_changes_the_level_through_the_ledger(repo: Path) -> None:
    changed = autodev(repo, "task", "set", "1.2", "--model", "sonnet")

    assert changed.code == 0, changed.err
    assert "Task 1.2 now runs on sonnet." in changed.out
    assert _models(repo) == {"1.1": "fast", "1.2": "standard"}
    lines = (repo / ".autodev" / "ledger.jsonl").read_text().splitlines()
    (entry,) = [json.loads(line) for line in lines if '"task_model_set"' in line]
    assert entry["payload"] == {
        "task_id": "1.2",
        "model": "standard",
        "from": None,
        "by": "user",
        "reason": "",
    }
    assert autodev(repo, "ledger", "verify").code == 0

    default = autodev(repo, "task", "set", "1.1", "--model", "")
    assert default.code == 0 and "runs on opus (the default)" in default.out
    assert _models(repo)["1.1"] is None


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("task", "set", "1.1", "--model", "gpt-7"), "unknown Model 'gpt-7'"),
        (("task", "set", "9.9", "--model", "opus"), "9.9"),
    ],
)
def test_a_bad_level_or_task_is_one_line_and_changes_nothing(
    repo: Path, args: tuple[str, ...], says: str
) -> None:
    before = (repo / ".autodev" / "ledger.jsonl").read_bytes()

    result = autodev(repo, *args)

    assert_clean_error(result)
    assert says in result.err
    assert (repo / ".autodev" / "ledger.jsonl").read_bytes() == before
