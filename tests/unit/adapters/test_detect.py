"""Choosing the platform (``--platform auto``), probing the machine for ``autodev doctor``, and the registry
that turns a platform name into an adapter."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from autodev.adapters import adapter_class, detect_platform
from autodev.adapters.detect import PlatformChoice, probe_platforms
from autodev.adapters.registry import ADAPTERS
from autodev.config.schema import PLATFORMS
from autodev.errors import ConfigError


def _which(*found: str) -> Callable[[str], str | None]:
    return lambda name: f"/usr/bin/{name}" if name in found else None


@pytest.mark.parametrize(
    ("on_path", "expected"),
    [
        (("gemini", "opencode", "cursor-agent", "codex", "claude"), "claude_code"),
        (("gemini", "opencode", "cursor-agent", "codex"), "codex"),
        (("gemini", "opencode", "cursor-agent"), "cursor"),
        (("gemini", "opencode"), "opencode"),
        (("gemini",), "gemini"),
    ],
)
def test_auto_picks_the_first_agent_cli_on_path(on_path: tuple[str, ...], expected: str) -> None:
    choice = detect_platform("auto", which=_which(*on_path))

    assert choice.name == expected
    assert choice.executable is not None
    assert choice.reason == f"auto: found {Path(choice.executable).name} at {choice.executable}"


def test_auto_without_any_agent_cli_falls_back_to_inline_and_says_why() -> None:
    choice = detect_platform("auto", which=_which())

    assert choice == PlatformChoice(
        "inline",
        "auto: no agent CLI on PATH (looked for claude, codex, cursor-agent, opencode, gemini); using inline",
    )


@pytest.mark.parametrize(
    ("preference", "executable"),
    [("codex", "/usr/bin/codex"), ("gemini", None), ("inline", None), ("scripted", None)],
)
def test_an_explicit_platform_is_kept_as_configured(preference: str, executable: str | None) -> None:
    choice = detect_platform(preference, which=_which("claude", "codex"))

    assert choice == PlatformChoice(preference, "configured", executable)


def test_an_unknown_platform_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="unknown platform 'claude'; valid platforms: auto, claude_code"):
        detect_platform("claude")


def _executable(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def test_probes_report_versions_hangs_failures_and_missing_clis(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _executable(bin_dir, "claude", 'echo ""; echo "2.1.0 (Claude Code)"')
    _executable(bin_dir, "codex", "sleep 30")
    _executable(bin_dir, "cursor-agent", "echo 'unknown option' >&2; exit 3")
    _executable(bin_dir, "gemini", "echo 'gemini 0.9.1' >&2")

    started = time.monotonic()
    probes = probe_platforms(which=lambda name: shutil.which(name, path=str(bin_dir)), timeout_s=0.5)

    assert time.monotonic() - started < 10
    by_name = {probe.name: probe for probe in probes}
    assert [probe.name for probe in probes] == ["claude_code", "codex", "cursor", "opencode", "gemini"]
    assert by_name["claude_code"].found
    assert by_name["claude_code"].path == str(bin_dir / "claude")
    assert by_name["claude_code"].version == "2.1.0 (Claude Code)"
    assert by_name["codex"].found
    assert by_name["codex"].version is None
    assert by_name["codex"].error == "`codex --version` did not finish within 0.5s"
    assert by_name["cursor"].error == "`cursor-agent --version` exited 3: unknown option"
    assert not by_name["opencode"].found
    assert by_name["opencode"].error == "not found on PATH"
    assert by_name["gemini"].version == "gemini 0.9.1"


def test_a_hanging_version_probe_leaves_no_process_behind(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pid_file = tmp_path / "child.pid"
    _executable(bin_dir, "claude", f"sleep 30 &\necho $! > {pid_file}\nwait")

    probe_platforms(which=lambda name: shutil.which(name, path=str(bin_dir)), timeout_s=0.5)

    stat = Path(f"/proc/{pid_file.read_text().strip()}/stat")
    deadline = time.monotonic() + 5
    while stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z":
        assert time.monotonic() < deadline, "the --version probe's child is still running"
        time.sleep(0.05)


def test_the_registry_names_every_configurable_platform_but_auto() -> None:
    assert set(ADAPTERS) == set(PLATFORMS) - {"auto"}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("claud", "unknown platform 'claud'; valid platforms: claude_code, codex, cursor, opencode, gemini"),
        ("auto", "resolve 'auto' with detect_platform() first"),
    ],
)
def test_an_unknown_adapter_name_lists_the_valid_names(name: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        adapter_class(name)
