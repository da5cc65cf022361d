"""The tournament engine with scripted roles: convergence, max_rounds, quorum, invalid judges, seeds."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from autodev.tournament import (
    Candidate,
    EngineSettings,
    RoleCall,
    RoleReply,
    TournamentArtifacts,
    TournamentEngine,
    TournamentResult,
)

Judge = Callable[[int, int], list[str] | str | None]
_SECTION = re.compile(r"^CANDIDATE (\w+):\n(.*?)(?=^CANDIDATE \w+:|\Z|^Rank all)", re.M | re.S)


def _name(text: str, pass_no: int) -> str:
    if f"<<AB:{pass_no}>>" in text:
        return "AB"
    if f"<<B:{pass_no}>>" in text:
        return "B"
    return "A"


class FakeClient:
    """Critic, reviser and synthesizer always answer; ``judge(pass, judge)`` gives names best first, raw
    text (sent as is), or None (the call fails)."""

    def __init__(self, judge: Judge, *, fail_role: str | None = None) -> None:
        self.judge = judge
        self.fail_role = fail_role
        self.calls: list[RoleCall] = []
        self.shown: list[dict[str, str]] = []

    async def call(self, call: RoleCall) -> RoleReply:
        self.calls.append(call)
        if call.role == self.fail_role:
            return RoleReply(False, error="boom")
        if call.role != "judge":
            return RoleReply(True, f"{call.role} reply {call.pass_no}")
        assert call.judge_no is not None
        labels = {label: _name(body, call.pass_no) for label, body in _SECTION.findall(call.prompt)}
        self.shown.append(labels)
        wanted = self.judge(call.pass_no, call.judge_no)
        if wanted is None:
            return RoleReply(False, error="judge down")
        if isinstance(wanted, str):
            return RoleReply(True, wanted)
        by_name = {name: label for label, name in labels.items()}
        return RoleReply(True, "RANKING: " + " > ".join(by_name[name] for name in wanted) + "\nbecause")


class FakeHandler:
    def __init__(self, disqualify: frozenset[str] = frozenset()) -> None:
        self.disqualify = disqualify

    async def realize(
        self, variant: str, pass_no: int, reply: str, incumbent: Candidate[str]
    ) -> Candidate[str]:
        note = "does not parse" if variant in self.disqualify else None
        return Candidate(
            f"<<{variant}:{pass_no}>> {reply}", f"{variant}{pass_no}", variant, disqualified=note
        )


def _run(
    client: FakeClient,
    handler: FakeHandler | None = None,
    artifacts: TournamentArtifacts | None = None,
    **settings: int,
) -> TournamentResult[str]:
    engine: TournamentEngine[str] = TournamentEngine(
        tournament_id="plan-t",
        kind="plan",
        client=client,
        handler=handler or FakeHandler(),
        settings=EngineSettings(
            **{"num_judges": 3, "convergence_k": 2, "max_rounds": 5, "quorum": 2, **settings}
        ),
        artifacts=artifacts,
    )
    return anyio.run(engine.run, "the task", Candidate("<<A:0>> initial", "A0", "A"))


def test_a_winning_k_times_converges_and_stops() -> None:
    client = FakeClient(lambda p, j: ["A", "B", "AB"])
    result = _run(client, convergence_k=3)
    assert result.converged and len(result.passes) == 3
    assert result.winner.origin == "A" and not result.replaced
    assert [p.streak for p in result.passes] == [1, 2, 3]
    assert "converged" in result.stop_reason


def test_alternating_winners_run_to_max_rounds() -> None:
    client = FakeClient(lambda p, j: ["B", "A", "AB"] if p % 2 else ["AB", "B", "A"])
    result = _run(client, max_rounds=4)
    assert len(result.passes) == 4 and not result.converged
    assert [p.winner for p in result.passes] == ["B", "AB", "B", "AB"]
    assert result.winner.origin == "AB@4" and result.winner.payload == "AB4"
    assert "max_rounds" in result.stop_reason
    assert [p.incumbent for p in result.passes] == ["A", "B@1", "AB@2", "B@3"]


def test_quorum_failure_is_inconclusive_and_keeps_a_with_the_reason() -> None:
    # Only judge 1 answers validly: 1 < quorum 2 every pass.
    client = FakeClient(lambda p, j: ["B", "AB", "A"] if j == 1 else "RANKING: nonsense")
    result = _run(client, convergence_k=2)
    assert [p.status for p in result.passes] == ["inconclusive", "inconclusive"]
    assert result.winner.origin == "A" and not result.converged
    assert "only 1 of 3 judge(s)" in (result.passes[0].reason or "")
    assert "inconclusive pass(es) in a row" in result.stop_reason
    assert all(p.streak == 0 for p in result.passes)


def test_inconclusive_pass_neither_counts_nor_replaces_a() -> None:
    client = FakeClient(lambda p, j: None if p == 2 else ["A", "B", "AB"])
    result = _run(client, convergence_k=2)
    assert [p.status for p in result.passes] == ["decided", "inconclusive", "decided"]
    assert [p.streak for p in result.passes] == [1, 1, 2]
    assert result.converged and result.winner.origin == "A"


def test_invalid_rankings_are_excluded_and_recorded() -> None:
    def judge(p: int, j: int) -> list[str] | str | None:
        answers: dict[int, list[str] | str] = {
            1: ["B", "A", "AB"],
            2: ["B", "AB", "A"],
            3: "RANKING: X > X > Y",
        }
        return answers[j]

    result = _run(judge_client := FakeClient(judge), max_rounds=1)
    first = result.passes[0]
    assert first.valid_judges == 2 and first.status == "decided"
    bad = first.judges[2]
    assert not bad.valid and bad.ranking is None and "exactly the labels" in (bad.reason or "")
    assert first.scores == {"A": 3, "B": 6, "AB": 3}
    assert result.winner.origin == "B@1"
    assert len([c for c in judge_client.calls if c.role == "judge"]) == 3


def test_a_failing_critic_makes_the_pass_inconclusive() -> None:
    result = _run(FakeClient(lambda p, j: ["B", "A", "AB"], fail_role="critic_t"), convergence_k=2)
    assert len(result.passes) == 2 and result.winner.origin == "A"
    assert result.passes[0].reason == "critic_t failed: boom"


def test_disqualified_candidate_cannot_win() -> None:
    client = FakeClient(lambda p, j: ["B", "A", "AB"])
    result = _run(client, FakeHandler(frozenset({"B"})), max_rounds=1)
    first = result.passes[0]
    assert first.disqualified == {"B": "does not parse"}
    assert first.scores["B"] == 3 and first.winner == "A"


@pytest.mark.parametrize(("min_margin", "winner"), [(0, "B"), (5, "B"), (6, "A")])
def test_min_margin(min_margin: int, winner: str) -> None:
    rankings = {1: ["B", "A", "AB"], 2: ["B", "AB", "A"], 3: ["B", "AB", "A"]}
    result = _run(FakeClient(lambda p, j: rankings[j]), max_rounds=1, min_margin=min_margin)
    first = result.passes[0]
    assert first.scores == {"A": 4, "B": 9, "AB": 5} and first.margin == 5
    assert first.winner == winner


def test_margin_below_min_margin_keeps_a() -> None:
    rankings = {1: ["B", "A", "AB"], 2: ["A", "B", "AB"], 3: ["B", "A", "AB"]}
    kept = _run(FakeClient(lambda p, j: rankings[j]), max_rounds=1, min_margin=2).passes[0]
    assert (
        kept.scores == {"A": 7, "B": 8, "AB": 3}
        and kept.winner == "A"
        and "below min_margin" in (kept.reason or "")
    )
    taken = _run(FakeClient(lambda p, j: rankings[j]), max_rounds=1, min_margin=1).passes[0]
    assert taken.winner == "B"


def test_tie_goes_to_the_incumbent() -> None:
    rankings = {1: ["B", "A", "AB"], 2: ["A", "B", "AB"]}
    result = _run(FakeClient(lambda p, j: rankings[j]), max_rounds=1, num_judges=2)
    assert result.passes[0].scores["A"] == result.passes[0].scores["B"] and result.passes[0].winner == "A"


def test_label_randomization_is_seeded_recorded_and_reproducible() -> None:
    def labels_for(seed: int) -> list[dict[str, str]]:
        result = _run(FakeClient(lambda p, j: ["A", "B", "AB"]), seed=seed, convergence_k=2)
        return [judge.labels for p in result.passes for judge in p.judges]

    first, again, other = labels_for(7), labels_for(7), labels_for(8)
    assert first == again and first != other
    assert all(set(m.values()) == {"A", "B", "AB"} and not {"A", "B"} & set(m) for m in first)
    assert len({tuple(sorted(m.items())) for m in first}) > 1  # each judge gets its own labels


def test_judges_run_in_parallel_bounded_by_max_parallel() -> None:
    active = 0
    peak = 0

    class SlowClient(FakeClient):
        async def call(self, call: RoleCall) -> RoleReply:
            nonlocal active, peak
            if call.role == "judge":
                active += 1
                peak = max(peak, active)
                await anyio.sleep(0.01)
                active -= 1
            return await super().call(call)

    _run(SlowClient(lambda p, j: ["A", "B", "AB"]), num_judges=5, quorum=3, max_parallel=2, max_rounds=1)
    assert peak == 2


def test_artifacts_are_written_for_every_pass(tmp_path: Path) -> None:
    artifacts = TournamentArtifacts(tmp_path, "plan-t")
    result = _run(FakeClient(lambda p, j: ["B", "A", "AB"]), artifacts=artifacts, max_rounds=2, seed=3)
    root = tmp_path / "plan-t"
    for name in ("a.md", "b.md", "ab.md", "critique.md", "judge-1.json", "judge-3.json"):
        assert (root / "pass-02" / name).is_file()
    judge = json.loads((root / "pass-01" / "judge-1.json").read_text())
    assert (
        judge["valid"]
        and judge["ranking_candidates"] == ["B", "A", "AB"]
        and set(judge["labels"]) == set(judge["order"])
    )
    history = json.loads((root / "history.json").read_text())
    assert history["seed"] == 3 and history["winner"] == result.winner.origin == "B@2"
    assert len(json.loads((root / "scores.json").read_text())) == 2
    assert (root / "final.md").read_text().startswith("<<B:2>>")
