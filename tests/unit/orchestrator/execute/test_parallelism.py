"""How many tasks run at once: configured, probed from the machine, and the limits on both."""

from __future__ import annotations

from pathlib import Path

from autodev.adapters.inline import InlineAdapter
from autodev.adapters.scripted import ScriptedAdapter
from autodev.config import load_config
from autodev.orchestrator.execute.parallelism import (
    MEMORY_PER_AGENT_BYTES,
    available_memory_bytes,
    resolve_parallelism,
)

GIB = 1024**3


def _config(tmp_path: Path, **overrides: object):  # type: ignore[no-untyped-def]
    return load_config(tmp_path, env={}, overrides={"platform": "scripted", **overrides})


def _scripted() -> ScriptedAdapter:
    return ScriptedAdapter(script={"entries": []})


def test_the_configured_value_wins_over_the_probe(tmp_path: Path) -> None:
    config = _config(tmp_path, **{"tournaments.execute_max_parallel_tasks": 5})
    result = resolve_parallelism(config, _scripted(), cpus=1, memory_bytes=GIB)
    assert (result.workers, result.isolated) == (5, True)
    assert "execute_max_parallel_tasks" in result.reason


def test_the_probe_takes_the_tightest_of_cpus_memory_and_the_agent_limit(tmp_path: Path) -> None:
    config = _config(tmp_path, max_concurrent_agents=6)
    assert resolve_parallelism(config, _scripted(), cpus=4, memory_bytes=64 * GIB).workers == 4
    by_memory = resolve_parallelism(config, _scripted(), cpus=32, memory_bytes=3 * MEMORY_PER_AGENT_BYTES)
    assert (by_memory.workers, "memory" in by_memory.reason) == (3, True)
    by_agents = resolve_parallelism(config, _scripted(), cpus=32, memory_bytes=64 * GIB)
    assert (by_agents.workers, "max_concurrent_agents" in by_agents.reason) == (6, True)
    # A starved machine still runs one task.
    assert resolve_parallelism(config, _scripted(), cpus=1, memory_bytes=1).workers == 1


def test_inline_runs_one_task_at_a_time_even_when_configured_higher(tmp_path: Path) -> None:
    config = _config(tmp_path, **{"tournaments.execute_max_parallel_tasks": 4})
    result = resolve_parallelism(config, InlineAdapter(repo_root=tmp_path), cpus=8, memory_bytes=64 * GIB)
    assert (result.workers, result.isolated) == (1, False)
    assert "inline" in result.reason


def test_without_auto_commit_tasks_run_one_at_a_time_in_the_main_tree(tmp_path: Path) -> None:
    config = _config(tmp_path, auto_commit=False, **{"tournaments.execute_max_parallel_tasks": 4})
    result = resolve_parallelism(config, _scripted(), cpus=8, memory_bytes=64 * GIB)
    assert (result.workers, result.isolated) == (1, False)
    assert "auto_commit" in result.reason


def test_available_memory_is_read_from_meminfo_and_missing_is_none(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:  16000000 kB\nMemAvailable:    2048 kB\n")
    assert available_memory_bytes(meminfo) == 2048 * 1024
    assert available_memory_bytes(tmp_path / "absent") is None
    meminfo.write_text("MemTotal: 1 kB\n")
    assert available_memory_bytes(meminfo) is None
