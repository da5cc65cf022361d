"""The autoreason pass loop (NousResearch "Autoreason"), with sound judging.

Each pass, with a fresh agent per role: ``critic_t`` lists the problems of the incumbent A,
``architect_b`` revises A into B, ``synthesizer`` merges A and B (shown under random labels) into AB, and
``num_judges`` judges rank {A, B, AB}, each under its own random labels and order, in parallel (at most
``max_parallel`` at once). The Borda count decides: A keeps its place on a tie or a lead below
``min_margin``; A winning grows the streak, another winner becomes A and resets it. The tournament stops
after ``convergence_k`` A wins in a row or ``max_rounds`` passes.

Judging is strict: a ranking must be a permutation of exactly the three labels, or the judge is excluded and
the reason recorded. A pass with fewer valid judges than the quorum, or whose critic, reviser or synthesizer
failed, is *inconclusive*: it neither counts toward convergence nor replaces A. ``convergence_k`` inconclusive
passes in a row end the tournament keeping A. Every random choice comes from one ``random.Random`` seeded
from the settings; the seed and every label map are recorded, so a rerun shows the same labels.

The engine knows nothing of orchestrators or git: agents are reached through ``RoleClient`` and candidates
are made concrete (a plan parsed, a variant implemented in a worktree) by a ``ContentHandler``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Generic, Literal, Protocol, TypeVar

import anyio

from autodev.agents.parsing import parse_ranking
from autodev.config.schema import TournamentSettings, TournamentsSettings
from autodev.logging import get_logger
from autodev.tournament.artifacts import TournamentArtifacts
from autodev.tournament.borda import decide

__all__ = [
    "CANDIDATES",
    "Candidate",
    "ContentHandler",
    "EngineSettings",
    "JudgeRecord",
    "PassRecord",
    "RoleCall",
    "RoleClient",
    "RoleReply",
    "TournamentEngine",
    "TournamentKind",
    "TournamentResult",
]

_log = get_logger("autodev.tournament")

T = TypeVar("T")
TournamentKind = Literal["plan", "impl"]
Role = Literal["critic_t", "architect_b", "synthesizer", "judge"]
Variant = Literal["B", "AB"]
CANDIDATES: tuple[str, str, str] = ("A", "B", "AB")
# Neutral labels: never "A" or "B" (they would hint at the incumbent), no letters easily misread.
_LABEL_POOL = tuple("CDEFGHJKMNPQRSTUVWXYZ")


@dataclass(frozen=True, slots=True)
class RoleCall:
    """One agent call the engine needs: ``prompt`` is the task message for a fresh agent of ``role``."""

    role: Role
    pass_no: int
    prompt: str
    judge_no: int | None = None


@dataclass(frozen=True, slots=True)
class RoleReply:
    """What the agent answered; ``ok`` False with ``error`` when the call failed."""

    ok: bool
    text: str = ""
    error: str | None = None


class RoleClient(Protocol):
    """Makes one agent call. Agent failures come back as ``RoleReply(ok=False)``; only fatal conditions
    (a spent budget, a breached guardrail) are raised, and they end the tournament."""

    async def call(self, call: RoleCall) -> RoleReply: ...


@dataclass(frozen=True, slots=True)
class Candidate(Generic[T]):
    """A competitor: ``text`` is what the critic, synthesizer and judges see; ``payload`` what the caller
    keeps. ``origin`` says where it came from (``A`` for the initial candidate, ``B@2`` for pass 2's B; the
    engine sets it for the candidates it makes).
    A candidate with ``disqualified`` set is ranked last by every judge and cannot win.
    """

    text: str
    payload: T
    origin: str
    disqualified: str | None = None


class ContentHandler(Protocol[T]):
    """Turns a reviser's or synthesizer's reply into a candidate (and may disqualify it)."""

    async def realize(
        self, variant: Variant, pass_no: int, reply: str, incumbent: Candidate[T]
    ) -> Candidate[T]: ...


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """The knobs of one tournament (``TournamentSettings`` plus the shared parallelism and seed)."""

    num_judges: int = 3
    convergence_k: int = 2
    max_rounds: int = 5
    min_margin: int = 0
    quorum: int = 2
    max_parallel: int = 3
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.num_judges, self.convergence_k, self.max_rounds, self.quorum, self.max_parallel) < 1:
            raise ValueError(f"tournament settings must be positive: {self}")
        if self.quorum > self.num_judges:
            raise ValueError(f"quorum ({self.quorum}) cannot exceed num_judges ({self.num_judges})")
        if self.min_margin < 0:
            raise ValueError(f"min_margin must be >= 0, got {self.min_margin}")

    @classmethod
    def from_config(cls, settings: TournamentSettings, shared: TournamentsSettings) -> EngineSettings:
        return cls(
            num_judges=settings.num_judges,
            convergence_k=settings.convergence_k,
            max_rounds=settings.max_rounds,
            min_margin=settings.min_margin,
            quorum=settings.effective_quorum,
            max_parallel=shared.max_parallel_subprocesses,
            seed=shared.seed,
        )


@dataclass(slots=True)
class JudgeRecord:
    """One judge of one pass: what it was shown, what it said, and whether its ranking counts."""

    judge_no: int
    labels: dict[str, str]
    order: list[str]
    raw: str = ""
    valid: bool = False
    ranking: list[str] | None = None
    ranking_candidates: list[str] | None = None
    reason: str | None = None


@dataclass(slots=True)
class PassRecord:
    """One pass: its candidates, judges, vote and what it did to A."""

    pass_no: int
    incumbent: str
    status: Literal["decided", "inconclusive"] = "inconclusive"
    reason: str | None = None
    origins: dict[str, str] = field(default_factory=dict)
    disqualified: dict[str, str] = field(default_factory=dict)
    synth_labels: dict[str, str] = field(default_factory=dict)
    judges: list[JudgeRecord] = field(default_factory=list)
    valid_judges: int = 0
    quorum: int = 0
    scores: dict[str, int] = field(default_factory=dict)
    winner: str | None = None
    margin: int | None = None
    streak: int = 0

    def summary(self) -> dict[str, Any]:
        """The pass without the judges' raw replies (for ``scores.json`` and the ledger)."""
        data = asdict(self)
        data["judges"] = [
            {"judge_no": j.judge_no, "valid": j.valid, "ranking": j.ranking_candidates, "reason": j.reason}
            for j in self.judges
        ]
        return data


