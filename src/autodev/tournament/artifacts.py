"""The audit trail of one tournament under ``.autodev/tournaments/<plan|impl>-<id>/``.

Layout::

    pass-01/a.md  b.md  ab.md  critique.md   the candidates of the pass and the critique of A
    pass-01/judge-1.json ...                 each judge's raw reply, parsed ranking and label map
    scores.json                              Borda points and the decision of every pass
    history.json                             settings, seed, every pass in full, stop reason, winner
    final.md                                 the winning candidate

Every file is written atomically, so a crash leaves each file either absent or whole.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from autodev.errors import AutodevError
from autodev.files import MAX_STATE_FILE_BYTES, led_by, read_bounded_text
from autodev.state.atomic import atomic_write_text

__all__ = [
    "CandidateFile",
    "TournamentArtifacts",
    "TournamentNotFoundError",
    "list_tournaments",
    "load_history",
    "resolve_tournament_dir",
]

CandidateFile = Literal["a", "b", "ab", "critique"]


class TournamentNotFoundError(AutodevError):
    """No tournament directory matches the id the user gave."""


def _json(data: object) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


class TournamentArtifacts:
    """Writes the files of tournament ``tournament_id`` under ``tournaments_dir``."""

    def __init__(self, tournaments_dir: Path, tournament_id: str) -> None:
        if not tournament_id or "/" in tournament_id or tournament_id.startswith("."):
            raise ValueError(f"not a usable tournament id: {tournament_id!r}")
        self.tournament_id = tournament_id
        self.dir = Path(tournaments_dir) / tournament_id

    def pass_dir(self, pass_no: int) -> Path:
        return self.dir / f"pass-{pass_no:02d}"

    def write_candidate(self, pass_no: int, name: CandidateFile, text: str) -> Path:
        path = self.pass_dir(pass_no) / f"{name}.md"
        atomic_write_text(path, text if text.endswith("\n") or not text else text + "\n")
        return path

    def write_judge(self, pass_no: int, judge_no: int, record: Mapping[str, Any]) -> Path:
        path = self.pass_dir(pass_no) / f"judge-{judge_no}.json"
        atomic_write_text(path, _json(record))
        return path

    def write_scores(self, passes: Sequence[Mapping[str, Any]]) -> Path:
        path = self.dir / "scores.json"
        atomic_write_text(path, _json(list(passes)))
        return path

    def write_history(self, history: Mapping[str, Any]) -> Path:
        path = self.dir / "history.json"
        atomic_write_text(path, _json(history))
        return path

    def write_final(self, text: str) -> Path:
        path = self.dir / "final.md"
        atomic_write_text(path, text if text.endswith("\n") or not text else text + "\n")
        return path


def list_tournaments(tournaments_dir: Path) -> list[str]:
    """The ids of the tournaments recorded under ``tournaments_dir``, sorted."""
    if not tournaments_dir.is_dir():
        return []
    return sorted(p.name for p in tournaments_dir.iterdir() if p.is_dir() and not p.name.startswith("."))


def resolve_tournament_dir(tournaments_dir: Path, ident: str) -> Path:
    """The directory of tournament ``ident``: an exact id, else the one id that starts with ``ident``."""
    known = list_tournaments(tournaments_dir)
    if ident in known:
        return tournaments_dir / ident
    matches = [name for name in known if name.startswith(ident)]
    if len(matches) == 1:
        return tournaments_dir / matches[0]
    if not matches:
        listing = ", ".join(known) if known else "none recorded yet"
        raise TournamentNotFoundError(f"no tournament {ident!r} in {tournaments_dir}; known: {listing}")
    raise TournamentNotFoundError(f"{ident!r} matches several tournaments: {', '.join(matches)}")


def load_history(directory: Path) -> dict[str, Any]:
    """Read ``history.json`` of one tournament directory; a missing or broken file is a clear error."""
    path = directory / "history.json"
    try:
        data = json.loads(
            read_bounded_text(
                path,
                limit=MAX_STATE_FILE_BYTES,
                what="the tournament history",
                follow_symlinks=False,
                error=led_by(path, AutodevError),
            )
        )
    except FileNotFoundError as exc:
        raise TournamentNotFoundError(
            f"{directory} has no history.json: the tournament did not get past its start"
        ) from exc
    except (OSError, json.JSONDecodeError) as exc:
        raise AutodevError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise AutodevError(f"{path} does not hold a JSON object")
    return data
