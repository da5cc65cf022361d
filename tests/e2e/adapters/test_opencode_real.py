"""The OpenCode adapter driving the real ``opencode`` CLI (pinned) against the scripted model server."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from support.agent_clis import isolated_env
from support.model_server import BIG_END, BIG_START, ModelServer, Scenario
from support.processes import survivors

from autodev.adapters.base import AgentInvocation, ToolName
from autodev.adapters.opencode import OpenCodeAdapter
from autodev.config.schema import AutodevConfig, ModelPrice
from autodev.state.paths import AutodevPaths

pytestmark = pytest.mark.slow

WRITE_TOOLS: tuple[ToolName, ...] = ("read", "search", "write", "edit", "bash")
MODEL = "mock/mock-model"
PRICES = {"mock-model": ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0)}


def _user_config(server: ModelServer, *, permissive: bool) -> dict[str, object]:
    """The user's own OpenCode config: the mock provider, and (``permissive``) everything allowed."""
    config: dict[str, object] = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "mock": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock",
                "options": {"baseURL": f"{server.url}/v1", "apiKey": "test-key"},
                "models": {"mock-model": {"name": "Mock", "tool_call": True}},
            }
        },
        "autoupdate": False,
        "share": "disabled",
    }
    if permissive:
        # A user who allows everything, globally and for the default agent: AutoDev's restrictions must hold.
        config["permission"] = {"*": "allow", "edit": "allow", "bash": "allow"}
        config["agent"] = {"build": {"permission": {"edit": "allow", "bash": "allow"}}}
    return config


def _adapter(
    clis: dict[str, Path],
    server: ModelServer,
    home: Path,
    workdir: Path,
    repo: Path,
    *,
    permissive: bool = False,
    config: AutodevConfig | None = None,
) -> OpenCodeAdapter:
    config_file = home / "opencode.json"
    config_file.write_text(json.dumps(_user_config(server, permissive=permissive)))
    env = isolated_env(
        home,
        workdir,
        OPENCODE_CONFIG=str(config_file),
        OPENCODE_DISABLE_MODELS_FETCH="1",
        OPENCODE_DISABLE_AUTOUPDATE="1",
        OPENCODE_DISABLE_SHARE="1",
        OPENCODE_DISABLE_LSP_DOWNLOAD="1",
        OPENCODE_DISABLE_DEFAULT_PLUGINS="1",
    )
    return OpenCodeAdapter(
        repo_root=repo, config=config or AutodevConfig(), executable=str(clis["opencode"]), env=env
    )


@pytest.fixture
def adapter(
    agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, workdir: Path, repo: Path
) -> OpenCodeAdapter:
    return _adapter(agent_clis, model_server, cli_home, workdir, repo)


def _invocation(
    workdir: Path, prompt: str, tools: tuple[ToolName, ...], timeout_s: float = 60.0
) -> AgentInvocation:
    return AgentInvocation(
        role="developer",
        prompt=prompt,
        cwd=workdir,
        model=MODEL,
        tools=tools,
        max_turns=6,
        timeout_s=timeout_s,
        task_id="1.1",
    )


def _chat_requests(server: ModelServer) -> list[tuple[str, ...]]:
    return [request.tool_names for request in server.requests if request.api == "chat"]


@pytest.mark.asyncio
async def test_a_scripted_write_lands_and_the_result_is_parsed(
    agent_clis: dict[str, Path],
    model_server: ModelServer,
    cli_home: Path,
    workdir: Path,
    repo: Path,
) -> None:
    adapter = _adapter(
        agent_clis, model_server, cli_home, workdir, repo, config=AutodevConfig(price_table=PRICES)
    )
    # A relative path: OpenCode resolves it against PWD, which the adapter pins to the call's cwd.
    model_server.set_scenarios(
        [Scenario(text="Wrote hello.txt.", write_path="hello.txt", write_content="hello from opencode\n")]
    )
    await adapter.init_workspace(workdir, [])

    result = await adapter.execute(_invocation(workdir, "Create hello.txt.", WRITE_TOOLS))

    assert result.success, result.error
    assert (workdir / "hello.txt").read_text() == "hello from opencode\n"
    assert result.text == "Wrote hello.txt."
    assert result.tool_calls == 1
    assert result.num_turns == 2
    assert (result.tokens_in, result.tokens_out, result.tokens_cached) == (240, 60, 0)
    # OpenCode reports cost 0 for a model it has no price for; the price table fills it in.
    assert result.cost_usd == pytest.approx((240 * 1.0 + 60 * 2.0) / 1_000_000)
    assert result.session_id is not None and result.session_id.startswith("ses_")
    assert result.exit_code == 0
    assert result.transcript_path is not None
    assert result.transcript_path.parent == AutodevPaths(repo).transcripts_dir
    assert '"type":"step_finish"' in result.transcript_path.read_text()
    offered = _chat_requests(model_server)
    assert any({"write", "edit", "bash", "read"} <= set(names) for names in offered)


