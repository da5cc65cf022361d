"""Claude Code's ``stream-json`` parser and argv, fed with event lines recorded from claude 2.1.328
(trimmed to the fields that matter), plus the shared subprocess-adapter helpers of ``autodev.adapters._cli``.
"""

from __future__ import annotations

import re
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from autodev.adapters._cli import (
    JsonLines,
    check_health,
    child_env,
    outcome_failure,
    prepare_workspace,
    transcript_path,
)
from autodev.adapters.base import AgentInvocation, AgentResult, ToolName
from autodev.adapters.claude_code import ClaudeCodeAdapter, ClaudeStreamParser, build_argv
from autodev.config.schema import AutodevConfig, ModelPrice
from autodev.errors import AutodevError
from autodev.process_runner import ProcessOutcome
from autodev.state.paths import AutodevPaths

INIT = (
    '{"type":"system","subtype":"init","cwd":"/w","session_id":"5268f0d8","tools":["Bash","Edit","Read","Write"],'
    '"model":"claude-sonnet-5-5","permissionMode":"acceptEdits","claude_code_version":"2.1.328"}'
)
TOOL_USE = (
    '{"type":"assistant","message":{"id":"msg_00000001","type":"message","role":"assistant",'
    '"model":"claude-sonnet-5-5","content":[{"type":"tool_use","id":"toolu_00000001","name":"Write",'
    '"input":{"file_path":"/w/out.txt","content":"hello\\n"}}],"usage":{"input_tokens":120,"output_tokens":1}},'
    '"parent_tool_use_id":null,"session_id":"5268f0d8"}'
)
TOOL_RESULT = (
    '{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_00000001",'
    '"type":"tool_result","content":"File created successfully at: /w/out.txt"}]},'
    '"parent_tool_use_id":null,"session_id":"5268f0d8"}'
)
TEXT = (
    '{"type":"assistant","message":{"id":"msg_00000002","type":"message","role":"assistant",'
    '"content":[{"type":"text","text":"Wrote it."}]},"session_id":"5268f0d8"}'
)
RESULT = (
    '{"type":"result","subtype":"success","is_error":false,"result":"Wrote it.","session_id":"5268f0d8",'
    '"total_cost_usd":0.00108,"num_turns":2,"duration_ms":211,"stop_reason":"end_turn","usage":{"input_tokens":240,'
    '"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":60},"permission_denials":[],'
    '"api_error_status":null}'
)
API_ERROR_MESSAGE = (
    '{"type":"assistant","message":{"id":"ec3f843a","model":"<synthetic>","role":"assistant","type":"message",'
    '"content":[{"type":"text","text":"API Error: 400 scripted bad request xyz"}]},"session_id":"dad0be87",'
    '"error":"unknown","is_api_error_message":true,"api_error_status":400}'
)
API_ERROR_RESULT = (
    '{"type":"result","subtype":"success","is_error":true,"result":"API Error: 400 scripted bad request xyz",'
    '"session_id":"dad0be87","total_cost_usd":0,"num_turns":1,"terminal_reason":"api_error","usage":{'
    '"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0},'
    '"api_error_status":400,"api_error_type":"invalid_request_error"}'
)
MAX_TURNS_RESULT = (
    '{"type":"result","subtype":"error_max_turns","is_error":true,"session_id":"9ec9699a","total_cost_usd":0.00054,'
    '"num_turns":2,"terminal_reason":"max_turns","errors":["Reached maximum number of turns (1)"],"usage":{'
    '"input_tokens":120,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":30}}'
)


def _done(exit_code: int | None = 0, *, stderr: str = "", timed_out: bool = False) -> ProcessOutcome:
    return ProcessOutcome(exit_code=exit_code, duration_s=1.5, timed_out=timed_out, stderr_head=stderr)


def _result(
    *lines: str, outcome: ProcessOutcome | None = None, parser: ClaudeStreamParser | None = None
) -> AgentResult:
    parser = parser or ClaudeStreamParser()
    for line in lines:
        parser.feed_line(line.encode())
    return parser.to_result(outcome or _done(), timeout_s=30.0)


