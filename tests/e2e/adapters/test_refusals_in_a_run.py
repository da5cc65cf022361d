"""Each provider refusal through each CLI, inside a run: the real CLIs against the local model server
answering the developer's call with that provider's own error (Cursor through its fake), driven by the
orchestrator over a saved one-task plan.

Whatever the CLI, the refusal must cost the task no attempt: a rate limit or an outage is asked again
after a back-off and then pauses the run, a usage limit or a refused login pauses it at once (exit 3, one
line naming the refusal), and the ledger says so. A prompt too long for the model is asked once more, cut,
then fails as that step's failure. The health check's probe is answered (only the developer's prompt is
refused), as it would be for a provider that refuses one request and not another.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.cli_contract import CLI_SPECS, REFUSAL_CASES, CliSpec, Setup
from support.model_server import ModelServer, Refusal, Scenario
from support.parallel import Spec, entries_for, git_repo, ledger_ops, plan_of, save_plan, script_of

from autodev.adapters.scripted import ScriptedAdapter
from autodev.config.loader import load_config
from autodev.orchestrator import Orchestrator
from autodev.orchestrator.provider_guard import ProviderRefusedError
from autodev.state.plan_manager import PlanManager

pytestmark = [pytest.mark.slow, pytest.mark.asyncio]

KINDS: dict[Refusal, str] = {
    "rate_limited": "rate_limited",
    "unavailable": "provider_unavailable",
    "auth_failed": "auth_failed",
    "usage_limit": "usage_limit",
    "context_overflow": "context_overflow",
}
DEVELOPER = "AGENT: developer"


def _ops(root: Path, name: str) -> list[dict[str, Any]]:
    return [entry["payload"] for entry in ledger_ops(root) if entry["op"] == name]


async def _execute(spec: CliSpec, case: Refusal, clis: dict[str, Path], tmp_path: Path) -> Path:
    """A one-task plan executed through ``spec``'s CLI whose developer call is refused with ``case``;
    returns the repository. A pause is left to the caller to catch."""
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1")]))
    home = tmp_path / "home"
    home.mkdir()
    scenario = Scenario(marker=DEVELOPER, refusal=case)
    with ModelServer([scenario]) as server:
        adapter = spec.build(Setup(clis, server, home, root, root, case, scenario))
        config = load_config(
            root,
            env={},
            overrides={
                "platform": spec.platform,
                "roles.developer.model": spec.model,
                "qa_retry_limit": 1,
                "tournaments.execute_max_parallel_tasks": 1,
                "provider.retry_attempts": 1,
                "provider.retry_base_delay_s": 0.1,
                "provider.retry_max_delay_s": 0.5,
                **{
                    f"qa_gates.{gate}.enabled": False
                    for gate in ("syntax", "lint", "build", "test", "secretscan")
                },
            },
        )
        # A CLI that cannot start a read-only sandbox (OpenCode) leaves the reviewer to another platform,
        # as its users set it up; the developer's refusal comes first, so no reviewer is asked here.
        readers = (
            None
            if adapter.sandbox.can_start("read_only")
            else ScriptedAdapter(script=script_of(entries_for()))
        )
        await Orchestrator(
            root, config=config, adapter=adapter, read_only_adapter=readers, write_scope="**"
        ).execute()
    return root


@pytest.mark.parametrize("case", [case for case in REFUSAL_CASES if case != "context_overflow"])
@pytest.mark.parametrize("spec", CLI_SPECS, ids=[spec.platform for spec in CLI_SPECS])
async def test_a_refusal_pauses_the_run_and_costs_no_attempt(
    spec: CliSpec, case: Refusal, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    clis: dict[str, Path] = request.getfixturevalue("agent_clis") if spec.needs_npm else {}

    with pytest.raises(ProviderRefusedError) as stopped:
        await _execute(spec, case, clis, tmp_path)

    root = tmp_path / "repo"
    assert stopped.value.exit_code == 3
    assert stopped.value.kind == KINDS[case]
    assert "no attempt was counted" in stopped.value.message
    assert "\n" not in stopped.value.message
    (paused,) = _ops(root, "provider_paused")
    assert (paused["task_id"], paused["role"], paused["kind"]) == ("1.1", "developer", KINDS[case])
    # Asked again in place first where waiting can help.
    retried = [op["kind"] for op in _ops(root, "provider_backoff")]
    assert retried == ([KINDS[case]] if case in ("rate_limited", "unavailable") else [])
    task = PlanManager.open(root, readonly=True).get_task("1.1")
    assert task.retry_count == 0 and task.status not in ("blocked", "complete")


@pytest.mark.parametrize("spec", CLI_SPECS, ids=[spec.platform for spec in CLI_SPECS])
async def test_a_prompt_too_long_is_cut_once_then_fails_the_step_with_the_reason(
    spec: CliSpec, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    clis: dict[str, Path] = request.getfixturevalue("agent_clis") if spec.needs_npm else {}

    root = await _execute(spec, "context_overflow", clis, tmp_path)

    (cut,) = _ops(root, "prompt_cut")
    assert (cut["task_id"], cut["role"]) == ("1.1", "developer")
    assert not _ops(root, "provider_paused")
    task = PlanManager.open(root, readonly=True).get_task("1.1")
    # The one attempt qa_retry_limit allows went to the overflow, named as such.
    assert task.status == "blocked"
    assert (
        "context" in (task.blocked_reason or "").lower() or "too long" in (task.blocked_reason or "").lower()
    )
