"""Hypothesis properties of the Borda count: totals, symmetry, ties to the incumbent, margins, demotion."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autodev.tournament.borda import borda_scores, decide, demote

CANDIDATES = ("A", "B", "AB")
rankings = st.lists(st.permutations(CANDIDATES), max_size=9)


@given(rankings)
def test_points_add_up_to_six_per_judge(votes: list[list[str]]) -> None:
    scores = borda_scores(votes, CANDIDATES)
    assert sum(scores.values()) == 6 * len(votes)
    assert all(len(votes) <= s <= 3 * len(votes) for s in scores.values())


@given(rankings)
def test_order_of_judges_does_not_matter(votes: list[list[str]]) -> None:
    assert borda_scores(votes, CANDIDATES) == borda_scores(list(reversed(votes)), CANDIDATES)


@given(rankings, st.integers(min_value=0, max_value=30))
def test_challenger_wins_only_with_a_strict_lead_of_at_least_min_margin(
    votes: list[list[str]], min_margin: int
) -> None:
    outcome = decide(votes, CANDIDATES, "A", min_margin=min_margin)
    best = max(outcome.scores[c] for c in ("B", "AB"))
    lead = best - outcome.scores["A"]
    assert outcome.margin == lead
    assert outcome.displaced == (lead > 0 and lead >= min_margin)
    assert (outcome.winner != "A") == outcome.displaced
    if outcome.displaced:
        assert outcome.scores[outcome.winner] == best


@given(st.permutations(CANDIDATES))
def test_mirrored_votes_tie_and_the_incumbent_keeps_its_place(ranking: list[str]) -> None:
    votes = [ranking, list(reversed(ranking))]
    outcome = decide(votes, CANDIDATES, "A")
    assert len(set(outcome.scores.values())) == 1
    assert outcome.winner == "A" and not outcome.displaced


@given(rankings, st.sampled_from([["B"], ["AB"], ["B", "AB"]]))
def test_disqualified_candidates_never_win(votes: list[list[str]], out: list[str]) -> None:
    outcome = decide(votes, CANDIDATES, "A", disqualified=out)
    assert outcome.winner not in out


@given(st.permutations(CANDIDATES), st.sets(st.sampled_from(CANDIDATES)))
def test_demote_moves_disqualified_to_the_end_keeping_order(ranking: list[str], out: set[str]) -> None:
    moved = demote(ranking, out)
    assert sorted(moved) == sorted(ranking)
    assert moved[: len(ranking) - len(out)] == [c for c in ranking if c not in out]
    assert moved[len(ranking) - len(out) :] == [c for c in ranking if c in out]


@given(st.lists(st.sampled_from(CANDIDATES), max_size=4).filter(lambda r: sorted(r) != sorted(CANDIDATES)))
def test_anything_but_a_permutation_is_rejected(bad: list[str]) -> None:
    with pytest.raises(ValueError, match="not a permutation"):
        borda_scores([bad], CANDIDATES)