def _inv(tmp_path: Path, tools: tuple[ToolName, ...], **fields: Any) -> AgentInvocation:
    return AgentInvocation(role="developer", prompt="p", cwd=tmp_path, tools=tools, **fields)


# --- the stream ------------------------------------------------------------------------------------


def test_a_tool_call_then_a_success_result() -> None:
    result = _result(INIT, TOOL_USE, TOOL_RESULT, TEXT, RESULT)

    assert result.success
    assert result.error is None
    assert result.text == "Wrote it."
    assert result.tool_calls == 1
    assert (result.tokens_in, result.tokens_out, result.tokens_cached) == (240, 60, 0)
    assert result.cost_usd == pytest.approx(0.00108)
    assert result.num_turns == 2
    assert result.session_id == "5268f0d8"
    assert result.exit_code == 0
    assert result.duration_s == 1.5


def test_cached_input_counts_in_tokens_in() -> None:
    cached = RESULT.replace('"input_tokens":240', '"input_tokens":40').replace(
        '"cache_creation_input_tokens":0,"cache_read_input_tokens":0',
        '"cache_creation_input_tokens":50,"cache_read_input_tokens":150',
    )

    result = _result(INIT, cached)

    assert (result.tokens_in, result.tokens_cached) == (240, 150)


def test_the_same_tool_use_block_seen_twice_counts_once() -> None:
    second = TOOL_USE.replace("toolu_00000001", "toolu_00000002")

    result = _result(INIT, TOOL_USE, TOOL_USE, second, RESULT)

    assert result.tool_calls == 2


def test_an_api_error_reported_as_subtype_success_is_an_is_error_failure() -> None:
    result = _result(INIT, API_ERROR_MESSAGE, API_ERROR_RESULT, outcome=_done(1))

    assert not result.success
    assert result.error is not None
    assert result.error.kind == "is_error"
    assert "API status 400" in result.error.message
    assert "scripted bad request xyz" in result.error.message
    assert result.text == "API Error: 400 scripted bad request xyz"
    assert result.exit_code == 1


def test_is_error_wins_even_with_exit_zero() -> None:
    result = _result(INIT, API_ERROR_RESULT)

    assert result.error is not None
    assert result.error.kind == "is_error"


def test_the_turn_limit_is_an_is_error_failure_that_names_it() -> None:
    result = _result(INIT, TOOL_USE, TOOL_RESULT, MAX_TURNS_RESULT, outcome=_done(1))

    assert result.error is not None
    assert result.error.kind == "is_error"
    assert "turn limit" in result.error.message
    assert "Reached maximum number of turns (1)" in result.error.message
    assert result.tool_calls == 1
    assert result.cost_usd == pytest.approx(0.00054)


def test_a_success_result_with_a_nonzero_exit_is_not_a_success() -> None:
    result = _result(INIT, RESULT, outcome=_done(2, stderr="something broke late"))

    assert result.error is not None
    assert result.error.kind == "nonzero_exit"
    assert "something broke late" in result.error.message
    assert result.text == "Wrote it."


def test_no_result_event_with_exit_zero_is_malformed_output() -> None:
    result = _result(INIT, TOOL_USE, "not json at all")

    assert result.error is not None
    assert result.error.kind == "malformed_output"
    assert "1 non-JSON line(s) skipped" in result.error.message
    assert result.tool_calls == 1
    assert result.session_id == "5268f0d8"


def test_no_result_event_with_a_nonzero_exit_quotes_stderr_and_names_a_refused_key() -> None:
    result = _result(outcome=_done(1, stderr="Error: Invalid API key\n   please log in"))

    assert result.error is not None
    assert result.error.kind == "auth_failed"
    assert result.error.message == "claude exited 1 without a result: Error: Invalid API key please log in"


