"""Which harness each role runs on: the run's platform, or a read-only one for the roles that may not write.

A harness that cannot start in the sandbox mode a role needs (``autodev.adapters.sandbox``: OpenCode has
no read-only sandbox) never gets that role. ``read_only_platform`` names the platform of the roles that
only read; unset, it is the run's own platform, unless that one cannot start read-only and the platform was
chosen automatically, in which case the first agent CLI on PATH that can is taken, as ``auto`` would. A
platform the user pinned is never replaced silently: the run stops before its first agent call with the
harness, the mode and the platforms that could start it.

While a completion contract needs it (``completion.cross_family``), the reviewer, who settles the contract's
semantic checks, runs on another agent CLI family than the developer's: ``completion.verify_platform``, else
the read-only platform when it is another family, else with ``platform = auto`` the first other agent CLI on
PATH that can start read-only (a verifier found that way that fails its health check is dropped, not
fatal). Without one the reviewer runs where it would have, and the contract says so (``verifier:family``).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from autodev.adapters.base import PlatformAdapter
from autodev.adapters.detect import CLI_EXECUTABLES, detect_platform
from autodev.adapters.registry import create_adapter
from autodev.adapters.sandbox import SandboxDescriptor, SandboxMode, compatible_platforms, needed_mode
from autodev.agents.spec import AgentSpec
from autodev.config import AutodevConfig
from autodev.config.schema import AGENT_CLIS, PLATFORMS, Platform
from autodev.errors import ConfigError

__all__ = [
    "VERIFYING_ROLES",
    "Verifier",
    "check_sandboxes",
    "harness_for",
    "pick_read_only_adapter",
    "pick_verifier",
    "platform_of",
]

VERIFYING_ROLES = frozenset({"reviewer"})
"""The roles whose verdict settles a completion contract's semantic checks."""


@dataclass(slots=True)
class Verifier:
    """The platform of the verifying roles when it is another family than the developer's (else None),
    why, and whether it was found on PATH rather than configured or given (such a one is dropped when it
    cannot be used)."""

    adapter: PlatformAdapter | None = None
    reason: str = ""
    found_on_path: bool = False

    def drop(self, why: str) -> None:
        """Go without the verifier: the reviewer runs where it would have."""
        self.adapter, self.reason, self.found_on_path = None, why, False


def harness_for(
    registry: Mapping[str, AgentSpec],
    adapter: PlatformAdapter,
    read_only: PlatformAdapter | None,
    role: str,
    verifier: PlatformAdapter | None = None,
) -> PlatformAdapter:
    """The platform ``role``'s calls go to: ``verifier`` for a verifying role when the run has one;
    ``read_only`` for a role that may not write, when the run has one; else the run's ``adapter``."""
    if verifier is not None and role in VERIFYING_ROLES:
        return verifier
    spec = registry.get(role)
    if read_only is not None and spec is not None and not spec.can_write:
        return read_only
    return adapter


def platform_of(adapter: PlatformAdapter, default: Platform) -> Platform:
    """``adapter``'s platform name (model tiers resolve per platform); ``default`` for a test's own."""
    name = adapter.name
    return name if name in PLATFORMS else default


def pick_read_only_adapter(
    config: AutodevConfig,
    repo_root: Path,
    adapter: PlatformAdapter,
    *,
    which: Callable[[str], str | None] = shutil.which,
) -> tuple[PlatformAdapter | None, str]:
    """The adapter of the roles that only read when it is not ``adapter`` (else None), and why."""
    wanted = config.read_only_platform
    if wanted is None:
        if adapter.sandbox.can_start("read_only") or config.platform != "auto":
            return None, ""
        wanted = "auto"
    choice = detect_platform(wanted, which=which, needing="read_only")
    if wanted == "auto" and choice.executable is None:
        return None, ""  # no agent CLI on PATH can: check_sandboxes names what would
    if choice.name == adapter.name:
        return None, ""
    options = {"executable": choice.executable} if choice.executable is not None else {}
    built = create_adapter(choice.name, repo_root=repo_root, config=config, **options)
    return built, f"read-only roles: {choice.name} ({choice.reason})"


