"""The learning router inside a run: autonomous mode runs the recommended tier through the delegation
policy; off records no route. (Shadow mode, the default, is checked end to end by the CLI tests.)

Scripted agents behind Claude Code's name (so that tiers resolve to its model names), real git and QA tools.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from support.orchestration import ClaudeLike, Recorder, config_for, decided, demo_project

from autodev.orchestrator import Orchestrator
from autodev.orchestrator.run_router import RunRouter
from autodev.policy.router import History, OutcomeStats

pytestmark = pytest.mark.slow

FAST_GATES = {"qa_gates.secretscan.enabled": False, "qa_gates.build.enabled": False}


def test_autonomous_mode_runs_the_recommended_tier_through_the_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup = demo_project(tmp_path)
    adapter = ClaudeLike(script=setup.script)
    # This repository's developers have passed at the fast tier every time; the gate itself is tested apart.
    learned: History = {("developer:repository", "claude_code", "fast"): OutcomeStats(n=40, passed=40)}
    monkeypatch.setattr(RunRouter, "history", lambda self: learned)
    monkeypatch.setattr("autodev.orchestrator.core.check_autonomy", lambda config, root: None)
    config = config_for(setup.repo_root, **FAST_GATES, **{"router.mode": "autonomous"})
    orch = Orchestrator(
        setup.repo_root, config=config, adapter=adapter, listener=Recorder(), write_scope="**"
    )

    tasks = anyio.run(lambda: orch.run(setup.intent)).tasks

    assert [task.status for task in tasks] == ["complete", "complete"]
    developer = [
        (call.task_id, call.attempt, call.model) for call in adapter.calls if call.role == "developer"
    ]
    # First attempts on the recommended fast tier; 1.1's retry never goes below the task's strong tier.
    assert developer == [("1.1", 1, "haiku"), ("1.1", 2, "opus"), ("1.2", 1, "haiku")]
    assert {call.model for call in adapter.calls if call.role == "reviewer"} == {"opus"}
    entries = decided(setup.repo_root)
    assert all(entry["route"]["mode"] == "autonomous" for entry in entries)
    first = next(entry for entry in entries if entry["inputs"]["role"] == "developer")
    route = first["route"]
    given = route["candidates"][route["executed"]]
    assert (given["tier"], route["candidates"][route["baseline"]]["tier"]) == ("fast", "strong")
    # The policy decided the call at the tier it runs at, and the worker's grant holds that tier's units.
    assert first["inputs"]["tier"] == "fast" and first["decision"]["route"] == "spawn"
    assert (first["grant"]["tier"], first["grant"]["units"]) == ("fast", 1)


def test_off_records_no_route(tmp_path: Path) -> None:
    setup = demo_project(tmp_path)
    adapter = ClaudeLike(script=setup.script)
    config = config_for(setup.repo_root, **FAST_GATES, **{"router.mode": "off"})
    orch = Orchestrator(
        setup.repo_root, config=config, adapter=adapter, listener=Recorder(), write_scope="**"
    )

    anyio.run(lambda: orch.plan(setup.intent))

    entries = decided(setup.repo_root)
    assert [entry["inputs"]["role"] for entry in entries] == ["explorer", "domain_expert", "architect"]
    assert not any("route" in entry for entry in entries)
