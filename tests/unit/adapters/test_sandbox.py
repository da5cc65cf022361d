"""What each platform's harness declares it can start in, and what a call of each role needs."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from autodev.adapters import detect_platform
from autodev.adapters.registry import ADAPTERS
from autodev.adapters.sandbox import SANDBOXES, UNDECLARED, compatible_platforms, needed_mode
from autodev.config.schema import AGENT_CLIS


def _which(*found: str) -> Callable[[str], str | None]:
    return lambda name: f"/usr/bin/{name}" if name in found else None


def test_every_adapter_declares_its_sandbox() -> None:
    assert set(SANDBOXES) == set(ADAPTERS)
    for name, descriptor in SANDBOXES.items():
        assert descriptor.modes, name
        assert descriptor.enforcement and descriptor.transport, name


def test_opencode_declares_no_read_only_mode_and_cursor_no_workspace_write() -> None:
    assert not SANDBOXES["opencode"].can_start("read_only")
    assert SANDBOXES["opencode"].can_start("workspace_write")
    assert "HTTP" in SANDBOXES["opencode"].transport
    # Cursor's writers run with --force (full access): that serves a writer, checked afterwards.
    assert SANDBOXES["cursor"].modes == {"read_only", "full"}
    assert SANDBOXES["cursor"].can_start("workspace_write")
    for name in ("claude_code", "codex", "gemini"):
        assert SANDBOXES[name].can_start("read_only") and SANDBOXES[name].can_start("workspace_write")


def test_a_role_that_may_not_write_needs_read_only_and_an_undeclared_harness_serves_nothing() -> None:
    assert needed_mode(can_write=False) == "read_only"
    assert needed_mode(can_write=True) == "workspace_write"
    assert not UNDECLARED.can_start("read_only") and not UNDECLARED.can_start("workspace_write")


def test_the_compatible_platforms_are_the_agent_clis_that_can_in_detection_order() -> None:
    assert compatible_platforms("read_only") == tuple(name for name in AGENT_CLIS if name != "opencode")
    assert compatible_platforms("workspace_write") == AGENT_CLIS
    assert compatible_platforms("read_only", ["opencode", "gemini"]) == ("gemini",)


@pytest.mark.parametrize(
    ("on_path", "expected"),
    [(("opencode", "gemini"), "gemini"), (("opencode",), "inline"), (("opencode", "claude"), "claude_code")],
)
def test_auto_needing_read_only_passes_over_opencode(on_path: tuple[str, ...], expected: str) -> None:
    choice = detect_platform("auto", which=_which(*on_path), needing="read_only")

    assert choice.name == expected
    if expected == "inline":
        assert "opencode" not in choice.reason
    assert detect_platform("auto", which=_which(*on_path)).name in ("opencode", "claude_code")