def pick_verifier(
    config: AutodevConfig,
    repo_root: Path,
    adapter: PlatformAdapter,
    read_only: PlatformAdapter | None,
    *,
    which: Callable[[str], str | None] = shutil.which,
) -> Verifier:
    """The verifying roles' platform for ``completion.cross_family`` (module docstring)."""
    settings = config.completion
    implementer = adapter.name
    if settings.cross_family == "off":
        return Verifier()
    wanted = settings.verify_platform
    if wanted is not None:
        if wanted == implementer:
            return Verifier(reason=f"verifier: {wanted} (completion.verify_platform), the developer's family")
        if read_only is not None and read_only.name == wanted:
            return Verifier(read_only, f"verifier: {wanted} (completion.verify_platform)")
        able = compatible_platforms("read_only")
        if wanted not in able:
            others = ", ".join(name for name in able if name != implementer)
            raise ConfigError(
                f"{wanted} cannot start the reviewer in a read-only sandbox; set completion.verify_platform "
                f"to one of {others}",
                key="completion.verify_platform",
            )
        choice = detect_platform(wanted, which=which)
        options = {"executable": choice.executable} if choice.executable is not None else {}
        built = create_adapter(wanted, repo_root=repo_root, config=config, **options)
        return Verifier(built, f"verifier: {wanted} (completion.verify_platform)")
    if implementer not in AGENT_CLIS:
        return Verifier()  # scripted or inline answers: no harness family to keep apart
    if read_only is not None and read_only.name != implementer:
        return Verifier(read_only, f"verifier: {read_only.name} (the read-only platform)")
    if config.platform != "auto":
        return Verifier(reason=_no_verifier(implementer, "the platform is pinned"))
    choice = detect_platform("auto", which=which, needing="read_only", excluding=frozenset({implementer}))
    if choice.executable is None:
        return Verifier(reason=_no_verifier(implementer, "no other agent CLI on PATH"))
    built = create_adapter(choice.name, repo_root=repo_root, config=config, executable=choice.executable)
    return Verifier(built, f"verifier: {choice.name} ({choice.reason})", found_on_path=True)


def _no_verifier(implementer: str, why: str) -> str:
    return (
        f"verifier: none of another family than {implementer} ({why}; set completion.verify_platform): "
        f"the reviewer runs on {implementer}"
    )


def check_sandboxes(
    registry: Mapping[str, AgentSpec],
    adapter_for: Callable[[str], PlatformAdapter],
    *,
    which: Callable[[str], str | None] = shutil.which,
) -> None:
    """``ConfigError`` naming the harness, the sandbox mode and the compatible platforms when a role's
    harness cannot start in the mode the role needs; nothing has been started or recorded then."""
    refused: dict[tuple[str, SandboxMode], list[str]] = {}
    descriptors: dict[str, SandboxDescriptor] = {}
    for name, spec in registry.items():
        route = adapter_for(name)
        needed = needed_mode(spec.can_write)
        if not route.sandbox.can_start(needed):
            refused.setdefault((route.name, needed), []).append(name.replace("_", " "))
            descriptors[route.name] = route.sandbox
    if not refused:
        return
    (harness, needed), roles = next(iter(refused.items()))
    found = [
        f"{name} (on PATH)" if which(CLI_EXECUTABLES[name]) else name
        for name in compatible_platforms(needed)
        if name != harness
    ]
    offered = ", ".join(mode.replace("_", "-") for mode in sorted(descriptors[harness].modes)) or "none"
    fix = (
        f"set read_only_platform to one of {', '.join(found)} (in .autodev/config.toml, or "
        "AUTODEV_READ_ONLY_PLATFORM), or choose another --platform"
        if needed == "read_only"
        else f"choose another --platform: {', '.join(found)}"
    )
    raise ConfigError(
        f"{harness} cannot start the {', '.join(sorted(roles))} in a {needed.replace('_', '-')} sandbox "
        f"(its harness starts in: {offered}; {descriptors[harness].transport}); {fix}",
        key="read_only_platform" if needed == "read_only" else "platform",
    )
