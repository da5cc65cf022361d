"""What every task's agents are told about the project, beyond their task.

The plan phase learns things about the repository (the explorer's findings, the domain expert's notes) that
the developer, reviewer and test engineer of every task need as much as the architect did; and the
preflight knows where the project's code runs and how its tests stood on the base commit. ``ProjectContext``
turns both into one bounded prompt block, each finding with the id of the evidence file it comes from (an
agent can be pointed at it; a person can check it).

What the block says about the tests is what the test gate does: which command runs, how many tests ran on
the base commit and which of them fail there already (not blamed on the task), or that the repository has
no tests (the gate then records ``no_tests``, which fails nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from autodev.errors import EvidenceError
from autodev.orchestrator.text import clip
from autodev.qa.baseline import TreeBaseline
from autodev.qa.environment import ProjectEnvironment
from autodev.state.evidence import read_evidence
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import ExploreEvidence, SMEEvidence

__all__ = ["FINDINGS_CHARS", "ProjectContext", "project_context"]

FINDINGS_CHARS = 3_000
"""How much of each plan-phase finding goes into a task prompt; the evidence file keeps all of it."""
_SHOWN_FAILURES = 10


@dataclass(frozen=True, slots=True)
class ProjectContext:
    """The prompt blocks every task role gets: plan-phase findings, the project's environment and tests."""

    findings: str
    project: str

    def block(self) -> str:
        return "\n\n".join(part for part in (self.project, self.findings) if part)


def _plan_findings(plans: PlanManager, repo_root: Path) -> str:
    parts = []
    for ref in plans.evidence_for("plan"):
        if ref.kind not in ("explore", "domain_expert"):
            continue
        try:
            evidence = read_evidence(repo_root / ref.path)
        except EvidenceError:
            continue
        if isinstance(evidence, ExploreEvidence) and evidence.findings.strip():
            title = "the explorer's findings"
            text = evidence.findings
        elif isinstance(evidence, SMEEvidence) and evidence.findings.strip():
            title = "the domain expert's notes" + (f" on {evidence.topic}" if evidence.topic else "")
            text = evidence.findings
        else:
            continue
        parts.append(f"From {title} (evidence {Path(ref.path).name}):\n{clip(text.strip(), FINDINGS_CHARS)}")
    if not parts:
        return ""
    return "WHAT THE PLAN PHASE LEARNED ABOUT THIS REPOSITORY:\n" + "\n\n".join(parts)


def _tests_line(baseline: TreeBaseline | None, commit: str | None) -> str:
    if baseline is None or commit is None:
        return ""
    gate = next((g for g in baseline.gates if g.gate == "test"), None)
    if gate is None:
        return ""
    where = f"the base commit {commit[:10]}"
    if gate.status == "no_tests":
        return (
            f"Tests: this repository has no tests ({gate.reason or 'none found'} on {where}). The test gate "
            "records `no_tests`, which is neither a pass nor a failure and does not fail your change."
        )
    ran = f"{gate.counts.total} ran on {where}" if gate.counts is not None else f"they ran on {where}"
    if not gate.findings:
        return f"Tests: {ran}, all passing. A change must keep them passing."
    shown = "; ".join(gate.findings[:_SHOWN_FAILURES])
    more = f" and {len(gate.findings) - _SHOWN_FAILURES} more" if len(gate.findings) > _SHOWN_FAILURES else ""
    return (
        f"Tests: {ran}; {len(gate.findings)} of them fail there already and are not blamed on your change "
        f"(only new failures are): {shown}{more}."
    )


def project_context(
    plans: PlanManager,
    repo_root: Path,
    *,
    environment: ProjectEnvironment | None,
    baseline: TreeBaseline | None,
    commit: str | None,
) -> ProjectContext:
    """The context block of the module docstring, read from the ledger's evidence and the preflight."""
    lines = []
    if environment is not None:
        lines.append(f"The project's code runs in {environment.summary()}.")
    tests = _tests_line(baseline, commit)
    if tests:
        lines.append(tests)
    base = plans.base_check
    if base is not None and base.get("stale"):
        lines.append(
            f"The checkout is {base['behind']} commit(s) behind {base['ref']}, and the user chose to build "
            "on it as it is: work from this checkout; do not pull, fetch, merge or rebase."
        )
    project = "THE PROJECT (as AutoDev's checks see it):\n" + "\n".join(lines) if lines else ""
    return ProjectContext(findings=_plan_findings(plans, repo_root), project=project)
