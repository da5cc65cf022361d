"""A change over the size limits fails the attempt of the role that made it, whichever limit it meets: what
its files add (checked before anything is staged) or the size of its diff (a large deletion adds nothing)."""

from __future__ import annotations

from pathlib import Path

import anyio
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
