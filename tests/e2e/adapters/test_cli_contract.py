"""The contract every agent CLI adapter keeps, asserted for each CLI (the test id is its platform name).

The real Claude Code, Codex, OpenCode and Gemini CLIs (pinned npm installs) talk to the scripted model
server on 127.0.0.1; Cursor's CLI cannot be installed here and is played by a fake (``support.fake_cursor``).
What each CLI is, and what it reports where they differ, is its ``CliSpec`` in ``support.cli_contract``;
each scenario runs once per CLI, and several cases below read the same run. What only one CLI does is
tested in that CLI's own file, on the same runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli_contract import (
    BIG_PAYLOAD,
    BIG_PAYLOAD_DIGEST,
    CLI_SPECS,
    OFFERING_SPECS,
    SERVED_SPECS,
    Case,
    CliSpec,
    HealthOf,
    RunOf,
    invocation,
)

from autodev.config.schema import AutodevConfig
from autodev.state.paths import AutodevPaths

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]


def each(specs: tuple[CliSpec, ...]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("spec", specs, ids=[spec.platform for spec in specs])


# --- a role that may write ------------------------------------------------------------------------------


@each(CLI_SPECS)
async def test_a_scripted_write_lands_and_the_answer_is_parsed(spec: CliSpec, run_of: RunOf) -> None:
    run = await run_of(spec, "write")
    result = run.result

    assert result.success, result.error
    assert run.written.read_text() == f"hello from {spec.platform}\n"
    assert result.text == "Wrote hello.txt."
    assert result.session_id
    assert result.session_id.startswith(spec.session_prefix)
    assert result.exit_code == 0


@each(CLI_SPECS)
async def test_the_tool_call_and_the_turns_are_counted(spec: CliSpec, run_of: RunOf) -> None:
    result = (await run_of(spec, "write")).result

    assert result.tool_calls == 1
    assert result.num_turns == spec.num_turns


@each(CLI_SPECS)
async def test_tokens_and_cost_are_reported(spec: CliSpec, run_of: RunOf) -> None:
    result = (await run_of(spec, "write")).result

    assert (result.tokens_in, result.tokens_cached, result.tokens_out) == spec.tokens
    assert result.model is not None and result.model.startswith(spec.reported_model)
    if spec.prices_itself:
        assert result.cost_usd is not None and result.cost_usd > 0
        assert not result.cost_estimated
    elif spec.cost_usd is None:
        # No cost and no tokens to price: unknown, never $0.
        assert result.cost_usd is None
    else:
        assert result.cost_usd == pytest.approx(spec.cost_usd)
        assert result.cost_estimated


@each(CLI_SPECS)
async def test_the_transcript_is_written_under_autodev(spec: CliSpec, run_of: RunOf) -> None:
    run = await run_of(spec, "write")
    transcript = run.result.transcript_path

    assert transcript is not None
    assert transcript.parent == AutodevPaths(run.setup.repo).transcripts_dir
    assert spec.transcript_marker in transcript.read_text()


@each(SERVED_SPECS)
async def test_a_writing_role_is_offered_the_writing_tools(spec: CliSpec, run_of: RunOf) -> None:
    offered = (await run_of(spec, "write")).offered_with_tools()

    assert offered
    for names in offered:
        assert spec.writer_offer <= names
        assert not names & spec.never_offered


# --- roles that may not write ---------------------------------------------------------------------------


@each(CLI_SPECS)
async def test_a_read_only_role_cannot_write(spec: CliSpec, run_of: RunOf) -> None:
    # The scripted model calls the write tool wherever it is offered one.
    run = await run_of(spec, "read_only")

    assert run.result.success, run.result.error
    assert run.result.text == "Looked around."
    assert run.result.tool_calls == spec.read_only_tool_calls
    assert not run.written.exists()


@each(OFFERING_SPECS)
async def test_a_read_only_role_is_offered_only_reading_tools(spec: CliSpec, run_of: RunOf) -> None:
    offered = (await run_of(spec, "read_only")).offered_with_tools()

    assert offered
    for names in offered:
        assert spec.reader_offer <= names <= spec.reader_offer_within
        assert not names & (spec.writing_tools | spec.never_offered)


@each(CLI_SPECS)
async def test_no_capabilities_cannot_write(spec: CliSpec, run_of: RunOf) -> None:
    run = await run_of(spec, "no_tools")

    assert run.result.success, run.result.error
    assert run.result.text == "Judged."
    assert run.result.tool_calls == spec.no_tools_tool_calls
    assert not run.written.exists()


@each(OFFERING_SPECS)
async def test_no_capabilities_offers_no_tools_at_all(spec: CliSpec, run_of: RunOf) -> None:
    offered = (await run_of(spec, "no_tools")).offered()

    assert offered
    assert offered == [frozenset()] * len(offered)


# --- failures -------------------------------------------------------------------------------------------


@each(CLI_SPECS)
async def test_a_model_error_is_an_is_error_failure_with_the_servers_message(
    spec: CliSpec, run_of: RunOf
) -> None:
    result = (await run_of(spec, "api_error")).result

    assert not result.success
    assert result.error is not None
    assert result.error.kind == "is_error"
    assert "scripted bad request 7f3a" in result.error.message
    assert result.exit_code == spec.error_exit_code
    # A 400 is not retried until the deadline.
    assert result.duration_s < 30.0


@each(CLI_SPECS)
@pytest.mark.parametrize(
    ("case", "kind"),
    [
        ("rate_limited", "rate_limited"),
        ("unavailable", "provider_unavailable"),
        ("auth_failed", "auth_failed"),
        ("usage_limit", "usage_limit"),
        ("context_overflow", "context_overflow"),
    ],
)
async def test_a_providers_refusal_is_named_from_what_the_cli_reports(
    spec: CliSpec, run_of: RunOf, case: Case, kind: str
) -> None:
    result = (await run_of(spec, case)).result

    assert not result.success
    assert result.error is not None
    assert result.error.kind == kind, result.error.message
    # Refused at once: not retried until the deadline.
    assert result.duration_s < spec.timeout_s


@each(CLI_SPECS)
async def test_a_model_that_never_answers_times_out_and_leaves_no_process(
    spec: CliSpec, run_of: RunOf
) -> None:
    run = await run_of(spec, "hang")
    result = run.result

    assert result.error is not None
    assert result.error.kind == "timeout"
    assert result.exit_code is None
    assert spec.hang_timeout_s <= result.duration_s < spec.hang_timeout_s + spec.hang_grace_s
    assert run.last_pid is not None
    assert run.survivors == ()


@each(CLI_SPECS)
async def test_a_missing_executable_is_cli_missing(spec: CliSpec, repo: Path, tmp_path: Path) -> None:
    adapter = spec.adapter_class(
        repo_root=repo, config=AutodevConfig(), executable=str(tmp_path / "no-such-cli")
    )

    result = await adapter.execute(invocation(spec, tmp_path, "Hello.", ()))

    assert not result.success
    assert result.error is not None
    assert result.error.kind == "cli_missing"
    assert spec.install_hint_mentions in result.error.message


# --- the prompt -----------------------------------------------------------------------------------------


@each(CLI_SPECS)
async def test_a_prompt_over_200_kb_arrives_intact(spec: CliSpec, run_of: RunOf) -> None:
    assert len(BIG_PAYLOAD.encode()) > 200_000
    result = (await run_of(spec, "big_prompt")).result

    assert result.success, result.error
    assert result.text == f"Read it. {BIG_PAYLOAD_DIGEST}"


# --- the health check -------------------------------------------------------------------------------------


@each(CLI_SPECS)
async def test_the_health_check_makes_one_real_call_to_the_model(spec: CliSpec, health_of: HealthOf) -> None:
    health = await health_of(spec, "write")

    assert health.healthy, health.line
    assert "answered" in health.line
    if spec.api is not None:
        assert any(request.api == spec.api for request in health.requests)
    if spec.api is not None and spec.offer_follows_capabilities:
        # The probe offers the model nothing to do: no tool is offered.
        assert [request.api for request in health.requests if request.tool_names] == []


@each(CLI_SPECS)
async def test_the_health_check_names_a_refused_key_in_the_clis_words(
    spec: CliSpec, health_of: HealthOf
) -> None:
    health = await health_of(spec, "auth_failed")

    assert not health.healthy
    assert "auth_failed" in health.line
