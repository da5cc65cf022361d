"""The project's own environment: which Python runs a project's tests and import checks.

A project's tests need the project's dependencies, its pytest plugins and its configuration, none of which
AutoDev's own interpreter has (installed with pipx it has nothing of the project at all). The environment is
found the way the project's users work; the first match wins:

1. ``environment.python`` in the configuration: a path, a command on PATH, or ``"autodev"`` for AutoDev's
   own interpreter as step 6 uses it;
2. the repository's own ``.venv`` or ``venv``;
3. the environment of the shell that started AutoDev: ``VIRTUAL_ENV``, then ``CONDA_PREFIX``;
4. a uv, Poetry, PDM or Hatch project, known by its lock or configuration file, when that tool is on PATH:
   the tool is asked once, in the main checkout, which interpreter its ``run`` uses (``uv run --frozen
   python``, ``poetry run python``, ``pdm run python``, ``hatch run python``);
5. a ``python3`` on PATH that is not AutoDev's own and can import pytest;
6. AutoDev's own interpreter, with pytest's plugin autoloading turned off, so that plugins installed beside
   AutoDev never load into a project's test run.

Every candidate is asked, by running it, for its ``sys.prefix``, version and whether it can import pytest;
an interpreter that cannot be run is a problem to report, not a reason to fall through to the next one
(a broken ``.venv`` must not silently become "AutoDev's own").

Commands then run the interpreter found *directly* (``<env>/bin/python -m pytest``), never through the
project tool: ``uv run`` and ``poetry run`` choose their environment by the project directory, so in a task's
worktree they would create and fill a fresh environment of their own. The environment's ``bin`` directory
comes first on ``PATH`` (as activation does), so a test that starts ``python`` or a console script gets the
project's.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from autodev.config.schema import EnvironmentSettings
from autodev.qa.runner import CheckSpec, run_check

__all__ = [
    "OWN_INTERPRETER",
    "EnvironmentCandidate",
    "EnvironmentResolution",
    "EnvironmentSource",
    "ProjectEnvironment",
    "autodev_environment",
    "resolve_environment",
]

EnvironmentSource = Literal[
    "configured",
    "repo_venv",
    "virtual_env",
    "conda",
    "uv",
    "poetry",
    "pdm",
    "hatch",
    "python_on_path",
    "autodev",
]

_PROBE = (
    "import importlib.util, json, sys\n"
    "print(json.dumps({'executable': sys.executable, 'prefix': sys.prefix, 'base_prefix': sys.base_prefix,"
    " 'version': '%d.%d.%d' % tuple(sys.version_info[:3]),"
    " 'pytest': importlib.util.find_spec('pytest') is not None}))\n"
)
_PROBE_TIMEOUT_S = 30.0
_VENV_DIRS = (".venv", "venv")
# The project tools, in the order they are tried, with what marks a project as theirs.
_RUNNERS: tuple[tuple[EnvironmentSource, str, tuple[str, ...]], ...] = (
    ("uv", "uv.lock", ("uv",)),
    ("poetry", "poetry.lock", ("poetry",)),
    ("pdm", "pdm.lock", ("pdm",)),
    ("hatch", "hatch.toml", ("hatch", "envs")),
)
_SHELL_ENVIRONMENTS: tuple[tuple[str, EnvironmentSource], ...] = (
    ("VIRTUAL_ENV", "virtual_env"),
    ("CONDA_PREFIX", "conda"),
)
OWN_INTERPRETER = "autodev"
"""The ``environment.python`` value that names AutoDev's own interpreter."""
_NO_PLUGIN_AUTOLOAD = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


@dataclass(frozen=True, slots=True)
class ProjectEnvironment:
    """The interpreter that runs a project's code, and how it was found.

    ``env`` is laid over the inherited environment of every command run in it (its ``bin`` directory
    first on ``PATH``; for AutoDev's own interpreter, pytest's plugin autoloading off).
    """

    source: EnvironmentSource
    python: str
    description: str
    prefix: str
    version: str
    has_pytest: bool
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def own(self) -> bool:
        """Whether this is AutoDev's own interpreter (the last resort)."""
        return self.source == "autodev"

    @property
    def bin_dir(self) -> Path:
        return Path(self.python).parent

    def tool(self, name: str) -> Path | None:
        """The project's own copy of a console script (``ruff``, ``detect-secrets``), if it pins one."""
        if self.own:
            return None
        candidate = self.bin_dir / name
        return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None

    def summary(self) -> str:
        """One line for headers and evidence: where it came from, the interpreter and its version."""
        return f"{self.description}: {self.python} (Python {self.version})"


