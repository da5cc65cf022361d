"""What only the Cursor adapter does, driving the fake ``cursor-agent`` of ``support.fake_cursor`` (the
real CLI cannot be installed here). The contract it shares with the other CLIs is ``test_cli_contract.py``
(``[cursor]``), played by the same fake.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli_contract import CURSOR, WRITE_TOOLS, RunOf, cursor_log, invocation
from support.fake_cursor import SESSION_ID, fake_cursor_env, install_fake_cursor, logged_calls

from autodev.adapters.base import AgentInvocation
from autodev.adapters.cursor import CursorAdapter
from autodev.config.schema import AutodevConfig

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]

STREAM_JSON = ["-p", "--output-format", "stream-json"]


async def test_a_writing_role_runs_with_force_and_the_streams_session(run_of: RunOf) -> None:
    run = await run_of(CURSOR, "write")

    assert run.result.success, run.result.error
    assert run.result.session_id == SESSION_ID
    (call,) = logged_calls(cursor_log(run.setup))
    assert call["argv"] == [*STREAM_JSON, "--force", "--model", "sonnet-4"]


async def test_a_read_only_role_runs_in_ask_mode_without_force(run_of: RunOf) -> None:
    run = await run_of(CURSOR, "read_only")

    assert run.result.success, run.result.error
    (call,) = logged_calls(cursor_log(run.setup))
    assert call["argv"] == [*STREAM_JSON, "--mode", "ask", "--model", "sonnet-4"]


async def test_no_capabilities_runs_in_ask_mode_too(run_of: RunOf) -> None:
    # Cursor has no switch that offers no tools at all.
    run = await run_of(CURSOR, "no_tools")

    assert run.result.success, run.result.error
    (call,) = logged_calls(cursor_log(run.setup))
    assert call["argv"] == [*STREAM_JSON, "--mode", "ask", "--model", "sonnet-4"]


async def test_a_prompt_over_200_kb_arrives_on_stdin_not_in_argv(run_of: RunOf) -> None:
    run = await run_of(CURSOR, "big_prompt")

    assert run.result.success, run.result.error
    (call,) = logged_calls(cursor_log(run.setup))
    assert call["prompt_bytes"] == len(run.invocation.prompt.encode())
    assert all(len(arg) < 100 for arg in call["argv"])


async def test_a_crash_without_a_result_reports_the_exit_code_and_stderr(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "fake-cursor.log"
    adapter = CursorAdapter(
        repo_root=repo,
        config=AutodevConfig(),
        executable=str(install_fake_cursor(tmp_path / "bin")),
        env=fake_cursor_env(log, {"crash": "Error: scripted crash 9c1e: model unavailable"}),
    )
    workdir = tmp_path / "work"
    workdir.mkdir()

    result = await adapter.execute(invocation(CURSOR, workdir, "Do it.", WRITE_TOOLS))

    assert not result.success
    assert result.error is not None
    assert result.error.kind == "nonzero_exit"
    assert "exited 3" in result.error.message
    assert "scripted crash 9c1e" in result.error.message
    assert result.exit_code == 3
    assert len(logged_calls(log)) == 1


def _call_silent_for_a_second_at_most(tmp_path: Path) -> AgentInvocation:
    workdir = tmp_path / "work"
    workdir.mkdir()
    return invocation(CURSOR, workdir, "Do it.", WRITE_TOOLS).model_copy(update={"stall_timeout_s": 1.0})


async def test_a_cli_silent_from_the_start_is_killed_as_cli_start_failed(repo: Path, tmp_path: Path) -> None:
    never_up = tmp_path / "bin" / "cursor-agent"
    never_up.parent.mkdir(parents=True)
    # Stuck before its first output (a login prompt, an update check, a lock), it would outlive the call.
    never_up.write_text("#!/bin/sh\nsleep 60\n")
    never_up.chmod(0o755)
    adapter = CursorAdapter(repo_root=repo, config=AutodevConfig(), executable=str(never_up))
    call = _call_silent_for_a_second_at_most(tmp_path)

    result = await adapter.execute(call)

    assert result.error is not None
    assert result.error.kind == "cli_start_failed"
    assert "printed nothing for 1s after it started" in result.error.message
    assert "agent_stall_timeout_s" in result.error.message
    assert result.duration_s < call.timeout_s


async def test_a_cli_that_falls_silent_mid_call_is_a_timeout_long_before_the_deadline(
    repo: Path, tmp_path: Path
) -> None:
    log = tmp_path / "fake-cursor.log"
    adapter = CursorAdapter(
        repo_root=repo,
        config=AutodevConfig(),
        executable=str(install_fake_cursor(tmp_path / "bin")),
        env=fake_cursor_env(log, {"hang": True}),  # its init events, then nothing
    )
    call = _call_silent_for_a_second_at_most(tmp_path)

    result = await adapter.execute(call)

    assert result.error is not None
    assert result.error.kind == "timeout"
    assert "printed nothing for 1s after its first output" in result.error.message
    assert result.duration_s < call.timeout_s
