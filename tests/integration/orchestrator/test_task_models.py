"""Each task's Model line decides the model its roles run on; a developer who finds it too low escalates."""

from __future__ import annotations

from pathlib import Path

import anyio
from support.parallel import (
    ClaudeCodeScripted,
    Spec,
    entries_for,
    git_repo,
    ledger_ops,
    orchestrator,
    plan_of,
    save_plan,
    script_of,
)

from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import Plan


def _tiered_plan() -> Plan:
    plan = plan_of([Spec("1.1"), Spec("1.2")])
    first = plan.phases[0].tasks[0]
    plan.phases[0].tasks[0] = first.model_copy(update={"model": "fast"})
    return plan


def _models_of(adapter: ClaudeCodeScripted, task_id: str) -> dict[str, set[str | None]]:
    seen: dict[str, set[str | None]] = {}
    for task, role, model in adapter.models:
        if task == task_id:
            seen.setdefault(role, set()).add(model)
    return seen


def test_every_role_of_a_task_runs_on_its_model_and_a_task_without_one_on_opus(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, _tiered_plan())
    adapter = ClaudeCodeScripted(script=script_of(entries_for()))
    settings = {
        "platform": "claude_code",
        "roles.reviewer.tier_offset": 1,
        "roles.test_engineer.model": "standard",
    }

    anyio.run(orchestrator(root, adapter, 1, **settings).execute)

    # 1.1 is haiku: its developer there, its reviewer one level up, its test engineer as configured.
    assert _models_of(adapter, "1.1") == {
        "developer": {"haiku"},
        "reviewer": {"sonnet"},
        "test_engineer": {"sonnet"},
    }
    # 1.2 has no Model line: opus, and a reviewer one level up stays at the top.
    assert _models_of(adapter, "1.2") == {
        "developer": {"opus"},
        "reviewer": {"opus"},
        "test_engineer": {"sonnet"},
    }


def test_a_developer_who_escalates_gets_the_task_again_at_the_higher_level(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, _tiered_plan())
    escalate = {"text": "ESCALATE: opus the parser needs a design decision"}
    done = {"text": "done", "edits": [{"path": "src/t_1.1.py", "content": "VALUE = 1\n"}]}
    entries = [*entries_for(), {"role": "developer", "task_id": "1.1", "responses": [escalate, done]}]
    adapter = ClaudeCodeScripted(script=script_of(entries))

    anyio.run(orchestrator(root, adapter, 1, platform="claude_code").execute)

    task = PlanManager.open(root, readonly=True).get_task("1.1")
    assert (task.status, task.retry_count, task.model) == ("complete", 0, "strong")
    developer_calls = [
        (call.model, call.metadata["step"])
        for call in adapter.calls
        if call.task_id == "1.1" and call.role == "developer"
    ]
    assert developer_calls == [("haiku", "develop"), ("opus", "develop@strong")]
    assert _models_of(adapter, "1.1")["reviewer"] == {"opus"}
    (changed,) = [op["payload"] for op in ledger_ops(root) if op["op"] == "task_model_set"]
    assert changed == {
        "task_id": "1.1",
        "model": "strong",
        "from": "fast",
        "by": "developer",
        "reason": "the parser needs a design decision",
    }


def test_an_escalation_to_the_same_or_a_lower_level_is_ignored(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1")]))
    done = {
        "text": "done\nESCALATE: haiku this was easy",
        "edits": [{"path": "src/t_1.1.py", "content": "VALUE = 1\n"}],
    }
    adapter = ClaudeCodeScripted(
        script=script_of([*entries_for(), {"role": "developer", "task_id": "1.1", **done}])
    )

    anyio.run(orchestrator(root, adapter, 1, platform="claude_code").execute)

    assert not [op for op in ledger_ops(root) if op["op"] == "task_model_set"]
    assert _models_of(adapter, "1.1")["developer"] == {"opus"}
