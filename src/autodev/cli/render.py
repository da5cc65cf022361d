"""Rich rendering for the CLI: the only place that formats output for people."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from autodev.cli.text import ReaderMayLeaveConsole, terminal_markup
from autodev.state.vocabulary import DONE_STATUSES

if TYPE_CHECKING:
    # Only named in signatures: `autodev status` renders without importing the models behind them.
    from autodev.adapters.detect import ToolProbe
    from autodev.config import ConfigEntry
    from autodev.orchestrator.agent_health import AgentHealth
    from autodev.qa.environment import EnvironmentResolution
    from autodev.state.costs import CostReport, CostRow
    from autodev.state.schemas import Plan

__all__ = [
    "plan_summary",
    "print_agent_health",
    "print_config",
    "print_environment",
    "print_probes",
    "print_status",
]

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
    # No emoji codes: a title with ":warning:" in it shows as written.
    console = ReaderMayLeaveConsole(emoji=False)
    if not console.is_terminal:
        # Piped output is read by grep and scripts: do not wrap it at a guessed 80 columns.
        console.width = 200
    return console


def plan_summary(plan: Plan) -> str:
    tasks = sum(len(phase.tasks) for phase in plan.phases)
    lines = [f"Saved plan {plan.plan_id} {plan.title!r}: {len(plan.phases)} phase(s), {tasks} task(s)."]
    # What the plan may mean but does not say exactly (words after a Model value, ...).
    lines += [f"warning: {warning}" for warning in plan.metadata.get("warnings", [])]
    return "\n".join(lines)


# A cell names at most this many ids: a task waiting on dozens would otherwise fill the screen.
_WAITS_ON_IDS = 5
_TOP_BLOCKERS = 3
_BASELINE_SHOWN = 5


def _waits_on(ids: list[str]) -> str:
    shown = ", ".join(ids[:_WAITS_ON_IDS])
    return f"{shown} (+{len(ids) - _WAITS_ON_IDS} more)" if len(ids) > _WAITS_ON_IDS else shown


def _styled(status: str) -> str:
    style = _STATUS_STYLE.get(status, "")
    shown = terminal_markup(status)
    return f"[{style}]{shown}[/{style}]" if style else shown


def print_status(data: dict[str, Any], repo_root: Path, *, show_all: bool = False) -> None:
    """The plan task by task. By default what needs a look in full (the tasks in flight, the blocked ones,
    the next pending ones) and the rest counted per phase, so that a plan of thousands of tasks reads at a
    glance; ``show_all`` lists every task, through a pager when a terminal could not show it whole."""
    console = _console()
    if show_all and console.is_terminal and len(data["tasks"]) + _LINES_BESIDE_TASKS > console.height:
        with console.pager(styles=True):
            _print_status(console, data, repo_root, show_all=True)
        return
    _print_status(console, data, repo_root, show_all=show_all)


# Title, session, table headers and the summary lines around the task rows.
_LINES_BESIDE_TASKS = 12


def _print_status(console: Console, data: dict[str, Any], repo_root: Path, *, show_all: bool) -> None:
    plan = data["plan"]
    if plan is None:
        if data.get("waiting_for"):
            console.print("No plan yet: the plan phase is under way.")
            _print_inline_wait(console, data["waiting_for"])
            return
        where = terminal_markup(repo_root)
        console.print(f"No plan yet in {where}. Create one with `autodev plan --from-markdown FILE`.")
        return
    plan_id = terminal_markup(plan["plan_id"])
    console.print(f"[bold]{terminal_markup(plan['title'] or '') or plan_id}[/bold]  ({plan_id})")
    session, updated = terminal_markup(data["session_id"] or "-"), terminal_markup(plan["updated_at"])
    console.print(f"session {session}   updated {updated}")
    missing = data.get("missing_commits")
    if missing:
        console.print(
            "[bold red]Recorded commits are not on the checked-out branch[/bold red] (something rewrote it): "
            + terminal_markup(", ".join(missing))
            + "; put the branch back (`git reflog` shows where it was) before `autodev resume`"
        )
    by_phase: dict[str, list[dict[str, Any]]] = {}
    for task in data["tasks"]:
        by_phase.setdefault(task["phase_id"], []).append(task)
    if show_all:
        for phase_id, tasks in by_phase.items():
            console.print(_task_table(f"Phase {terminal_markup(phase_id)}", tasks))
    else:
        _print_phases_in_short(console, by_phase)
    _print_in_flight(console, data.get("in_flight", []), show_all=show_all)
    _print_waiting_summary(console, data["tasks"])
    _print_baseline(console, data.get("baseline"))
    _print_inline_wait(console, data.get("waiting_for"))
    _print_approvals(console, data.get("policy"))
    totals = data["totals"]
    counts = ", ".join(f"{totals[name]} {name}" for name in _STATUS_STYLE if totals.get(name))
    in_flight = f" ({totals['in_flight']} in flight)" if totals.get("in_flight") else ""
    console.print(f"{totals['total']} tasks{in_flight}: {counts}")
    cost = data.get("cost")
    if cost and (cost["usd"] or cost["unknown_calls"]):
        spent = cost_figure(
            cost["usd"] if cost["usd"] or not cost["unknown_calls"] else None,
            estimated_usd=cost["estimated_usd"],
            unknown_calls=cost["unknown_calls"],
        )
        console.print(f"cost so far: {spent} (`autodev cost` for the breakdown)")


def _print_approvals(console: Console, policy: dict[str, Any] | None) -> None:
    """The write-scope approval requests that tasks wait on, with the command that answers each."""
    for request in (policy or {}).get("approvals", []):
        if request["status"] != "pending":
            continue
        scope = terminal_markup(", ".join(request["scope"]))
        tasks = terminal_markup(", ".join(request["task_ids"]))
        ident = terminal_markup(request["id"])
        console.print(
            f"[bold yellow]Waiting for approval[/bold yellow] {ident}: write {scope} (for {tasks}); "
            f"`autodev approve --scope {ident}` or `autodev decline {ident}`, then `autodev resume`"
        )


# The default view shows at most this many tasks of each kind; the rest are counted (``--all`` lists all).
_SHOWN_IN_SHORT = {"blocked": 50, "pending": 10}
_IN_FLIGHT_SHOWN = 50


def _kind(status: str) -> str:
    if status in DONE_STATUSES:
        return "done"
    return status if status in ("blocked", "pending") else "in flight"


def _task_table(title: str, tasks: list[dict[str, Any]]) -> Table:
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column("Task", no_wrap=True)
    table.add_column("Title")
    table.add_column("Status", no_wrap=True)
    table.add_column("Retries", justify="right")
    table.add_column("Model", no_wrap=True)
    table.add_column("Lane", no_wrap=True)
    table.add_column("Depends on")
    table.add_column("Cost", justify="right")
    table.add_column("Note")
    for task in tasks:
        table.add_row(
            terminal_markup(task["id"]),
            terminal_markup(task["title"]),
            _styled(task["status"]),
            str(task["retry_count"]),
            _MODEL_NAMES.get(task.get("model") or "strong", "opus"),
            terminal_markup(_lane(task)),
            terminal_markup(", ".join(task["depends_on"]) or "-"),
            _task_cost(task.get("cost")),
            terminal_markup(_note(task)),
        )
    return table


def _lane(task: dict[str, Any]) -> str:
    lane = task.get("lane")
    if lane is None:
        return "-"
    return f"{lane} (slice)" if task.get("slice_job") else lane


# A task's tier as plans name it (no Model line: opus). Spelled out here: `autodev status` renders without
# importing the plan parser.
_MODEL_NAMES = {"fast": "haiku", "standard": "sonnet", "strong": "opus"}


def _task_cost(cost: dict[str, Any] | None) -> str:
    if not cost:
        return "-"
    return cost_figure(cost["usd"], estimated_usd=cost["estimated_usd"], unknown_calls=cost["unknown_calls"])


def _counts(tasks: list[dict[str, Any]]) -> str:
    counted = Counter(task["status"] for task in tasks)
    if len(counted) == 1:
        return f"{len(tasks)} task(s), all {next(iter(counted))}"
    return f"{len(tasks)} task(s): " + ", ".join(
        f"{counted[name]} {name}" for name in _STATUS_STYLE if counted.get(name)
    )


def _print_phases_in_short(console: Console, by_phase: dict[str, list[dict[str, Any]]]) -> None:
    """Each phase as a table of the tasks worth a look, or one line of counts; neighbouring phases whose
    tasks all have one status share a line."""
    budget = dict(_SHOWN_IN_SHORT)
    hidden = 0
    run: list[str] = []  # neighbouring phases, all their tasks in one status
    run_status = ""
    run_tasks = 0

    def flush() -> None:
        if run:
            names = f"Phase {run[0]}" if len(run) == 1 else f"Phases {run[0]}-{run[-1]}"
            console.print(f"{terminal_markup(names)}: {run_tasks} task(s), all {run_status}")
            run.clear()

    for phase_id, tasks in by_phase.items():
        shown = []
        for task in tasks:
            kind = _kind(task["status"])
            # Tasks in flight have a table of their own (``_print_in_flight``).
            if kind in ("blocked", "pending") and budget[kind] > 0:
                budget[kind] -= 1
                shown.append(task)
        listed_elsewhere = sum(_kind(task["status"]) in ("done", "in flight") for task in tasks)
        hidden += len(tasks) - len(shown) - listed_elsewhere
        statuses = {task["status"] for task in tasks}
        if not shown and len(statuses) == 1:
            status = next(iter(statuses))
            if run and status != run_status:
                flush()
            if not run:
                run_status, run_tasks = status, 0
            run.append(phase_id)
            run_tasks += len(tasks)
            continue
        flush()
        title = f"Phase {terminal_markup(phase_id)}: {_counts(tasks)}"
        if shown:
            console.print(_task_table(title, shown))
        else:
            console.print(title)
    flush()
    if hidden:
        console.print(f"[dim]{hidden} more task(s) not listed; `autodev status --all` lists every task[/dim]")


def _print_baseline(console: Console, baseline: dict[str, Any] | None) -> None:
    """The base commit's own failures: listed so nobody mistakes them for a task's."""
    if not baseline:
        return
    failing = [gate for gate in baseline["gates"] if gate["finding_count"]]
    commit = terminal_markup(str(baseline["commit"])[:10])
    if not failing:
        console.print(f"Base commit {commit}: its checks pass ({terminal_markup(baseline['taken_in'])}).")
        return
    for gate in failing:
        shown = "; ".join(gate["findings"][:_BASELINE_SHOWN])
        more = gate["finding_count"] - min(len(gate["findings"]), _BASELINE_SHOWN)
        extra = f" (+{more} more)" if more > 0 else ""
        name = terminal_markup(gate["gate"])
        console.print(
            f"[yellow]Pre-existing on the base commit {commit}[/yellow] ({name} gate, not blamed on any "
            f"task): {gate['finding_count']}: {terminal_markup(shown)}{extra}"
        )


def _print_inline_wait(console: Console, waiting: dict[str, Any] | None) -> None:
    if not waiting:
        return
    role, task_id, step, delegation, response = (
        terminal_markup(waiting[key]) for key in ("role", "task_id", "step", "delegation", "response")
    )
    console.print(
        f"[bold]Waiting[/bold] for the {role} answer of {task_id} (step {step}): instructions in "
        f"{delegation}; write the answer to {response}, then run `autodev resume`."
    )


def _note(task: dict[str, Any]) -> str:
    if task["blocked_reason"]:
        return str(task["blocked_reason"])
    if task["escalated"]:
        return "escalated"
    if task.get("waiting_on"):
        return f"waits on {_waits_on(task['waiting_on'])}"
    return ""


def _print_in_flight(console: Console, in_flight: list[dict[str, Any]], *, show_all: bool) -> None:
    """The in-flight tasks with their step, worktree and (with executor = ray) cluster node; the run's
    parallelism keeps this list short, and
    past ``_IN_FLIGHT_SHOWN`` the rest are counted unless ``show_all``."""
    if not in_flight:
        return
    shown = in_flight if show_all else in_flight[:_IN_FLIGHT_SHOWN]
    table = Table(title="In flight", title_justify="left", expand=False)
    table.add_column("Task", no_wrap=True)
    table.add_column("Step", no_wrap=True)
    table.add_column("Worktree")
    progress = any(item.get("progress") for item in shown)
    waiting = any(item.get("waiting") for item in shown)
    nodes = any(item.get("node") for item in shown)
    if nodes:
        table.add_column("Node")
    if waiting:
        table.add_column("Waiting for")
    if progress:
        table.add_column("Last seen (`autodev peek`)")
    for item in shown:
        worktree = terminal_markup(item["worktree"]) if item["worktree"] else "[dim](main tree)[/dim]"
        row = [terminal_markup(item["id"]), _styled(item["status"]), worktree]
        if nodes:
            row.append(terminal_markup(item.get("node") or "(here)"))
        if waiting:
            row.append(terminal_markup(item.get("waiting") or ""))
        if progress:
            row.append(terminal_markup(item.get("progress") or ""))
        table.add_row(*row)
    console.print(table)
    if len(shown) < len(in_flight):
        console.print(
            f"[dim]{len(in_flight) - len(shown)} more in flight; `autodev status --all` lists them[/dim]"
        )


def _print_waiting_summary(console: Console, tasks: list[dict[str, Any]]) -> None:
    """How many pending tasks are ready or waiting, and the few tasks most of the waiting hangs on.

    Each waiting task already names its blockers in its row; on a plan of thousands a count and the top
    blockers say more than another list would.
    """
    ready = 0
    waiting = 0
    blockers: Counter[str] = Counter()
    for task in tasks:
        ids = task.get("waiting_on")
        if ids is None:
            continue
        if ids:
            waiting += 1
            blockers.update(ids)
        else:
            ready += 1
    if not ready and not waiting:
        return
    line = f"Pending: {ready} ready to start, {waiting} waiting"
    if blockers:
        top = ", ".join(f"{task_id} ({count})" for task_id, count in blockers.most_common(_TOP_BLOCKERS))
        line += f"; most waited on: {terminal_markup(top)}"
    console.print(line)


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
            terminal_markup(entry.key),
            terminal_markup(_format_value(entry.value)),
            terminal_markup(source) if source != "default" else "[dim]default[/dim]",
        )
    _console().print(table)


def print_probes(title: str, probes: Iterable[ToolProbe]) -> None:
    table = Table(title=terminal_markup(title), title_justify="left")
    for column in ("Name", "Executable", "Found", "Version or problem"):
        table.add_column(column)
    for probe in probes:
        found = "[green]yes[/green]" if probe.found else "[red]missing[/red]"
        detail = probe.version or probe.error or ""
        table.add_row(
            terminal_markup(probe.name),
            terminal_markup(probe.path or probe.executable),
            found,
            terminal_markup(detail),
        )
    _console().print(table)


def print_agent_health(health: Iterable[AgentHealth], *, probed: bool) -> None:
    """Each installed agent platform's health check (with the paid probe unless ``probed`` is false)."""
    title = "Agent health (one real call each)" if probed else "Agent health (--no-probe: versions only)"
    table = Table(title=terminal_markup(title), title_justify="left")
    for column in ("Platform", "Usable", "Detail"):
        table.add_column(column)
    for item in health:
        usable = "[green]yes[/green]" if item.healthy else "[red]no[/red]"
        table.add_row(terminal_markup(item.platform), usable, terminal_markup(item.line))
    _console().print(table)


