"""The live display of a run: per task its step, attempt, elapsed time, cost and worktree, what its agent did
last (from the agent's own event stream, ``autodev.state.activity``), plus recent notes.

On a terminal it is a rich ``Live`` table redrawn as ``ProgressEvent``s arrive, one row per task so tasks
running in parallel each keep their own line; when output is piped it prints one plain line per event
instead, prefixed with the task id so the interleaved lines of parallel tasks can be told apart (and
grepped) in CI logs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from autodev.cli.text import ReaderMayLeaveConsole, terminal_text
from autodev.orchestrator.events import ProgressEvent
from autodev.state.activity import progress_summary
from autodev.state.schemas import Task

__all__ = ["LiveDisplay", "print_summary"]


@dataclass(slots=True)
class _Row:
    step: str = "-"
    attempt: int = 1
    state: str = "waiting"
    started: float = field(default_factory=time.monotonic)
    cost_usd: float = 0.0
    worktree: str | None = None
    # Set when the task finishes, so its elapsed time stops growing while other tasks still run.
    finished: float | None = None

    def elapsed(self) -> float:
        return (self.finished if self.finished is not None else time.monotonic()) - self.started


class LiveDisplay:
    """A ``ProgressListener`` that renders the run for a person."""

    def __init__(self, console: Console | None = None, repo_root: Path | None = None) -> None:
        # The reader may leave (``autodev demo | head``): the run then goes on, unprinted.
        self.console = console or ReaderMayLeaveConsole()
        # Where the agents' transcripts are, for each running task's last action (None: not shown).
        self.repo_root = repo_root
        self._seen: dict[str, tuple[float, str | None]] = {}
        self._rows: dict[str, _Row] = {}
        self._notes: list[str] = []
        self._phase = ""
        self._live: Live | None = None
        self.started = time.monotonic()
        # While ``count_down`` runs: what is waited for, and the seconds left.
        self._waiting: tuple[str, float] | None = None

    def __enter__(self) -> Self:
        if self.console.is_terminal:
            # Rendered on every refresh, not only on events: an agent's last action changes between them.
            self._live = Live(
                console=self.console, refresh_per_second=4, transient=False, get_renderable=self._render
            )
            self._live.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(exc_type, exc, tb)
            self._live = None

    def __call__(self, event: ProgressEvent) -> None:
        if event.kind == "phase":
            self._phase = event.message
        if event.task_id is not None:
            row = self._rows.setdefault(event.task_id, _Row())
            if event.kind == "task_started":
                # A resumed or retried task starts afresh: its clock and worktree are those of this start.
                row.started = time.monotonic()
                row.finished = None
                row.worktree = event.details[0] if event.details else None
                row.step = event.step or "-"
            elif event.kind == "task_finished":
                # The final status goes to State; Step keeps the step the task ended on.
                row.finished = time.monotonic()
            elif event.step:
                row.step = event.step
            if event.attempt:
                row.attempt = event.attempt
            if event.cost_usd:
                row.cost_usd += event.cost_usd
            row.state = _state_of(event, row.state)
        if event.kind in ("retry", "note", "suspended", "task_finished", "phase", "waiting"):
            self._notes = [*self._notes[-5:], _plain(event)]
        if self._live is not None:
            self._live.update(self._render())
        else:
            # Text, not markup: "[1.1/develop]" is no rich style tag.
            self.console.print(Text(_plain(event)), soft_wrap=True)

    def _render(self) -> Group:
        table = Table(title=Text(terminal_text(self._phase) or "AutoDev"), title_justify="left", expand=False)
        # Live's refresh thread renders while events add rows: work on a copy (taken under the GIL at once).
        rows = list(self._rows.items())
        # A serial run has no worktrees: keep its table as narrow as it was.
        with_worktree = any(row.worktree for _, row in rows)
        last_seen = {task_id: self._last_seen(task_id, row) for task_id, row in rows}
        with_last_seen = any(last_seen.values())
        columns = ("Task", "Step", "Attempt", "State", "Elapsed", "Cost")
        for column in (*columns, "Worktree") if with_worktree else columns:
            table.add_column(column, no_wrap=True)
        if with_last_seen:
            table.add_column("Last seen", overflow="ellipsis", max_width=60)
        for task_id, row in rows:
            cells = [
                task_id,
                row.step,
                str(row.attempt),
                row.state,
                f"{row.elapsed():5.0f}s",
                f"${row.cost_usd:.2f}" if row.cost_usd else "-",
            ]
            if with_worktree:
                cells.append(row.worktree or "-")
            if with_last_seen:
                cells.append(last_seen[task_id] or "")
            # Text, not markup: an id or a path with "[...]" must show as written.
            table.add_row(*(Text(terminal_text(cell)) for cell in cells))
        notes = Text("\n".join(self._notes[-6:]), style="dim")
        if self._waiting is None:
            return Group(table, notes)
        reason, seconds_left = self._waiting
        left = _duration(seconds_left)
        waiting = Text(
            terminal_text(
                f"waiting {left} for the provider ({reason}); Ctrl-C stops, `autodev resume` continues"
            ),
            style="bold yellow",
        )
        return Group(table, notes, waiting)

    def _last_seen(self, task_id: str, row: _Row) -> str | None:
        """What the running task's agent did last, read from its transcript at most once a second."""
        if self.repo_root is None or row.finished is not None:
            return None
        now = time.monotonic()
        cached = self._seen.get(task_id)
        if cached is not None and now - cached[0] < 1.0:
            return cached[1]
        summary = progress_summary(self.repo_root, task_id)
        self._seen[task_id] = (now, summary)
        return summary

    def count_down(
        self,
        seconds: float,
        reason: str,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Wait ``seconds`` for ``reason`` (``--wait`` after the provider paused the run), showing how long is
        left: on a terminal redrawn every second, piped as a line at the start and one per minute after."""
        until = clock() + seconds
        printed_minute: int | None = None
        try:
            while (left := until - clock()) > 0:
                self._waiting = (reason, left)
                if self._live is not None:
                    self._live.update(self._render(), refresh=True)
                elif printed_minute is None or int(left // 60) < printed_minute:
                    printed_minute = int(left // 60)
                    line = f"waiting {_duration(left)} for the provider ({reason})"
                    self.console.print(Text(terminal_text(line)), soft_wrap=True)
                sleep(min(1.0, left))
        finally:
            self._waiting = None
            if self._live is not None:
                self._live.update(self._render())


def _duration(seconds: float) -> str:
    """``1h 02m``, ``4m 05s``, ``9s``: how long a wait has left, to the second."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def _state_of(event: ProgressEvent, previous: str) -> str:
    if event.kind == "task_started":
        return "started"
    if event.kind == "step_started":
        return "running"
    if event.kind == "step_finished":
        return "ok" if event.ok else "failed"
    if event.kind == "retry":
        return "retrying"
    if event.kind == "task_finished":
        return event.step or ("complete" if event.ok else "blocked")
    if event.kind == "suspended":
        return "suspended"
    if event.kind == "waiting":
        return "queued"
    return previous


def _plain(event: ProgressEvent) -> str:
    """The event as printable lines: the ids, messages and details in it are an agent's or a tool's words."""
    where = f"[{event.task_id}{'/' + event.step if event.step else ''}]" if event.task_id else ""
    attempt = f" (attempt {event.attempt})" if event.attempt and event.attempt > 1 else ""
    cost = f" ${event.cost_usd:.4f}" if event.cost_usd else ""
    worktree = f" (worktree {event.details[0]})" if event.kind == "task_started" and event.details else ""
    lines = [f"{where} {event.message}{attempt}{cost}{worktree}".strip()]
    if len(event.details) > 1 and event.kind == "retry":
        # Each failure line carries the task id too: a grep for one task finds all of its lines.
        prefix = f"[{event.task_id}]  " if event.task_id else "  "
        lines += (f"{prefix}  - {next(iter(detail.splitlines()), '')[:200]}" for detail in event.details)
    # Line by line, so that a newline inside a message cannot start a line that seems to be another task's.
    return "\n".join(terminal_text(line) for line in lines)


def print_summary(console: Console, tasks: list[Task], cost: str, elapsed_s: float, evidence: Path) -> None:
    """The end-of-run table: every task's outcome, retries and commit, then totals and where to look.
    ``cost`` is the plan's cost as ``render.cost_figure`` words it (an unknown cost is not $0.00).

    Every cell is ``Text``, not markup: a title or a blocked reason with ``[/bold]`` in it shows as written.
    """
    table = Table(title="Run summary", title_justify="left")
    for column in ("Task", "Title", "Status", "Retries", "Commit / reason"):
        table.add_column(column)
    for task in tasks:
        outcome = task.commit[:10] if task.commit else (task.blocked_reason or "")
        style = "green" if task.status == "complete" else "red" if task.status == "blocked" else ""
        table.add_row(
            Text(terminal_text(task.id)),
            Text(terminal_text(task.title)),
            Text(task.status, style=style),
            Text(str(task.retry_count)),
            Text(terminal_text(outcome)[:120]),
        )
    console.print(table)
    complete = sum(task.status == "complete" for task in tasks)
    blocked = sum(task.status == "blocked" for task in tasks)
    retries = sum(task.retry_count for task in tasks)
    console.print(
        Text(
            f"{complete} complete, {blocked} blocked, {retries} retries, cost {cost}, "
            f"{elapsed_s:.0f}s. Evidence: {terminal_text(evidence)}"
        )
    )