def test_a_timeout_is_a_timeout_whatever_was_printed() -> None:
    result = _result(INIT, TOOL_USE, outcome=_done(None, timed_out=True))

    assert result.error is not None
    assert result.error.kind == "timeout"
    assert "30s" in result.error.message
    assert result.tool_calls == 1


def test_garbage_and_unknown_events_between_real_ones_are_skipped() -> None:
    parser = ClaudeStreamParser()
    result = _result(
        "npm WARN something",
        INIT,
        "",
        "[1, 2, 3]",
        '{"type":"stream_event","event":{"type":"content_block_delta"}}',
        '{"type":"rate_limit_event","rate_limit_info":{}}',
        TOOL_USE,
        '{"type": "assistant", "message": "not an object"}',
        "{truncated",
        TOOL_RESULT,
        TEXT,
        RESULT,
        parser=parser,
    )

    assert result.success
    assert result.tool_calls == 1
    assert parser.skipped_lines == 3


def test_without_a_reported_cost_the_price_table_prices_the_tokens_as_an_estimate() -> None:
    price = ModelPrice(input_per_mtok=3.0, output_per_mtok=15.0)
    by_name = AutodevConfig(price_table={"claude-sonnet-5-5": price})
    by_alias = AutodevConfig(price_table={"sonnet": price})
    no_cost = RESULT.replace('"total_cost_usd":0.00108,', "")

    priced = _result(INIT, no_cost, parser=ClaudeStreamParser(config=by_name, model="sonnet"))
    aliased = _result(INIT, no_cost, parser=ClaudeStreamParser(config=by_alias, model="sonnet"))
    unpriced = _result(INIT, no_cost, parser=ClaudeStreamParser(config=by_alias, model="opus"))
    reported = _result(INIT, RESULT, parser=ClaudeStreamParser(config=by_name, model="sonnet"))

    assert priced.cost_usd == pytest.approx((240 * 3.0 + 60 * 15.0) / 1_000_000)
    assert priced.cost_estimated
    assert aliased.cost_usd == priced.cost_usd
    assert unpriced.cost_usd is None and not unpriced.cost_estimated
    assert reported.cost_usd == 0.00108 and not reported.cost_estimated


def test_the_model_is_the_one_the_init_event_names() -> None:
    result = _result(INIT, RESULT, parser=ClaudeStreamParser(model="sonnet"))
    bare = _result(RESULT, parser=ClaudeStreamParser(model="sonnet"))

    assert result.model == "claude-sonnet-5-5"
    assert bare.model == "sonnet"


def test_cache_writes_are_input_tokens_priced_at_the_cache_write_price() -> None:
    usage = (
        '"usage":{"input_tokens":100,"cache_creation_input_tokens":1000,"cache_read_input_tokens":2000,'
        '"output_tokens":10}'
    )
    line = re.sub(r'"usage":\{[^}]*\}', usage, RESULT.replace('"total_cost_usd":0.00108,', ""))
    price = ModelPrice(
        input_per_mtok=3.0, output_per_mtok=15.0, cached_input_per_mtok=0.3, cache_write_per_mtok=3.75
    )
    config = AutodevConfig(price_table={"claude-sonnet-5-5": price})

    result = _result(INIT, line, parser=ClaudeStreamParser(config=config))

    assert (result.tokens_in, result.tokens_cached, result.tokens_cache_write) == (3100, 2000, 1000)
    assert result.cost_usd == pytest.approx((100 * 3.0 + 2000 * 0.3 + 1000 * 3.75 + 10 * 15.0) / 1e6)


# --- argv ------------------------------------------------------------------------------------------


def test_a_writer_gets_its_tools_offered_and_pre_approved(tmp_path: Path) -> None:
    inv = _inv(tmp_path, ("read", "search", "write", "edit", "bash"), model="sonnet", max_turns=12)

    argv = build_argv("claude", inv)

    tools = "Read,Grep,Glob,Write,Edit,NotebookEdit,Bash"
    assert argv == [
        "claude", "-p", "--output-format", "stream-json", "--verbose",
        "--model", "sonnet", "--max-turns", "12",
        "--permission-mode", "acceptEdits", "--tools", tools, "--allowedTools", tools,
    ]  # fmt: skip


