"""The Claude Code adapter driving the real ``claude`` CLI (pinned) against the scripted model server."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from support.agent_clis import isolated_env
from support.model_server import BIG_END, BIG_START, ModelServer, Scenario
from support.processes import survivors

from autodev.adapters.base import AgentInvocation, ToolName
from autodev.adapters.claude_code import ClaudeCodeAdapter
from autodev.config.schema import AutodevConfig
from autodev.state.paths import AutodevPaths

pytestmark = pytest.mark.slow

WRITE_TOOLS: tuple[ToolName, ...] = ("read", "search", "write", "edit", "bash")


@pytest.fixture
def adapter(
    agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, workdir: Path, repo: Path
) -> ClaudeCodeAdapter:
    env = isolated_env(
        cli_home,
        workdir,
        ANTHROPIC_BASE_URL=model_server.url,
        ANTHROPIC_API_KEY="test-key",
        DISABLE_TELEMETRY="1",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_AUTOUPDATER="1",
    )
    return ClaudeCodeAdapter(
        repo_root=repo, config=AutodevConfig(), executable=str(agent_clis["claude"]), env=env
    )


def _invocation(
    workdir: Path, prompt: str, tools: tuple[ToolName, ...], timeout_s: float = 30.0
) -> AgentInvocation:
    return AgentInvocation(
        role="developer",
        prompt=prompt,
        cwd=workdir,
        model="sonnet",
        tools=tools,
        max_turns=4,
        timeout_s=timeout_s,
        task_id="1.1",
    )


@pytest.mark.asyncio
async def test_a_scripted_write_lands_and_the_result_is_parsed(
    adapter: ClaudeCodeAdapter, model_server: ModelServer, workdir: Path, repo: Path
) -> None:
    target = workdir / "hello.txt"
    model_server.set_scenarios(
        [Scenario(text="Wrote hello.txt.", write_path=str(target), write_content="hello from claude\n")]
    )
    await adapter.init_workspace(workdir, [])

    result = await adapter.execute(_invocation(workdir, "Create hello.txt.", WRITE_TOOLS))

    assert result.success, result.error
    assert target.read_text() == "hello from claude\n"
    assert result.text == "Wrote hello.txt."
    assert result.tool_calls == 1
    assert (result.tokens_in, result.tokens_out) == (240, 60)
    assert result.cost_usd is not None and result.cost_usd > 0
    assert result.num_turns == 2
    assert result.session_id
    assert result.exit_code == 0
    assert result.transcript_path is not None
    assert result.transcript_path.parent == AutodevPaths(repo).transcripts_dir
    assert '"type":"result"' in result.transcript_path.read_text()


@pytest.mark.asyncio
async def test_an_api_error_is_an_is_error_failure_with_the_servers_message(
    adapter: ClaudeCodeAdapter, model_server: ModelServer, workdir: Path
) -> None:
    model_server.set_scenarios([Scenario(error_status=400, error_message="scripted bad request 7f3a")])

    result = await adapter.execute(_invocation(workdir, "Do something.", WRITE_TOOLS))

    assert not result.success
    assert result.error is not None
    assert result.error.kind == "is_error"
    assert "scripted bad request 7f3a" in result.error.message
    assert result.exit_code == 1


@pytest.mark.asyncio
async def test_a_model_that_never_answers_times_out_and_leaves_no_process(
    adapter: ClaudeCodeAdapter, model_server: ModelServer, workdir: Path
) -> None:
    model_server.set_scenarios([Scenario(hang=True)])

    result = await adapter.execute(_invocation(workdir, "Do something.", WRITE_TOOLS, timeout_s=5.0))

    assert result.error is not None
    assert result.error.kind == "timeout"
    assert 5.0 <= result.duration_s < 15.0
    assert adapter.last_pid is not None
    assert await survivors(adapter.last_pid) == []


@pytest.mark.asyncio
async def test_a_prompt_over_200_kb_arrives_intact(
    adapter: ClaudeCodeAdapter, model_server: ModelServer, workdir: Path
) -> None:
    model_server.set_scenarios([Scenario(text="Read it.")])
    payload = "".join(f"line {i:05d} {hashlib.sha256(str(i).encode()).hexdigest()}\n" for i in range(3000))
    assert len(payload.encode()) > 200_000
    expected = f"BIG_BYTES={len(payload.encode())} BIG_SHA256={hashlib.sha256(payload.encode()).hexdigest()}"

    result = await adapter.execute(_invocation(workdir, f"Summarise:\n{BIG_START}{payload}{BIG_END}\n", ()))

    assert result.success, result.error
    assert result.text == f"Read it. {expected}"


@pytest.mark.asyncio
async def test_a_read_only_role_is_not_offered_tools_that_write(
    adapter: ClaudeCodeAdapter, model_server: ModelServer, workdir: Path
) -> None:
    model_server.set_scenarios([Scenario(text="Looked around.")])

    result = await adapter.execute(_invocation(workdir, "Review the code.", ("read", "search")))

    assert result.success, result.error
    offered = [set(request.tool_names) for request in model_server.requests if request.api == "anthropic"]
    assert offered
    for names in offered:
        assert {"Read", "Grep", "Glob"} <= names
        assert not names & {"Write", "Edit", "NotebookEdit", "Bash"}


@pytest.mark.asyncio
async def test_no_capabilities_offers_no_tools_at_all(
    adapter: ClaudeCodeAdapter, model_server: ModelServer, workdir: Path
) -> None:
    model_server.set_scenarios([Scenario(text="Judged.")])

    result = await adapter.execute(_invocation(workdir, "Pick the better plan.", ()))

    assert result.success, result.error
    assert result.text == "Judged."
    assert result.tool_calls == 0
    requests = [request for request in model_server.requests if request.api == "anthropic"]
    assert requests
    assert [request.tool_names for request in requests] == [()] * len(requests)
