"""How many tasks the execute phase runs at once.

``tournaments.execute_max_parallel_tasks`` wins when set. Unset, a resource probe decides: the CPUs this
process may use, the memory available (an agent CLI with its tool processes needs about
``MEMORY_PER_AGENT_BYTES``), and ``max_concurrent_agents``. Either way the platform's own limit applies
(the inline adapter answers one delegation at a time), and isolation needs ``auto_commit``: parallel tasks
work in their own worktrees and reach the main tree as commits, so without commits there is nothing to
merge and the phase runs one task at a time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from autodev.adapters.base import PlatformAdapter
from autodev.config import AutodevConfig

__all__ = [
    "MEMORY_PER_AGENT_BYTES",
    "Parallelism",
    "available_memory_bytes",
    "isolated_writes",
    "resolve_parallelism",
]

MEMORY_PER_AGENT_BYTES = 512 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Parallelism:
    """The resolved worker count and, for the log and the live display, why it is that number."""

    workers: int
    reason: str
    # Every task in a worktree of its own, a lone one included (``write_mode = isolated``).
    always_isolated: bool = False

    @property
    def isolated(self) -> bool:
        """Whether tasks work in their own worktrees: when more than one may run at once, or always."""
        return self.workers > 1 or self.always_isolated


def available_memory_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """``MemAvailable`` from the kernel, or None where it cannot be read (not Linux)."""
    try:
        for line in meminfo.read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def resolve_parallelism(
    config: AutodevConfig,
    adapter: PlatformAdapter,
    *others: PlatformAdapter,
    cpus: int | None = None,
    memory_bytes: int | None = None,
) -> Parallelism:
    """The execute phase's worker count, within what ``adapter`` and the run's ``others`` platforms (the
    read-only roles') serve at a time; ``cpus`` and ``memory_bytes`` override the probe (tests)."""
    configured = config.tournaments.execute_max_parallel_tasks
    if configured is not None:
        workers, reason = configured, f"execute_max_parallel_tasks = {configured}"
    else:
        cpus = cpus if cpus is not None else _usable_cpus()
        memory = memory_bytes if memory_bytes is not None else available_memory_bytes()
        limits = {"CPUs": cpus, "max_concurrent_agents": config.max_concurrent_agents}
        if memory is not None:
            limits["available memory"] = max(1, memory // MEMORY_PER_AGENT_BYTES)
        limit_name = min(limits, key=limits.__getitem__)
        workers = max(1, limits[limit_name])
        reason = f"probed: {workers} (limited by {limit_name})"
    for harness in (adapter, *others):
        if harness.max_concurrent_calls is not None and workers > harness.max_concurrent_calls:
            workers = harness.max_concurrent_calls
            reason = f"{workers} ({harness.name} serves {workers} call(s) at a time)"
    if workers > 1 and not config.auto_commit:
        workers, reason = 1, "1 (parallel tasks merge as commits; auto_commit is off)"
    return Parallelism(workers, reason, always_isolated=isolated_writes(config))


def isolated_writes(config: AutodevConfig) -> bool:
    """Whether even a lone task works in a worktree of its own (its change lands as a commit, so only
    with ``auto_commit``): ``write_mode = isolated``, or a Ray executor, whose nodes' changes land here
    into the task's worktree."""
    return (config.write_mode == "isolated" or config.executor == "ray") and config.auto_commit
