"""Where the QA tools come from, and the tool report of ``autodev doctor``.

The Python tools (ruff, pytest, detect-secrets) are looked up in this order, first match wins:

1. the repository's own virtual environment, ``<repo>/.venv/bin/<tool>`` then ``<repo>/venv/bin/<tool>``,
   so a project's pinned tool versions, plugins and dependencies apply;
2. beside AutoDev: ``<python running AutoDev> -m <module>`` when that interpreter can import the tool
   (what ``pip install autodev[qa]`` provides);
3. ``<tool>`` on PATH.

The interpreter used for Python's syntax and import checks is the repository's ``.venv``/``venv`` Python,
else the one running AutoDev. ESLint is the project's ``node_modules/.bin/eslint``, else ``eslint`` on
PATH. Everything else (node, npm, cargo, go, gofmt, git) comes from PATH.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import anyio

from autodev.adapters.detect import ToolProbe
from autodev.qa.runner import STDERR_MARKER, CheckSpec, run_check

__all__ = [
    "PROBED_TOOLS",
    "ResolvedTool",
    "looked_for",
    "probe_tools",
    "python_interpreter",
    "resolve_tool",
]

PROBED_TOOLS: tuple[str, ...] = ("ruff", "pytest", "detect-secrets", "node", "npm", "cargo", "go", "git")
"""The tools ``probe_tools`` reports, in order."""

_PYTHON_MODULES: dict[str, str] = {"ruff": "ruff", "pytest": "pytest", "detect-secrets": "detect_secrets"}
_VENV_DIRS = (".venv", "venv")
# `go` has no --version flag; every other probed tool has.
_VERSION_ARGS: dict[str, tuple[str, ...]] = {"go": ("version",)}


@dataclass(frozen=True, slots=True)
class ResolvedTool:
    """A tool ``resolve_tool`` found; ``argv`` is the command prefix that runs it."""

    name: str
    argv: tuple[str, ...]


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _repo_venv_bin(repo_root: Path, name: str) -> Path | None:
    for venv in _VENV_DIRS:
        candidate = repo_root / venv / "bin" / name
        if _executable(candidate):
            return candidate
    return None


def python_interpreter(repo_root: Path) -> tuple[str, ...]:
    """The Python that checks the repository's code: its own virtual environment's, else AutoDev's."""
    own = _repo_venv_bin(repo_root, "python")
    return (str(own),) if own is not None else (sys.executable,)


def resolve_tool(name: str, repo_root: Path | None) -> ResolvedTool | None:
    """Find ``name`` in the order the module docstring gives; ``None`` when it is nowhere."""
    own = _repository_tool(name, repo_root) if repo_root is not None else None
    if own is not None:
        return ResolvedTool(name, (str(own),))
    module = _PYTHON_MODULES.get(name)
    if module is not None and sys.executable and importlib.util.find_spec(module) is not None:
        return ResolvedTool(name, (sys.executable, "-m", module))
    on_path = shutil.which(name)
    return ResolvedTool(name, (on_path,)) if on_path is not None else None


def _repository_tool(name: str, repo_root: Path) -> Path | None:
    if name in _PYTHON_MODULES:
        return _repo_venv_bin(repo_root, name)
    if name == "eslint":
        candidate = repo_root / "node_modules" / ".bin" / name
        return candidate if _executable(candidate) else None
    return None


def looked_for(name: str) -> str:
    """Where ``resolve_tool`` looked for ``name``, for a "not found" message."""
    if name in _PYTHON_MODULES:
        return f"not in the repository's .venv or venv, not importable by {sys.executable}, not on PATH"
    if name == "eslint":
        return "not in the repository's node_modules/.bin, not on PATH"
    return "not on PATH"


async def probe_tools(repo_root: Path | None = None, *, timeout_s: float = 10.0) -> list[ToolProbe]:
    """What ``autodev doctor`` reports for each of ``PROBED_TOOLS``: found or missing, where, which version.

    Tools are resolved as the gates resolve them (``repo_root`` enables the repository's own tools) and
    asked for their version concurrently, each under ``timeout_s``. Never raises: a tool that fails to
    answer is reported as found with an ``error``.
    """
    if repo_root is not None:
        repo_root = Path(await anyio.Path(repo_root).resolve())
    cwd = repo_root if repo_root is not None else Path.cwd()
    probes: dict[str, ToolProbe] = {}

    async def probe(name: str) -> None:
        probes[name] = await _probe(name, repo_root, cwd, timeout_s)

    async with anyio.create_task_group() as group:
        for name in PROBED_TOOLS:
            group.start_soon(probe, name)
    return [probes[name] for name in PROBED_TOOLS]


async def _probe(name: str, repo_root: Path | None, cwd: Path, timeout_s: float) -> ToolProbe:
    tool = resolve_tool(name, repo_root)
    if tool is None:
        return ToolProbe(name, name, found=False, error=looked_for(name))
    path = " ".join(tool.argv)
    spec = CheckSpec(
        argv=(*tool.argv, *_VERSION_ARGS.get(name, ("--version",))), cwd=cwd, timeout_s=timeout_s
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
