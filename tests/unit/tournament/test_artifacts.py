"""Tournament artifacts: layout, atomic JSON, lookup by id or prefix, and the CLI summary."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from autodev.cli.tournament import render_tournament_summary, tournament
from autodev.tournament import (
    TournamentArtifacts,
    TournamentNotFoundError,
    list_tournaments,
    load_history,
    resolve_tournament_dir,
)

HISTORY = {
    "tournament_id": "impl-1.1-abc123",
    "kind": "impl",
    "seed": 4,
    "winner": "B@1",
    "converged": False,
    "stop_reason": "max_rounds reached (1 pass(es)); keeping the current A",
    "passes": [
        {
            "pass_no": 1,
            "status": "decided",
            "scores": {"A": 4, "B": 8, "AB": 6},
            "winner": "B",
            "margin": 4,
            "quorum": 2,
            "reason": "B leads A by 4 point(s)",
            "disqualified": {"AB": "no change against the task's base commit"},
            "judges": [
                {"judge_no": 1, "valid": True, "ranking_candidates": ["B", "AB", "A"]},
                {"judge_no": 2, "valid": False, "reason": "no valid RANKING line"},
            ],
        }
    ],
}


def test_files_land_in_the_documented_layout(tmp_path: Path) -> None:
    artifacts = TournamentArtifacts(tmp_path, "plan-x")
    artifacts.write_candidate(1, "a", "plan A")
    artifacts.write_candidate(1, "critique", "ISSUES:\n- none\n")
    artifacts.write_judge(1, 2, {"raw": "RANKING: C > D > E", "labels": {"C": "A"}})
    artifacts.write_scores([{"pass_no": 1}])
    artifacts.write_history(HISTORY)
    artifacts.write_final("final")
    root = tmp_path / "plan-x"
    assert (root / "pass-01" / "a.md").read_text() == "plan A\n"
    assert json.loads((root / "pass-01" / "judge-2.json").read_text())["labels"] == {"C": "A"}
    assert json.loads((root / "scores.json").read_text()) == [{"pass_no": 1}]
    assert (root / "final.md").read_text() == "final\n"
    assert not [p for p in root.rglob("*.tmp")]  # atomic writes leave no temporary files
    assert load_history(root) == HISTORY


@pytest.mark.parametrize("bad", ["", "../x", ".hidden"])
def test_unusable_ids_are_refused(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValueError, match="tournament id"):
        TournamentArtifacts(tmp_path, bad)


def test_lookup_by_exact_id_or_unique_prefix(tmp_path: Path) -> None:
    for name in ("impl-1.1-aaa", "impl-1.2-bbb", "plan-p-ccc"):
        (tmp_path / name).mkdir()
    assert list_tournaments(tmp_path) == ["impl-1.1-aaa", "impl-1.2-bbb", "plan-p-ccc"]
    assert resolve_tournament_dir(tmp_path, "plan") == tmp_path / "plan-p-ccc"
    with pytest.raises(TournamentNotFoundError, match="several"):
        resolve_tournament_dir(tmp_path, "impl")
    with pytest.raises(TournamentNotFoundError, match="no tournament 'nope'"):
        resolve_tournament_dir(tmp_path, "nope")
    with pytest.raises(TournamentNotFoundError, match=r"no history\.json"):
        load_history(tmp_path / "plan-p-ccc")


def test_summary_shows_passes_winners_scores_and_judges() -> None:
    text = render_tournament_summary(HISTORY)
    assert "winner: B@1" in text
    assert "pass 1: decided, winner B (scores A=4, B=8, AB=6; margin 4)" in text
    assert "AB disqualified: no change" in text
    assert "judges: 1 of 2 valid (quorum 2)" in text
    assert "judge 2: invalid (no valid RANKING line)" in text


def test_show_command_prints_the_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".git").mkdir()
    TournamentArtifacts(tmp_path / ".autodev" / "tournaments", "impl-1.1-abc123").write_history(HISTORY)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(tournament, ["show", "impl-1.1"])
    assert result.exit_code == 0, result.output
    assert "tournament impl-1.1-abc123 (impl), seed 4" in result.output
