"""Cursor's ``stream-json`` parser and argv, fed with the event lines of Cursor's own documentation
(https://cursor.com/docs/cli/reference/output-format, the README-summary example), since the real CLI cannot
be installed here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autodev.adapters.base import AgentInvocation, AgentResult, ToolName
from autodev.adapters.cursor import CursorStreamParser, build_argv
from autodev.process_runner import ProcessOutcome

SESSION = "c6b62c6f-7ead-4fd6-9922-e952131177ff"
DOCUMENTED = [
    {
        "type": "system",
        "subtype": "init",
        "apiKeySource": "login",
        "cwd": "/Users/user/project",
        "session_id": SESSION,
        "model": "Claude 4 Sonnet",
        "permissionMode": "default",
    },
    {
        "type": "user",
        "message": {
            "role": "user",
            "content": [{"type": "text", "text": "Read README.md and create a summary"}],
        },
        "session_id": SESSION,
    },
    {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "I'll read the README.md file"}],
        },
        "session_id": SESSION,
    },
    {
        "type": "tool_call",
        "subtype": "started",
        "call_id": "toolu_vrtx_01NnjaR886UcE8whekg2MGJd",
        "tool_call": {"readToolCall": {"args": {"path": "README.md"}}},
        "session_id": SESSION,
    },
    {
        "type": "tool_call",
        "subtype": "completed",
        "call_id": "toolu_vrtx_01NnjaR886UcE8whekg2MGJd",
        "tool_call": {
            "readToolCall": {
                "args": {"path": "README.md"},
                "result": {"success": {"content": "# Project\n", "isEmpty": False, "totalLines": 54}},
            }
        },
        "session_id": SESSION,
    },
    {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "Based on the README, I'll create a summary"}],
        },
        "session_id": SESSION,
    },
    {
        "type": "tool_call",
        "subtype": "started",
        "call_id": "toolu_vrtx_01Q3VHVnWFSKygaRPT7WDxrv",
        "tool_call": {"writeToolCall": {"args": {"path": "summary.txt", "fileText": "# README Summary\n"}}},
        "session_id": SESSION,
    },
    {
        "type": "tool_call",
        "subtype": "completed",
        "call_id": "toolu_vrtx_01Q3VHVnWFSKygaRPT7WDxrv",
        "tool_call": {
            "writeToolCall": {
                "args": {"path": "summary.txt", "fileText": "# README Summary\n"},
                "result": {"success": {"path": "/Users/user/project/summary.txt", "linesCreated": 19}},
            }
        },
        "session_id": SESSION,
    },
    {
        "type": "assistant",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "Done! I've created the summary in summary.txt"}],
        },
        "session_id": SESSION,
    },
    {
        "type": "result",
        "subtype": "success",
        "duration_ms": 5234,
        "duration_api_ms": 5234,
        "is_error": False,
        "result": "I'll read the README.md fileBased on the README, I'll create a summaryDone! I've created "
        "the summary in summary.txt",
        "session_id": SESSION,
        "request_id": "10e11780-df2f-45dc-a1ff-4540af32e9c0",
    },
]
LINES = [json.dumps(event) for event in DOCUMENTED]
INIT, USER, RESULT = LINES[0], LINES[1], LINES[-1]


def _done(exit_code: int | None = 0, *, stderr: str = "", timed_out: bool = False) -> ProcessOutcome:
    return ProcessOutcome(exit_code=exit_code, duration_s=5.5, timed_out=timed_out, stderr_head=stderr)


def _result(
    *lines: str, outcome: ProcessOutcome | None = None, parser: CursorStreamParser | None = None
) -> AgentResult:
    parser = parser or CursorStreamParser()
    for line in lines:
        parser.feed_line(line.encode())
    return parser.to_result(outcome or _done(), timeout_s=60.0)


def _error_result(text: str, subtype: str = "error") -> str:
    return json.dumps(
        {"type": "result", "subtype": subtype, "is_error": True, "result": text, "session_id": "s"}
    )


def _inv(tools: tuple[ToolName, ...], model: str | None = "sonnet-4") -> AgentInvocation:
    return AgentInvocation(role="judge", prompt="Judge.", cwd=Path("/w"), model=model, tools=tools)


def test_the_documented_stream_is_a_success_with_the_final_answer_and_two_tool_calls() -> None:
    result = _result(*LINES)

    assert result.success, result.error
    assert result.text == "Done! I've created the summary in summary.txt"
    assert result.tool_calls == 2
    assert result.session_id == SESSION
    assert (result.tokens_in, result.tokens_out, result.cost_usd, result.num_turns) == (
        None,
        None,
        None,
        None,
    )
    assert result.exit_code == 0
    assert result.duration_s == 5.5


def test_without_assistant_events_the_text_is_the_result_text() -> None:
    assert _result(INIT, RESULT).text.startswith("I'll read the README.md file")


def test_a_run_without_tool_calls_keeps_all_its_assistant_text() -> None:
    first = json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "A "}]}})
    second = json.dumps({"type": "assistant", "message": {"content": [{"type": "text", "text": "B"}]}})

    assert _result(INIT, first, second, RESULT).text == "A B"


def test_a_tool_call_without_a_completed_event_still_counts_once() -> None:
    started = LINES[3]

    assert _result(INIT, started, started, RESULT).tool_calls == 1


def test_an_is_error_result_is_a_failure_with_its_text_named_after_the_refusal() -> None:
    result = _result(INIT, USER, _error_result("Rate limit exceeded"), outcome=_done(1))

    assert not result.success
    assert result.error is not None
    assert result.error.kind == "rate_limited"
    assert result.error.message == "cursor-agent reported an error (subtype error): Rate limit exceeded"
    assert result.exit_code == 1


def test_an_is_error_flag_fails_even_with_subtype_success() -> None:
    result = _result(INIT, _error_result("API error 400", subtype="success"))

    assert result.error is not None
    assert result.error.kind == "is_error"


def test_a_failure_with_no_result_reports_the_exit_code_and_stderr_and_names_a_lost_login() -> None:
    result = _result(
        INIT, USER, outcome=_done(1, stderr="Error: You are not logged in. Run cursor-agent login.")
    )

    assert result.error is not None
    assert result.error.kind == "auth_failed"
    assert "cursor-agent exited 1 without a result" in result.error.message
    assert "not logged in" in result.error.message


def test_a_success_result_with_a_non_zero_exit_is_a_failure() -> None:
    result = _result(*LINES, outcome=_done(2))

    assert result.error is not None
    assert result.error.kind == "nonzero_exit"


def test_a_tool_call_that_failed_still_counts_and_is_noted() -> None:
    failed = json.dumps(
        {
            "type": "tool_call",
            "subtype": "completed",
            "call_id": "c9",
            "tool_call": {"shellToolCall": {"args": {"command": "rm -rf /"}, "result": {"rejected": {}}}},
        }
    )
    errored = json.dumps(
        {
            "type": "tool_call",
            "subtype": "completed",
            "call_id": "c10",
            "tool_call": {"editToolCall": {"result": {"error": {"message": "file not found"}}}},
        }
    )
    parser = CursorStreamParser()

    result = _result(INIT, failed, errored, RESULT, parser=parser)

    assert result.success, result.error
    assert result.tool_calls == 2
    assert parser.tool_errors == ["shell: rejected", "edit: file not found"]


def test_garbage_lines_and_unknown_events_are_skipped() -> None:
    parser = CursorStreamParser()
    noise = ["\x1b[2K", "not json", '{"type":"thinking","subtype":"delta","text":"hmm"}', "[]"]

    result = _result(noise[0], INIT, noise[1], *LINES[1:5], noise[2], noise[3], *LINES[5:], parser=parser)

    assert result.success, result.error
    assert result.text == "Done! I've created the summary in summary.txt"
    assert parser.skipped_lines == 3


def test_a_stream_that_ends_without_a_result_is_malformed_output() -> None:
    result = _result(*LINES[:-1])

    assert result.error is not None
    assert result.error.kind == "malformed_output"


def test_a_timeout_is_a_timeout() -> None:
    result = _result(INIT, outcome=_done(None, timed_out=True))

    assert result.error is not None
    assert result.error.kind == "timeout"


def test_a_writer_runs_with_force() -> None:
    assert build_argv("cursor-agent", _inv(("read", "write", "bash"))) == [
        "cursor-agent",
        "-p",
        "--output-format",
        "stream-json",
        "--force",
        "--model",
        "sonnet-4",
    ]


@pytest.mark.parametrize("tools", [("read", "search"), ("web",), ()])
def test_roles_that_cannot_write_run_in_ask_mode_without_force(tools: tuple[ToolName, ...]) -> None:
    argv = build_argv("cursor-agent", _inv(tools, model=None))

    assert argv == ["cursor-agent", "-p", "--output-format", "stream-json", "--mode", "ask"]
