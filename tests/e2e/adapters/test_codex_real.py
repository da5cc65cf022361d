"""What only the Codex adapter does, driving the real ``codex`` CLI (pinned) against the scripted model
server. The contract it shares with the other CLIs is ``test_cli_contract.py`` (``[codex]``).
"""

from __future__ import annotations

import pytest
from support.cli_contract import CODEX, Case, RunOf

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]


@pytest.mark.parametrize("case", ["read_only", "no_tools"])
async def test_a_role_that_may_not_write_is_offered_apply_patch_and_the_sandbox_refuses_it(
    case: Case, run_of: RunOf
) -> None:
    # Codex offers its own tools whatever the capabilities: the scripted model's patch reaches Codex, whose
    # read-only sandbox refuses it, and the model is told so (its next request carries the tool's output).
    run = await run_of(CODEX, case)

    assert run.result.success, run.result.error
    assert all("apply_patch" in names for names in run.offered())
    assert [request.has_tool_result for request in run.requests] == [False, True]
    assert not run.written.exists()
    assert run.result.tool_calls == 0
