"""What only the Gemini adapter does, driving the real ``gemini`` CLI (pinned) against the scripted model
server. The contract it shares with the other CLIs is ``test_cli_contract.py`` (``[gemini]``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli_contract import GEMINI, WRITE_TOOLS, RunOf, Setup, gemini_adapter, invocation
from support.model_server import ModelServer, RecordedRequest, Scenario

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]


def _user_prompts(requests: tuple[RecordedRequest, ...]) -> list[str]:
    """The text parts of the first user turn of each request (what the CLI sent as the prompt)."""
    prompts: list[str] = []
    for request in requests:
        contents = request.body.get("contents") or []
        user_turns = [content for content in contents if content.get("role") == "user"]
        if user_turns:
            prompts += [part["text"] for part in user_turns[0].get("parts", []) if "text" in part]
    return prompts


async def test_the_prompt_comes_from_stdin_alone(run_of: RunOf) -> None:
    # ``-p TEXT`` would be appended to the piped prompt after a blank line: nothing may be.
    run = await run_of(GEMINI, "write")

    assert run.result.success, run.result.error
    assert "Create hello.txt." in _user_prompts(run.requests)


async def test_the_users_own_policies_still_apply(
    agent_clis: dict[str, Path],
    model_server: ModelServer,
    cli_home: Path,
    workdir: Path,
    repo: Path,
) -> None:
    policies = cli_home / ".gemini" / "policies"
    policies.mkdir(parents=True)
    (policies / "mine.toml").write_text(
        '[[rule]]\ntoolName = "run_shell_command"\ndecision = "deny"\npriority = 10\n'
    )
    scenario = Scenario(text="Done.")
    model_server.set_scenarios([scenario])
    adapter = gemini_adapter(Setup(agent_clis, model_server, cli_home, workdir, repo, "write", scenario))

    result = await adapter.execute(invocation(GEMINI, workdir, "Do it.", WRITE_TOOLS))

    assert result.success, result.error
    offered = [request.tool_names for request in model_server.requests if request.api == "gemini"]
    assert offered
    for names in offered:
        assert "write_file" in names
        assert "run_shell_command" not in names