def print_environment(resolution: EnvironmentResolution, problems: list[str]) -> None:
    """Where the project's code runs, each place looked at on the way, and what the gates would lack."""
    console = _console()
    table = Table(title="Project environment (first match wins)", title_justify="left")
    for column in ("Looked at", "Found", "Detail"):
        table.add_column(column)
    for candidate in resolution.considered:
        found = "[green]chosen[/green]" if candidate.usable else "[dim]no[/dim]"
        table.add_row(terminal_markup(candidate.source), found, terminal_markup(candidate.detail))
    console.print(table)
    if resolution.environment is not None:
        console.print(f"The project's code runs in {terminal_markup(resolution.environment.summary())}.")
    else:
        console.print(
            f"[red]No project environment[/red]: {terminal_markup(resolution.problem or 'none found')}"
        )
    if problems:
        console.print("[red]The gates could not run here[/red] (a run stops before any agent call):")
        for problem in problems:
            console.print(f"  - {terminal_markup(problem)}")
    else:
        console.print("Every enabled gate has what it needs.")


def cost_figure(cost_usd: float | None, *, estimated_usd: float = 0.0, unknown_calls: int = 0) -> str:
    """A cost as a user should read it: ``$0.0123``; ``~$0.0123`` when all of it is AutoDev's estimate
    (``$0.0123 (~$0.0100 estimated)`` when part of it is); ``+ 2 unknown`` for calls nobody priced; and
    ``unknown`` for none known at all, never ``$0.00``."""
    if cost_usd is None:
        return f"unknown ({unknown_calls} call{'s' if unknown_calls != 1 else ''})" if unknown_calls else "-"
    if estimated_usd and round(estimated_usd, 6) >= round(cost_usd, 6):
        figure = f"~${cost_usd:.4f}"
    elif estimated_usd:
        figure = f"${cost_usd:.4f} (~${estimated_usd:.4f} estimated)"
    else:
        figure = f"${cost_usd:.4f}"
    return f"{figure} + {unknown_calls} unknown" if unknown_calls else figure


