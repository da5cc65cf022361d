"""The agent platforms' health checks, paid probe included: what ``autodev doctor`` shows and what a run
checks before its first agent call."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio

from autodev.adapters.base import PlatformAdapter
from autodev.adapters.detect import ToolProbe
from autodev.adapters.registry import create_adapter
from autodev.agents.registry import get_spec
from autodev.agents.spec import AgentSpec
from autodev.config import AutodevConfig
from autodev.config.schema import AGENT_CLIS, AgentCLI, Platform

__all__ = ["AgentHealth", "check_adapter", "check_installed", "probe_model"]


@dataclass(frozen=True, slots=True)
class AgentHealth:
    """One platform's health check: whether it can be used, and its line (version, the probe's answer)."""

    platform: str
    healthy: bool
    line: str


def probe_model(registry: Mapping[str, AgentSpec], config: AutodevConfig, platform: Platform) -> str | None:
    """The model the probe asks: the developer's, the role that makes most of a run's calls."""
    return get_spec(registry, "developer").effective(config, platform).model


async def check_adapter(adapter: PlatformAdapter, model: str | None, *, probe: bool = True) -> AgentHealth:
    healthy, line = await adapter.healthcheck(probe=probe, model=model)
    return AgentHealth(adapter.name, healthy, line)


async def check_installed(
    repo_root: Path,
    config: AutodevConfig,
    registry: Mapping[str, AgentSpec],
    probes: list[ToolProbe],
    *,
    probe: bool,
) -> list[AgentHealth]:
    """The health check of every platform whose CLI was found, all at once (each paid probe is one short
    call; they wait on the network, not on each other)."""
    platforms = {name: name for name in AGENT_CLIS}
    found = [(item, platforms[item.name]) for item in probes if item.found and item.name in platforms]
    results: list[AgentHealth | None] = [None] * len(found)

    async def check(index: int, item: ToolProbe, platform: AgentCLI) -> None:
        adapter = create_adapter(platform, repo_root=repo_root, config=config, executable=item.path)
        results[index] = await check_adapter(adapter, probe_model(registry, config, platform), probe=probe)

    async with anyio.create_task_group() as group:
        for index, (item, platform) in enumerate(found):
            group.start_soon(check, index, item, platform)
    return [result for result in results if result is not None]
