"""The live display of a run with several tasks in flight at once, on a terminal and in plain mode."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from autodev.cli.live import LiveDisplay, print_summary
from autodev.orchestrator.events import ProgressEvent
from autodev.state.schemas import Task

WT1 = ".autodev/task-worktrees/task-1.1"
WT2 = ".autodev/task-worktrees/task-1.2"

INTERLEAVED = [
    ProgressEvent("phase", "execute phase: demo"),
    # As the dispatcher sends it: the status as step, the attempt, the worktree as the only detail.
    ProgressEvent("task_started", "started", "1.1", "in_progress", 1, details=(WT1,)),
    ProgressEvent("task_started", "started", "1.2", "in_progress", 1, details=(WT2,)),
    ProgressEvent("step_started", "developer working", "1.1", "develop", 1),
    ProgressEvent("step_started", "developer working", "1.2", "develop", 1),
    ProgressEvent("step_finished", "developer done", "1.2", "develop", 1, True, 0.5),
    ProgressEvent("step_started", "QA gates running", "1.2", "gates", 1),
    ProgressEvent("step_finished", "developer done", "1.1", "develop", 1, True, 0.25),
    ProgressEvent("retry", "gates failed", "1.2", "gates", 2, details=("lint: E501", "test: 1 failed")),
    ProgressEvent("step_started", "reviewer working", "1.1", "review", 1),
    ProgressEvent("task_finished", "complete", "1.1", "complete", ok=True),
    ProgressEvent("step_started", "developer working", "1.2", "develop", 2),
]


def _last_rows(text: str) -> dict[str, list[str]]:
    """The cells of each task's row in the last frame drawn (later frames overwrite earlier ones)."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.startswith("│ 1."):
            cells = [cell.strip() for cell in line.strip("│").split("│")]
            rows[cells[0]] = cells
    return rows


def test_on_a_terminal_two_interleaved_tasks_keep_their_own_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr("autodev.cli.live.time", SimpleNamespace(monotonic=lambda: clock[0]))
    console = Console(record=True, force_terminal=True, width=160, file=io.StringIO())
    with LiveDisplay(console) as display:
        for event in INTERLEAVED:
            if event.kind == "task_finished":
                clock[0] = 5.0
            display(event)
        clock[0] = 100.0
    rows = _last_rows(console.export_text())
    assert set(rows) == {"1.1", "1.2"}
    # Task, Step, Attempt, State, Elapsed, Cost, Worktree
    assert rows["1.1"] == ["1.1", "review", "1", "complete", "5s", "$0.25", WT1]
    assert rows["1.2"] == ["1.2", "develop", "2", "running", "100s", "$0.50", WT2]


def test_a_serial_run_without_worktrees_has_no_worktree_column() -> None:
    console = Console(record=True, force_terminal=True, width=160, file=io.StringIO())
    with LiveDisplay(console) as display:
        display(ProgressEvent("task_started", "started", "1.1", "in_progress", 1))
        display(ProgressEvent("step_started", "developer working", "1.2", "develop", 1))
    text = console.export_text()
    assert "Worktree" not in text
    rows = _last_rows(text)
    assert rows["1.1"][:4] == ["1.1", "in_progress", "1", "started"]
    assert rows["1.2"][:4] == ["1.2", "develop", "1", "running"]


def test_plain_mode_prefixes_every_line_with_its_task_id() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with LiveDisplay(console) as display:
        for event in INTERLEAVED:
            display(event)
    lines = out.getvalue().splitlines()
    assert lines[:3] == [
        "execute phase: demo",
        f"[1.1/in_progress] started (worktree {WT1})",
        f"[1.2/in_progress] started (worktree {WT2})",
    ]
    assert lines[3:5] == ["[1.1/develop] developer working", "[1.2/develop] developer working"]
    assert "[1.2/gates] gates failed (attempt 2)" in lines
    assert "[1.2]    - lint: E501" in lines and "[1.2]    - test: 1 failed" in lines
    assert all(line.startswith(("[1.1", "[1.2")) for line in lines[1:])
    assert len(lines) == len(INTERLEAVED) + 2  # one per event, plus the two failure lines of the retry


