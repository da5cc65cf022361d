"""Where the QA tools come from, and the tool report of ``autodev doctor``.

The project's Python code (syntax and import checks, pytest) runs in the project's own environment
(``autodev.qa.environment``): ``<its python> -m pytest``, never a ``pytest`` found elsewhere. The tools
that need no project environment, ruff and detect-secrets, are looked up in this order, first match wins:

1. the project's pinned copy: the console script in its environment's ``bin`` directory (so the
   project's own tool version and configuration semantics apply);
2. AutoDev's own copy, a dependency of AutoDev: the console script beside AutoDev's interpreter, else
   ``<AutoDev's python> -m <module>``;
3. ``<tool>`` on PATH.

ESLint is the project's ``node_modules/.bin/eslint``, else ``eslint`` on PATH. Everything else (node, npm,
cargo, go, gofmt, git) comes from PATH.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import anyio

from autodev.adapters.detect import ToolProbe
from autodev.qa.environment import ProjectEnvironment
from autodev.qa.runner import STDERR_MARKER, CheckSpec, run_check

__all__ = [
    "PROBED_TOOLS",
    "ResolvedTool",
    "looked_for",
    "probe_tools",
    "resolve_tool",
]

PROBED_TOOLS: tuple[str, ...] = ("ruff", "pytest", "detect-secrets", "node", "npm", "cargo", "go", "git")
"""The tools ``probe_tools`` reports, in order."""

# The tools AutoDev depends on, by the module that runs them with `python -m`.
_PYTHON_MODULES: dict[str, str] = {"ruff": "ruff", "detect-secrets": "detect_secrets"}
# `go` has no --version flag; every other probed tool has.
_VERSION_ARGS: dict[str, tuple[str, ...]] = {"go": ("version",)}


@dataclass(frozen=True, slots=True)
class ResolvedTool:
    """A tool ``resolve_tool`` found; ``argv`` is the command prefix that runs it."""

    name: str
    argv: tuple[str, ...]


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def resolve_tool(
    name: str, repo_root: Path | None, environment: ProjectEnvironment | None = None
) -> ResolvedTool | None:
    """Find ``name`` in the order the module docstring gives; ``None`` when it is nowhere."""
    pinned = _project_tool(name, repo_root, environment)
    if pinned is not None:
        return ResolvedTool(name, (str(pinned),))
    module = _PYTHON_MODULES.get(name)
    if module is not None:
        beside = Path(sysconfig.get_path("scripts")) / name
        if _executable(beside):
            return ResolvedTool(name, (str(beside),))
        if sys.executable and importlib.util.find_spec(module) is not None:
            return ResolvedTool(name, (sys.executable, "-m", module))
    on_path = shutil.which(name)
    return ResolvedTool(name, (on_path,)) if on_path is not None else None


def _project_tool(name: str, repo_root: Path | None, environment: ProjectEnvironment | None) -> Path | None:
    if name in _PYTHON_MODULES:
        return environment.tool(name) if environment is not None else None
    if name == "eslint" and repo_root is not None:
        candidate = repo_root / "node_modules" / ".bin" / name
        return candidate if _executable(candidate) else None
    return None


def looked_for(name: str) -> str:
    """Where ``resolve_tool`` looked for ``name``, for a "not found" message."""
    if name in _PYTHON_MODULES:
        return (
            f"not in the project's environment, not installed beside AutoDev ({sys.executable}), "
            "not on PATH; reinstall autodev, which depends on it"
        )
    if name == "eslint":
        return "not in the repository's node_modules/.bin, not on PATH"
    return "not on PATH"


async def probe_tools(
    repo_root: Path | None = None,
    environment: ProjectEnvironment | None = None,
    *,
    timeout_s: float = 10.0,
) -> list[ToolProbe]:
    """What ``autodev doctor`` reports for each of ``PROBED_TOOLS``: found or missing, where, which version.

    Tools are resolved as the gates resolve them (``environment`` is the project's, whose pytest and
    pinned tools apply) and asked for their version concurrently, each under ``timeout_s``. Never raises:
    a tool that fails to answer is reported as found with an ``error``.
    """
    if repo_root is not None:
        repo_root = Path(await anyio.Path(repo_root).resolve())
    cwd = repo_root if repo_root is not None else Path.cwd()
    probes: dict[str, ToolProbe] = {}

    async def probe(name: str) -> None:
        probes[name] = await _probe(name, repo_root, environment, cwd, timeout_s)

    async with anyio.create_task_group() as group:
        for name in PROBED_TOOLS:
            group.start_soon(probe, name)
    return [probes[name] for name in PROBED_TOOLS]


async def _probe(
    name: str, repo_root: Path | None, environment: ProjectEnvironment | None, cwd: Path, timeout_s: float
) -> ToolProbe:
    if name == "pytest":
        if environment is None:
            return ToolProbe(name, name, found=False, error="no project environment was found")
        tool: ResolvedTool | None = ResolvedTool(name, (environment.python, "-m", "pytest"))
        if not environment.has_pytest:
            path = " ".join(tool.argv) if tool else None
            return ToolProbe(
                name, name, found=False, path=path, error="the project's environment cannot import it"
            )
    else:
        tool = resolve_tool(name, repo_root, environment)
    if tool is None:
        return ToolProbe(name, name, found=False, error=looked_for(name))
    path = " ".join(tool.argv)
    env = dict(environment.env) if environment is not None and name == "pytest" else {}
    spec = CheckSpec(
        argv=(*tool.argv, *_VERSION_ARGS.get(name, ("--version",))), cwd=cwd, timeout_s=timeout_s, env=env
    )
    try:
        result = await run_check(spec)
    except OSError as exc:
        return ToolProbe(name, name, found=True, path=path, error=f"cannot run it: {exc}")
    first = next(
        (
            line.strip()
            for line in result.output_excerpt.splitlines()
            if line.strip() not in ("", STDERR_MARKER)
        ),
        "",
    )
    if result.status == "pass" and first:
        return ToolProbe(name, name, found=True, path=path, version=first[:200])
    error = result.reason or "printed no version"
    if result.status != "pass" and first:
        error += f": {first[:200]}"
    return ToolProbe(name, name, found=not result.tool_missing, path=path, error=error)
