"""A platform that cannot start a read-only sandbox (OpenCode) never gets the roles that may not write: they
run on the read-only platform, and without one the run stops before its first agent call.

Scripted agents (one answering as OpenCode would be asked: only the writers' calls), real git and the real
QA tools.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from support.orchestration import Recorder, config_for, decided, demo_project

from autodev.adapters.scripted import ScriptedAdapter
from autodev.agents.registry import build_registry
from autodev.errors import ConfigError
from autodev.orchestrator import Orchestrator
from autodev.state.paths import AutodevPaths

FAST_GATES = {"qa_gates.secretscan.enabled": False, "qa_gates.build.enabled": False}


class OpenCodeLike(ScriptedAdapter):
    """Scripted answers behind OpenCode's name, and so behind its sandbox descriptor (no read-only mode)."""

    name = "opencode"


def test_the_roles_that_only_read_run_on_the_read_only_platform_and_the_writers_on_the_runs(
    tmp_path: Path,
) -> None:
    setup = demo_project(tmp_path)
    writers = OpenCodeLike(script=setup.script)
    readers = ScriptedAdapter(script=setup.script)
    config = config_for(setup.repo_root, **FAST_GATES)
    orch = Orchestrator(
        setup.repo_root,
        config=config,
        adapter=writers,
        read_only_adapter=readers,
        listener=Recorder(),
        write_scope="**",
    )

    tasks = anyio.run(lambda: orch.run(setup.intent)).tasks

    assert [task.status for task in tasks] == ["complete"] * len(tasks)
    registry = build_registry()
    written = {call.role for call in writers.calls}
    read = {call.role for call in readers.calls}
    assert written and read
    assert all(registry[role].can_write for role in written), written
    assert not any(registry[role].can_write for role in read), read
    assert {"developer", "test_engineer"} <= written
    assert {"explorer", "architect", "reviewer"} <= read
    # Each decision records the harness it checked: the one the role's calls went to.
    harnesses = {d["inputs"]["role"]: d["inputs"]["harness"] for d in decided(setup.repo_root)}
    assert harnesses["developer"] == "opencode"
    assert harnesses["reviewer"] == "scripted"
    modes = {d["inputs"]["role"]: d["inputs"]["harness_modes"] for d in decided(setup.repo_root)}
    assert modes["developer"] == ["full", "workspace_write"]


def test_without_a_read_only_platform_the_run_stops_before_any_agent_call_and_records_nothing(
    tmp_path: Path,
) -> None:
    setup = demo_project(tmp_path)
    writers = OpenCodeLike(script=setup.script)
    orch = Orchestrator(
        setup.repo_root,
        config=config_for(setup.repo_root, **FAST_GATES),
        adapter=writers,
        listener=Recorder(),
        write_scope="**",
    )

    with pytest.raises(ConfigError) as raised:
        anyio.run(lambda: orch.run(setup.intent))

    message = str(raised.value)
    assert message.startswith("read_only_platform: opencode cannot start the ")
    assert "explorer" in message and "reviewer" in message and "read-only sandbox" in message
    assert "claude_code" in message and "codex" in message and "gemini" in message
    assert writers.calls == []
    ledger = AutodevPaths(setup.repo_root).ledger
    assert not ledger.exists() or decided(setup.repo_root) == []
