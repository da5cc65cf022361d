"""The ``codex exec --json`` parser and argv, fed with event lines recorded from codex 0.169.0 against the
scripted model server (``command_execution`` and ``mcp_tool_call`` items follow the documented shapes)."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest

from autodev.adapters.base import AgentInvocation, AgentResult, ToolName
from autodev.adapters.codex import CodexAdapter, CodexStreamParser, build_argv
from autodev.config.schema import AutodevConfig, ModelPrice
from autodev.errors import ConfigError
from autodev.process_runner import ProcessOutcome

THREAD = '{"type":"thread.started","thread_id":"01a229b0-c422-7201-a711-d271ec6d1c05"}'
TURN_STARTED = '{"type":"turn.started"}'
PATCH_STARTED = (
    '{"type":"item.started","item":{"id":"item_0","type":"file_change","changes":[{"path":"/w/out.txt",'
    '"kind":"add"}],"status":"in_progress"}}'
)
PATCH_DONE = (
    '{"type":"item.completed","item":{"id":"item_0","type":"file_change","changes":[{"path":"/w/out.txt",'
    '"kind":"add"}],"status":"completed"}}'
)
MESSAGE = '{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Wrote it."}}'
TURN_DONE = (
    '{"type":"turn.completed","usage":{"input_tokens":240,"cached_input_tokens":0,"cache_write_input_tokens":0,'
    '"output_tokens":60,"reasoning_output_tokens":0}}'
)
API_ERROR = (
    '{"type":"error","message":"{\\"error\\": {\\"message\\": \\"scripted bad request xyz\\", '
    '\\"type\\": \\"invalid_request_error\\", \\"code\\": null}}"}'
)
TURN_FAILED = (
    '{"type":"turn.failed","error":{"message":"{\\"error\\": {\\"message\\": \\"scripted bad request xyz\\", '
    '\\"type\\": \\"invalid_request_error\\", \\"code\\": null}}"}}'
)
COMMAND_STARTED = (
    '{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":"bash -lc ls",'
    '"aggregated_output":"","exit_code":null,"status":"in_progress"}}'
)
COMMAND_DONE = (
    '{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"bash -lc ls",'
    '"aggregated_output":"out.txt\\n","exit_code":0,"status":"completed"}}'
)
MCP_DONE = (
    '{"type":"item.completed","item":{"id":"item_3","type":"mcp_tool_call","server":"docs","tool":"search",'
    '"status":"completed"}}'
)
REASONING = '{"type":"item.completed","item":{"id":"item_4","type":"reasoning","text":"thinking"}}'

PRICE = ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5)
CONFIG = AutodevConfig(price_table={"gpt-5.5": PRICE})


def _done(exit_code: int | None = 0, *, stderr: str = "", timed_out: bool = False) -> ProcessOutcome:
    return ProcessOutcome(exit_code=exit_code, duration_s=2.0, timed_out=timed_out, stderr_head=stderr)


def _result(
    *lines: str, outcome: ProcessOutcome | None = None, parser: CodexStreamParser | None = None
) -> AgentResult:
    parser = parser or CodexStreamParser(config=CONFIG, model="gpt-5.5")
    for line in lines:
        parser.feed_line(line.encode())
    return parser.to_result(outcome or _done(), timeout_s=30.0)


def _inv(tmp_path: Path, tools: tuple[ToolName, ...], **fields: Any) -> AgentInvocation:
    return AgentInvocation(role="developer", prompt="p", cwd=tmp_path, tools=tools, **fields)


# --- the stream ------------------------------------------------------------------------------------


@pytest.mark.parametrize("item_type", ["{}", "[]", "null", "7"])
def test_an_item_whose_type_is_no_string_is_neither_a_tool_call_nor_a_crash(item_type: str) -> None:
    odd = f'{{"type":"item.completed","item":{{"type":{item_type},"id":"x"}}}}'

    result = _result(THREAD, TURN_STARTED, odd, MESSAGE, TURN_DONE)

    assert result.success
    assert result.tool_calls == 0


def test_a_patch_then_a_completed_turn() -> None:
    result = _result(THREAD, TURN_STARTED, PATCH_STARTED, PATCH_DONE, MESSAGE, TURN_DONE)

    assert result.success
    assert result.error is None
    assert result.text == "Wrote it."
    assert result.tool_calls == 1
    assert (result.tokens_in, result.tokens_cached, result.tokens_out) == (240, 0, 60)
    assert result.cost_usd == pytest.approx((240 * 2.0 + 60 * 8.0) / 1_000_000)
    assert result.num_turns == 1
    assert result.session_id == "01a229b0-c422-7201-a711-d271ec6d1c05"
    assert result.exit_code == 0


def test_every_kind_of_tool_item_counts_once_and_the_last_message_is_the_text() -> None:
    updated = COMMAND_STARTED.replace("item.started", "item.updated")
    first_message = MESSAGE.replace("Wrote it.", "Working on it.").replace("item_1", "item_9")

    result = _result(
        THREAD,
        TURN_STARTED,
        first_message,
        COMMAND_STARTED,
        updated,
        COMMAND_DONE,
        PATCH_STARTED,
        PATCH_DONE,
        MCP_DONE,
        REASONING,
        MESSAGE,
        TURN_DONE,
    )

    assert result.success
    assert result.tool_calls == 3
    assert result.text == "Wrote it."


def test_tokens_are_summed_over_turns_and_cached_input_is_priced_as_cached() -> None:
    second = TURN_DONE.replace(
        '"input_tokens":240,"cached_input_tokens":0', '"input_tokens":1000,"cached_input_tokens":800'
    )

    result = _result(THREAD, TURN_STARTED, TURN_DONE, TURN_STARTED, MESSAGE, second)

    assert (result.tokens_in, result.tokens_cached, result.tokens_out) == (1240, 800, 120)
    assert result.num_turns == 2
    assert result.cost_usd == pytest.approx((440 * 2.0 + 800 * 0.5 + 120 * 8.0) / 1_000_000)


def test_an_unpriced_or_unnamed_model_has_no_cost() -> None:
    unpriced = _result(THREAD, MESSAGE, TURN_DONE, parser=CodexStreamParser(config=CONFIG, model="o9"))
    unnamed = _result(THREAD, MESSAGE, TURN_DONE, parser=CodexStreamParser(config=CONFIG, model=None))

    assert unpriced.success and unnamed.success
    assert unpriced.cost_usd is None
    assert unnamed.cost_usd is None
    assert unpriced.tokens_in == 240


def test_a_failed_turn_is_an_is_error_failure_with_the_providers_message() -> None:
    result = _result(THREAD, TURN_STARTED, API_ERROR, TURN_FAILED, outcome=_done(1))

    assert not result.success
    assert result.error is not None
    assert result.error.kind == "is_error"
    assert result.error.message == "codex turn failed: scripted bad request xyz"
    assert result.exit_code == 1


def test_a_failed_turn_wins_over_a_completed_one() -> None:
    result = _result(THREAD, TURN_STARTED, MESSAGE, TURN_DONE, TURN_STARTED, TURN_FAILED)

    assert result.error is not None
    assert result.error.kind == "is_error"
    assert result.tokens_in == 240


def test_an_error_event_is_only_a_warning_when_the_turn_completes() -> None:
    result = _result(THREAD, TURN_STARTED, API_ERROR, MESSAGE, TURN_DONE)

    assert result.success
    assert result.text == "Wrote it."


def test_an_error_event_without_any_turn_is_the_failure() -> None:
    result = _result(THREAD, API_ERROR, outcome=_done(1))

    assert result.error is not None
    assert result.error.kind == "is_error"
    assert "scripted bad request xyz" in result.error.message


def test_a_plain_error_message_is_kept_as_it_is() -> None:
    result = _result(
        THREAD, '{"type":"turn.failed","error":{"message":"stream disconnected"}}', outcome=_done(1)
    )

    assert result.error is not None
    assert result.error.message == "codex turn failed: stream disconnected"


def test_no_turn_events_with_exit_zero_is_malformed_output() -> None:
    result = _result(THREAD, TURN_STARTED, "Reading prompt from stdin...")

    assert result.error is not None
    assert result.error.kind == "malformed_output"
    assert result.session_id == "01a229b0-c422-7201-a711-d271ec6d1c05"


def test_no_turn_events_with_a_nonzero_exit_quotes_stderr() -> None:
    result = _result(outcome=_done(2, stderr="Error: unknown feature `apps`"))

    assert result.error is not None
    assert result.error.kind == "nonzero_exit"
    assert result.error.message == "codex exited 2 without a result: Error: unknown feature `apps`"


def test_a_completed_turn_with_a_nonzero_exit_is_not_a_success() -> None:
    result = _result(THREAD, MESSAGE, TURN_DONE, outcome=_done(1, stderr="panic at shutdown"))

    assert result.error is not None
    assert result.error.kind == "nonzero_exit"
    assert "panic at shutdown" in result.error.message


def test_a_timeout_keeps_what_was_parsed() -> None:
    result = _result(THREAD, TURN_STARTED, COMMAND_STARTED, outcome=_done(None, timed_out=True))

    assert result.error is not None
    assert result.error.kind == "timeout"
    assert result.tool_calls == 1


def test_garbage_and_unknown_events_between_real_ones_are_skipped() -> None:
    parser = CodexStreamParser(config=CONFIG, model="gpt-5.5")
    result = _result(
        "WARNING: proceeding, even though we could not create PATH aliases",
        THREAD,
        '{"type":"turn.plan_updated","plan":[]}',
        "null",
        TURN_STARTED,
        '{"type":"item.completed","item":"not an object"}',
        '{"type":"item.completed","item":{"id":"item_7","type":"todo_list","items":[]}}',
        PATCH_DONE,
        "{broken",
        MESSAGE,
        TURN_DONE,
        parser=parser,
    )

    assert result.success
    assert result.tool_calls == 1
    assert parser.skipped_lines == 3


# --- argv ------------------------------------------------------------------------------------------


def test_a_writer_runs_in_the_workspace_write_sandbox(tmp_path: Path) -> None:
    inv = _inv(tmp_path, ("read", "edit"), model="gpt-5.5")

    argv = build_argv("codex", inv, ["model_provider=mock"])

    assert argv == [
        "codex", "exec", "--json", "--skip-git-repo-check", "--sandbox", "workspace-write",
        "-C", str(tmp_path), "-m", "gpt-5.5",
        "-c", "analytics.enabled=false", "-c", "check_for_update_on_startup=false",
        "-c", "model_provider=mock",
        "--disable", "plugins", "--disable", "apps", "-",
    ]  # fmt: skip


def test_a_call_continuing_a_session_uses_exec_resume_with_the_sandbox_as_config(tmp_path: Path) -> None:
    inv = _inv(tmp_path, ("read", "edit"), model="gpt-5.5", resume_session="0199-thread")

    argv = build_argv("codex", inv, ["model_provider=mock"])

    assert argv == [
        "codex", "exec", "resume", "--json", "--skip-git-repo-check", "-c", 'sandbox_mode="workspace-write"',
        "-m", "gpt-5.5",
        "-c", "analytics.enabled=false", "-c", "check_for_update_on_startup=false",
        "-c", "model_provider=mock",
        "--disable", "plugins", "--disable", "apps", "0199-thread", "-",
    ]  # fmt: skip
    assert CodexAdapter.resumes_sessions


@pytest.mark.parametrize("tools", [("read", "search", "web"), ()])
def test_roles_that_must_not_write_run_read_only(tmp_path: Path, tools: tuple[ToolName, ...]) -> None:
    argv = build_argv("codex", _inv(tmp_path, tools))

    assert argv[argv.index("--sandbox") + 1] == "read-only"
    assert "-m" not in argv
    assert argv[-1] == "-"


def test_bash_alone_can_write_so_it_gets_the_write_sandbox(tmp_path: Path) -> None:
    argv = build_argv("codex", _inv(tmp_path, ("bash",)))

    assert argv[argv.index("--sandbox") + 1] == "workspace-write"


@pytest.mark.parametrize("option", ["model_provider", "=mock", ""])
def test_extra_config_must_be_key_value(tmp_path: Path, option: str) -> None:
    with pytest.raises(ConfigError, match="key=value"):
        CodexAdapter(repo_root=tmp_path, config=CONFIG, extra_config=[option])


# --- the adapter around a fake executable ------------------------------------------------------------


@pytest.mark.asyncio
async def test_execute_sends_the_prompt_on_stdin_and_keeps_a_transcript(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    script = tmp_path / "fake-codex"
    lines = "".join(f"printf '%s\\n' '{line}'\n" for line in (THREAD, TURN_STARTED, MESSAGE, TURN_DONE))
    script.write_text(
        f'#!/bin/sh\nprintf "%s " "$@" > "{tmp_path}/argv.txt"\ncat > "{tmp_path}/stdin.txt"\n{lines}'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    adapter = CodexAdapter(
        repo_root=tmp_path, config=CONFIG, executable=str(script), extra_config=["model_provider=mock"]
    )

    result = await adapter.execute(
        AgentInvocation(role="developer", prompt="x" * 300_000, cwd=work, model="gpt-5.5", tools=("write",))
    )

    assert result.success, result.error
    assert (tmp_path / "stdin.txt").read_text() == "x" * 300_000
    assert "-c model_provider=mock" in (tmp_path / "argv.txt").read_text()
    assert result.transcript_path is not None
    assert result.transcript_path.read_text().splitlines() == [THREAD, TURN_STARTED, MESSAGE, TURN_DONE]
    assert result.cost_usd == pytest.approx((240 * 2.0 + 60 * 8.0) / 1_000_000)


@pytest.mark.asyncio
async def test_a_missing_executable_is_cli_missing_with_the_install_hint(tmp_path: Path) -> None:
    adapter = CodexAdapter(repo_root=tmp_path, config=CONFIG, executable="no-such-codex-cli")

    result = await adapter.execute(_inv(tmp_path, ()))

    assert result.error is not None
    assert result.error.kind == "cli_missing"
    assert "npm install -g @openai/codex" in result.error.message
