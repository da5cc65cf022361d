"""The plan phase on the demo project: what an interrupted or refused plan phase keeps of the architect."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from support.orchestration import demo_project, orchestrator

from autodev.adapters.base import AgentInvocation, AgentResult
from autodev.adapters.scripted import ScriptedAdapter
from autodev.errors import PathEscapeError, PlanParseError
from autodev.orchestrator.delegation_policy import DelegationDecision, DelegationHeldError, DelegationRequest
from autodev.state.plan_manager import PlanManager


class ArchitectAnswering(ScriptedAdapter):
    """Scripted agents, except the architect, who gives ``answers`` in turn, one per call."""

    def __init__(self, *answers: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.answers = list(answers)

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        if inv.role != "architect":
            return await super().execute(inv)
        self.calls.append(inv)
        return AgentResult(success=True, text=self.answers.pop(0))

    def roles_called(self) -> list[tuple[str, int]]:
        return [(call.role, call.attempt) for call in self.calls]


class _HoldTheCritic:
    def decide(self, request: DelegationRequest) -> DelegationDecision:
        if request.role == "critic_t":
            return DelegationDecision("queue", "one critic at a time")
        return DelegationDecision("execute")


def _demo_plan(tmp_path: Path) -> tuple[Path, str, str, ArchitectAnswering]:
    setup = demo_project(tmp_path)
    plan_md = next(entry.text for entry in setup.script.entries if entry.role == "architect")
    return setup.repo_root, setup.intent, plan_md, ArchitectAnswering(script=setup.script)


def test_a_plan_refused_after_its_retry_is_asked_for_afresh_when_the_intent_runs_again(
    tmp_path: Path,
) -> None:
    root, intent, plan_md, adapter = _demo_plan(tmp_path)
    adapter.answers = ["Prose, not a plan.", "Still prose.", plan_md]
    orch, _ = orchestrator(root, adapter.script)
    orch.adapter = adapter

    with pytest.raises(PlanParseError):
        anyio.run(orch.plan, intent)
    plan = anyio.run(orch.plan, intent)

    assert plan.title == "Add a slugify helper to textutils"
    # The explorer's and the domain expert's findings stand; the refused answers are not reused.
    assert adapter.roles_called() == [
        ("explorer", 1),
        ("domain_expert", 1),
        ("architect", 1),
        ("architect", 2),
        ("architect", 1),
    ]
    assert adapter.answers == []


def test_a_plan_with_paths_outside_the_repository_is_asked_for_afresh_when_the_intent_runs_again(
    tmp_path: Path,
) -> None:
    root, intent, plan_md, adapter = _demo_plan(tmp_path)
    # A link in the repository that leads out of it: only the checked path shows where it goes.
    (tmp_path / "elsewhere").mkdir()
    (root / "linked").symlink_to(tmp_path / "elsewhere")
    outside = plan_md.replace("- Files: ", "- Files: linked/notes.py, ", 1)
    assert outside != plan_md
    adapter.answers = [outside, plan_md]
    orch, _ = orchestrator(root, adapter.script)
    orch.adapter = adapter

    with pytest.raises(PathEscapeError, match=r"linked/notes\.py"):
        anyio.run(orch.plan, intent)
    plan = anyio.run(orch.plan, intent)

    assert plan.title == "Add a slugify helper to textutils"
    assert [role for role, _ in adapter.roles_called()].count("architect") == 2


def test_an_architect_answer_recorded_before_a_stop_is_not_paid_for_again(tmp_path: Path) -> None:
    root, intent, plan_md, adapter = _demo_plan(tmp_path)
    adapter.answers = [plan_md]
    orch, _ = orchestrator(root, adapter.script, **{"tournaments.plan.enabled": True})
    orch.adapter = adapter
    orch.delegation_policy = _HoldTheCritic()
    with pytest.raises(DelegationHeldError):
        anyio.run(orch.plan, intent)

    resumed, _ = orchestrator(root, adapter.script, **{"tournaments.plan.enabled": False})
    resumed.adapter = adapter
    plan = anyio.run(resumed.plan, intent)

    assert plan.title == "Add a slugify helper to textutils"
    assert adapter.roles_called() == [("explorer", 1), ("domain_expert", 1), ("architect", 1)]
    assert PlanManager.open(root, readonly=True).has_plan
