"""Glue between the plan phase and the tournament engine, and what both runners share.

The architect's plan is candidate A; revisions and syntheses are plan markdown. A candidate that does not
parse, or names a file outside the repository, is disqualified: judges still see it, it is ranked last and
the reason is noted. The winner is returned as a parsed ``Plan``; ``plan_tournament_complete`` goes to the
ledger and ``TournamentEvidence`` to the evidence directory.

Tournaments are skipped, with the reason logged and shown, on the inline adapter (judges must be
independent agent calls, which a person answering files is not) and when the model in use contains one
of ``tournaments.auto_disable_for_models``.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol

from autodev.adapters.base import PlatformAdapter
from autodev.adapters.inline import InlineAdapter
from autodev.agents.registry import get_spec
from autodev.agents.spec import AgentAction, AgentSpec
from autodev.config import AutodevConfig
from autodev.config.schema import Platform, TournamentSettings
from autodev.errors import (
    AutodevError,
    EnvironmentFaultError,
    GuardrailExceededError,
    LockHeldError,
    StateError,
)
from autodev.guardrails.errors import BudgetExceededError, LoopDetectedError
from autodev.logging import get_logger
from autodev.orchestrator.delegate import DelegationRequest, delegate
from autodev.orchestrator.delegation_envelope import DelegationEnvelope
from autodev.orchestrator.delegation_policy import DelegationHeldError
from autodev.orchestrator.events import ProgressEvent
from autodev.orchestrator.integrity import RepositoryChangedError
from autodev.orchestrator.submodules import refuse_submodule_files
from autodev.state.paths import normalize_repo_path
from autodev.state.plan_markdown import parse_plan_markdown, render_plan_markdown
from autodev.state.schemas import Plan, TournamentEvidence
from autodev.tournament import (
    Candidate,
    EngineSettings,
    RoleCall,
    RoleReply,
    TournamentArtifacts,
    TournamentEngine,
    TournamentKind,
    TournamentResult,
)

if TYPE_CHECKING:
    from pathlib import Path

    from autodev.orchestrator.run_context import RunContext

__all__ = [
    "DelegateRoleClient",
    "PlanContentHandler",
    "new_tournament_id",
    "run_plan_tournament",
    "skip",
    "tournament_skip_reason",
    "tournament_summary",
]

_log = get_logger("autodev.plan_tournament")
_ACTIONS: dict[str, AgentAction] = {
    "critic_t": "critique",
    "architect_b": "design",
    "synthesizer": "design",
    "judge": "review",
}


class AgentSetup(Protocol):
    """What deciding about a tournament reads: the platform, its adapter, the roles and the configuration
    (a ``RunContext`` has them, and so has the ``Orchestrator`` before any call)."""

    @property
    def config(self) -> AutodevConfig: ...

    @property
    def registry(self) -> Mapping[str, AgentSpec]: ...

    @property
    def platform_name(self) -> Platform: ...

    def adapter_for(self, role: str) -> PlatformAdapter: ...

    def platform_for(self, role: str) -> Platform: ...


def tournament_skip_reason(session: AgentSetup, settings: TournamentSettings) -> str | None:
    """Why a tournament must not run here, or None when it may."""
    if any(isinstance(session.adapter_for(role), InlineAdapter) for role in ("judge", "developer")):
        return "the inline adapter cannot run tournaments (judges must be independent agent calls)"
    model = tournament_model(session, settings)
    if model is None:
        judges = session.platform_for("judge")
        model = get_spec(session.registry, "judge").effective(session.config, judges).model
    if model:
        lowered = model.casefold()
        for needle in session.config.tournaments.auto_disable_for_models:
            if needle.casefold() in lowered:
                return f"model {model!r} matches tournaments.auto_disable_for_models entry {needle!r}"
    return None


def tournament_model(session: AgentSetup, settings: TournamentSettings, role: str = "judge") -> str | None:
    """``tournaments.<kind>.model`` as the model name of ``role``'s platform (a tier resolves per
    platform; the judges may run on the read-only platform)."""
    platform = session.platform_for(role)
    return session.config.resolve_model(platform, settings.model) if settings.model else None


class DelegateRoleClient:
    """The engine's ``RoleClient`` over ``delegate``: guardrails, cost and loop detection apply to every call.

    A loop detected on a tournament role (judges may well repeat one another) fails that call only; the
    engine then excludes the judge or makes the pass inconclusive, instead of blocking a task that is done.
    """

    def __init__(
        self,
        session: RunContext,
        *,
        tournament_id: str,
        phase: Literal["plan", "execute"],
        task_id: str = "plan",
        attempt: int = 1,
        files: tuple[str, ...] = (),
        acceptance: str | None = None,
        model: str | None = None,
    ) -> None:
        self.session = session
        # ``tournaments.<kind>.model`` as configured: a tier resolves per call, for the role's platform.
        self.model = model
        self.tournament_id = tournament_id
        self.phase: Literal["plan", "execute"] = phase
        self.task_id = task_id
        self.attempt = attempt
        self.files = files
        self.acceptance = acceptance

    async def call(self, call: RoleCall) -> RoleReply:
        context: dict[str, object] = {"tournament": self.tournament_id, "pass": call.pass_no}
        if call.judge_no is not None:
            context["judge"] = call.judge_no
        envelope = DelegationEnvelope(
            task_id=self.task_id,
            target_agent=call.role,
            action=_ACTIONS[call.role],
            files=list(self.files),
            acceptance=self.acceptance,
            context=context,
        )
        request = DelegationRequest(
            role=call.role,
            envelope=envelope,
            phase=self.phase,
            step=f"tournament:{call.role}",
            task_id=self.task_id,
            attempt=self.attempt,
            extra_context=call.prompt,
            model=(
                self.session.config.resolve_model(self.session.platform_for(call.role), self.model)
                if self.model
                else None
            ),
        )
        try:
            result = await delegate(self.session, request)
        except LoopDetectedError as exc:
            return RoleReply(False, error=f"loop detected: {exc.message}")
        if not result.success:
            error = f"{result.error.kind}: {result.error.message}" if result.error else "failed"
            return RoleReply(False, result.text, error)
        return RoleReply(True, result.text)


class PlanContentHandler:
    """Makes plan candidates: the reply is the plan markdown; one that does not parse is disqualified."""

    def __init__(self, repo_root: Path, spec_hash: str, created_at: str) -> None:
        self.repo_root = repo_root
        self.spec_hash = spec_hash
        self.created_at = created_at

    async def realize(
        self, variant: Literal["B", "AB"], pass_no: int, reply: str, incumbent: Candidate[Plan]
    ) -> Candidate[Plan]:
        source = f"plan tournament pass {pass_no} candidate {variant}"
        try:
            plan = parse_plan_markdown(reply, self.spec_hash, source=source, created_at=self.created_at)
            for task in plan.iter_tasks():
                for path in task.files:
                    normalize_repo_path(path, self.repo_root, context=f"{source}: task {task.id}")
            refuse_submodule_files(plan, self.repo_root, source=source)
        except AutodevError as exc:  # PlanParseError (a file inside a submodule too), or PathEscapeError
            return Candidate(reply, incumbent.payload, variant, disqualified=f"does not parse: {exc}")
        return Candidate(reply, plan, variant)


# What stops the whole run wherever it happens: a tournament that meets one stops too, instead of keeping A
# and going on (an agent that moved a ref would otherwise go unnoticed, and a full disk would be "a failed
# tournament").
STOPS_THE_RUN: tuple[type[AutodevError], ...] = (
    GuardrailExceededError,
    BudgetExceededError,
    RepositoryChangedError,
    EnvironmentFaultError,
    DelegationHeldError,
    StateError,
    LockHeldError,
)


def new_tournament_id(kind: TournamentKind, subject: str) -> str:
    """``<kind>-<subject>-<random>``: unique, so a rerun never overwrites an earlier tournament's files."""
    return f"{kind}-{subject}-{secrets.token_hex(3)}"


