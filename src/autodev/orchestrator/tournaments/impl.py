"""Glue between the execute phase and the tournament engine for one tested task.

Candidate A is the task's change as git shows it against the task's base commit. B and AB are made by the
developer, following architect_b's or the synthesizer's direction, in a detached worktree created from the
base commit *with A's change applied*; the test engineer then works in the same worktree and AutoDev runs
the tests there itself. Judges see each variant's diff (bounded) and its test results. A variant whose
developer failed, that changed nothing (no change against the base, or a tree identical to A's), or whose
tests fail when AutoDev runs them is disqualified.

When a variant wins, its diff replaces A's change in the main working tree: A's change is taken back out
with a reverse ``git apply`` (refused, changing nothing, if the tree no longer holds exactly A's change),
the winner is applied, and on a failure A's change is put back. A's patch is saved in the tournament's
directory first. Worktrees are removed in ``finally``, shielded from cancellation; a crash leaves them for
``WorktreeManager.prune_stale`` at the next start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import anyio

from autodev.agents.parsing import parse_test_results
from autodev.errors import AutodevError
from autodev.guardrails.errors import LoopDetectedError
from autodev.logging import get_logger
from autodev.orchestrator.delegate import DelegationRequest, delegate
from autodev.orchestrator.delegation_envelope import DelegationEnvelope
from autodev.orchestrator.events import ProgressEvent
from autodev.orchestrator.text import clip
from autodev.orchestrator.tournaments.plan import (
    STOPS_THE_RUN,
    DelegateRoleClient,
    new_tournament_id,
    skip,
    tournament_model,
    tournament_skip_reason,
    tournament_summary,
)
from autodev.state.atomic import atomic_write_bytes
from autodev.state.schemas import Task, TournamentEvidence
from autodev.tournament import Candidate, EngineSettings, TournamentArtifacts, TournamentEngine
from autodev.workspace.git import GitRepo
from autodev.workspace.worktree import Worktree, WorktreeError, WorktreeManager

if TYPE_CHECKING:
    from pathlib import Path

    from autodev.orchestrator.run_context import RunContext

__all__ = ["ImplContentHandler", "prune_stale_worktrees", "run_impl_tournament"]

_log = get_logger("autodev.impl_tournament")
# Each of the three candidates goes into one judge prompt; the evidence keeps every diff in full.
CANDIDATE_DIFF_CHARS = 20_000
_OUTPUT_CHARS = 2_000


def describe_variant(patch: str, tests: str) -> str:
    """What critics and judges see of an implementation: its bounded diff and its test results."""
    return f"DIFF (against the task's base commit):\n{clip(patch, CANDIDATE_DIFF_CHARS)}\n\nTESTS:\n{tests}\n"


class ImplContentHandler:
    """Implements a direction in a fresh worktree and reports the variant's diff and test results."""

    def __init__(
        self, session: RunContext, task: Task, manager: WorktreeManager, base: str, tournament_id: str
    ) -> None:
        self.session = session
        self.task = task
        self.manager = manager
        self.base = base
        self.tournament_id = tournament_id

    def _request(self, role: str, worktree: Worktree, extra: str) -> DelegationRequest:
        envelope = DelegationEnvelope(
            task_id=self.task.id,
            target_agent=role,
            action="implement" if role == "developer" else "test",
            files=list(self.task.files),
            constraints=["work only inside the working directory", "keep the change to what this task needs"],
            acceptance="; ".join(c.description for c in self.task.acceptance) or None,
            context={
                "task_title": self.task.title,
                "task_description": self.task.description,
                "tournament": self.tournament_id,
            },
        )
        return DelegationRequest(
            role=role,
            envelope=envelope,
            phase="execute",
            step=f"tournament:{role}",
            task_id=self.task.id,
            attempt=self.task.retry_count + 1,
            retry_count=self.task.retry_count,
            cwd=worktree.path,
            extra_context=extra,
        )

    async def realize(
        self, variant: Literal["B", "AB"], pass_no: int, reply: str, incumbent: Candidate[str]
    ) -> Candidate[str]:
        name = f"{self.tournament_id}-p{pass_no:02d}-{variant.lower()}"
        worktree = await self.manager.create(name, self.base, incumbent.payload)
        try:
            # A's tree as the variant's worktree holds it before the developer works: a variant left so is A.
            incumbent_tree = await GitRepo(worktree.path, like=self.session.git).snapshot_tree()
            return await self._implement(variant, worktree, reply, incumbent, incumbent_tree)
        finally:
            with anyio.CancelScope(shield=True):
                await self.manager.remove(worktree)

    async def _implement(
        self,
        variant: str,
        worktree: Worktree,
        direction: str,
        incumbent: Candidate[str],
        incumbent_tree: str,
    ) -> Candidate[str]:
        self.session.emit(
            ProgressEvent("note", f"tournament: developer builds variant {variant}", self.task.id)
        )
        extra = (
            "THE WORKING DIRECTORY ALREADY HOLDS THE CURRENT IMPLEMENTATION OF THIS TASK. Revise it "
            f"following this direction:\n{direction.strip()}"
        )
        try:
            developer = await delegate(self.session, self._request("developer", worktree, extra))
        except LoopDetectedError as exc:
            return Candidate("", incumbent.payload, variant, disqualified=f"developer: {exc.message}")
        diff = await self.manager.diff(worktree)
        if not developer.success:
            error = developer.error.message if developer.error else "failed"
            return Candidate(
                describe_variant(diff.patch, "not run"), diff.patch, variant, f"developer: {error}"
            )
        if diff.is_empty:
            return Candidate("(no change)", diff.patch, variant, "no change against the task's base commit")
        if diff.tree == incumbent_tree:
            # Judged, it would split the votes with A for nothing, and could "win" without changing anything.
            return Candidate(
                "(identical to A)", diff.patch, variant, "identical to A: the developer changed nothing"
            )
        try:
            tester = await delegate(self.session, self._request("test_engineer", worktree, ""))
        except LoopDetectedError as exc:
            return Candidate(describe_variant(diff.patch, "not run"), diff.patch, variant, exc.message)
        diff = await self.manager.diff(worktree)
        claim = parse_test_results(tester.text) if tester.success else None
        checks = await self.session.change_checks(self.session.test_recipe(self.task.files))
        git = GitRepo(worktree.path, like=self.session.git)
        checked = await checks.check(worktree.path, git, self.base, diff.files, only=("test",))
        run = next((gate for gate in checked.results if gate.gate == "test"), None)
        lines = [
            "test engineer: "
            + (
                f"passed={claim.passed} failed={claim.failed} total={claim.total}"
                if claim
                else "no RESULTS line"
            ),
            f"AutoDev's own test run: {run.status if run else 'not run'}"
            + (f" ({run.reason})" if run is not None and run.reason else ""),
        ]
        if run is not None:
            output = "\n".join(c.output_excerpt.strip() for c in run.checks if c.output_excerpt.strip())
            if output:
                lines.append(clip(output, _OUTPUT_CHARS))
        text = describe_variant(diff.patch, "\n".join(lines))
        if run is not None and not run.acceptable:
            return Candidate(
                text, diff.patch, variant, f"its tests do not pass when AutoDev runs them ({run.status})"
            )
        return Candidate(text, diff.patch, variant)


