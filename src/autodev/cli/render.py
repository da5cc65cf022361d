"""Rich rendering for the CLI: the only place that formats output for people."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from autodev.adapters.detect import ToolProbe
from autodev.config import ConfigEntry
from autodev.state.schemas import Plan

__all__ = ["plan_summary", "print_config", "print_probes", "print_status"]

_STATUS_STYLE = {
    "pending": "dim",
    "in_progress": "yellow",
    "coded": "cyan",
    "auto_gated": "cyan",
    "reviewed": "cyan",
    "tested": "cyan",
    "tournamented": "cyan",
    "complete": "green",
    "blocked": "bold red",
    "skipped": "dim",
}


def _console() -> Console:
    console = Console()
    if not console.is_terminal:
        # Piped output is read by grep and scripts: do not wrap it at a guessed 80 columns.
        console.width = 200
    return console


def plan_summary(plan: Plan) -> str:
    tasks = sum(len(phase.tasks) for phase in plan.phases)
    return f"Saved plan {plan.plan_id} {plan.title!r}: {len(plan.phases)} phase(s), {tasks} task(s)."


def print_status(data: dict[str, Any], repo_root: Path) -> None:
    console = _console()
    plan = data["plan"]
    if plan is None:
        console.print(f"No plan yet in {repo_root}. Create one with `autodev plan --from-markdown FILE`.")
        return
    console.print(f"[bold]{plan['title'] or plan['plan_id']}[/bold]  ({plan['plan_id']})")
    console.print(f"session {data['session_id'] or '-'}   updated {plan['updated_at']}")
    by_phase: dict[str, list[dict[str, Any]]] = {}
    for task in data["tasks"]:
        by_phase.setdefault(task["phase_id"], []).append(task)
    for phase_id, tasks in by_phase.items():
        table = Table(title=f"Phase {phase_id}", title_justify="left", expand=False)
        table.add_column("Task", no_wrap=True)
        table.add_column("Title")
        table.add_column("Status", no_wrap=True)
        table.add_column("Retries", justify="right")
        table.add_column("Depends on")
        table.add_column("Note")
        for task in tasks:
            style = _STATUS_STYLE.get(task["status"], "")
            table.add_row(
                task["id"],
                task["title"],
                f"[{style}]{task['status']}[/{style}]" if style else task["status"],
                str(task["retry_count"]),
                ", ".join(task["depends_on"]) or "-",
                task["blocked_reason"] or ("escalated" if task["escalated"] else ""),
            )
        console.print(table)
    totals = data["totals"]
    counts = ", ".join(f"{count} {name}" for name, count in totals.items() if name != "total" and count)
    console.print(f"{totals['total']} tasks: {counts}")


def _format_value(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def print_config(entries: Iterable[ConfigEntry]) -> None:
    table = Table(title="Effective configuration", title_justify="left")
    table.add_column("Key", no_wrap=True)
    table.add_column("Value")
    table.add_column("Source", no_wrap=True)
    for entry in entries:
        source = entry.source
        table.add_row(
            entry.key,
            _format_value(entry.value),
            source if source != "default" else "[dim]default[/dim]",
        )
    _console().print(table)


def print_probes(title: str, probes: Iterable[ToolProbe]) -> None:
    table = Table(title=title, title_justify="left")
    for column in ("Name", "Executable", "Found", "Version or problem"):
        table.add_column(column)
    for probe in probes:
        found = "[green]yes[/green]" if probe.found else "[red]missing[/red]"
        detail = probe.version or probe.error or ""
        table.add_row(probe.name, str(probe.path or probe.executable), found, detail)
    _console().print(table)
