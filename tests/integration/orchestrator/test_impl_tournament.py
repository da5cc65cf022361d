"""The implementation tournament on a real repository: variants in worktrees, the winner in the main tree."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from support.orchestration import demo_project, orchestrator, script_with

from autodev.adapters.base import AgentInvocation, AgentResult
from autodev.adapters.scripted import Script, ScriptedAdapter
from autodev.state.costs import cost_report
from autodev.state.plan_manager import PlanManager

_SECTION = re.compile(r"^CANDIDATE (\w+):\n(.*?)(?=^CANDIDATE \w+:|^Rank all|\Z)", re.M | re.S)
FAST = {
    "qa_gates.secretscan.enabled": False,
    "qa_gates.build.enabled": False,
    "tournaments.plan.enabled": False,
    "tournaments.impl.enabled": True,
    "tournaments.impl.max_rounds": 1,
}
TOURNAMENT_ROLES = (
    {"role": "critic_t", "text": "ISSUES:\n- [minor] no marker - traceability"},
    {"role": "architect_b", "text": "DIRECTION:\n1. add a variant marker"},
    {"role": "synthesizer", "text": "DIRECTION:\n1. add a merged marker"},
)


class VariantAgents(ScriptedAdapter):
    """Developers in worktrees write a marker naming their variant; judges prefer ``VARIANT = "B"``."""

    def __init__(
        self, *, raise_in_worktree: bool = False, idle_in_worktree: bool = False, **kwargs: object
    ) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.raise_in_worktree = raise_in_worktree
        self.idle_in_worktree = idle_in_worktree
        self.judged = 0

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        in_worktree = ".autodev/worktrees" in str(inv.cwd)
        if inv.role == "developer" and in_worktree:
            if self.raise_in_worktree:
                raise RuntimeError("the developer crashed")
            if self.idle_in_worktree:
                return AgentResult(success=True, text="looked, changed nothing", tool_calls=1)
            variant = "AB" if inv.cwd.name.endswith("-ab") else "B"
            marker = inv.cwd / "textutils" / f"variant_{inv.task_id.replace('.', '_')}.py"
            marker.write_text(f'"""Variant marker."""\n\nVARIANT = "{variant}"\n')
            return AgentResult(success=True, text=f"wrote variant {variant} in {inv.cwd.name}", tool_calls=1)
        if inv.role == "judge":
            self.judged += 1
            sections = _SECTION.findall(inv.prompt)
            # B first when it carries its marker; without markers, anything before A.
            ordered = sorted(sections, key=lambda s: ('VARIANT = "B"' not in s[1], s[0] == "A"))
            return AgentResult(
                success=True, text=f"RANKING: {' > '.join(label for label, _ in ordered)}\n#{self.judged}"
            )
        return await super().execute(inv)


def _tournaments_done(root: Path) -> list[dict[str, Any]]:
    ledger = [json.loads(line) for line in (root / ".autodev" / "ledger.jsonl").read_text().splitlines()]
    return [entry["payload"] for entry in ledger if entry["op"] == "impl_tournament_complete"]


def _worktree_list(root: Path) -> list[str]:
    out = subprocess.run(["git", "worktree", "list"], cwd=root, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def test_judges_prefer_b_and_b_is_applied_and_committed(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    script = script_with(setup, *TOURNAMENT_ROLES)
    orch, _ = orchestrator(setup.repo_root, script, **FAST)
    adapter = VariantAgents(script=script)
    orch.adapter = adapter
    outcome = anyio.run(orch.run, setup.intent)
    assert [t.status for t in outcome.tasks] == ["complete", "complete"]
    root = setup.repo_root
    assert (root / "textutils" / "variant_1_1.py").read_text().endswith('VARIANT = "B"\n')
    committed = subprocess.run(
        ["git", "show", "--name-only", "--format=", outcome.tasks[0].commit or "HEAD"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "textutils/variant_1_1.py" in committed and "textutils/slug.py" in committed
    assert (
        subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True).stdout
        == ""
    )
    done = _tournaments_done(root)
    assert [(d["task_id"], d["winner"], d["applied"]) for d in done] == [
        ("1.1", "B@1", True),
        ("1.2", "B@1", True),
    ]
    evidence = json.loads((root / ".autodev" / "evidence" / "1.1-tournament-2.json").read_text())
    assert evidence["winner"] == "B@1" and evidence["phase"] == "impl"
    assert (root / done[0]["artifact_dir"] / "a-original.patch").read_text().startswith("diff --git")
    assert len(_worktree_list(root)) == 1
    assert list((root / ".autodev" / "worktrees").iterdir()) == []
    assert adapter.judged == 6


def test_a_variant_that_raises_leaves_no_worktree_behind(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    script = script_with(setup, *TOURNAMENT_ROLES)
    orch, _ = orchestrator(setup.repo_root, script, **FAST)
    orch.adapter = VariantAgents(raise_in_worktree=True, script=script)
    outcome = anyio.run(orch.run, setup.intent)
    # Failure isolation: the crash blocks the task (and its dependent), it does not crash the run.
    first = next(task for task in outcome.tasks if task.id == "1.1")
    assert first.status == "blocked"
    assert "the developer crashed" in (first.blocked_reason or "")
    root = setup.repo_root
    assert len(_worktree_list(root)) == 1
    assert list((root / ".autodev" / "worktrees").iterdir()) == []
    # The tested change of the task is kept as evidence; the variant's file went nowhere.
    assert "textutils/slug.py" in (root / ".autodev" / "evidence" / "1.1.developer.patch").read_text()
    assert not (root / "textutils" / "variant_1_1.py").exists()


def test_variants_identical_to_a_are_disqualified_and_a_is_kept(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    script = script_with(setup, *TOURNAMENT_ROLES)
    orch, _ = orchestrator(setup.repo_root, script, **FAST)
    orch.adapter = VariantAgents(idle_in_worktree=True, script=script)
    outcome = anyio.run(orch.run, setup.intent)

    assert [t.status for t in outcome.tasks] == ["complete", "complete"]
    root = setup.repo_root
    done = _tournaments_done(root)
    # Every judge put a variant before A, but the variants are A itself: A stays, nothing is re-applied.
    assert [(d["task_id"], d["winner"], d["applied"]) for d in done] == [
        ("1.1", "A", False),
        ("1.2", "A", False),
    ]
    evidence = json.loads((root / ".autodev" / "evidence" / "1.1-tournament-2.json").read_text())
    reasons = {name: why for entry in evidence["history"] for name, why in entry["disqualified"].items()}
    assert reasons == {name: "identical to A: the developer changed nothing" for name in ("B", "AB")}


class PricedAgents(VariantAgents):
    """Every call, whatever its role, reports what it cost: a cent."""

    def __init__(self, *, script: Script) -> None:
        super().__init__(script=script)
        self.priced_calls: list[str] = []

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        result = await super().execute(inv)
        self.priced_calls.append(inv.role)
        return result.model_copy(update={"cost_usd": 0.01, "tokens_in": 1000, "tokens_out": 100})


def test_every_tournament_call_counts_toward_the_plans_cost(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    script = script_with(setup, *TOURNAMENT_ROLES)
    orch, _ = orchestrator(setup.repo_root, script, **FAST)
    adapter = PricedAgents(script=script)
    orch.adapter = adapter

    anyio.run(orch.run, setup.intent)

    manager = PlanManager.open(setup.repo_root, readonly=True)
    report = cost_report(manager.usage_entries(), by="role")
    by_role = {row.key: row for row in report.rows}
    # Variants, critics, the architect's and synthesizer's directions and every judge: all counted.
    assert {"judge", "critic_t", "architect_b", "synthesizer", "developer"} <= set(by_role)
    assert by_role["judge"].calls == adapter.judged == 6
    assert report.total.calls == len(adapter.priced_calls)
    assert manager.cost_usd_total == pytest.approx(0.01 * len(adapter.priced_calls))
    assert report.total.cost_usd == pytest.approx(manager.cost_usd_total)
