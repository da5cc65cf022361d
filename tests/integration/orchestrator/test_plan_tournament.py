"""The plan tournament on the demo project: a revision that does not parse is disqualified and cannot win."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest
from support.orchestration import demo_project, orchestrator, script_with
from support.projects import PLAN as MINI_PLAN
from support.projects import git, mini_project

from autodev.adapters.base import AgentInvocation, AgentResult
from autodev.adapters.scripted import ScriptedAdapter
from autodev.orchestrator.delegation_policy import DelegationDecision, DelegationHeldError, DelegationRequest
from autodev.orchestrator.tournaments.plan import PlanContentHandler, tournament_skip_reason
from autodev.state.plan_manager import PlanManager
from autodev.state.plan_markdown import parse_plan_markdown
from autodev.tournament.engine import Candidate

_SECTION = re.compile(r"^CANDIDATE (\w+):\n(.*?)(?=^CANDIDATE \w+:|^Rank all|\Z)", re.M | re.S)


class JudgesPreferring(ScriptedAdapter):
    """Scripted agents, except that judges rank candidates by the first of ``favourites`` they contain."""

    def __init__(self, *favourites: str, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.favourites = favourites
        self.judged = 0

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        if inv.role != "judge":
            return await super().execute(inv)
        self.calls.append(inv)
        self.judged += 1
        sections = _SECTION.findall(inv.prompt)
        ordered = sorted(sections, key=self._rank)
        ranking = " > ".join(label for label, _ in ordered)
        return AgentResult(success=True, text=f"RANKING: {ranking}\nvote {self.judged}")

    def _rank(self, section: tuple[str, str]) -> int:
        found = [i for i, mark in enumerate(self.favourites) if mark in section[1]]
        return found[0] if found else len(self.favourites)


def test_b_that_does_not_parse_cannot_win(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    plan_md = next(e.text for e in setup.script.entries if e.role == "architect")
    merged = plan_md.replace("# Plan: Add a slugify helper to textutils", "# Plan: Merged slugify plan")
    script = script_with(
        setup,
        {"role": "critic_t", "text": "ISSUES:\n- [minor] 1.1: the title is vague - clarity"},
        {"role": "architect_b", "text": "Here is my improved plan, in prose only. NOT A PLAN"},
        {"role": "synthesizer", "text": merged},
    )
    orch, _ = orchestrator(
        setup.repo_root,
        script,
        **{
            "tournaments.plan.enabled": True,
            "tournaments.plan.max_rounds": 1,
            "tournaments.plan.num_judges": 3,
        },
    )
    adapter = JudgesPreferring("NOT A PLAN", "Merged slugify plan", script=script)
    orch.adapter = adapter
    plan = anyio.run(orch.plan, setup.intent)

    # Every judge put B first, but B does not parse: it is ranked last, so the merged plan wins.
    assert plan.title == "Merged slugify plan"
    assert adapter.judged == 3
    manager = PlanManager.open(setup.repo_root, readonly=True)
    assert manager.plan.title == "Merged slugify plan"
    ledger = [
        json.loads(line) for line in (setup.repo_root / ".autodev" / "ledger.jsonl").read_text().splitlines()
    ]
    done = [entry["payload"] for entry in ledger if entry["op"] == "plan_tournament_complete"]
    assert len(done) == 1 and done[0]["winner"] == "AB@1"
    history = json.loads((setup.repo_root / done[0]["artifact_dir"] / "history.json").read_text())
    first = history["passes"][0]
    assert "does not parse" in first["disqualified"]["B"]
    assert first["scores"] == {"A": 6, "B": 3, "AB": 9} and first["winner"] == "AB"
    assert all(judge["valid"] and judge["ranking_candidates"][0] == "B" for judge in first["judges"])
    evidence = json.loads((setup.repo_root / ".autodev" / "evidence" / "plan-tournament-1.json").read_text())
    assert evidence["winner"] == "AB@1" and evidence["phase"] == "plan"


def test_inline_adapter_skips_with_a_logged_reason(tmp_path: Path) -> None:
    from autodev.adapters.inline import InlineAdapter

    setup = demo_project(tmp_path)
    orch, _ = orchestrator(setup.repo_root, setup.script)
    orch.adapter = InlineAdapter(repo_root=setup.repo_root)
    assert "inline adapter" in (tournament_skip_reason(orch, orch.config.tournaments.plan) or "")


def test_auto_disable_for_models_skips(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    orch, _ = orchestrator(setup.repo_root, setup.script, **{"tournaments.plan.model": "claude-opus-4"})
    reason = tournament_skip_reason(orch, orch.config.tournaments.plan)
    assert reason is not None and "'opus'" in reason


class _HoldTheCritic:
    def decide(self, request: DelegationRequest) -> DelegationDecision:
        if request.role == "critic_t":
            return DelegationDecision("queue", "one critic at a time")
        return DelegationDecision("execute")


def test_what_stops_a_run_anywhere_stops_it_inside_a_tournament_too(tmp_path: Path) -> None:
    # A tournament that fails for its own reasons keeps the architect's plan; one that meets what stops a run
    # (a held call here; a moved ref or a full disk alike) must not be taken for a failed tournament.
    setup = demo_project(tmp_path)
    orch, _ = orchestrator(setup.repo_root, setup.script, **{"tournaments.plan.enabled": True})
    orch.delegation_policy = _HoldTheCritic()

    with pytest.raises(DelegationHeldError, match="critic t of plan run"):
        anyio.run(orch.plan, setup.intent)

    assert not PlanManager.open(setup.repo_root, readonly=True).has_plan


def test_a_candidate_plan_that_edits_inside_a_submodule_is_disqualified(tmp_path: Path) -> None:
    library = mini_project(tmp_path / "library", {"a.py": "A = 1\n"})
    repo = mini_project(tmp_path / "repo")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "sub")
    git(repo, "commit", "-qm", "add the submodule")
    architect = parse_plan_markdown(MINI_PLAN, "spec")
    handler = PlanContentHandler(repo, "spec", architect.created_at)
    incumbent = Candidate(MINI_PLAN, architect, "A")

    into_submodule = MINI_PLAN.replace("- Files: mini/core.py, tests/test_triple.py", "- Files: sub/a.py")
    candidate = anyio.run(handler.realize, "B", 1, into_submodule, incumbent)
    fine = anyio.run(handler.realize, "B", 1, MINI_PLAN, incumbent)

    assert candidate.disqualified is not None and "submodule" in candidate.disqualified
    assert fine.disqualified is None