def test_a_read_only_role_is_offered_no_tool_that_writes(tmp_path: Path) -> None:
    argv = build_argv("claude", _inv(tmp_path, ("read", "search", "web")))

    assert argv[argv.index("--tools") + 1] == "Read,Grep,Glob,WebFetch,WebSearch"
    assert argv[argv.index("--allowedTools") + 1] == "Read,Grep,Glob,WebFetch,WebSearch"
    assert "--model" not in argv
    assert "--max-turns" not in argv


def test_no_capabilities_offers_no_tools(tmp_path: Path) -> None:
    argv = build_argv("claude", _inv(tmp_path, ()))

    assert argv[argv.index("--tools") + 1] == ""
    assert argv[argv.index("--allowedTools") + 1] == ""
    assert "--dangerously-skip-permissions" not in argv


def test_a_call_continuing_a_session_resumes_it(tmp_path: Path) -> None:
    inv = _inv(tmp_path, ("read", "write")).model_copy(update={"resume_session": "4f2c-session"})

    argv = build_argv("claude", inv)

    assert argv[-2:] == ["--resume", "4f2c-session"]
    assert "--resume" not in build_argv("claude", _inv(tmp_path, ("read", "write")))
    assert ClaudeCodeAdapter.resumes_sessions


# --- the adapter around a fake executable ------------------------------------------------------------


def _fake_cli(tmp_path: Path, *lines: str) -> Path:
    """An executable that saves its stdin and PWD, then prints ``lines``."""
    script = tmp_path / "fake-claude"
    body = "".join(f"printf '%s\\n' '{line}'\n" for line in lines)
    save = f'cat > "{tmp_path}/stdin.txt"\nprintf %s "$PWD" > "{tmp_path}/pwd.txt"\n'
    script.write_text(f"#!/bin/sh\n{save}{body}")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.asyncio
async def test_execute_sends_the_prompt_on_stdin_and_keeps_a_transcript(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    adapter = ClaudeCodeAdapter(
        repo_root=tmp_path, config=AutodevConfig(), executable=str(_fake_cli(tmp_path, INIT, TEXT, RESULT))
    )
    await adapter.init_workspace(work, [])

    result = await adapter.execute(
        AgentInvocation(role="reviewer", prompt="Review this ✓", cwd=work, task_id="2.1", attempt=3)
    )

    assert result.success, result.error
    assert (tmp_path / "stdin.txt").read_text(encoding="utf-8") == "Review this ✓"
    assert (tmp_path / "pwd.txt").read_text() == str(work)
    assert result.transcript_path is not None
    assert result.transcript_path.name.startswith("2.1-reviewer-3-")
    assert result.transcript_path.read_text().splitlines() == [INIT, TEXT, RESULT]
    assert adapter.last_pid is not None


@pytest.mark.asyncio
async def test_a_missing_executable_is_cli_missing_with_the_install_hint(tmp_path: Path) -> None:
    adapter = ClaudeCodeAdapter(repo_root=tmp_path, config=AutodevConfig(), executable="no-such-claude-cli")

    result = await adapter.execute(_inv(tmp_path, ()))
    healthy, reason = await adapter.healthcheck()

    assert result.error is not None
    assert result.error.kind == "cli_missing"
    assert "npm install -g @anthropic-ai/claude-code" in result.error.message
    assert not healthy
    assert "not found on PATH" in reason
    assert adapter.last_pid is None


@pytest.mark.asyncio
async def test_a_missing_working_directory_is_spawn_failed_not_cli_missing(tmp_path: Path) -> None:
    adapter = ClaudeCodeAdapter(repo_root=tmp_path, config=AutodevConfig(), executable="sh")

    result = await adapter.execute(_inv(tmp_path / "gone", ()))

    assert result.error is not None
    assert result.error.kind == "spawn_failed"
    assert "gone does not exist" in result.error.message


# --- shared helpers (autodev.adapters._cli) ----------------------------------------------------------


def test_child_env_layers_adapter_then_call_env_and_pins_pwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTODEV_TEST_LAYER", "process")
    monkeypatch.setenv("AUTODEV_TEST_INHERITED", "kept")
    inv = AgentInvocation(role="r", prompt="p", cwd=tmp_path, env={"AUTODEV_TEST_LAYER": "call"})

    env = child_env({"AUTODEV_TEST_LAYER": "adapter", "PWD": "/elsewhere"}, inv)

    assert env["AUTODEV_TEST_LAYER"] == "call"
    assert env["AUTODEV_TEST_INHERITED"] == "kept"
    assert env["PWD"] == str(tmp_path)
    assert (
        child_env({"AUTODEV_TEST_LAYER": "adapter"}, inv.model_copy(update={"env": {}}))["AUTODEV_TEST_LAYER"]
        == "adapter"
    )


def test_transcript_names_are_safe_timestamped_and_unique(tmp_path: Path) -> None:
    inv = AgentInvocation(role="critic/t", prompt="p", cwd=tmp_path, task_id="../1.2", attempt=2)
    now = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)

    first = transcript_path(tmp_path, inv, now=now)
    second = transcript_path(tmp_path, inv, now=now)

    assert first.parent == AutodevPaths(tmp_path).transcripts_dir
    assert first.name.startswith("_1.2-critic_t-2-20260304T050607Z-")
    assert first.suffix == ".jsonl"
    assert first != second