@dataclass(frozen=True, slots=True)
class EnvironmentCandidate:
    """One place that was looked at, in order, and what was found there (for ``autodev doctor``)."""

    source: EnvironmentSource
    detail: str
    usable: bool


@dataclass(frozen=True, slots=True)
class EnvironmentResolution:
    """The outcome of the search: the environment chosen, or the problem that stops it, and the trail."""

    environment: ProjectEnvironment | None
    problem: str | None
    considered: tuple[EnvironmentCandidate, ...]


@dataclass(frozen=True, slots=True)
class _Probe:
    executable: str
    prefix: str
    version: str
    has_pytest: bool


def autodev_environment() -> ProjectEnvironment:
    """AutoDev's own interpreter, as the last resort uses it."""
    return ProjectEnvironment(
        source="autodev",
        python=sys.executable,
        description="AutoDev's own interpreter (the project has no environment of its own)",
        prefix=sys.prefix,
        version=".".join(str(part) for part in sys.version_info[:3]),
        has_pytest=_importable("pytest"),
        env=dict(_NO_PLUGIN_AUTOLOAD),
    )


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _is_own(prefix: str) -> bool:
    return os.path.realpath(prefix) == os.path.realpath(sys.prefix)


async def _probe(argv: tuple[str, ...], cwd: Path, timeout_s: float) -> _Probe | str:
    """Run the probe with ``argv`` (an interpreter, or a tool's ``run python``): its answer, or why not."""
    result = await run_check(
        CheckSpec(
            argv=(*argv, "-c", _PROBE),
            cwd=cwd,
            timeout_s=timeout_s,
            # The probe runs before anything is known about the project: a bytecode prefix the user set
            # inside the working copy must not fill it.
            env={"PYTHONDONTWRITEBYTECODE": "1"},
        ),
        on_line=None,
    )
    if result.status != "pass":
        detail = " ".join(result.output_excerpt.split())[-300:]
        return f"{result.reason or result.status}{': ' + detail if detail else ''}"
    for line in reversed(result.output_excerpt.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
                return _Probe(
                    str(data["executable"]), str(data["prefix"]), str(data["version"]), bool(data["pytest"])
                )
            except (ValueError, KeyError, TypeError):
                break
    return "it printed no answer to the interpreter probe"


def _activation_env(probe: _Probe) -> dict[str, str]:
    bin_dir = str(Path(probe.executable).parent)
    inherited = os.environ.get("PATH", "")
    env = {"PATH": f"{bin_dir}{os.pathsep}{inherited}" if inherited else bin_dir}
    if (Path(probe.prefix) / "pyvenv.cfg").is_file():
        env["VIRTUAL_ENV"] = probe.prefix
    return env


def _environment(source: EnvironmentSource, description: str, probe: _Probe) -> ProjectEnvironment:
    return ProjectEnvironment(
        source=source,
        python=probe.executable,
        description=description,
        prefix=probe.prefix,
        version=probe.version,
        has_pytest=probe.has_pytest,
        env=_activation_env(probe),
    )


def _interpreter_in(prefix: Path) -> Path | None:
    for name in ("python", "python3"):
        candidate = prefix / "bin" / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _pyproject_tables(repo_root: Path) -> Mapping[str, object]:
    try:
        data = tomllib.loads((repo_root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    tool = data.get("tool")
    return tool if isinstance(tool, dict) else {}


def _runner_marker(
    repo_root: Path, source: EnvironmentSource, lock: str, table: tuple[str, ...]
) -> str | None:
    """What marks ``repo_root`` as a project of ``source``'s tool, or None."""
    if (repo_root / lock).is_file():
        return lock
    node: object = _pyproject_tables(repo_root)
    for key in table:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict):
        return f"[tool.{'.'.join(table)}] in pyproject.toml"
    return None


def _runner_argv(source: EnvironmentSource, executable: str, repo_root: Path) -> tuple[str, ...]:
    if source == "uv":
        # --frozen: use uv.lock as it is; asking for an interpreter must never rewrite the lock file.
        frozen = ("--frozen",) if (repo_root / "uv.lock").is_file() else ()
        return (executable, "run", *frozen, "python")
    return (executable, "run", "python")


async def resolve_environment(repo_root: Path, settings: EnvironmentSettings) -> EnvironmentResolution:
    """Find the project's environment in the order of the module docstring (runs each candidate once)."""
    considered: list[EnvironmentCandidate] = []

    def found(
        source: EnvironmentSource, detail: str, environment: ProjectEnvironment
    ) -> EnvironmentResolution:
        considered.append(EnvironmentCandidate(source, detail, True))
        return EnvironmentResolution(environment, None, tuple(considered))

    def broken(source: EnvironmentSource, detail: str) -> EnvironmentResolution:
        considered.append(EnvironmentCandidate(source, detail, False))
        return EnvironmentResolution(None, detail, tuple(considered))

    if settings.python == OWN_INTERPRETER:
        own = autodev_environment()
        return found("autodev", f'environment.python = "{OWN_INTERPRETER}"', own)
    if settings.python is not None:
        configured = settings.python
        path = Path(configured)
        if not path.is_absolute() and ("/" in configured or os.sep in configured):
            path = repo_root / path
        executable = str(path) if path.is_absolute() else shutil.which(configured)
        if executable is None:
            return broken(
                "configured", f"environment.python = {configured!r} is not a file or a command on PATH"
            )
        probe = await _probe((executable,), repo_root, _PROBE_TIMEOUT_S)
        if isinstance(probe, str):
            return broken("configured", f"environment.python = {configured!r} cannot be run: {probe}")
        return found("configured", executable, _environment("configured", "environment.python", probe))
    considered.append(EnvironmentCandidate("configured", "environment.python is not set", False))

    venv_seen = len(considered)
    for name in _VENV_DIRS:
        prefix = repo_root / name
        if not (prefix / "pyvenv.cfg").is_file() and not prefix.is_dir():
            continue
        interpreter = _interpreter_in(prefix)
        if interpreter is None:
            considered.append(EnvironmentCandidate("repo_venv", f"{name}/ has no bin/python", False))
            continue
        probe = await _probe((str(interpreter),), repo_root, _PROBE_TIMEOUT_S)
        if isinstance(probe, str):
            return broken("repo_venv", f"the repository's {name}/ ({interpreter}) cannot be run: {probe}")
        return found(
            "repo_venv", str(interpreter), _environment("repo_venv", f"the repository's {name}", probe)
        )

    if len(considered) == venv_seen:
        considered.append(EnvironmentCandidate("repo_venv", "no .venv or venv in the repository", False))

    for variable, shell_source in _SHELL_ENVIRONMENTS:
        value = os.environ.get(variable)
        if not value:
            considered.append(EnvironmentCandidate(shell_source, f"{variable} is not set", False))
            continue
        interpreter = _interpreter_in(Path(value))
        if interpreter is None:
            return broken(shell_source, f"{variable}={value} has no bin/python")
        probe = await _probe((str(interpreter),), repo_root, _PROBE_TIMEOUT_S)
        if isinstance(probe, str):
            return broken(shell_source, f"{variable}={value} cannot be run: {probe}")
        environment = _environment(shell_source, f"{variable}={value}", probe)
        return found(shell_source, str(interpreter), environment)

    for source, lock, table in _RUNNERS:
        marker = _runner_marker(repo_root, source, lock, table)
        if marker is None:
            considered.append(EnvironmentCandidate(source, f"not a {source} project (no {lock})", False))
            continue
        executable = shutil.which(source)
        if executable is None:
            considered.append(EnvironmentCandidate(source, f"{marker}, but {source} is not on PATH", False))
            continue
        argv = _runner_argv(source, executable, repo_root)
        probe = await _probe(argv, repo_root, settings.resolve_timeout_s)
        if isinstance(probe, str):
            return broken(source, f"{' '.join(argv[1:])} ({marker}) failed: {probe}")
        description = (
            f"the {source} project's environment ({marker}; `{source} {' '.join(argv[1:-1])} python`)"
        )
        return found(source, probe.executable, _environment(source, description, probe))

    python3 = shutil.which("python3")
    if python3 is None:
        considered.append(EnvironmentCandidate("python_on_path", "no python3 on PATH", False))
    else:
        probe = await _probe((python3,), repo_root, _PROBE_TIMEOUT_S)
        if isinstance(probe, str):
            considered.append(
                EnvironmentCandidate("python_on_path", f"{python3} cannot be run: {probe}", False)
            )
        elif _is_own(probe.prefix):
            considered.append(EnvironmentCandidate("python_on_path", f"{python3} is AutoDev's own", False))
        elif not probe.has_pytest:
            considered.append(
                EnvironmentCandidate("python_on_path", f"{python3} cannot import pytest", False)
            )
        else:
            return found("python_on_path", python3, _environment("python_on_path", "python3 on PATH", probe))

    own = autodev_environment()
    return found("autodev", own.python, own)