def print_cost(report: CostReport, plan_id: str | None) -> None:
    """``autodev cost``: one row per task, role, model or phase, then the plan's total."""
    console = _console()
    if not report.total.calls:
        which = f"plan {terminal_markup(plan_id)}" if plan_id else "this repository"
        console.print(f"No agent calls recorded for {which} yet.")
        return
    title = f"Cost of plan {terminal_markup(plan_id)} by {report.by}" if plan_id else f"Cost by {report.by}"
    table = Table(title=title, title_justify="left", expand=False)
    table.add_column(report.by.replace(",", " · ").capitalize(), no_wrap=True)
    for name in ("Calls", "Input tokens", "Cached", "Output tokens", "Agent time"):
        table.add_column(name, justify="right")
    table.add_column("Cost", justify="right")
    for row in [*report.rows, report.total]:
        is_total = row is report.total
        table.add_row(
            "[bold]total[/bold]" if is_total else terminal_markup(row.key or "(not named)"),
            str(row.calls),
            _tokens(row.tokens_in, row),
            _tokens(row.tokens_cache_read, row),
            _tokens(row.tokens_out, row),
            f"{row.duration_s:.0f}s",
            cost_figure(row.cost_usd, estimated_usd=row.estimated_usd, unknown_calls=row.unknown_calls),
            end_section=len(report.rows) > 0 and row is report.rows[-1],
        )
    console.print(table)
    if report.total.estimated_usd:
        console.print(
            "~ marks AutoDev's estimate from token counts and price_table (the CLI reported no cost)."
        )
    if report.total.unknown_calls:
        console.print(
            f"{report.total.unknown_calls} call(s) of unknown cost are not in the figures: their CLI "
            "reported no cost and price_table has no price for their model."
        )


def _tokens(count: int, row: CostRow) -> str:
    if row.calls_without_tokens == row.calls:
        return "-"
    return f"{count:,}"