@dataclass(frozen=True, slots=True)
class TournamentResult(Generic[T]):
    """The winner (the final A), every pass, and why the tournament stopped."""

    tournament_id: str
    kind: TournamentKind
    winner: Candidate[T]
    passes: list[PassRecord]
    converged: bool
    stop_reason: str
    seed: int

    @property
    def replaced(self) -> bool:
        """Whether the winner is not the initial candidate."""
        return self.winner.origin != "A"

    def history(self) -> dict[str, Any]:
        return {
            "tournament_id": self.tournament_id,
            "kind": self.kind,
            "seed": self.seed,
            "winner": self.winner.origin,
            "converged": self.converged,
            "stop_reason": self.stop_reason,
            "passes": [asdict(p) for p in self.passes],
        }


_KIND_LINE = {
    "plan": "This is a PLAN tournament: the candidates are plans in AutoDev's canonical plan markdown.",
    "impl": "This is an IMPLEMENTATION tournament: each candidate is a change (a git diff against the task's "
    "base commit) with its test results.",
}
_REVISE_ASK = {
    "plan": "Write candidate B: the complete revised plan, starting with '# Plan:'.",
    "impl": "Write the DIRECTION block for the developer who will revise A into B.",
}
_MERGE_ASK = {
    "plan": "Write the merged plan, starting with '# Plan:'.",
    "impl": "Write the DIRECTION block for the developer who will turn A's change into the merged one.",
}