@pytest.mark.asyncio
async def test_an_api_error_is_an_is_error_failure_naming_the_servers_message(
    adapter: OpenCodeAdapter, model_server: ModelServer, workdir: Path
) -> None:
    # OpenCode does not retry a 400: it prints an ``error`` event and exits 1 within seconds.
    model_server.set_scenarios([Scenario(error_status=400, error_message="scripted bad request 7f3a")])

    result = await adapter.execute(_invocation(workdir, "Do something.", WRITE_TOOLS))

    assert not result.success
    assert result.error is not None
    assert result.error.kind == "is_error"
    assert "scripted bad request 7f3a" in result.error.message
    assert "HTTP 400" in result.error.message
    assert result.exit_code == 1
    assert result.duration_s < 30.0


@pytest.mark.asyncio
async def test_a_model_that_never_answers_times_out_and_leaves_no_process(
    adapter: OpenCodeAdapter, model_server: ModelServer, workdir: Path
) -> None:
    model_server.set_scenarios([Scenario(hang=True)])

    result = await adapter.execute(_invocation(workdir, "Do something.", WRITE_TOOLS, timeout_s=6.0))

    assert result.error is not None
    assert result.error.kind == "timeout"
    assert result.exit_code is None
    assert 6.0 <= result.duration_s < 16.0
    assert adapter.last_pid is not None
    assert await survivors(adapter.last_pid) == []


@pytest.mark.asyncio
async def test_a_prompt_over_200_kb_arrives_intact(
    adapter: OpenCodeAdapter, model_server: ModelServer, workdir: Path
) -> None:
    model_server.set_scenarios([Scenario(text="Read it.")])
    payload = "".join(f"line {i:05d} {hashlib.sha256(str(i).encode()).hexdigest()} ü\n" for i in range(3000))
    assert len(payload.encode()) > 200_000
    expected = f"BIG_BYTES={len(payload.encode())} BIG_SHA256={hashlib.sha256(payload.encode()).hexdigest()}"

    result = await adapter.execute(_invocation(workdir, f"Summarise:\n{BIG_START}{payload}{BIG_END}\n", ()))

    assert result.success, result.error
    assert result.text == f"Read it. {expected}"


@pytest.mark.asyncio
async def test_a_read_only_role_cannot_write_even_when_the_user_allows_everything(
    agent_clis: dict[str, Path],
    model_server: ModelServer,
    cli_home: Path,
    workdir: Path,
    repo: Path,
) -> None:
    adapter = _adapter(agent_clis, model_server, cli_home, workdir, repo, permissive=True)
    model_server.set_scenarios(
        [Scenario(text="Looked around.", write_path="hello.txt", write_content="should not exist\n")]
    )

    result = await adapter.execute(_invocation(workdir, "Review the code.", ("read", "search")))

    assert result.success, result.error
    assert result.text == "Looked around."
    assert not (workdir / "hello.txt").exists()
    offered = [set(names) for names in _chat_requests(model_server) if names]
    assert offered
    for names in offered:
        assert {"read", "glob", "grep"} <= names
        assert not names & {"write", "edit", "bash", "task", "webfetch"}


@pytest.mark.asyncio
async def test_no_capabilities_offers_no_tools_at_all(
    agent_clis: dict[str, Path],
    model_server: ModelServer,
    cli_home: Path,
    workdir: Path,
    repo: Path,
) -> None:
    adapter = _adapter(agent_clis, model_server, cli_home, workdir, repo, permissive=True)
    model_server.set_scenarios([Scenario(text="Judged.", write_path="hello.txt", write_content="no\n")])

    result = await adapter.execute(_invocation(workdir, "Pick the better plan.", ()))

    assert result.success, result.error
    assert result.text == "Judged."
    assert result.tool_calls == 0
    assert result.cost_usd == 0.0
    assert not (workdir / "hello.txt").exists()
    requests = _chat_requests(model_server)
    assert requests
    assert requests == [()] * len(requests)
