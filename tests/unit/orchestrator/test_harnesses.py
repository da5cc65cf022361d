"""Which platform the roles that only read run on, and the error when the run's cannot start them; which
platform verifies a developer's change, and the contract's check of it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from autodev.adapters.base import PlatformAdapter
from autodev.adapters.registry import create_adapter
from autodev.agents.registry import build_registry
from autodev.config import AutodevConfig
from autodev.config.schema import CrossFamilyPolicy
from autodev.errors import ConfigError
from autodev.orchestrator.execute.completion import family_check
from autodev.orchestrator.harnesses import check_sandboxes, harness_for, pick_read_only_adapter, pick_verifier


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


# --- the verifier: the reviewer on another family than the developer's (completion.cross_family) ------------


def test_auto_finds_a_verifier_of_another_family_on_path_never_the_developers_own(tmp_path: Path) -> None:
    config = AutodevConfig(platform="auto")
    claude = create_adapter("claude_code", repo_root=tmp_path, config=config)

    verifier = pick_verifier(config, tmp_path, claude, None, which=_which("claude", "opencode", "gemini"))

    # Claude Code is first in auto's order but is the developer's; OpenCode cannot start read-only.
    assert verifier.adapter is not None and verifier.adapter.name == "gemini"
    assert verifier.found_on_path
    assert verifier.reason == "verifier: gemini (auto: found gemini at /usr/bin/gemini)"
    registry = build_registry()
    assert harness_for(registry, claude, None, "reviewer", verifier.adapter) is verifier.adapter
    for role in ("developer", "test_engineer", "explorer", "architect", "critic_sounding_board"):
        assert harness_for(registry, claude, None, role, verifier.adapter) is claude, role


def test_the_read_only_platform_verifies_when_it_is_another_family(tmp_path: Path) -> None:
    config = AutodevConfig(platform="opencode", read_only_platform="codex")
    readers = create_adapter("codex", repo_root=tmp_path, config=config)

    verifier = pick_verifier(config, tmp_path, _opencode(tmp_path, config), readers, which=_which("gemini"))

    assert verifier.adapter is readers and not verifier.found_on_path
    assert verifier.reason == "verifier: codex (the read-only platform)"


def test_a_pinned_platform_gets_no_verifier_unless_one_is_configured(tmp_path: Path) -> None:
    pinned = AutodevConfig(platform="claude_code")
    claude = create_adapter("claude_code", repo_root=tmp_path, config=pinned)

    alone = pick_verifier(pinned, tmp_path, claude, None, which=_which("claude", "codex"))
    assert alone.adapter is None
    assert "the platform is pinned" in alone.reason and "completion.verify_platform" in alone.reason

    configured = pinned.model_copy(
        update={"completion": pinned.completion.model_copy(update={"verify_platform": "codex"})}
    )
    chosen = pick_verifier(configured, tmp_path, claude, None, which=_which("claude", "codex"))
    assert chosen.adapter is not None and chosen.adapter.name == "codex"
    assert chosen.reason == "verifier: codex (completion.verify_platform)" and not chosen.found_on_path


def test_no_verifier_when_cross_family_is_off_or_the_answers_come_inline(tmp_path: Path) -> None:
    off = AutodevConfig(platform="auto")
    off = off.model_copy(update={"completion": off.completion.model_copy(update={"cross_family": "off"})})
    claude = create_adapter("claude_code", repo_root=tmp_path, config=off)
    assert pick_verifier(off, tmp_path, claude, None, which=_which("codex")).adapter is None

    config = AutodevConfig(platform="auto")
    inline = create_adapter("inline", repo_root=tmp_path, config=config)
    nothing = pick_verifier(config, tmp_path, inline, None, which=_which("codex"))
    assert (nothing.adapter, nothing.reason) == (None, "")


def test_a_verify_platform_that_cannot_start_read_only_is_a_config_error(tmp_path: Path) -> None:
    config = AutodevConfig(platform="claude_code")
    config = config.model_copy(
        update={"completion": config.completion.model_copy(update={"verify_platform": "opencode"})}
    )
    claude = create_adapter("claude_code", repo_root=tmp_path, config=config)

    with pytest.raises(
        ConfigError, match="opencode cannot start the reviewer in a read-only sandbox"
    ) as caught:
        pick_verifier(config, tmp_path, claude, None, which=_which())
    assert caught.value.key == "completion.verify_platform"
    assert "claude_code" not in str(caught.value).split("one of", 1)[1]


@pytest.mark.parametrize(
    ("policy", "implemented_on", "verified_on", "expected"),
    [
        ("warn", "claude_code", "codex", "pass"),
        ("require_approval", "claude_code", "gemini", "pass"),
        ("warn", "claude_code", "claude_code", "waived"),
        ("warn", "codex", None, "waived"),
        ("require_approval", "codex", "codex", "blocked"),
        ("off", "claude_code", "claude_code", None),
        ("require_approval", "scripted", "scripted", None),
        ("require_approval", None, "codex", None),
    ],
)
def test_the_family_check_follows_the_policy(
    policy: CrossFamilyPolicy, implemented_on: str | None, verified_on: str | None, expected: str | None
) -> None:
    check = family_check(policy, implemented_on, verified_on)

    assert (check.status if check is not None else None) == expected
    if check is not None:
        assert check.id == "verifier:family" and check.kind == "semantic"
        assert f"({implemented_on})" in check.description
    if expected == "blocked":
        assert check is not None and check.reason and "completion.verify_platform" in check.reason
