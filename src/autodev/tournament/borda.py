"""Borda count over full rankings: the vote of a tournament pass (autoreason).

With three candidates the best gets 3 points, the second 2 and the last 1. Ties go to the incumbent: a
challenger displaces it only with strictly more points and, when ``min_margin`` is set, a lead of at least
that many points. A disqualified candidate (a plan that does not parse, a variant that produced nothing) is
moved to the end of every ranking before counting, so it can never win.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["BordaOutcome", "borda_scores", "decide", "demote"]


@dataclass(frozen=True, slots=True)
class BordaOutcome:
    """The result of one vote: every candidate's points, the winner, and the challenger's lead over A."""

    scores: Mapping[str, int]
    winner: str
    margin: int
    displaced: bool


def _check_permutation(ranking: Sequence[str], candidates: Sequence[str]) -> None:
    if len(ranking) != len(candidates) or set(ranking) != set(candidates):
        raise ValueError(f"ranking {list(ranking)} is not a permutation of {list(candidates)}")


def borda_scores(rankings: Sequence[Sequence[str]], candidates: Sequence[str]) -> dict[str, int]:
    """Points per candidate: ``n`` for first place down to 1 for last, summed over ``rankings``.

    Every ranking must be a permutation of ``candidates``; anything else is a ``ValueError`` (invalid
    judges are filtered out before counting, never repaired here).
    """
    if len(set(candidates)) != len(candidates):
        raise ValueError(f"candidates must be distinct: {list(candidates)}")
    scores = dict.fromkeys(candidates, 0)
    size = len(candidates)
    for ranking in rankings:
        _check_permutation(ranking, candidates)
        for position, candidate in enumerate(ranking):
            scores[candidate] += size - position
    return scores


def demote(ranking: Sequence[str], disqualified: Collection[str]) -> list[str]:
    """``ranking`` with the disqualified candidates moved to the end, each group keeping its order."""
    return [c for c in ranking if c not in disqualified] + [c for c in ranking if c in disqualified]


def decide(
    rankings: Sequence[Sequence[str]],
    candidates: Sequence[str],
    incumbent: str,
    *,
    min_margin: int = 0,
    disqualified: Collection[str] = (),
) -> BordaOutcome:
    """Count ``rankings`` and decide whether a challenger displaces ``incumbent``.

    The best challenger is the one with the most points (the earlier in ``candidates`` on a tie between
    challengers). It wins only with more points than the incumbent and a lead of at least ``min_margin``.
    ``margin`` is the best challenger's lead (negative when it trails).
    """
    if incumbent not in candidates:
        raise ValueError(f"the incumbent {incumbent!r} is not one of {list(candidates)}")
    if incumbent in disqualified:
        raise ValueError("the incumbent cannot be disqualified: it is the candidate kept when nothing wins")
    if min_margin < 0:
        raise ValueError(f"min_margin must be >= 0, got {min_margin}")
    scores = borda_scores([demote(r, disqualified) for r in rankings], candidates)
    challengers = [c for c in candidates if c != incumbent and c not in disqualified]
    if not challengers:
        return BordaOutcome(scores, incumbent, 0, False)
    best = max(challengers, key=lambda c: (scores[c], -candidates.index(c)))
    margin = scores[best] - scores[incumbent]
    displaced = margin > 0 and margin >= min_margin
    return BordaOutcome(scores, best if displaced else incumbent, margin, displaced)
