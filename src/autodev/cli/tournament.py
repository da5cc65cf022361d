"""``autodev tournament``: read the audit trail of plan and implementation tournaments.

``autodev tournament show <id>`` prints what happened: every pass, its winner and Borda scores, and which
judges gave a valid ranking (and why the others did not). ``<id>`` is a directory name under
``.autodev/tournaments/`` or an unambiguous prefix of one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

__all__ = ["render_tournament_summary", "tournament"]


def _repo_root() -> Path:
    obj = click.get_current_context().find_root().obj
    root = getattr(obj, "repo_root", None)
    if isinstance(root, Path):
        return root
    from autodev.state.paths import find_repo_root

    return find_repo_root(Path.cwd())


def render_tournament_summary(history: dict[str, Any]) -> str:
    """``history.json`` of one tournament as readable lines, made printable one by one.

    Candidate names, reasons and rankings come from agents: a newline in one must not forge a line.
    """
    from autodev.cli.text import terminal_text

    lines = [
        f"tournament {history.get('tournament_id')} ({history.get('kind')}), seed {history.get('seed')}",
        f"winner: {history.get('winner')}   converged: {'yes' if history.get('converged') else 'no'}",
        f"stopped: {history.get('stop_reason')}",
    ]
    for record in history.get("passes", []):
        head = f"pass {record.get('pass_no')}: {record.get('status')}"
        if record.get("status") == "decided":
            scores = ", ".join(f"{name}={points}" for name, points in (record.get("scores") or {}).items())
            head += f", winner {record.get('winner')} (scores {scores}; margin {record.get('margin')})"
        lines.append(head)
        if record.get("reason"):
            lines.append(f"  {record['reason']}")
        for name, why in (record.get("disqualified") or {}).items():
            lines.append(f"  {name} disqualified: {why}")
        judges = record.get("judges") or []
        if judges:
            valid = sum(1 for judge in judges if judge.get("valid"))
            lines.append(f"  judges: {valid} of {len(judges)} valid (quorum {record.get('quorum')})")
        for judge in judges:
            if judge.get("valid"):
                ranking = " > ".join(judge.get("ranking_candidates") or [])
                lines.append(f"    judge {judge.get('judge_no')}: {ranking}")
            else:
                lines.append(f"    judge {judge.get('judge_no')}: invalid ({judge.get('reason')})")
    return "\n".join(terminal_text(line) for line in lines)


@click.group("tournament")
def tournament() -> None:
    """Inspect plan and implementation tournaments."""


@tournament.command("show")
@click.argument("tournament_id")
def show(tournament_id: str) -> None:
    """Print the summary of tournament TOURNAMENT_ID (a name under .autodev/tournaments/ or its prefix)."""
    from autodev.state.paths import AutodevPaths
    from autodev.tournament.artifacts import load_history, resolve_tournament_dir

    tournaments_dir = AutodevPaths(_repo_root()).tournaments_dir
    directory = resolve_tournament_dir(tournaments_dir, tournament_id)
    click.echo(render_tournament_summary(load_history(directory)))
