"""Which agent platform to drive (``--platform auto``), and what ``autodev doctor`` finds on this machine.

``auto`` takes the first agent CLI on PATH in a fixed order, else the inline platform, and says which
and why. The probes look executables up on PATH and ask each for ``--version``, without a shell, with
stdin closed and under a deadline; whatever goes wrong is reported in the probe, never raised.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from autodev.adapters.sandbox import SandboxMode, compatible_platforms
from autodev.config.schema import PLATFORMS
from autodev.errors import ConfigError
from autodev.processes import TAG_VARIABLE, call_tag, own_child, starting_child

__all__ = [
    "CLI_EXECUTABLES",
    "PlatformChoice",
    "ToolProbe",
    "detect_platform",
    "probe_platforms",
    "read_version",
]

CLI_EXECUTABLES: Mapping[str, str] = MappingProxyType(
    {
        "claude_code": "claude",
        "codex": "codex",
        "cursor": "cursor-agent",
        "opencode": "opencode",
        "gemini": "gemini",
    }
)
"""Agent platform name -> the executable it runs, in the order ``auto`` tries them."""

"""The tools behind the QA gates and the worktrees, as ``autodev doctor`` lists them."""

VERSION_TIMEOUT_S = 10.0

Which = Callable[[str], str | None]
RunVersion = Callable[[str, float], str]


@dataclass(frozen=True, slots=True)
class PlatformChoice:
    """The platform to drive, why it was picked, and its executable when it is an agent CLI on PATH."""

    name: str
    reason: str
    executable: str | None = None


@dataclass(frozen=True, slots=True)
class ToolProbe:
    """What ``autodev doctor`` found for one executable.

    ``name`` is the platform (``claude_code``) or tool (``ruff``); ``executable`` the command looked up;
    ``path`` where it was found; ``version`` the first line ``--version`` printed; ``error`` why there
    is no version.
    """

    name: str
    executable: str
    found: bool
    path: str | None = None
    version: str | None = None
    error: str | None = None


def detect_platform(
    preference: str,
    *,
    which: Which = shutil.which,
    needing: SandboxMode | None = None,
    excluding: frozenset[str] = frozenset(),
) -> PlatformChoice:
    """Resolve the configured ``platform``: ``auto`` is looked up on PATH, any other platform is kept.

    With ``needing``, ``auto`` takes only an agent CLI that can start in that sandbox mode; it never takes
    one of ``excluding``. Raises ``ConfigError`` listing the valid platforms when ``preference`` is not one.
    """
    if preference == "auto":
        names = compatible_platforms(needing) if needing is not None else tuple(CLI_EXECUTABLES)
        names = tuple(name for name in names if name not in excluding)
        for name in names:
            executable = CLI_EXECUTABLES[name]
            path = which(executable)
            if path is not None:
                return PlatformChoice(name, f"auto: found {executable} at {path}", path)
        looked = ", ".join(CLI_EXECUTABLES[name] for name in names)
        return PlatformChoice("inline", f"auto: no agent CLI on PATH (looked for {looked}); using inline")
    if preference not in PLATFORMS:
        raise ConfigError(
            f"unknown platform {preference!r}; valid platforms: {', '.join(PLATFORMS)}", key="platform"
        )
    cli = CLI_EXECUTABLES.get(preference)
    return PlatformChoice(preference, "configured", which(cli) if cli is not None else None)


def read_version(path: str, timeout_s: float = VERSION_TIMEOUT_S) -> str:
    """The first line ``<path> --version`` prints (stdout, else stderr); empty when it prints nothing.

    Runs without a shell, with stdin closed, in its own session; on timeout the whole process group is
    killed and ``subprocess.TimeoutExpired`` raised. A non-zero exit raises ``CalledProcessError``; a
    program that cannot be started raises ``OSError``.
    """
    argv = [path, "--version"]
    with contextlib.ExitStack() as ours:
        with starting_child():
            process = ours.enter_context(
                subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,
                    # Tagged like every process AutoDev starts in a session of its own: not an orphan.
                    env={**os.environ, TAG_VARIABLE: call_tag(None)},
                )
            )
            # Left before the Popen itself, by when communicate() or wait() below has reaped the process.
            ours.enter_context(own_child(process.pid))
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            # Killing only the leader would leave its children holding the pipes open.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
    if process.returncode != 0:
        raise subprocess.CalledProcessError(process.returncode, argv, stdout, stderr)
    for stream in (stdout, stderr):
        lines = [line.strip() for line in stream.decode("utf-8", errors="replace").splitlines()]
        first = next((line for line in lines if line), None)
        if first is not None:
            return first[:200]
    return ""


def probe_platforms(
    *,
    which: Which = shutil.which,
    run_version: RunVersion = read_version,
    timeout_s: float = VERSION_TIMEOUT_S,
) -> list[ToolProbe]:
    """Probe every agent CLI, in ``auto``'s order; ``timeout_s`` bounds each ``--version``."""
    return [_probe(name, exe, which, run_version, timeout_s) for name, exe in CLI_EXECUTABLES.items()]


def _probe(name: str, executable: str, which: Which, run_version: RunVersion, timeout_s: float) -> ToolProbe:
    path = which(executable)
    if path is None:
        return ToolProbe(name, executable, found=False, error="not found on PATH")
    try:
        version = run_version(path, timeout_s)
    except subprocess.TimeoutExpired:
        error = f"`{executable} --version` did not finish within {timeout_s:g}s"
    except subprocess.CalledProcessError as exc:
        excerpt = " ".join(_text(exc.stderr).split())[:200]
        error = f"`{executable} --version` exited {exc.returncode}" + (f": {excerpt}" if excerpt else "")
    except OSError as exc:
        error = f"cannot run {path}: {exc.strerror or exc}"
    else:
        if version:
            return ToolProbe(name, executable, found=True, path=path, version=version)
        error = f"`{executable} --version` printed nothing"
    return ToolProbe(name, executable, found=True, path=path, error=error)


def _text(output: bytes | str | None) -> str:
    if isinstance(output, bytes):
        return output.decode("utf-8", errors="replace")
    return output or ""