# What an agent-written plan and agent output may carry: escape sequences, control characters, rich markup.
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m[/bold] [link=file:///etc/passwd]x[/link]\x08!"
SHOWN = "[/bold] [link=file:///etc/passwd]x[/link]!"
HOSTILE_EVENTS = [
    ProgressEvent("phase", f"execute phase: {HOSTILE}"),
    ProgressEvent("task_started", f"started {HOSTILE}", "1.1", "in_progress", 1, details=(f"wt{HOSTILE}",)),
    ProgressEvent("note", f"agent said {HOSTILE}\r\n[1.2/develop] forged line", "1.1", "develop", 1),
    ProgressEvent(
        "retry", "gates failed", "1.1", "gates", 2, details=(f"lint: {HOSTILE}\nmore", "", "test: fail")
    ),
]


def _assert_text_only(out: str) -> None:
    """No escape sequence or control character of the hostile strings reached the output (rich's own may)."""
    assert "pwned" not in out and "\x07" not in out and "\x1b]" not in out and "\x1b[2J" not in out
    assert not [char for char in out if "\x80" <= char <= "\x9f" or char == "\x08"], repr(out)


def test_plain_mode_prints_hostile_text_as_text_on_lines_of_its_own_task() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with LiveDisplay(console) as display:
        for event in HOSTILE_EVENTS:
            display(event)
    printed = out.getvalue()
    assert "\x1b" not in printed and "\r" not in printed
    _assert_text_only(printed)
    lines = printed.splitlines()
    assert lines[0] == f"execute phase: {SHOWN}"
    assert lines[1] == f"[1.1/in_progress] started {SHOWN} (worktree wt{SHOWN})"
    # A newline in a message is not a line of another task's.
    assert lines[2] == f"[1.1/develop] agent said {SHOWN}  [1.2/develop] forged line"
    assert lines[3:] == [
        "[1.1/gates] gates failed (attempt 2)",
        f"[1.1]    - lint: {SHOWN}",
        "[1.1]    - ",
        "[1.1]    - test: fail",
    ]


def test_on_a_terminal_hostile_text_is_shown_as_written() -> None:
    out = io.StringIO()
    console = Console(record=True, force_terminal=True, width=200, file=out)
    with LiveDisplay(console) as display:
        for event in HOSTILE_EVENTS:
            display(event)
    _assert_text_only(out.getvalue())
    text = console.export_text()
    assert f"execute phase: {SHOWN}" in text
    assert f"wt{SHOWN}" in _last_rows(text)["1.1"][-1]
    assert f"agent said {SHOWN}  [1.2/develop] forged line" in text


def test_the_run_summary_shows_hostile_titles_and_reasons_as_written(tmp_path: Path) -> None:
    tasks = [
        Task(id="1.1", phase_id="1", title=f"Title{HOSTILE}", status="complete", commit="0123456789abcdef"),
        Task(id="1.2", phase_id="1", title="[bold]", status="blocked", blocked_reason=f"gates: {HOSTILE}"),
    ]
    out = io.StringIO()
    console = Console(record=True, force_terminal=True, width=300, file=out)
    print_summary(console, tasks, "$0.5000", 3.0, tmp_path / "[/evidence]")
    _assert_text_only(out.getvalue())
    text = console.export_text()
    assert f"Title{SHOWN}" in text and "[bold]" in text and f"gates: {SHOWN}" in text
    assert f"Evidence: {tmp_path / '[/evidence]'}" in text


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_piped_countdown_prints_a_line_at_the_start_and_one_per_minute() -> None:
    out = io.StringIO()
    display = LiveDisplay(Console(file=out, force_terminal=False, width=200))
    clock = _Clock()

    display.count_down(150.0, "usage limit", sleep=clock.sleep, clock=clock)

    lines = out.getvalue().splitlines()
    assert lines == [
        "waiting 2m 30s for the provider (usage limit)",
        "waiting 1m 59s for the provider (usage limit)",
        "waiting 59s for the provider (usage limit)",
    ]
    assert clock.now == pytest.approx(1150.0)


def test_a_terminal_countdown_is_drawn_under_the_table_and_gone_when_the_wait_ends() -> None:
    out = io.StringIO()
    clock = _Clock()
    with LiveDisplay(Console(file=out, force_terminal=True, width=200)) as display:
        display(ProgressEvent("task_started", "started", "1.1", "in_progress", 1))
        display.count_down(3.0, "rate limited", sleep=clock.sleep, clock=clock)
        waiting = display._waiting
    assert waiting is None
    assert "for the provider (rate limited); Ctrl-C stops" in out.getvalue()


def test_a_running_tasks_last_action_comes_from_its_agents_transcript(tmp_path: Path) -> None:
    transcripts = tmp_path / ".autodev" / "transcripts"
    transcripts.mkdir(parents=True)
    event = {"type": "tool_use", "part": {"tool": "write", "state": {"input": {"filePath": "src/a.py"}}}}
    (transcripts / "1.1-developer-1-20260101T000000Z-abcdef.jsonl").write_text(json.dumps(event) + "\n")
    (transcripts / "1.2-developer-1-20260101T000000Z-abcdef.jsonl").write_text(json.dumps(event) + "\n")
    console = Console(record=True, force_terminal=True, width=200, file=io.StringIO())
    with LiveDisplay(console, repo_root=tmp_path) as display:
        display(ProgressEvent("step_started", "developer working", "1.1", "develop", 1))
        display(ProgressEvent("task_started", "started", "1.2", "in_progress", 1))
        display(ProgressEvent("task_finished", "done", "1.2", "complete", 1, True))
    rows = _last_rows(console.export_text())
    assert rows["1.1"][-1] == "developer ran: write src/a.py"
    assert rows["1.2"][-1] == ""  # finished: no longer followed
