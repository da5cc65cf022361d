"""The Codex adapter driving the real ``codex`` CLI (pinned) against the local scripted model server."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from support.agent_clis import isolated_env
from support.model_server import BIG_END, BIG_START, ModelServer, Scenario
from support.processes import survivors

from autodev.adapters.base import AgentInvocation, ToolName
from autodev.adapters.codex import CodexAdapter
from autodev.config.schema import AutodevConfig, ModelPrice
from autodev.state.paths import AutodevPaths

pytestmark = pytest.mark.slow

MODEL = "gpt-5.5"
PRICE = ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5)
WRITE_TOOLS: tuple[ToolName, ...] = ("read", "search", "write", "edit", "bash")


@pytest.fixture
def adapter(
    agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, workdir: Path, repo: Path
) -> CodexAdapter:
    codex_home = cli_home / ".codex"
    codex_home.mkdir()
    env = isolated_env(cli_home, workdir, CODEX_HOME=str(codex_home), MOCK_API_KEY="test-key")
    provider = f'{{name="mock",base_url="{model_server.url}/v1",wire_api="responses",env_key="MOCK_API_KEY"}}'
    return CodexAdapter(
        repo_root=repo,
        config=AutodevConfig(price_table={MODEL: PRICE}),
        executable=str(agent_clis["codex"]),
        env=env,
        extra_config=["model_provider=mock", f"model_providers.mock={provider}"],
    )


def _invocation(
    workdir: Path, prompt: str, tools: tuple[ToolName, ...], timeout_s: float = 30.0
) -> AgentInvocation:
    return AgentInvocation(
        role="developer",
        prompt=prompt,
        cwd=workdir,
        model=MODEL,
        tools=tools,
        timeout_s=timeout_s,
        task_id="1.1",
    )


@pytest.mark.asyncio
async def test_a_scripted_patch_lands_and_the_result_is_parsed(
    adapter: CodexAdapter, model_server: ModelServer, workdir: Path, repo: Path
) -> None:
    model_server.set_scenarios(
        [Scenario(text="Wrote hello.txt.", write_path="hello.txt", write_content="hello from codex\n")]
    )
    await adapter.init_workspace(workdir, [])

    result = await adapter.execute(_invocation(workdir, "Create hello.txt.", WRITE_TOOLS))

    assert result.success, result.error
    assert (workdir / "hello.txt").read_text() == "hello from codex\n"
    assert result.text == "Wrote hello.txt."
    assert result.tool_calls == 1
    assert (result.tokens_in, result.tokens_cached, result.tokens_out) == (240, 0, 60)
    assert result.cost_usd == pytest.approx((240 * 2.0 + 60 * 8.0) / 1_000_000)
    assert result.num_turns == 1
    assert result.session_id
    assert result.exit_code == 0
    assert result.transcript_path is not None
    assert result.transcript_path.parent == AutodevPaths(repo).transcripts_dir
    assert '"type":"turn.completed"' in result.transcript_path.read_text()


@pytest.mark.asyncio
async def test_a_read_only_role_cannot_write(
    adapter: CodexAdapter, model_server: ModelServer, workdir: Path
) -> None:
    model_server.set_scenarios(
        [Scenario(text="Tried to write.", write_path="hello.txt", write_content="should not land\n")]
    )

    result = await adapter.execute(_invocation(workdir, "Review the code.", ("read", "search")))

    assert result.success, result.error
    assert not (workdir / "hello.txt").exists()
    assert result.tool_calls == 0


@pytest.mark.asyncio
async def test_an_api_error_is_an_is_error_failure_with_the_servers_message(
    adapter: CodexAdapter, model_server: ModelServer, workdir: Path
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
    adapter: CodexAdapter, model_server: ModelServer, workdir: Path
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
    adapter: CodexAdapter, model_server: ModelServer, workdir: Path
) -> None:
    model_server.set_scenarios([Scenario(text="Read it.")])
    payload = "".join(f"line {i:05d} {hashlib.sha256(str(i).encode()).hexdigest()}\n" for i in range(3000))
    assert len(payload.encode()) > 200_000
    expected = f"BIG_BYTES={len(payload.encode())} BIG_SHA256={hashlib.sha256(payload.encode()).hexdigest()}"

    result = await adapter.execute(_invocation(workdir, f"Summarise:\n{BIG_START}{payload}{BIG_END}\n", ()))

    assert result.success, result.error
    assert result.text == f"Read it. {expected}"
