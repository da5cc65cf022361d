"""After a parallel task lands, the run looks at the main checkout while the tasks it freed start, so the
check after the next agent's call in a worktree finds the main checkout's state known and starts no git on
the way to the next step, and still catches a file an agent writes there. Real git, scripted agents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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

from autodev.adapters.base import AgentInvocation, AgentResult
from autodev.orchestrator.integrity import AgentWatch, RepositoryChangedError, RepositoryView
from autodev.state.plan_manager import PlanManager
from autodev.workspace.git import GitRepo


def _record_what_each_check_knew(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """For each check after an agent's call: who called, and whether the main checkout's dirty paths
    were known without git when the check began."""
    seen: list[tuple[str, bool]] = []
    real = AgentWatch.after

    async def after(self: AgentWatch, view: RepositoryView, copy: GitRepo, **kwargs: Any) -> Any:
        seen.append((kwargs["who"], self.main.known_dirty_paths() is not None))
        return await real(self, view, copy, **kwargs)

    monkeypatch.setattr(AgentWatch, "after", after)
    return seen


def test_the_check_after_a_call_that_follows_a_landing_finds_the_main_checkout_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2", deps=("1.1",))]))
    seen = _record_what_each_check_knew(monkeypatch)
    # Each call lasts long enough for the look after 1.1's landing to end during 1.2's first call.
    adapter = WatchedAdapter(script=script_of(entries_for(), latency_s=0.3))

    tasks = anyio.run(orchestrator(root, adapter, 2).execute)

    assert [task.status for task in tasks] == ["complete", "complete"]
    after_the_landing = [known for who, known in seen if who.endswith("task 1.2")]
    assert after_the_landing and all(after_the_landing)


class _WritesIntoTheMainCheckout(WatchedAdapter):
    """Task 1.2's developer also writes a file into the main checkout, beside its own worktree."""

    def __init__(self, main: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.main = main

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        if inv.task_id == "1.2" and inv.role == "developer":
            (self.main / "stray.py").write_text("written where no task works\n")
        return await super().execute(inv)


def test_a_file_written_into_the_main_checkout_after_a_landing_is_still_caught(
    tmp_path: Path,
) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2", deps=("1.1",))]))
    adapter = _WritesIntoTheMainCheckout(root, script=script_of(entries_for(), latency_s=0.3))

    with pytest.raises(RepositoryChangedError, match=r"stray\.py"):
        anyio.run(orchestrator(root, adapter, 2).execute)

    assert (root / "stray.py").read_text() == "written where no task works\n"
    with PlanManager.open(root) as manager:
        assert manager.get_task("1.1").status == "complete"
