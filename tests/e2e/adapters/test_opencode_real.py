"""What only the OpenCode adapter does, driving the real ``opencode`` CLI (pinned) against the scripted
model server. The contract it shares with the other CLIs is ``test_cli_contract.py`` (``[opencode]``); there
the roles that may not write run under a user config that allows everything (``support.cli_contract``).
"""

from __future__ import annotations

import pytest
from support.cli_contract import OPENCODE, RunOf

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]


async def test_an_api_error_names_the_http_status(run_of: RunOf) -> None:
    # OpenCode does not retry a 400: it prints an ``error`` event and exits 1 within seconds.
    result = (await run_of(OPENCODE, "api_error")).result

    assert result.error is not None
    assert "scripted bad request 7f3a" in result.error.message
    assert "HTTP 400" in result.error.message


async def test_without_a_price_table_its_own_cost_is_reported(run_of: RunOf) -> None:
    # The no-capabilities run has no price table: OpenCode's own cost (0 for a model it cannot price).
    result = (await run_of(OPENCODE, "no_tools")).result

    assert result.success, result.error
    assert result.cost_usd == 0.0
