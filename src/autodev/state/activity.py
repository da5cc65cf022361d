"""What agents are doing, from the event streams the CLIs wrote: ``autodev peek`` and status's progress line.

Every agent CLI call's stdout is kept, as it streams, in ``.autodev/transcripts/<task>-<role>-<attempt>-
<UTC>-<rand>.jsonl``. This module reads the newest of a task's files (their tails only, so a long call costs
no more than a short one), turns the events the CLIs emit into entries (a tool call, or a message), and
gives the most recent ones, each cut to a line. It only reads: safe beside a live run, and nothing here
ever goes into an agent's prompt.

Event shapes (each CLI's own stream): Claude Code and Cursor ``assistant`` messages with ``text`` and
``tool_use`` blocks, Cursor ``tool_call`` (``started``); Codex ``item.started``/``item.completed`` with
``command_execution``, ``file_change`` and ``agent_message`` items; OpenCode ``tool_use`` and ``text`` parts;
Gemini ``tool_use`` and assistant ``message`` deltas. Anything else is skipped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from autodev.state.paths import AutodevPaths, transcript_name_part

__all__ = ["Activity", "CallActivity", "progress_summary", "summarize_event", "task_activity"]

# How much of a transcript's end is read: enough for many recent events, bounded however long the call.
TAIL_BYTES = 256 * 1024
ENTRY_CHARS = 200
SUMMARY_CHARS = 120


@dataclass(frozen=True, slots=True)
class Activity:
    """One thing an agent did: a tool call (with its main argument) or a message."""

    kind: Literal["tool", "message"]
    text: str


@dataclass(frozen=True, slots=True)
class CallActivity:
    """One agent call of a task and its most recent entries (oldest first)."""

    task_id: str
    role: str
    attempt: int
    started: str
    entries: tuple[Activity, ...]


def _line(text: str, limit: int = ENTRY_CHARS) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _argument(value: Any) -> str:
    """The argument worth showing of a tool call's input: a path or a command, else the whole input."""
    if isinstance(value, dict):
        for key in ("file_path", "filePath", "path", "command", "cmd", "pattern", "query", "url"):
            if isinstance(value.get(key), str | list):
                found = value[key]
                return " ".join(found) if isinstance(found, list) else found
        return json.dumps(value, sort_keys=True)[:ENTRY_CHARS]
    return "" if value is None else str(value)


def _tool(name: Any, arguments: Any) -> Activity:
    return Activity("tool", _line(f"{name} {_argument(arguments)}".strip()))


def summarize_event(event: dict[str, Any]) -> list[Activity]:
    """The entries one stream event holds (none for events that are neither a tool call nor a message)."""
    kind = event.get("type")
    if kind == "assistant":  # Claude Code, Cursor
        message = event.get("message")
        blocks = message.get("content") if isinstance(message, dict) else None
        found: list[Activity] = []
        for block in blocks if isinstance(blocks, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and str(block.get("text", "")).strip():
                found.append(Activity("message", _line(block["text"])))
            elif block.get("type") == "tool_use":
                found.append(_tool(block.get("name"), block.get("input")))
        return found
    if kind == "tool_call" and event.get("subtype") == "started":  # Cursor
        call = event.get("tool_call")
        if isinstance(call, dict) and call:
            name, body = next(iter(call.items()))
            args = body.get("args") if isinstance(body, dict) else None
            return [_tool(str(name).removesuffix("ToolCall"), args)]
        return []
    if kind in ("item.started", "item.completed"):  # Codex
        item = event.get("item")
        if not isinstance(item, dict):
            return []
        if item.get("type") == "command_execution" and kind == "item.started":
            return [_tool("exec", item.get("command"))]
        if item.get("type") == "file_change" and kind == "item.completed":
            changes = item.get("changes")
            listed = changes if isinstance(changes, list) else []
            paths = [str(c.get("path")) for c in listed if isinstance(c, dict)]
            return [_tool("edit", " ".join(paths))]
        if item.get("type") == "agent_message" and kind == "item.completed":
            return [Activity("message", _line(item.get("text", "")))] if item.get("text") else []
        return []
    if kind == "tool_use":
        part = event.get("part")
        if isinstance(part, dict):  # OpenCode
            state = part.get("state")
            return [_tool(part.get("tool"), state.get("input") if isinstance(state, dict) else None)]
        return [_tool(event.get("tool_name"), event.get("parameters"))]  # Gemini
    if kind == "text":  # OpenCode
        part = event.get("part")
        text = part.get("text") if isinstance(part, dict) else None
        return [Activity("message", _line(text))] if text else []
    if kind == "message" and event.get("role") == "assistant":  # Gemini
        text = event.get("content")
        return [Activity("message", _line(text))] if isinstance(text, str) and text.strip() else []
    return []


def _tail_events(path: Path) -> Iterable[dict[str, Any]]:
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            start = max(0, size - TAIL_BYTES)
            handle.seek(start)
            data = handle.read(TAIL_BYTES)
    except OSError:
        return
    lines = data.split(b"\n")
    if start > 0:
        lines = lines[1:]  # the first line is cut
    for raw in lines:
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event


def _call_of(path: Path) -> tuple[str, str, int, str] | None:
    """(task, role, attempt, UTC stamp) from a transcript's name; None for a name of another shape."""
    parts = path.stem.split("-")
    if len(parts) < 5 or not parts[-3].isdigit():
        return None
    return "-".join(parts[:-4]), parts[-4], int(parts[-3]), parts[-2]


def task_activity(repo_root: Path, task_id: str, *, max_entries: int, calls: int = 1) -> list[CallActivity]:
    """The ``calls`` newest agent calls of ``task_id`` (newest last), each with its ``max_entries`` most
    recent entries; empty when the task's calls wrote no transcript (the inline and scripted platforms)."""
    directory = AutodevPaths(repo_root).transcripts_dir
    part = transcript_name_part(task_id)
    prefix = f"{part}-"
    try:
        names = [entry for entry in os.scandir(directory) if entry.name.startswith(prefix)]
    except OSError:
        return []
    found = []
    for entry in names:
        call = _call_of(Path(entry.name))
        if call is not None and call[0] == part:
            try:
                modified = entry.stat().st_mtime_ns
            except OSError:
                continue
            found.append((call[3], modified, entry.name, call))
    found.sort()
    result = []
    for _, _, name, (_, role, attempt, stamp) in found[-calls:] if calls > 0 else []:
        entries = [item for event in _tail_events(directory / name) for item in summarize_event(event)]
        result.append(CallActivity(task_id, role, attempt, stamp, tuple(entries[-max_entries:])))
    return result


def progress_summary(repo_root: Path, task_id: str) -> str | None:
    """One line on what ``task_id``'s newest agent call did last, or None when nothing was recorded."""
    calls = task_activity(repo_root, task_id, max_entries=1)
    if not calls or not calls[-1].entries:
        return None
    call = calls[-1]
    last = call.entries[-1]
    verb = "ran" if last.kind == "tool" else "said"
    return _line(f"{call.role.replace('_', ' ')} {verb}: {last.text}", SUMMARY_CHARS)
