"""Phase review: the change a finished phase made, over its exact commit range.

A phase's range runs from ``baseline_commit`` (the main tree's HEAD when its first task started) to
``end_checkpoint_commit`` (HEAD when its last task became terminal, recorded once). With cross-phase
parallelism a later phase may merge commits inside that range; the review lists them apart and builds its
diff from the phase's own commits only, so it shows exactly what this phase did. The range and the diff
are always recorded as evidence; with ``phase_review_enabled`` the reviewer also reads the diff and its
verdict is recorded (advisory: the phase's tasks are complete and committed; a NEEDS_CHANGES is reported
for a person to act on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autodev.agents.parsing import parse_review_verdict
from autodev.logging import get_logger
from autodev.orchestrator.delegate import DelegationRequest, delegate
from autodev.orchestrator.delegation_envelope import DelegationEnvelope
from autodev.orchestrator.events import ProgressEvent
from autodev.orchestrator.text import clip
from autodev.state.schemas import Phase, PhaseReviewEvidence

if TYPE_CHECKING:
    from autodev.orchestrator.run_context import RunContext

__all__ = ["PHASE_REVIEW_PROMPT_CHARS", "build_phase_review", "review_finished_phases"]

PHASE_REVIEW_PROMPT_CHARS = 60_000
_log = get_logger("autodev.phase_review")


def _reviewed_positions(session: RunContext) -> set[int]:
    return {ref.attempt for ref in session.plan_manager.evidence_for("plan") if ref.kind == "phase_review"}


async def review_finished_phases(session: RunContext) -> None:
    """Record the review of every phase that has an end checkpoint and no review yet (idempotent)."""
    done = _reviewed_positions(session)
    for position, progress in enumerate(session.plan_manager.phase_progress(), start=1):
        if progress.end_checkpoint_commit is None or position in done:
            continue
        phase = session.plan_manager.phase(progress.phase_id)
        evidence = await build_phase_review(session, phase, position)
        if session.config.phase_review_enabled and evidence.commits:
            evidence = await _ask_reviewer(session, phase, evidence)
        session.plan_manager.record_evidence(evidence)
        _log.info(
            "phase_review.recorded",
            phase_id=phase.id,
            commits=len(evidence.commits),
            foreign=len(evidence.foreign_commits),
            verdict=evidence.verdict,
        )
        verdict = f", reviewer: {evidence.verdict}" if evidence.verdict else ""
        session.emit(
            ProgressEvent(
                "note",
                f"phase {phase.id} finished: {len(evidence.commits)} commit(s), "
                f"{len(evidence.files_changed)} file(s){verdict}",
                ok=evidence.verdict in (None, "APPROVED"),
                details=tuple(evidence.issues),
            )
        )


async def build_phase_review(session: RunContext, phase: Phase, position: int) -> PhaseReviewEvidence:
    """The phase's range, own and foreign commits, changed files and diff (no agent involved)."""
    end = phase.end_checkpoint_commit
    if end is None:
        raise ValueError(f"phase {phase.id} has no end checkpoint yet")
    git = session.git
    own = {task.commit for task in phase.tasks if task.status == "complete" and task.commit}
    in_range = await git.commits_since(phase.baseline_commit, end) if phase.baseline_commit else []
    commits = [commit for commit in in_range if commit in own]
    foreign = [commit for commit in in_range if commit not in own]
    if phase.baseline_commit and not foreign:
        diff = await git.range_patch(phase.baseline_commit, end)
        files = await git.changed_paths(phase.baseline_commit, end)
    else:
        diff = "".join([await git.commit_patch(commit) for commit in commits])
        files = sorted({path for commit in commits for path in await git.changed_paths(f"{commit}^", commit)})
    return PhaseReviewEvidence(
        task_id="plan",
        attempt=position,
        phase_id=phase.id,
        baseline_commit=phase.baseline_commit,
        end_checkpoint_commit=end,
        commits=commits,
        foreign_commits=foreign,
        files_changed=sorted(files),
        diff=diff,
    )


async def _ask_reviewer(
    session: RunContext, phase: Phase, evidence: PhaseReviewEvidence
) -> PhaseReviewEvidence:
    envelope = DelegationEnvelope(
        task_id="plan",
        target_agent="reviewer",
        action="review",
        files=list(evidence.files_changed),
        constraints=["review only; change nothing", "judge the phase as a whole: consistency, gaps"],
        acceptance=None,
        context={"phase_id": phase.id, "phase_title": phase.title, "phase_description": phase.description},
    )
    tasks = "\n".join(f"- {task.id} {task.title} ({task.status})" for task in phase.tasks)
    request = DelegationRequest(
        role="reviewer",
        envelope=envelope,
        phase="execute",
        step=f"phase_review:{phase.id}",
        extra_context=(
            f"PHASE {phase.id}: {phase.title}\nITS TASKS:\n{tasks}\n\nTHE PHASE'S WHOLE CHANGE "
            f"({evidence.baseline_commit or 'start'}..{evidence.end_checkpoint_commit}):\n"
            + clip(evidence.diff, PHASE_REVIEW_PROMPT_CHARS)
        ),
    )
    result = await delegate(session, request)
    if not result.success:
        message = result.error.message if result.error else "failed"
        return evidence.model_copy(update={"issues": [f"the reviewer could not review the phase: {message}"]})
    parsed = parse_review_verdict(result.text)
    return evidence.model_copy(
        update={
            "reviewed": True,
            "verdict": parsed.verdict if parsed else None,
            "issues": list(parsed.issues)
            if parsed
            else ["the reviewer's reply has no 'VERDICT: APPROVED|NEEDS_CHANGES|REJECTED' line"],
            "output_text": result.text,
            "cost_usd": result.cost_usd,
            "session_id": result.session_id,
            "role": "reviewer",
        }
    )