def tournament_summary(result: TournamentResult[Any]) -> list[dict[str, object]]:
    """The per-pass summary kept in the ledger payload and in ``TournamentEvidence.history``."""
    return [dict(p.summary()) for p in result.passes]


def skip(session: RunContext, kind: TournamentKind, subject: str, reason: str) -> None:
    """Log and show that a tournament did not run, and why."""
    _log.info(f"{kind}_tournament.skipped", subject=subject, reason=reason)
    label = "plan" if kind == "plan" else "implementation"
    session.emit(ProgressEvent("note", f"{label} tournament skipped: {reason}", subject))


async def run_plan_tournament(session: RunContext, plan: Plan, intent: str) -> Plan:
    """Refine ``plan`` in a plan tournament; returns the winning plan (``plan`` itself when A wins)."""
    settings = session.config.tournaments.plan
    reason = tournament_skip_reason(session, settings)
    if reason is not None:
        skip(session, "plan", "plan", reason)
        return plan
    tournament_id = new_tournament_id("plan", plan.plan_id.removeprefix("plan-"))
    artifacts = TournamentArtifacts(session.paths.tournaments_dir, tournament_id)
    engine: TournamentEngine[Plan] = TournamentEngine(
        tournament_id=tournament_id,
        kind="plan",
        client=DelegateRoleClient(session, tournament_id=tournament_id, phase="plan", model=settings.model),
        handler=PlanContentHandler(session.repo_root, plan.spec_hash, plan.created_at),
        settings=EngineSettings.from_config(settings, session.config.tournaments),
        artifacts=artifacts,
    )
    _log.info(
        "plan_tournament.start",
        tournament_id=tournament_id,
        model=tournament_model(session, settings),
        num_judges=settings.num_judges,
        max_rounds=settings.max_rounds,
    )
    session.emit(ProgressEvent("note", f"plan tournament {tournament_id} started", "plan"))
    task_prompt = (
        f"THE USER'S INTENT:\n{intent.strip()}\n\nACCEPTANCE: the plan covers the whole intent and "
        "nothing more, in small tasks with testable acceptance criteria, correct dependencies and "
        "repository-relative files, in AutoDev's canonical plan format."
    )
    try:
        result = await engine.run(task_prompt, Candidate(render_plan_markdown(plan), plan, "A"))
    except STOPS_THE_RUN:
        raise  # as it would anywhere else
    except AutodevError as exc:
        skip(session, "plan", "plan", f"it failed and the architect's plan is kept ({exc.message})")
        return plan
    winner = plan
    if result.replaced:
        winner = result.winner.payload.model_copy(update={"metadata": dict(plan.metadata)})
    history = tournament_summary(result)
    session.plan_manager.record_event(
        "plan_tournament_complete",
        {
            "tournament_id": tournament_id,
            "passes": len(result.passes),
            "winner": result.winner.origin,
            "converged": result.converged,
            "stop_reason": result.stop_reason,
            "seed": result.seed,
            "artifact_dir": session.paths.relative(artifacts.dir),
        },
    )
    session.plan_manager.record_evidence(
        TournamentEvidence(
            task_id="plan",
            tournament_id=tournament_id,
            phase="plan",
            passes=len(result.passes),
            winner=result.winner.origin,
            converged=result.converged,
            history=history,
        )
    )
    _log.info(
        "plan_tournament.done",
        tournament_id=tournament_id,
        passes=len(result.passes),
        winner_last=result.winner.origin,
    )
    session.emit(
        ProgressEvent(
            "note",
            f"plan tournament {tournament_id}: winner {result.winner.origin} ({result.stop_reason})",
            "plan",
        )
    )
    return winner
