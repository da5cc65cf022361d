"""OpenCode's ``--format json`` parser, argv and per-call agent config, fed with event lines recorded from
opencode 1.18.33 against the scripted model server (trimmed to the fields that matter).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autodev.adapters.base import AgentInvocation, AgentResult, ToolName
from autodev.adapters.opencode import (
    AGENT_NAME,
    CONFIG_CONTENT_ENV,
    KNOWN_PERMISSIONS,
    OpenCodeAdapter,
    OpenCodeStreamParser,
    build_argv,
    config_content,
    permission_table,
)
from autodev.config.schema import AutodevConfig, ModelPrice
from autodev.process_runner import ProcessOutcome

SESSION = "ses_dd64e61d8ffeestIwLCe8t5ZHo"
STEP_START = (
    '{"type":"step_start","timestamp":1795995837038,"sessionID":"' + SESSION + '","part":{"id":"prt_1",'
    '"messageID":"msg_1","sessionID":"' + SESSION + '","type":"step-start"}}'
)
TOOL_USE = (
    '{"type":"tool_use","timestamp":1795995837096,"sessionID":"' + SESSION + '","part":{"type":"tool",'
    '"tool":"write","callID":"call_00000014","state":{"status":"completed","input":{"filePath":"hello.txt",'
    '"content":"hi\\n"},"output":"Wrote file successfully.","title":"work/hello.txt",'
    '"time":{"start":1795995837028,"end":1795995837071}},"id":"prt_2","messageID":"msg_1"}}'
)
TOOL_STEP_FINISH = (
    '{"type":"step_finish","timestamp":1795995837096,"sessionID":"' + SESSION + '","part":{"id":"prt_3",'
    '"reason":"tool-calls","messageID":"msg_1","type":"step-finish","tokens":{"total":150,"input":120,'
    '"output":30,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0}}'
)
TEXT = (
    '{"type":"text","timestamp":1795995837764,"sessionID":"' + SESSION + '","part":{"id":"prt_5",'
    '"messageID":"msg_2","type":"text","text":"Wrote it.",'
    '"time":{"start":1795995837700,"end":1795995837705}}}'
)
STOP_STEP_FINISH = (
    '{"type":"step_finish","timestamp":1795995837764,"sessionID":"' + SESSION + '","part":{"id":"prt_6",'
    '"reason":"stop","messageID":"msg_2","type":"step-finish","tokens":{"total":150,"input":120,'
    '"output":30,"reasoning":0,"cache":{"write":0,"read":0}},"cost":0}}'
)
API_ERROR = (
    '{"type":"error","timestamp":1795995851670,"sessionID":"ses_dd64e2bb2ffeZROOovT22KtDSk","error":{'
    '"name":"APIError","data":{"message":"scripted model failure","statusCode":400,"isRetryable":false,'
    '"responseBody":"{\\"error\\": {\\"message\\": \\"scripted model failure\\"}}",'
    '"metadata":{"url":"http://127.0.0.1:35797/v1/chat/completions"}}}}'
)
TOOL_DENIED = (
    '{"type":"tool_use","timestamp":1795995984446,"sessionID":"' + SESSION + '","part":{"type":"tool",'
    '"tool":"write","callID":"call_00000002","state":{"status":"error","input":{"filePath":"/tmp/outside.txt",'
    '"content":"x"},"error":"The user has specified a rule which prevents you from using this specific tool '
    'call.","time":{"start":1795995984322,"end":1795995984343}},"id":"prt_7","messageID":"msg_1"}}'
)
HAPPY = (STEP_START, TOOL_USE, TOOL_STEP_FINISH, STEP_START, TEXT, STOP_STEP_FINISH)


def _text(text: str) -> str:
    return json.dumps({"type": "text", "sessionID": SESSION, "part": {"type": "text", "text": text}})


def _finish(reason: str, *, cost: float = 0, reasoning: int = 0, read: int = 0, write: int = 0) -> str:
    tokens = {"input": 100, "output": 20, "reasoning": reasoning, "cache": {"read": read, "write": write}}
    part = {"type": "step-finish", "reason": reason, "tokens": tokens, "cost": cost}
    return json.dumps({"type": "step_finish", "sessionID": SESSION, "part": part})


def _done(exit_code: int | None = 0, *, stderr: str = "", timed_out: bool = False) -> ProcessOutcome:
    return ProcessOutcome(exit_code=exit_code, duration_s=2.5, timed_out=timed_out, stderr_head=stderr)


def _result(
    *lines: str, outcome: ProcessOutcome | None = None, parser: OpenCodeStreamParser | None = None
) -> AgentResult:
    parser = parser or OpenCodeStreamParser()
    for line in lines:
        parser.feed_line(line.encode())
    return parser.to_result(outcome or _done(), timeout_s=60.0)


def _inv(
    tools: tuple[ToolName, ...], *, model: str | None = "mock/mock-model", max_turns: int | None = None
) -> AgentInvocation:
    return AgentInvocation(
        role="reviewer", prompt="Review.", cwd=Path("/w"), model=model, tools=tools, max_turns=max_turns
    )


def test_a_recorded_write_run_is_a_success_with_its_text_tokens_and_tool_call() -> None:
    result = _result(*HAPPY)

    assert result.success, result.error
    assert result.text == "Wrote it."
    assert result.tool_calls == 1
    assert result.num_turns == 2
    assert (result.tokens_in, result.tokens_out, result.tokens_cached) == (240, 60, 0)
    # OpenCode's 0 for tokens spent means it has no price for the model: unknown, not free.
    assert result.cost_usd is None
    assert result.session_id == SESSION
    assert result.exit_code == 0
    assert result.duration_s == 2.5


def test_tokens_count_cache_in_input_and_reasoning_in_output() -> None:
    result = _result(STEP_START, _text("Done."), _finish("stop", reasoning=7, read=50, write=5))

    assert (result.tokens_in, result.tokens_out, result.tokens_cached) == (155, 27, 50)


def test_a_reported_positive_cost_is_summed_over_steps() -> None:
    parser = OpenCodeStreamParser(
        config=AutodevConfig(price_table={"mock-model": ModelPrice(input_per_mtok=9.0, output_per_mtok=9.0)}),
        model="mock/mock-model",
    )
    result = _result(
        STEP_START,
        _finish("tool-calls", cost=0.25),
        STEP_START,
        _text("Ok."),
        _finish("stop", cost=0.5),
        parser=parser,
    )

    assert result.cost_usd == pytest.approx(0.75)


def test_a_zero_reported_cost_is_priced_from_the_price_table_by_model_id() -> None:
    prices = {"mock-model": ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0)}
    parser = OpenCodeStreamParser(config=AutodevConfig(price_table=prices), model="mock/mock-model")

    result = _result(*HAPPY, parser=parser)

    assert result.cost_usd == pytest.approx((240 * 1.0 + 60 * 2.0) / 1_000_000)
    assert result.cost_estimated and result.model == "mock/mock-model"


def test_a_zero_cost_for_no_tokens_at_all_is_a_known_zero() -> None:
    empty = _finish("stop").replace('"input": 100', '"input": 0').replace('"output": 20', '"output": 0')
    result = _result(STEP_START, _text("Hi."), empty)

    assert (result.tokens_in, result.tokens_out) == (0, 0)
    assert result.cost_usd == 0.0


def test_no_step_finish_means_no_tokens_and_no_cost() -> None:
    result = _result(STEP_START, _text("Hi."), outcome=_done(1, stderr="boom"))

    assert (result.tokens_in, result.tokens_out, result.cost_usd) == (None, None, None)


def test_the_text_is_the_last_step_that_produced_text() -> None:
    lines = (
        STEP_START,
        _text("Let me write the file."),
        TOOL_USE,
        _finish("tool-calls"),
        STEP_START,
        _text("Wrote it."),
        _text("Anything else?"),
        _finish("stop"),
    )

    assert _result(*lines).text == "Wrote it.\n\nAnything else?"


def test_a_last_step_without_text_keeps_the_previous_steps_text() -> None:
    lines = (STEP_START, _text("The answer is 42."), _finish("tool-calls"), STEP_START, _finish("stop"))

    result = _result(*lines)

    assert result.success, result.error
    assert result.text == "The answer is 42."


def test_an_api_error_event_is_an_is_error_failure_naming_the_message_and_status() -> None:
    result = _result(API_ERROR, outcome=_done(1))

    assert not result.success
    assert result.error is not None
    assert result.error.kind == "is_error"
    assert result.error.message == "opencode reported: APIError: scripted model failure (HTTP 400)"
    assert result.exit_code == 1
    assert result.session_id == "ses_dd64e2bb2ffeZROOovT22KtDSk"


def test_an_error_event_wins_over_a_finished_step() -> None:
    result = _result(*HAPPY, '{"type":"error","error":{"name":"UnknownError","data":{"message":"late"}}}')

    assert result.error is not None
    assert result.error.kind == "is_error"
    assert "UnknownError: late" in result.error.message


def test_a_tool_call_that_failed_still_counts_and_is_noted() -> None:
    parser = OpenCodeStreamParser()
    lines = (STEP_START, TOOL_DENIED, TOOL_STEP_FINISH, STEP_START, _text("Could not."), _finish("stop"))

    result = _result(*lines, parser=parser)

    assert result.success, result.error
    assert result.tool_calls == 1
    assert parser.tool_errors == [
        "write: The user has specified a rule which prevents you from using this specific tool call."
    ]


def test_failed_tool_calls_are_named_in_a_failure_message() -> None:
    result = _result(STEP_START, TOOL_DENIED, API_ERROR, outcome=_done(1))

    assert result.error is not None
    assert "failed tool calls: write: The user has specified a rule" in result.error.message


def test_garbage_lines_and_unknown_events_are_skipped() -> None:
    parser = OpenCodeStreamParser()
    lines = (
        "Performing one time database migration...",
        STEP_START,
        "[1, 2, 3]",
        TOOL_USE,
        '{"type":"reasoning","part":{"type":"reasoning","text":"hmm"}}',
        TOOL_STEP_FINISH,
        "{not json",
        STEP_START,
        TEXT,
        '{"type":"done","reason":"idle","rejected":[]}',
        STOP_STEP_FINISH,
    )

    result = _result(*lines, parser=parser)

    assert result.success, result.error
    assert result.text == "Wrote it."
    assert result.tool_calls == 1
    assert parser.skipped_lines == 3


def test_a_run_that_stops_after_a_tool_step_has_no_result() -> None:
    result = _result(STEP_START, TOOL_USE, TOOL_STEP_FINISH)

    assert result.error is not None
    assert result.error.kind == "malformed_output"


def test_no_output_and_a_non_zero_exit_is_nonzero_exit_with_stderr() -> None:
    result = _result(outcome=_done(1, stderr="Error: provider mock not found"))

    assert result.error is not None
    assert result.error.kind == "nonzero_exit"
    assert "exited 1" in result.error.message
    assert "provider mock not found" in result.error.message


def test_a_finished_turn_with_a_non_zero_exit_is_a_failure() -> None:
    result = _result(*HAPPY, outcome=_done(2, stderr="late crash"))

    assert result.error is not None
    assert result.error.kind == "nonzero_exit"
    assert "late crash" in result.error.message


@pytest.mark.parametrize(
    ("reason", "words"),
    [
        ("length", "output token limit"),
        ("content-filter", "content filter"),
        ("error", "ended with an error"),
    ],
)
def test_a_last_step_that_did_not_answer_is_an_is_error_failure(reason: str, words: str) -> None:
    result = _result(STEP_START, _text("Partial"), _finish(reason))

    assert result.error is not None
    assert result.error.kind == "is_error"
    assert words in result.error.message


def test_a_timeout_is_a_timeout_even_after_some_steps() -> None:
    result = _result(STEP_START, TOOL_USE, TOOL_STEP_FINISH, outcome=_done(None, timed_out=True))

    assert result.error is not None
    assert result.error.kind == "timeout"
    assert result.tool_calls == 1


def test_the_argv_names_the_agent_and_model_but_never_the_prompt() -> None:
    inv = _inv(("read", "search", "write", "edit", "bash"))

    assert build_argv("opencode", inv) == [
        "opencode",
        "run",
        "--pure",
        "--format",
        "json",
        "--agent",
        AGENT_NAME,
        "-m",
        "mock/mock-model",
    ]
    assert build_argv("opencode", _inv((), model=None)) == [
        "opencode",
        "run",
        "--pure",
        "--format",
        "json",
        "--agent",
        AGENT_NAME,
    ]


def _allowed(table: dict[str, str | dict[str, str]]) -> set[str]:
    """The permissions ``table`` allows in general (a pattern table counts by its ``"*"`` rule)."""
    return {
        name for name, rule in table.items() if (rule.get("*") if isinstance(rule, dict) else rule) == "allow"
    }


def test_a_writer_is_allowed_edit_and_bash_and_nothing_it_was_not_given() -> None:
    table = permission_table(("read", "search", "write", "edit", "bash"))

    assert next(iter(table)) == "*"
    assert table["*"] == "deny"
    assert _allowed(table) == {"read", "list", "glob", "grep", "edit", "bash"}
    assert set(table) == {"*", *KNOWN_PERMISSIONS}


def test_a_read_only_role_is_allowed_only_reading_and_searching() -> None:
    table = permission_table(("read", "search"))

    assert _allowed(table) == {"read", "list", "glob", "grep"}
    assert table["edit"] == table["bash"] == table["task"] == table["external_directory"] == "deny"


def test_reading_keeps_opencodes_guard_on_env_files() -> None:
    assert permission_table(("read",))["read"] == {
        "*": "allow",
        "*.env": "deny",
        "*.env.*": "deny",
        "*.env.example": "allow",
    }


def test_no_capabilities_deny_every_permission() -> None:
    table = permission_table(())

    assert _allowed(table) == set()
    assert set(table.values()) == {"deny"}


def test_the_agent_config_carries_permissions_and_the_turn_limit() -> None:
    content = json.loads(config_content(_inv(("read",), max_turns=7), None))

    agent = content["agent"][AGENT_NAME]
    assert agent["mode"] == "primary"
    assert agent["steps"] == 7
    assert agent["permission"] == permission_table(("read",))
    assert "steps" not in json.loads(config_content(_inv(("read",)), None))["agent"][AGENT_NAME]


def test_an_existing_config_content_is_kept_and_only_the_autodev_agent_is_replaced() -> None:
    existing = json.dumps(
        {"model": "x/y", "agent": {"build": {"model": "x/z"}, AGENT_NAME: {"permission": {"edit": "allow"}}}}
    )

    content = json.loads(config_content(_inv(()), existing))

    assert content["model"] == "x/y"
    assert content["agent"]["build"] == {"model": "x/z"}
    assert content["agent"][AGENT_NAME]["permission"]["edit"] == "deny"


@pytest.mark.parametrize("existing", ["{not json", "[1, 2]"])
def test_an_unusable_config_content_is_refused(existing: str) -> None:
    with pytest.raises(ValueError, match=CONFIG_CONTENT_ENV):
        config_content(_inv(()), existing)


@pytest.mark.asyncio
async def test_an_unusable_config_content_in_the_environment_fails_before_starting(tmp_path: Path) -> None:
    adapter = OpenCodeAdapter(
        repo_root=tmp_path,
        config=AutodevConfig(),
        executable=str(tmp_path / "never-run"),
        env={CONFIG_CONTENT_ENV: "{broken"},
    )

    result = await adapter.execute(_inv(()).model_copy(update={"cwd": tmp_path}))

    assert result.error is not None
    assert result.error.kind == "spawn_failed"
    assert CONFIG_CONTENT_ENV in result.error.message
    assert adapter.last_pid is None


@pytest.mark.asyncio
async def test_a_missing_executable_is_cli_missing_with_an_install_hint(tmp_path: Path) -> None:
    adapter = OpenCodeAdapter(
        repo_root=tmp_path, config=AutodevConfig(), executable=str(tmp_path / "opencode")
    )

    result = await adapter.execute(_inv(()).model_copy(update={"cwd": tmp_path}))

    assert result.error is not None
    assert result.error.kind == "cli_missing"
    assert "opencode-ai" in result.error.message
