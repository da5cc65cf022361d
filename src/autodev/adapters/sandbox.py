"""What each platform's harness can really start in: its sandbox modes and the transport that limits them.

A call needs ``read_only`` when its role may not write (the explorer, the reviewer, the judges...), else
``workspace_write``; a harness that can only start with full access still serves a writer, whose change is
checked against its write scope afterwards, but never a role that may not write. A route to a harness that
cannot start in the mode a call needs would fail at startup (or run with more than it was granted), so the
delegation policy excludes it before anything is reserved (``permission_ceiling``) and the run names the
harnesses that can.

The table is by platform name, so that the alternatives can be named without importing every adapter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from autodev.config.schema import AGENT_CLIS

__all__ = [
    "SANDBOXES",
    "UNDECLARED",
    "SandboxDescriptor",
    "SandboxMode",
    "compatible_platforms",
    "needed_mode",
]

SandboxMode = Literal["read_only", "workspace_write", "full"]


@dataclass(frozen=True, slots=True)
class SandboxDescriptor:
    """The sandbox modes a harness can start in, how it enforces them, and what its transport allows."""

    modes: frozenset[SandboxMode]
    enforcement: str
    transport: str

    def can_start(self, needed: SandboxMode) -> bool:
        """Whether a call that needs ``needed`` can run here: read-only exactly; a writer in its
        workspace, or with full access (its change is checked against its scope afterwards)."""
        if needed == "workspace_write":
            return bool(self.modes & {"workspace_write", "full"})
        return needed in self.modes


def needed_mode(can_write: bool) -> SandboxMode:
    """The mode a call of a role needs: read-only unless the role may write."""
    return "workspace_write" if can_write else "read_only"


_ALL: frozenset[SandboxMode] = frozenset({"read_only", "workspace_write", "full"})

SANDBOXES: Mapping[str, SandboxDescriptor] = MappingProxyType(
    {
        "claude_code": SandboxDescriptor(
            _ALL,
            "the tools offered: read-only roles get Read, Grep and Glob only; edits stay in the working "
            "directory under acceptEdits; Bash is full access",
            "stdio",
        ),
        "codex": SandboxDescriptor(
            _ALL, "the CLI's own OS sandbox (--sandbox read-only / workspace-write)", "stdio"
        ),
        "cursor": SandboxDescriptor(
            frozenset({"read_only", "full"}),
            "ask mode for read-only roles; with --force the agent has full write access",
            "stdio",
        ),
        "opencode": SandboxDescriptor(
            frozenset({"workspace_write", "full"}),
            "a per-call agent permission table (kept as a fail-closed guard); no read-only sandbox",
            "the CLI's localhost HTTP server, which cannot run inside an offline read-only sandbox",
        ),
        "gemini": SandboxDescriptor(
            _ALL,
            "a per-call policy file denying every tool the role may not use; default approval mode for "
            "read-only roles",
            "stdio",
        ),
        "inline": SandboxDescriptor(
            _ALL, "none of its own: whoever answers works as you; every change is checked afterwards", "files"
        ),
        "scripted": SandboxDescriptor(_ALL, "none needed: its answers are written in advance", "none"),
    }
)
"""Platform name -> the sandbox its harness can start in."""

UNDECLARED = SandboxDescriptor(frozenset(), "undeclared: no call is routed to it", "unknown")
"""An adapter whose platform declares nothing: it can start in no mode (fail closed)."""


def compatible_platforms(needed: SandboxMode, candidates: Sequence[str] | None = None) -> tuple[str, ...]:
    """The agent platforms (of ``candidates``, default every agent CLI) that can start a call needing
    ``needed``, in AutoDev's detection order."""
    names = candidates if candidates is not None else AGENT_CLIS
    return tuple(name for name in names if name in SANDBOXES and SANDBOXES[name].can_start(needed))