class TournamentEngine(Generic[T]):
    """Runs one tournament; see the module docstring. ``artifacts`` (optional) receives every file as it
    is produced, so a crash leaves the passes run so far on disk."""

    def __init__(
        self,
        *,
        tournament_id: str,
        kind: TournamentKind,
        client: RoleClient,
        handler: ContentHandler[T],
        settings: EngineSettings,
        artifacts: TournamentArtifacts | None = None,
    ) -> None:
        self.tournament_id = tournament_id
        self.kind = kind
        self.client = client
        self.handler = handler
        self.settings = settings
        self.artifacts = artifacts
        self._rng = random.Random(settings.seed)
        self._limiter = anyio.CapacityLimiter(settings.max_parallel)

    async def run(self, task_prompt: str, initial: Candidate[T]) -> TournamentResult[T]:
        """Refine ``initial`` against ``task_prompt`` (the task or intent with its acceptance criteria)."""
        cfg = self.settings
        incumbent = initial
        streak = 0
        inconclusive_run = 0
        passes: list[PassRecord] = []
        stop_reason = f"max_rounds reached ({cfg.max_rounds} pass(es)); keeping the current A"
        converged = False
        for pass_no in range(1, cfg.max_rounds + 1):
            record, incumbent = await self._pass(pass_no, task_prompt, incumbent, streak)
            passes.append(record)
            if record.status == "inconclusive":
                inconclusive_run += 1
            else:
                inconclusive_run = 0
                streak = streak + 1 if record.winner == "A" else 0
            record.streak = streak
            self._write_progress(passes)
            _log.info(
                "tournament.pass",
                tournament_id=self.tournament_id,
                pass_no=pass_no,
                status=record.status,
                winner=record.winner,
                scores=record.scores,
                streak=streak,
            )
            if streak >= cfg.convergence_k:
                converged = True
                stop_reason = f"converged: A won {streak} pass(es) in a row"
                break
            if inconclusive_run >= cfg.convergence_k:
                stop_reason = (
                    f"{inconclusive_run} inconclusive pass(es) in a row (last: {record.reason}); keeping A"
                )
                break
        result = TournamentResult(
            tournament_id=self.tournament_id,
            kind=self.kind,
            winner=incumbent,
            passes=passes,
            converged=converged,
            stop_reason=stop_reason,
            seed=cfg.seed,
        )
        if self.artifacts is not None:
            self.artifacts.write_history({**result.history(), "settings": asdict(cfg)})
            self.artifacts.write_final(incumbent.text)
        return result

    # --- one pass -------------------------------------------------------------------------------------

    async def _pass(
        self, pass_no: int, task_prompt: str, a: Candidate[T], streak: int
    ) -> tuple[PassRecord, Candidate[T]]:
        record = PassRecord(pass_no=pass_no, incumbent=a.origin, quorum=self.settings.quorum, streak=streak)
        record.origins["A"] = a.origin
        self._write(pass_no, "a", a.text)
        head = f"{_KIND_LINE[self.kind]}\n\nTHE TASK (with its acceptance criteria):\n{task_prompt.strip()}\n"

        critique = await self.client.call(
            RoleCall("critic_t", pass_no, f"{head}\nCANDIDATE A:\n{a.text.strip()}\n")
        )
        self._write(pass_no, "critique", critique.text if critique.ok else f"(failed: {critique.error})")
        if not critique.ok:
            return self._inconclusive(record, f"critic_t failed: {critique.error}"), a

        revised = await self.client.call(
            RoleCall(
                "architect_b",
                pass_no,
                f"{head}\nCANDIDATE A:\n{a.text.strip()}\n\nTHE CRITIQUE OF A:\n{critique.text.strip()}\n\n"
                f"{_REVISE_ASK[self.kind]}\n",
            )
        )
        if not revised.ok:
            return self._inconclusive(record, f"architect_b failed: {revised.error}"), a
        b = replace(await self.handler.realize("B", pass_no, revised.text, a), origin=f"B@{pass_no}")
        self._write(pass_no, "b", b.text)

        first, second = self._rng.sample(_LABEL_POOL, 2)
        shown = [(first, a), (second, b)]
        self._rng.shuffle(shown)
        record.synth_labels = {label: ("A" if cand is a else "B") for label, cand in shown}
        merged = await self.client.call(
            RoleCall(
                "synthesizer",
                pass_no,
                head
                + "".join(f"\nCANDIDATE {label}:\n{cand.text.strip()}\n" for label, cand in shown)
                + f"\n{_MERGE_ASK[self.kind]}\n",
            )
        )
        if not merged.ok:
            return self._inconclusive(record, f"synthesizer failed: {merged.error}"), a
        ab = replace(await self.handler.realize("AB", pass_no, merged.text, a), origin=f"AB@{pass_no}")
        self._write(pass_no, "ab", ab.text)

        by_name: dict[str, Candidate[T]] = {"A": a, "B": b, "AB": ab}
        record.origins.update({"B": b.origin, "AB": ab.origin})
        record.disqualified = {n: c.disqualified for n, c in by_name.items() if c.disqualified is not None}
        record.judges = await self._judge_all(pass_no, head, by_name)
        valid = [j for j in record.judges if j.valid and j.ranking_candidates is not None]
        record.valid_judges = len(valid)
        if len(valid) < self.settings.quorum:
            return self._inconclusive(
                record,
                f"only {len(valid)} of {self.settings.num_judges} judge(s) gave a valid ranking; "
                f"the quorum is {self.settings.quorum}",
            ), a
        # A is never disqualified: it is what the tournament keeps when nothing better appears.
        outcome = decide(
            [j.ranking_candidates for j in valid if j.ranking_candidates is not None],
            CANDIDATES,
            "A",
            min_margin=self.settings.min_margin,
            disqualified=[n for n in record.disqualified if n != "A"],
        )
        record.status = "decided"
        record.scores = dict(outcome.scores)
        record.winner = outcome.winner
        record.margin = outcome.margin
        if outcome.displaced:
            record.reason = f"{outcome.winner} leads A by {outcome.margin} point(s)"
        elif outcome.margin > 0:
            record.reason = (
                f"the best challenger leads by {outcome.margin} point(s), below min_margin "
                f"{self.settings.min_margin}; A stays"
            )
        else:
            record.reason = "A keeps its place (ties go to the incumbent)"
        return record, by_name[outcome.winner]

    def _inconclusive(self, record: PassRecord, reason: str) -> PassRecord:
        record.status = "inconclusive"
        record.reason = reason
        _log.warning("tournament.inconclusive", tournament_id=self.tournament_id, reason=reason)
        return record

    async def _judge_all(
        self, pass_no: int, head: str, by_name: dict[str, Candidate[T]]
    ) -> list[JudgeRecord]:
        # Every random choice is drawn before the judges start, so the labels do not depend on timing.
        records: list[JudgeRecord] = []
        for judge_no in range(1, self.settings.num_judges + 1):
            labels = self._rng.sample(_LABEL_POOL, len(CANDIDATES))
            names = list(CANDIDATES)
            self._rng.shuffle(names)
            records.append(JudgeRecord(judge_no, dict(zip(labels, names, strict=True)), labels))
        try:
            async with anyio.create_task_group() as group:
                for judge in records:
                    group.start_soon(self._judge, pass_no, head, by_name, judge)
        except BaseExceptionGroup as errors:
            # A fatal condition (budget, guardrail) in one judge: surface it as itself, not as a group.
            if len(errors.exceptions) == 1:
                raise errors.exceptions[0] from None
            raise
        return records

    async def _judge(
        self, pass_no: int, head: str, by_name: dict[str, Candidate[T]], judge: JudgeRecord
    ) -> None:
        shown = "".join(
            f"\nCANDIDATE {label}:\n{by_name[judge.labels[label]].text.strip()}\n" for label in judge.order
        )
        labels_line = " > ".join(judge.order)
        prompt = (
            f"{head}{shown}\nRank all three candidates, best first, using each of the labels "
            f"{', '.join(judge.order)} exactly once (for example 'RANKING: {labels_line}').\n"
        )
        async with self._limiter:
            reply = await self.client.call(RoleCall("judge", pass_no, prompt, judge_no=judge.judge_no))
        judge.raw = reply.text
        if not reply.ok:
            judge.reason = f"the judge call failed: {reply.error}"
        else:
            ranking = parse_ranking(reply.text, judge.order)
            if ranking is None:
                judge.reason = (
                    "no valid RANKING line: it must rank exactly the labels "
                    f"{', '.join(judge.order)}, each once"
                )
            else:
                judge.valid = True
                judge.ranking = ranking
                judge.ranking_candidates = [judge.labels[label] for label in ranking]
        if self.artifacts is not None:
            self.artifacts.write_judge(pass_no, judge.judge_no, asdict(judge))

    # --- artifacts ------------------------------------------------------------------------------------

    def _write(self, pass_no: int, name: Literal["a", "b", "ab", "critique"], text: str) -> None:
        if self.artifacts is not None:
            self.artifacts.write_candidate(pass_no, name, text)

    def _write_progress(self, passes: Sequence[PassRecord]) -> None:
        if self.artifacts is not None:
            self.artifacts.write_scores([p.summary() for p in passes])
