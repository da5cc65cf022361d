"""The Gemini adapter driving the real ``gemini`` CLI (pinned) against the scripted model server."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from support.agent_clis import isolated_env
from support.model_server import BIG_END, BIG_START, ModelServer, Scenario
from support.processes import survivors

from autodev.adapters.base import AgentInvocation, ToolName
from autodev.adapters.gemini import GeminiAdapter
from autodev.config.schema import AutodevConfig, ModelPrice
from autodev.state.paths import AutodevPaths

pytestmark = pytest.mark.slow

WRITE_TOOLS: tuple[ToolName, ...] = ("read", "search", "write", "edit", "bash")
READ_TOOLS = {"read_file", "read_many_files", "list_directory", "grep_search", "glob"}
MODEL = "gemini-2.5-flash"
PRICES = {MODEL: ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0)}


def _adapter(
    clis: dict[str, Path],
    server: ModelServer,
    home: Path,
    workdir: Path,
    repo: Path,
    *,
    relaunch: bool = False,
    config: AutodevConfig | None = None,
) -> GeminiAdapter:
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(
        json.dumps(
            {"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}}}
        )
    )
    extra = {"GEMINI_API_KEY": "test-key", "GOOGLE_GEMINI_BASE_URL": server.url}
    if not relaunch:
        extra["GEMINI_CLI_NO_RELAUNCH"] = "1"
    env = isolated_env(home, workdir, **extra)
    return GeminiAdapter(
        repo_root=repo, config=config or AutodevConfig(), executable=str(clis["gemini"]), env=env
    )


@pytest.fixture
def adapter(
    agent_clis: dict[str, Path], model_server: ModelServer, cli_home: Path, workdir: Path, repo: Path
) -> GeminiAdapter:
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
        timeout_s=timeout_s,
        task_id="1.1",
    )


def _offered(server: ModelServer) -> list[tuple[str, ...]]:
    return [request.tool_names for request in server.requests if request.api == "gemini"]


def _user_prompts(server: ModelServer) -> list[str]:
    """The text parts of the last user turn of each request (what the CLI sent as the prompt)."""
    prompts: list[str] = []
    for request in server.requests:
        contents = request.body.get("contents") or []
        user_turns = [content for content in contents if content.get("role") == "user"]
        if user_turns:
            prompts += [part["text"] for part in user_turns[0].get("parts", []) if "text" in part]
    return prompts


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
    model_server.set_scenarios(
        [Scenario(text="Wrote hello.txt.", write_path="hello.txt", write_content="hello from gemini\n")]
    )
    await adapter.init_workspace(workdir, [])

    result = await adapter.execute(_invocation(workdir, "Create hello.txt.", WRITE_TOOLS))

    assert result.success, result.error
    assert (workdir / "hello.txt").read_text() == "hello from gemini\n"
    assert result.text == "Wrote hello.txt."
    assert result.tool_calls == 1
    assert (result.tokens_in, result.tokens_out, result.tokens_cached) == (240, 60, 0)
    assert result.cost_usd == pytest.approx((240 * 1.0 + 60 * 2.0) / 1_000_000)
    assert result.session_id
    assert result.exit_code == 0
    assert result.transcript_path is not None
    assert result.transcript_path.parent == AutodevPaths(repo).transcripts_dir
    assert '"type":"result"' in result.transcript_path.read_text()
    # The prompt came from stdin alone: nothing appended to it.
    assert "Create hello.txt." in _user_prompts(model_server)
    offered = _offered(model_server)
    assert offered
    for names in offered:
        assert {"write_file", "replace", "run_shell_command", "read_file"} <= set(names)
        assert not set(names) & {"web_fetch", "google_web_search", "invoke_agent", "activate_skill"}


@pytest.mark.asyncio
async def test_an_api_error_is_an_is_error_failure_naming_the_servers_message(
    adapter: GeminiAdapter, model_server: ModelServer, workdir: Path
) -> None:
    model_server.set_scenarios([Scenario(error_status=400, error_message="scripted bad request 7f3a")])

    result = await adapter.execute(_invocation(workdir, "Do something.", WRITE_TOOLS))

    assert not result.success
    assert result.error is not None
    assert result.error.kind == "is_error"
    assert "scripted bad request 7f3a" in result.error.message
    # Gemini exits with the HTTP status; the OS keeps its low 8 bits (400 -> 144).
    assert result.exit_code == 400 % 256
    assert result.duration_s < 30.0


@pytest.mark.asyncio
async def test_a_model_that_never_answers_times_out_and_leaves_no_process(
    agent_clis: dict[str, Path],
    model_server: ModelServer,
    cli_home: Path,
    workdir: Path,
    repo: Path,
) -> None:
    # Without GEMINI_CLI_NO_RELAUNCH the CLI re-executes itself as a child node process: two to kill.
    adapter = _adapter(agent_clis, model_server, cli_home, workdir, repo, relaunch=True)
    model_server.set_scenarios([Scenario(hang=True)])

    result = await adapter.execute(_invocation(workdir, "Do something.", WRITE_TOOLS, timeout_s=8.0))

    assert result.error is not None
    assert result.error.kind == "timeout"
    assert result.exit_code is None
    assert 8.0 <= result.duration_s < 18.0
    assert adapter.last_pid is not None
    assert await survivors(adapter.last_pid) == []


@pytest.mark.asyncio
async def test_a_prompt_over_200_kb_arrives_intact(
    adapter: GeminiAdapter, model_server: ModelServer, workdir: Path
) -> None:
    model_server.set_scenarios([Scenario(text="Read it.")])
    payload = "".join(f"line {i:05d} {hashlib.sha256(str(i).encode()).hexdigest()} ü\n" for i in range(3000))
    assert len(payload.encode()) > 200_000
    expected = f"BIG_BYTES={len(payload.encode())} BIG_SHA256={hashlib.sha256(payload.encode()).hexdigest()}"

    result = await adapter.execute(_invocation(workdir, f"Summarise:\n{BIG_START}{payload}{BIG_END}\n", ()))

    assert result.success, result.error
    assert result.text == f"Read it. {expected}"


@pytest.mark.asyncio
async def test_a_read_only_role_is_offered_only_reading_tools_and_cannot_write(
    adapter: GeminiAdapter, model_server: ModelServer, workdir: Path
) -> None:
    # The scripted model calls write_file anyway; Gemini must refuse a tool it never offered.
    model_server.set_scenarios(
        [Scenario(text="Looked around.", write_path="hello.txt", write_content="should not exist\n")]
    )

    result = await adapter.execute(_invocation(workdir, "Review the code.", ("read", "search")))

    assert result.success, result.error
    assert result.text == "Looked around."
    assert result.tool_calls == 1
    assert not (workdir / "hello.txt").exists()
    offered = _offered(model_server)
    assert offered
    for names in offered:
        assert {"read_file", "grep_search", "glob"} <= set(names) <= READ_TOOLS


@pytest.mark.asyncio
async def test_no_capabilities_offers_no_tools_at_all(
    adapter: GeminiAdapter, model_server: ModelServer, workdir: Path
) -> None:
    model_server.set_scenarios([Scenario(text="Judged.", write_path="hello.txt", write_content="no\n")])

    result = await adapter.execute(_invocation(workdir, "Pick the better plan.", ()))

    assert result.success, result.error
    assert result.text == "Judged."
    assert result.tool_calls == 0
    assert not (workdir / "hello.txt").exists()
    offered = _offered(model_server)
    assert offered
    assert offered == [()] * len(offered)


@pytest.mark.asyncio
async def test_the_users_own_policies_still_apply(
    adapter: GeminiAdapter, model_server: ModelServer, cli_home: Path, workdir: Path
) -> None:
    policies = cli_home / ".gemini" / "policies"
    policies.mkdir(parents=True)
    (policies / "mine.toml").write_text(
        '[[rule]]\ntoolName = "run_shell_command"\ndecision = "deny"\npriority = 10\n'
    )
    model_server.set_scenarios([Scenario(text="Done.")])

    result = await adapter.execute(_invocation(workdir, "Do it.", WRITE_TOOLS))

    assert result.success, result.error
    for names in _offered(model_server):
        assert "write_file" in names
        assert "run_shell_command" not in names