async def run_impl_tournament(session: RunContext, task: Task, tree: Path, git: GitRepo) -> None:
    """Refine the tested change of ``task`` living in ``tree``; the winner's change is left there.

    ``tree`` is the main working tree, or the task's own worktree when tasks run in parallel.
    """
    settings = session.config.tournaments.impl
    reason = tournament_skip_reason(session, settings)
    if reason is None and task.base_commit is None:
        reason = "the task has no recorded base commit"
    if reason is not None or task.base_commit is None:
        skip(session, "impl", task.id, reason or "no base commit")
        return
    base = task.base_commit
    a_diff = await git.diff_against(base)
    if a_diff.is_empty:
        skip(session, "impl", task.id, "the task's change is empty")
        return
    # Worktrees a crashed run left are pruned at start; here other tasks' tournaments may be running.
    manager = WorktreeManager(
        tree,
        session.paths.worktrees_dir,
        admin_lock=session.worktree_admin_lock,
        preparer=session.worktree_preparer,
        split_index_min_entries=session.config.worktree_split_index_min_files,
    )
    tournament_id = new_tournament_id("impl", task.id)
    artifacts = TournamentArtifacts(session.paths.tournaments_dir, tournament_id)
    # A's change is saved before anything else happens, so it can always be recovered by hand.
    atomic_write_bytes(artifacts.dir / "a-original.patch", a_diff.patch.encode("utf-8", "surrogateescape"))
    handler = ImplContentHandler(session, task, manager, base, tournament_id)
    acceptance = "; ".join(c.description for c in task.acceptance) or None
    engine: TournamentEngine[str] = TournamentEngine(
        tournament_id=tournament_id,
        kind="impl",
        client=DelegateRoleClient(
            session,
            tournament_id=tournament_id,
            phase="execute",
            task_id=task.id,
            attempt=task.retry_count + 1,
            files=tuple(task.files),
            acceptance=acceptance,
            model=session.config.tournaments.impl.model,
        ),
        handler=handler,
        settings=EngineSettings.from_config(settings, session.config.tournaments),
        artifacts=artifacts,
    )
    criteria = "\n".join(f"- {c.description}" for c in task.acceptance) or "- (none given)"
    task_prompt = f"TASK {task.id}: {task.title}\n{task.description}\n\nACCEPTANCE CRITERIA:\n{criteria}"
    initial = Candidate(
        describe_variant(a_diff.patch, "passed: reviewed and tested by the task's own steps"),
        a_diff.patch,
        "A",
    )
    _log.info(
        "impl_tournament.start",
        tournament_id=tournament_id,
        task_id=task.id,
        model=tournament_model(session, settings),
        num_judges=settings.num_judges,
    )
    session.emit(ProgressEvent("note", f"implementation tournament {tournament_id} started", task.id))
    try:
        result = await engine.run(task_prompt, initial)
    except STOPS_THE_RUN:
        raise  # the task is blocked or the run stops, as for any other call
    except AutodevError as exc:
        skip(session, "impl", task.id, f"it failed and the tested change is kept ({exc.message})")
        return
    finally:
        with anyio.CancelScope(shield=True):
            await manager.cleanup_all()
    applied = False
    note = result.stop_reason
    if result.replaced:
        try:
            await _adopt(git, manager, base, a_diff.patch, result.winner.payload)
            applied = True
            session.plan_manager.record_patch(task.id, result.winner.payload, attempt=task.retry_count + 1)
        except AutodevError as exc:
            note = (
                f"{result.stop_reason}; the winner was not applied, the tested change is kept: {exc.message}"
            )
            _log.warning("impl_tournament.not_applied", task_id=task.id, reason=exc.message)
    winner = result.winner.origin if applied or not result.replaced else "A"
    session.plan_manager.record_event(
        "impl_tournament_complete",
        {
            "tournament_id": tournament_id,
            "task_id": task.id,
            "passes": len(result.passes),
            "winner": winner,
            "applied": applied,
            "converged": result.converged,
            "stop_reason": note,
            "seed": result.seed,
            "artifact_dir": session.paths.relative(artifacts.dir),
        },
    )
    session.plan_manager.record_evidence(
        TournamentEvidence(
            task_id=task.id,
            attempt=task.retry_count + 1,
            tournament_id=tournament_id,
            phase="impl",
            passes=len(result.passes),
            winner=winner,
            converged=result.converged,
            history=tournament_summary(result),
        )
    )
    _log.info(
        "impl_tournament.done",
        tournament_id=tournament_id,
        task_id=task.id,
        passes=len(result.passes),
        winner_last=winner,
    )
    session.emit(
        ProgressEvent("note", f"implementation tournament {tournament_id}: winner {winner} ({note})", task.id)
    )


async def prune_stale_worktrees(session: RunContext) -> list[Path]:
    """Remove the tournament worktrees a crashed run left in ``.autodev/worktrees/`` (hold the run lock)."""
    manager = WorktreeManager(
        session.repo_root, session.paths.worktrees_dir, admin_lock=session.worktree_admin_lock
    )
    return await manager.prune_stale()


async def _adopt(git: GitRepo, manager: WorktreeManager, base: str, a_patch: str, winner: str) -> None:
    """Replace A's change in the task's tree with ``winner``; on any failure A's change is put back."""
    current = await git.diff_against(base)
    if current.patch != a_patch:
        raise WorktreeError("the main working tree changed during the tournament; it is left as it is")
    await manager.revert_on_main(a_patch)
    try:
        await manager.apply_to_main(winner)
    except WorktreeError:
        await manager.apply_to_main(a_patch)
        raise
