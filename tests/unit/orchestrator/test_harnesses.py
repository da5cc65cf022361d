"""Which platform the roles that only read run on, and the error when the run's cannot start them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from autodev.adapters.base import PlatformAdapter
from autodev.adapters.registry import create_adapter
from autodev.agents.registry import build_registry
from autodev.config import AutodevConfig
from autodev.errors import ConfigError
from autodev.orchestrator.harnesses import check_sandboxes, harness_for, pick_read_only_adapter


def _which(*found: str) -> Callable[[str], str | None]:
    return lambda name: f"/usr/bin/{name}" if name in found else None


def _opencode(tmp_path: Path, config: AutodevConfig) -> PlatformAdapter:
    return create_adapter("opencode", repo_root=tmp_path, config=config)


def test_a_platform_that_can_start_read_only_keeps_every_role(tmp_path: Path) -> None:
    config = AutodevConfig(platform="auto")
    claude = create_adapter("claude_code", repo_root=tmp_path, config=config)

    assert pick_read_only_adapter(config, tmp_path, claude, which=_which("claude", "gemini")) == (None, "")


def test_auto_opencode_hands_the_read_only_roles_to_the_first_cli_on_path_that_can(tmp_path: Path) -> None:
    config = AutodevConfig(platform="auto")

    chosen, reason = pick_read_only_adapter(
        config, tmp_path, _opencode(tmp_path, config), which=_which("opencode", "gemini")
    )

    assert chosen is not None and chosen.name == "gemini"
    assert reason == "read-only roles: gemini (auto: found gemini at /usr/bin/gemini)"
    registry = build_registry()
    assert harness_for(registry, _opencode(tmp_path, config), chosen, "reviewer") is chosen
    assert harness_for(registry, _opencode(tmp_path, config), chosen, "developer").name == "opencode"


def test_a_pinned_platform_is_never_replaced_silently(tmp_path: Path) -> None:
    config = AutodevConfig(platform="opencode")

    assert pick_read_only_adapter(config, tmp_path, _opencode(tmp_path, config), which=_which("claude")) == (
        None,
        "",
    )


def test_read_only_platform_names_the_readers_platform(tmp_path: Path) -> None:
    config = AutodevConfig(platform="opencode", read_only_platform="inline")

    chosen, reason = pick_read_only_adapter(config, tmp_path, _opencode(tmp_path, config), which=_which())

    assert chosen is not None and chosen.name == "inline"
    assert reason.startswith("read-only roles: inline")


def test_auto_opencode_with_no_cli_that_can_leaves_the_error_to_the_check(tmp_path: Path) -> None:
    config = AutodevConfig(platform="auto")
    opencode = _opencode(tmp_path, config)

    assert pick_read_only_adapter(config, tmp_path, opencode, which=_which("opencode")) == (None, "")
    with pytest.raises(ConfigError) as raised:
        check_sandboxes(build_registry(), lambda role: opencode, which=_which("opencode", "codex"))

    message = str(raised.value)
    assert message.startswith("read_only_platform: opencode cannot start the ")
    assert "reviewer" in message and "developer" not in message
    assert "read-only sandbox (its harness starts in: full, workspace-write;" in message
    assert "claude_code, codex (on PATH), cursor, gemini" in message
    assert "AUTODEV_READ_ONLY_PLATFORM" in message


def test_a_run_whose_harnesses_can_start_every_role_passes_the_check(tmp_path: Path) -> None:
    config = AutodevConfig(platform="cursor")
    cursor = create_adapter("cursor", repo_root=tmp_path, config=config)

    check_sandboxes(build_registry(), lambda role: cursor, which=_which())
