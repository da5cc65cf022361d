"""What only the OpenCode adapter does, driving the real ``opencode`` CLI (pinned) against the scripted
model server. The contract it shares with the other CLIs is ``test_cli_contract.py`` (``[opencode]``); there
the roles that may not write run under a user config that allows everything (``support.cli_contract``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli_contract import (
    OPENCODE,
    OPENCODE_MODEL,
    OPENCODE_PRICES,
    RunOf,
    invocation,
    opencode_env,
    opencode_user_config,
)
from support.model_server import ModelServer, Scenario

from autodev.adapters.opencode import OpenCodeAdapter
from autodev.config.schema import AutodevConfig

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]


async def test_an_api_error_names_the_http_status(run_of: RunOf) -> None:
    # OpenCode does not retry a 400: it prints an ``error`` event and exits 1 within seconds.
    result = (await run_of(OPENCODE, "api_error")).result

    assert result.error is not None
    assert "scripted bad request 7f3a" in result.error.message
    assert "HTTP 400" in result.error.message


async def test_without_a_price_its_zero_cost_for_spent_tokens_is_unknown(run_of: RunOf) -> None:
    # The no-capabilities run has no price table, and OpenCode reports 0 for a model it cannot price.
    result = (await run_of(OPENCODE, "no_tools")).result

    assert result.success, result.error
    assert result.tokens_in
    assert result.cost_usd is None


async def test_on_opencodes_default_model_the_session_names_the_model_and_it_is_priced(
    agent_clis: dict[str, Path], tmp_path: Path
) -> None:
    home, workdir = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    workdir.mkdir()
    with ModelServer([Scenario(text="Read it.")]) as server:
        user_config = {**opencode_user_config(server, permissive=False), "model": OPENCODE_MODEL}
        config_file = home / "opencode.json"
        config_file.write_text(json.dumps(user_config))
        adapter = OpenCodeAdapter(
            repo_root=tmp_path,
            config=AutodevConfig(price_table=OPENCODE_PRICES),
            executable=str(agent_clis["opencode"]),
            env=opencode_env(home, workdir, config_file),
        )
        call = invocation(OPENCODE, workdir, "Summarise the code.", ()).model_copy(update={"model": None})

        result = await adapter.execute(call)

    assert result.success, result.error
    assert result.model == OPENCODE_MODEL
    assert result.tokens_in and result.tokens_out
    assert result.cost_estimated
    assert result.cost_usd == pytest.approx((result.tokens_in * 1.0 + result.tokens_out * 2.0) / 1_000_000)
