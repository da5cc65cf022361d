"""Gemini CLI's ``stream-json`` parser, argv and policy files, fed with event lines recorded from gemini
0.61.0 against the scripted model server (trimmed to the fields that matter).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from autodev.adapters.base import AgentInvocation, AgentResult, ToolName
from autodev.adapters.gemini import (
    KNOWN_TOOLS,
    MAX_STDIN_BYTES,
    GeminiAdapter,
    GeminiStreamParser,
    build_argv,
    denied_tools,
    policy_toml,
    user_policies_dir,
    write_policy,
)
from autodev.config.schema import AutodevConfig, ModelPrice
from autodev.process_runner import ProcessOutcome
from autodev.state.paths import AutodevPaths

INIT = (
    '{"type":"init","timestamp":"2026-11-29T23:48:03.052Z","session_id":"5639d61b-d495-42ac-8c42-690354d528ff",'
    '"model":"gemini-2.5-flash"}'
)
USER = (
    '{"type":"message","timestamp":"2026-11-29T23:48:03.054Z","role":"user",'
    '"content":"Please write the file."}'
)
TOOL_USE = (
    '{"type":"tool_use","timestamp":"2026-11-29T23:48:03.430Z","tool_name":"write_file",'
    '"tool_id":"write_file__write_file_1795996083203_0","parameters":{"file_path":"hello.txt","content":"hi\\n"}}'
)
TOOL_RESULT = (
    '{"type":"tool_result","timestamp":"2026-11-29T23:48:03.670Z","tool_id":"write_file__write_file_1795996083203_0",'
    '"status":"success"}'
)
ANSWER = (
    '{"type":"message","timestamp":"2026-11-29T23:48:03.681Z","role":"assistant","content":"Wrote it.",'
    '"delta":true}'
)
RESULT = (
    '{"type":"result","timestamp":"2026-11-29T23:48:03.687Z","status":"success","stats":{"total_tokens":300,'
    '"input_tokens":240,"output_tokens":60,"cached":0,"input":240,"duration_ms":635,"tool_calls":1,"models":{'
    '"gemini-2.5-flash":{"total_tokens":300,"input_tokens":240,"output_tokens":60,"cached":0,"input":240}}}}'
)
TOOL_NOT_FOUND = (
    '{"type":"tool_result","timestamp":"2026-11-29T23:49:02.775Z","tool_id":"write_file__write_file_1795996083203_0",'
    '"status":"error","output":"Tool \\"write_file\\" not found. Did you mean one of: \\"read_file\\"?",'
    '"error":{"type":"tool_not_registered","message":"Tool \\"write_file\\" not found. Did you mean one of: '
    '\\"read_file\\"?"}}'
)
API_ERROR_RESULT = (
    '{"type":"result","timestamp":"2026-11-29T23:49:14.941Z","status":"error","error":{"type":"unknown",'
    '"message":"[API Error: {\\"error\\":{\\"code\\":400,\\"message\\":\\"scripted model failure\\",'
    '\\"status\\":\\"INVALID_ARGUMENT\\"}}]"},"stats":{"total_tokens":0,"input_tokens":0,"output_tokens":0,'
    '"cached":0,"input":0,"duration_ms":0,"tool_calls":0,"models":{}}}'
)
HAPPY = (INIT, USER, TOOL_USE, TOOL_RESULT, ANSWER, RESULT)
WRITER: tuple[ToolName, ...] = ("read", "search", "write", "edit", "bash")


def _say(text: str) -> str:
    return json.dumps({"type": "message", "role": "assistant", "content": text, "delta": True})


def _tool(tool_id: str) -> str:
    return json.dumps({"type": "tool_use", "tool_name": "read_file", "tool_id": tool_id, "parameters": {}})


def _stats_result(models: dict[str, dict[str, int]], **totals: int) -> str:
    return json.dumps({"type": "result", "status": "success", "stats": {**totals, "models": models}})


def _done(exit_code: int | None = 0, *, stderr: str = "", timed_out: bool = False) -> ProcessOutcome:
    return ProcessOutcome(exit_code=exit_code, duration_s=3.0, timed_out=timed_out, stderr_head=stderr)


def _result(
    *lines: str, outcome: ProcessOutcome | None = None, parser: GeminiStreamParser | None = None
) -> AgentResult:
    parser = parser or GeminiStreamParser()
    for line in lines:
        parser.feed_line(line.encode())
    return parser.to_result(outcome or _done(), timeout_s=60.0)


def _inv(tools: tuple[ToolName, ...], *, prompt: str = "Review.", cwd: Path = Path("/w")) -> AgentInvocation:
    return AgentInvocation(role="reviewer", prompt=prompt, cwd=cwd, model="gemini-2.5-flash", tools=tools)


def test_a_recorded_write_run_is_a_success_with_its_text_tokens_and_tool_call() -> None:
    result = _result(*HAPPY)

    assert result.success, result.error
    assert result.text == "Wrote it."
    assert result.tool_calls == 1
    assert (result.tokens_in, result.tokens_out, result.tokens_cached) == (240, 60, 0)
    assert result.cost_usd is None
    assert result.session_id == "5639d61b-d495-42ac-8c42-690354d528ff"
    assert result.exit_code == 0


def test_the_price_table_prices_each_model_of_the_stats() -> None:
    prices = {
        "gemini-2.5-flash": ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0),
        "gemini-2.5-pro": ModelPrice(input_per_mtok=10.0, output_per_mtok=20.0, cached_input_per_mtok=1.0),
    }
    models = {
        "gemini-2.5-flash": {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110, "cached": 0},
        "gemini-2.5-pro": {"input_tokens": 200, "output_tokens": 20, "total_tokens": 220, "cached": 50},
    }
    parser = GeminiStreamParser(config=AutodevConfig(price_table=prices), model="gemini-2.5-flash")

    result = _result(_say("ok"), _stats_result(models, input_tokens=300, output_tokens=30), parser=parser)

    expected = (100 * 1.0 + 10 * 2.0) / 1e6 + (150 * 10.0 + 50 * 1.0 + 20 * 20.0) / 1e6
    assert result.cost_usd == pytest.approx(expected)


def test_a_model_missing_from_the_price_table_leaves_the_cost_unknown() -> None:
    prices = {"gemini-2.5-flash": ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0)}
    models = {"gemini-2.5-flash": {"input_tokens": 1}, "gemini-3-pro": {"input_tokens": 1}}
    parser = GeminiStreamParser(config=AutodevConfig(price_table=prices))

    assert _result(_stats_result(models), parser=parser).cost_usd is None


def test_thinking_tokens_outside_output_tokens_count_as_output() -> None:
    result = _result(
        _say("ok"), _stats_result({}, total_tokens=400, input_tokens=240, output_tokens=60, cached=40)
    )

    assert (result.tokens_in, result.tokens_out, result.tokens_cached) == (240, 160, 40)


def test_assistant_deltas_are_concatenated_and_narration_before_a_tool_call_dropped() -> None:
    lines = (INIT, _say("Let me "), _say("look."), _tool("t1"), _say("Found "), _say("it."), RESULT)

    assert _result(*lines).text == "Found it."


def test_a_final_turn_without_text_keeps_the_text_before_the_last_tool_call() -> None:
    lines = (INIT, _say("The answer is 42."), _tool("t1"), RESULT)

    result = _result(*lines)

    assert result.success, result.error
    assert result.text == "The answer is 42."


def test_an_api_error_result_is_an_is_error_failure_with_the_message_and_exit_code() -> None:
    result = _result(INIT, USER, API_ERROR_RESULT, outcome=_done(144))

    assert not result.success
    assert result.error is not None
    assert result.error.kind == "is_error"
    assert "scripted model failure" in result.error.message
    assert "exit 144" in result.error.message
    assert result.exit_code == 144


def test_the_turn_limit_exit_says_so() -> None:
    limit = (
        '{"type":"result","status":"error","error":{"type":"FatalTurnLimitedError",'
        '"message":"Reached max session turns for this session."},"stats":{}}'
    )

    result = _result(INIT, limit, outcome=_done(53))

    assert result.error is not None
    assert result.error.kind == "is_error"
    assert result.error.message.startswith("gemini reached its session turn limit")


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (41, "authentication failed"),
        (42, "no prompt arrived"),
        (52, "configuration error"),
        (53, "session turn limit"),
        (55, "not trusted"),
        (1, "general error"),
    ],
)
def test_an_exit_without_a_result_is_explained_by_its_code(code: int, words: str) -> None:
    result = _result(INIT, outcome=_done(code, stderr="details on stderr"))

    assert result.error is not None
    assert result.error.kind == "nonzero_exit"
    assert f"gemini exited {code}" in result.error.message
    assert words in result.error.message
    assert "details on stderr" in result.error.message


def test_a_tool_call_that_failed_still_counts_and_is_noted() -> None:
    parser = GeminiStreamParser()

    result = _result(INIT, TOOL_USE, TOOL_NOT_FOUND, ANSWER, RESULT, parser=parser)

    assert result.success, result.error
    assert result.tool_calls == 1
    assert parser.tool_errors == [
        'write_file: Tool "write_file" not found. Did you mean one of: "read_file"?'
    ]


def test_failed_tool_calls_and_warnings_are_named_in_a_failure_message() -> None:
    warning = '{"type":"error","severity":"warning","message":"Loop detected"}'

    result = _result(INIT, TOOL_USE, TOOL_NOT_FOUND, warning, outcome=_done(0))

    assert result.error is not None
    assert result.error.kind == "malformed_output"
    assert "gemini warnings: Loop detected" in result.error.message
    assert "failed tool calls: write_file" in result.error.message


def test_garbage_lines_and_unknown_events_are_skipped() -> None:
    parser = GeminiStreamParser()
    lines = (
        "Warning: 256-color support not detected.",
        INIT,
        '"a json string"',
        USER,
        '{"type":"thought","content":"hmm"}',
        TOOL_USE,
        TOOL_RESULT,
        "YOLO mode is enabled.",
        ANSWER,
        RESULT,
    )

    result = _result(*lines, parser=parser)

    assert result.success, result.error
    assert result.text == "Wrote it."
    assert parser.skipped_lines == 3


def test_a_stream_without_a_result_is_malformed_output() -> None:
    result = _result(INIT, USER, ANSWER)

    assert result.error is not None
    assert result.error.kind == "malformed_output"


def test_a_success_result_with_a_non_zero_exit_is_a_failure() -> None:
    result = _result(*HAPPY, outcome=_done(1))

    assert result.error is not None
    assert result.error.kind == "nonzero_exit"


def test_a_timeout_is_a_timeout() -> None:
    result = _result(INIT, USER, outcome=_done(None, timed_out=True))

    assert result.error is not None
    assert result.error.kind == "timeout"


def test_a_writer_runs_in_yolo_mode_with_the_policy_and_no_prompt_in_argv() -> None:
    argv = build_argv("gemini", _inv(WRITER), Path("/r/.autodev/gemini/policy-1.toml"))

    assert argv == [
        "gemini",
        "--output-format",
        "stream-json",
        "--approval-mode",
        "yolo",
        "--policy",
        "/r/.autodev/gemini/policy-1.toml",
        "-m",
        "gemini-2.5-flash",
    ]
    assert "-p" not in argv and "--prompt" not in argv


@pytest.mark.parametrize("tools", [("read", "search"), ()])
def test_read_only_and_no_tool_roles_run_in_default_mode(tools: tuple[ToolName, ...]) -> None:
    argv = build_argv("gemini", _inv(tools), Path("/p.toml"), Path("/home/u/.gemini/policies"))

    assert argv[3:9] == [
        "--approval-mode",
        "default",
        "--policy",
        "/p.toml",
        "--policy",
        "/home/u/.gemini/policies",
    ]
    assert "yolo" not in argv


def test_a_writer_is_denied_only_what_it_was_not_given() -> None:
    denied = set(denied_tools(WRITER))

    assert not denied & {"read_file", "grep_search", "glob", "write_file", "replace", "run_shell_command"}
    assert {"web_fetch", "google_web_search", "invoke_agent", "activate_skill", "mcp_*"} <= denied


def test_a_read_only_role_is_denied_every_tool_that_writes_or_runs() -> None:
    denied = set(denied_tools(("read", "search")))

    assert {
        "write_file",
        "replace",
        "run_shell_command",
        "invoke_agent",
        "mcp_*",
        "discovered_tool_*",
    } <= denied
    assert not denied & {"read_file", "grep_search", "glob", "list_directory"}


def test_no_capabilities_deny_every_known_tool() -> None:
    assert set(denied_tools(())) == {*KNOWN_TOOLS, "mcp_*", "discovered_tool_*"}


def test_the_policy_is_valid_toml_with_one_top_priority_deny_rule() -> None:
    policy = tomllib.loads(policy_toml(("read", "search")))

    (rule,) = policy["rule"]
    assert rule["decision"] == "deny"
    assert rule["priority"] == 999
    assert rule["toolName"] == denied_tools(("read", "search"))


def test_policy_files_are_shared_per_capability_set_and_kept_out_of_git(tmp_path: Path) -> None:
    first = write_policy(tmp_path, ("read", "search"))
    again = write_policy(tmp_path, ("read", "search"))
    other = write_policy(tmp_path, WRITER)

    assert first == again != other
    assert first.parent == AutodevPaths(tmp_path).state_dir / "gemini"
    assert first.read_text() == policy_toml(("read", "search"))
    assert (AutodevPaths(tmp_path).state_dir / ".gitignore").exists()


def test_the_user_policies_dir_follows_gemini_cli_home_then_home() -> None:
    assert user_policies_dir({"HOME": "/h"}) == Path("/h/.gemini/policies")
    assert user_policies_dir({"HOME": "/h", "GEMINI_CLI_HOME": "/g"}) == Path("/g/.gemini/policies")


@pytest.mark.asyncio
async def test_a_prompt_gemini_would_truncate_is_refused_before_starting(tmp_path: Path) -> None:
    adapter = GeminiAdapter(
        repo_root=tmp_path, config=AutodevConfig(), executable=str(tmp_path / "never-run")
    )

    result = await adapter.execute(_inv((), prompt="x" * (MAX_STDIN_BYTES + 1), cwd=tmp_path))

    assert result.error is not None
    assert result.error.kind == "spawn_failed"
    assert "8388608" in result.error.message
    assert adapter.last_pid is None


@pytest.mark.asyncio
async def test_a_missing_executable_is_cli_missing_with_an_install_hint(tmp_path: Path) -> None:
    adapter = GeminiAdapter(repo_root=tmp_path, config=AutodevConfig(), executable=str(tmp_path / "gemini"))

    result = await adapter.execute(_inv((), cwd=tmp_path))

    assert result.error is not None
    assert result.error.kind == "cli_missing"
    assert "@google/gemini-cli" in result.error.message
