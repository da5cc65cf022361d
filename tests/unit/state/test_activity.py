"""Agent activity from the CLIs' own event streams: each CLI's shapes, the newest calls first, tails only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from autodev.state.activity import TAIL_BYTES, Activity, progress_summary, summarize_event, task_activity


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (  # Claude Code
            {
                "type": "assistant",
                "message": {
                    "content": [
                        {"type": "text", "text": "Let me look."},
                        {
                            "type": "tool_use",
                            "name": "Write",
                            "input": {"file_path": "src/a.py", "content": "x"},
                        },
                    ]
                },
            },
            [Activity("message", "Let me look."), Activity("tool", "Write src/a.py")],
        ),
        (  # Cursor
            {
                "type": "tool_call",
                "subtype": "started",
                "tool_call": {"shellToolCall": {"args": {"command": "ls"}}},
            },
            [Activity("tool", "shell ls")],
        ),
        ({"type": "tool_call", "subtype": "completed", "tool_call": {"shellToolCall": {}}}, []),
        (  # Codex
            {"type": "item.started", "item": {"type": "command_execution", "command": "pytest -q"}},
            [Activity("tool", "exec pytest -q")],
        ),
        (
            {
                "type": "item.completed",
                "item": {"type": "file_change", "changes": [{"path": "a.py", "kind": "add"}]},
            },
            [Activity("tool", "edit a.py")],
        ),
        (
            {"type": "item.completed", "item": {"type": "agent_message", "text": "Done   with\nit."}},
            [Activity("message", "Done with it.")],
        ),
        (  # OpenCode
            {"type": "tool_use", "part": {"tool": "write", "state": {"input": {"filePath": "b.py"}}}},
            [Activity("tool", "write b.py")],
        ),
        ({"type": "text", "part": {"text": "All set."}}, [Activity("message", "All set.")]),
        (  # Gemini
            {"type": "tool_use", "tool_name": "write_file", "parameters": {"file_path": "c.py"}},
            [Activity("tool", "write_file c.py")],
        ),
        ({"type": "message", "role": "assistant", "content": "Working."}, [Activity("message", "Working.")]),
        ({"type": "message", "role": "user", "content": "the prompt"}, []),
        ({"type": "result", "result": "final"}, []),
        ({"type": "assistant", "message": "not an object"}, []),
    ],
)
def test_each_clis_events_become_entries(event: dict[str, object], expected: list[Activity]) -> None:
    assert summarize_event(event) == expected


def test_a_long_message_is_cut_to_one_line() -> None:
    (entry,) = summarize_event({"type": "text", "part": {"text": "word " * 200}})
    assert len(entry.text) == 200 and entry.text.endswith("…")


def _transcript(root: Path, name: str, events: list[dict[str, object]], *, junk: bytes = b"") -> Path:
    directory = root / ".autodev" / "transcripts"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_bytes(junk + b"".join(json.dumps(event).encode() + b"\n" for event in events))
    return path


def _said(text: str) -> dict[str, object]:
    return {"type": "text", "part": {"text": text}}


def test_the_newest_calls_of_the_task_only_with_their_latest_entries(tmp_path: Path) -> None:
    older = _transcript(tmp_path, "1.1-developer-1-20260101T000000Z-aaaaaa.jsonl", [_said("first try")])
    _transcript(
        tmp_path, "1.1-reviewer-1-20260101T000100Z-bbbbbb.jsonl", [_said(f"note {n}") for n in range(30)]
    )
    _transcript(tmp_path, "1.10-developer-1-20260101T000200Z-cccccc.jsonl", [_said("another task")])
    _transcript(tmp_path, "t-map-core-developer-2-20260101T000300Z-dddddd.jsonl", [_said("map")])
    os.utime(older, (1, 1))
    (review,) = task_activity(tmp_path, "1.1", max_entries=3)
    assert (review.role, review.attempt, review.started) == ("reviewer", 1, "20260101T000100Z")
    assert [entry.text for entry in review.entries] == ["note 27", "note 28", "note 29"]
    both = task_activity(tmp_path, "1.1", max_entries=1, calls=5)
    assert [call.role for call in both] == ["developer", "reviewer"]
    (mapped,) = task_activity(tmp_path, "t-map-core", max_entries=5)
    assert (mapped.role, mapped.attempt) == ("developer", 2)
    assert progress_summary(tmp_path, "1.1") == "reviewer said: note 29"
    assert progress_summary(tmp_path, "9.9") is None
    assert task_activity(tmp_path / "nowhere", "1.1", max_entries=5) == []


def test_only_the_tail_of_a_huge_transcript_is_read(tmp_path: Path) -> None:
    filler = b'{"type": "step_start"}\n' * (2 * TAIL_BYTES // 23)
    _transcript(
        tmp_path,
        "1.1-developer-1-20260101T000000Z-aaaaaa.jsonl",
        [_said("latest")],
        junk=b"not json\n" + filler,
    )
    (call,) = task_activity(tmp_path, "1.1", max_entries=5)
    assert [entry.text for entry in call.entries] == ["latest"]