def test_json_lines_delivers_objects_and_counts_the_rest() -> None:
    events: list[dict[str, object]] = []
    lines = JsonLines(events.append)

    for line in (b'{"a": 1}', b"", b"  ", b"plain text", b'"a string"', b"\xff\xfe", b'{"b": 2}\r'):
        lines.feed(line)

    assert events == [{"a": 1}, {"b": 2}]
    assert (lines.events, lines.skipped) == (2, 3)


def test_outcome_failure_reports_the_output_bound() -> None:
    outcome = ProcessOutcome(exit_code=None, duration_s=1.0, output_limited=True, stdout_bytes=999)

    error = outcome_failure(outcome, cli="x", timeout_s=5.0, result_seen=True)

    assert error is not None
    assert error.kind == "output_limit"
    assert "999 bytes" in error.message


def test_prepare_workspace_checks_cwd_and_creates_the_transcripts_dir(tmp_path: Path) -> None:
    prepare_workspace(tmp_path, tmp_path)
    assert AutodevPaths(tmp_path).transcripts_dir.is_dir()

    with pytest.raises(AutodevError, match="does not exist or is not a directory"):
        prepare_workspace(tmp_path, tmp_path / "missing")


@pytest.mark.asyncio
async def test_check_health_reports_the_version_line(tmp_path: Path) -> None:
    fake = tmp_path / "fake-cli"
    fake.write_text("#!/bin/sh\necho\necho '9.9.9 (Fake CLI)'\n")
    fake.chmod(0o755)
    failing = tmp_path / "failing-cli"
    failing.write_text("#!/bin/sh\necho 'broken install' >&2\nexit 3\n")
    failing.chmod(0o755)

    assert await check_health(str(fake), install_hint="-") == (True, f"{fake}: 9.9.9 (Fake CLI)")
    healthy, reason = await check_health(str(failing), install_hint="-")
    assert not healthy
    assert reason == f"`{failing} --version` exited 3: broken install"


def test_a_turn_limit_is_no_refusal_whatever_the_agents_last_words_say() -> None:
    last_words = MAX_TURNS_RESULT.replace(
        '"errors":["Reached maximum number of turns (1)"]',
        '"result":"I was adding a retry for the 429 rate limit and the invalid API key case"',
    )

    result = _result(INIT, last_words, outcome=_done(1))

    assert result.error is not None
    assert result.error.kind == "is_error"
    assert "turn limit" in result.error.message
