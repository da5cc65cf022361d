"""`autodev peek` and status's progress line: what a live agent did last, from its own event stream, read
beside the running run (a fake cursor-agent streams events, then works on for a while)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.hostile import HostileAgent, default_steps, executing_until, planned, run_autodev
from support.projects import mini_project

from autodev.cli.text import terminal_text

pytestmark = pytest.mark.slow

ESCAPE = "\x1b]0;pwned\x07"


def test_peek_and_status_show_a_live_developers_recent_tool_calls_and_messages(tmp_path: Path) -> None:
    repo = planned(mini_project(tmp_path / "repo"))
    working = tmp_path / "working"
    steps = default_steps()
    steps["developer"][0] = {
        **steps["developer"][0],
        "events": [
            {"type": "assistant", "message": {"content": [{"type": "text", "text": "Reading mini first."}]}},
            {
                "type": "tool_call",
                "subtype": "started",
                "tool_call": {"readToolCall": {"args": {"path": "mini/core.py"}}},
            },
            {
                "type": "assistant",
                "message": {"content": [{"type": "text", "text": f"Now writing {ESCAPE}triple."}]},
            },
            {
                "type": "tool_call",
                "subtype": "started",
                "tool_call": {"writeToolCall": {"args": {"path": "mini/core.py"}}},
            },
        ],
        "shell": f"touch {working} && sleep 600",
    }
    agent = HostileAgent(tmp_path / "agent", repo, steps)
    with executing_until(repo, agent, working):
        peeked = run_autodev(repo, agent, "peek", "1.1")
        assert peeked.returncode == 0, peeked.stderr
        lines = peeked.stdout.splitlines()
        assert lines[0].startswith("1.1 developer (attempt 1")
        assert lines[1:] == [
            "  - Reading mini first.",
            "  > read mini/core.py",
            f"  - {terminal_text(f'Now writing {ESCAPE}triple.')}",
            "  > write mini/core.py",
        ]
        assert "\x1b" not in peeked.stdout

        every = run_autodev(repo, agent, "peek", "--json")
        (call,) = json.loads(every.stdout)
        assert (call["task_id"], call["role"], call["attempt"]) == ("1.1", "developer", 1)
        assert [entry["kind"] for entry in call["entries"]] == ["message", "tool", "message", "tool"]

        status = json.loads(run_autodev(repo, agent, "status", "--json").stdout)
        (live,) = status["in_flight"]
        assert (live["id"], live["step"], live["retry_count"]) == ("1.1", "developer", 0)
        assert live["progress"] == "developer ran: write mini/core.py"
        assert "Last seen" in run_autodev(repo, agent, "status").stdout

        (repo / ".autodev" / "config.toml").write_text("peek_max_entries = 2\n")
        capped = json.loads(run_autodev(repo, agent, "peek", "1.1", "--json").stdout)
        assert [entry["text"] for entry in capped[0]["entries"]][-1] == "write mini/core.py"
        assert len(capped[0]["entries"]) == 2
    # The killed run's agent is still working: stop it as a user would.
    assert run_autodev(repo, agent, "clean").returncode == 0
    unknown = run_autodev(repo, agent, "peek", "9.9")
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: ")
