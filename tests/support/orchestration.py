"""Helpers for orchestrator tests: the demo project as a fixture, scripts built from it, quick runs."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio

from autodev.adapters.scripted import Script, ScriptedAdapter
from autodev.cli.demo import DemoSetup, prepare_demo
from autodev.config import AutodevConfig, load_config
from autodev.orchestrator import Orchestrator, ProgressEvent
from autodev.state.ledger import Ledger
from autodev.state.paths import AutodevPaths


def demo_project(tmp_path: Path) -> DemoSetup:
    return prepare_demo(tmp_path / "project")


def script_with(setup: DemoSetup, *replacements: dict[str, Any], drop_roles: tuple[str, ...] = ()) -> Script:
    """The demo script with entries replaced: an entry with the same (role, task_id, attempt) key goes."""
    entries = [entry.model_dump(exclude_defaults=True) for entry in setup.script.entries]
    keys = {(r["role"], r.get("task_id"), r.get("attempt")) for r in replacements}
    kept = [
        entry
        for entry in entries
        if (entry["role"], entry.get("task_id"), entry.get("attempt")) not in keys
        and entry["role"] not in drop_roles
    ]
    return Script.model_validate({"entries": [*kept, *replacements]})


def costing(script: Script, cost_usd: float) -> Script:
    """The same script with every response reporting ``cost_usd``."""
    entries = []
    for entry in script.entries:
        data = entry.model_dump(exclude_defaults=True)
        if "responses" in data:
            data["responses"] = [{**response, "cost_usd": cost_usd} for response in data["responses"]]
        else:
            data["cost_usd"] = cost_usd
        entries.append(data)
    return Script.model_validate({"entries": entries})


def config_for(root: Path, **overrides: Any) -> AutodevConfig:
    base: dict[str, Any] = {"platform": "scripted"}
    base.update(overrides)
    return load_config(root, env={}, overrides=base)


class Recorder:
    """A progress listener that keeps every event."""

    def __init__(self) -> None:
        self.events: list[ProgressEvent] = []

    def __call__(self, event: ProgressEvent) -> None:
        self.events.append(event)


def orchestrator(root: Path, script: Script, **config_overrides: Any) -> tuple[Orchestrator, ScriptedAdapter]:
    adapter = ScriptedAdapter(script=script)
    config = config_for(root, **config_overrides)
    orch = Orchestrator(root, config=config, adapter=adapter, listener=Recorder(), write_scope="**")
    return orch, adapter


def planned(tmp_path: Path, **config_overrides: Any) -> Orchestrator:
    """The demo project with its plan saved, and an orchestrator for its execute phase."""
    setup = demo_project(tmp_path)
    planner, _ = orchestrator(setup.repo_root, setup.script)
    anyio.run(planner.plan, setup.intent)
    orch, _ = orchestrator(setup.repo_root, setup.script, **config_overrides)
    return orch


def run(orch: Orchestrator, intent: str) -> Any:
    return anyio.run(lambda: orch.run(intent))


def git_log(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "log", "--format=%s"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    return out.splitlines()


class ClaudeLike(ScriptedAdapter):
    """Scripted answers behind Claude Code's name: its harness family and model tiers, without the CLI."""

    name = "claude_code"


def decided(root: Path) -> list[dict[str, Any]]:
    """The payloads of every ``delegation_decided`` entry in ``root``'s ledger, read-only."""
    ledger = Ledger(AutodevPaths(root).ledger, readonly=True)
    ledger.open(repair=False)
    try:
        return [entry.payload for entry in ledger.entries() if entry.op == "delegation_decided"]
    finally:
        ledger.close()
