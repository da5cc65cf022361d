"""The project's environment, found the way its users work, with real interpreters and real tools.

Every test builds its environments for real (``python -m venv``, ``uv``); the suite's own environment
reaches them only as the ``VIRTUAL_ENV`` a user's shell would export (``tests/conftest.py``), which each test
here sets or removes as its case needs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest
from support.projects import STRICT_PYPROJECT, make_venv, write_files

from autodev.config.schema import EnvironmentSettings, GateSettings, QAGatesSettings
from autodev.qa import GATE_NAMES, GateResult, run_gates
from autodev.qa.environment import OWN_INTERPRETER, autodev_environment, resolve_environment

PROJECT = {
    "pyproject.toml": STRICT_PYPROJECT,
    "mini/__init__.py": "",
    "mini/core.py": "def double(x: int) -> int:\n    return 2 * x\n",
    "tests/test_core.py": (
        "from mini.core import double\n\n\ndef test_double() -> None:\n    assert double(2) == 4\n"
    ),
}


def _only_tests() -> QAGatesSettings:
    return QAGatesSettings(**{gate: GateSettings(enabled=gate == "test") for gate in GATE_NAMES})


async def _test_gate(root: Path, **options: Any) -> GateResult:
    results = await run_gates(root, [], _only_tests(), **options)
    (test,) = [result for result in results if result.gate == "test"]
    return test


def _uv_project(project: Path, uv: str, environment_dir: Path) -> None:
    """A uv project whose environment lives outside the repository, made offline by uv itself."""
    write_files(project, {"pyproject.toml": STRICT_PYPROJECT + "\n[tool.uv]\npackage = false\n"})
    subprocess.run([uv, "lock", "--quiet"], cwd=project, check=True)
    subprocess.run([uv, "sync", "--quiet", "--frozen"], cwd=project, check=True)
    site = next(environment_dir.glob("lib/python*/site-packages"))
    # pytest and its needs, from this session's environment, as if uv had installed them there.
    (site / "test-tools.pth").write_text(sysconfig.get_path("purelib") + "\n")


@pytest.fixture
def project(repo: Path) -> Path:
    write_files(repo, PROJECT)
    return repo


@pytest.fixture
def bare_shell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A shell with no active environment and only git on PATH (no python3): the last resort's case."""
    bin_dir = tmp_path / "shell-bin"
    bin_dir.mkdir()
    git = shutil.which("git")
    assert git is not None
    (bin_dir / "git").symlink_to(git)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    return bin_dir


async def _resolve(root: Path, **settings: object) -> object:
    return await resolve_environment(root, EnvironmentSettings.model_validate(settings))


@pytest.mark.asyncio
async def test_the_repositorys_venv_comes_before_the_shells_virtual_env(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = make_venv(tmp_path / "outside")
    monkeypatch.setenv("VIRTUAL_ENV", str(outside.parent.parent))
    resolution = await resolve_environment(project, EnvironmentSettings())
    assert resolution.environment is not None
    assert (resolution.environment.source, resolution.environment.python) == ("virtual_env", str(outside))

    inside = make_venv(project / ".venv")
    resolution = await resolve_environment(project, EnvironmentSettings())
    assert resolution.environment is not None
    assert (resolution.environment.source, resolution.environment.python) == ("repo_venv", str(inside))
    # Commands run in it as if it were activated: its bin first on PATH.
    assert resolution.environment.env["PATH"].split(os.pathsep)[0] == str(inside.parent)
    assert resolution.environment.env["VIRTUAL_ENV"] == str(project / ".venv")


@pytest.mark.asyncio
async def test_the_configured_interpreter_wins_and_autodev_names_autodevs_own(
    project: Path, tmp_path: Path
) -> None:
    make_venv(project / ".venv")
    chosen = make_venv(tmp_path / "chosen")
    resolution = await resolve_environment(project, EnvironmentSettings(python=str(chosen)))
    assert resolution.environment is not None
    assert (resolution.environment.source, resolution.environment.python) == ("configured", str(chosen))

    own = await resolve_environment(project, EnvironmentSettings(python=OWN_INTERPRETER))
    assert own.environment is not None
    assert own.environment.own and own.environment.python == sys.executable
    assert own.environment.env == {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}

    missing = await resolve_environment(project, EnvironmentSettings(python="no-such-python-xyz"))
    assert missing.environment is None
    assert missing.problem == "environment.python = 'no-such-python-xyz' is not a file or a command on PATH"


@pytest.mark.asyncio
async def test_a_broken_venv_is_a_problem_not_a_silent_fall_through(project: Path) -> None:
    bin_dir = project / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text("#!/bin/sh\necho 'this interpreter is broken' >&2\nexit 9\n")
    (bin_dir / "python").chmod(0o755)

    resolution = await resolve_environment(project, EnvironmentSettings())

    assert resolution.environment is None
    assert resolution.problem is not None
    assert resolution.problem.startswith("the repository's .venv/ (")
    assert "this interpreter is broken" in resolution.problem


@pytest.mark.asyncio
async def test_conda_prefix_is_the_shells_environment_when_no_virtualenv_is_active(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conda = make_venv(tmp_path / "conda-env")
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setenv("CONDA_PREFIX", str(conda.parent.parent))

    resolution = await resolve_environment(project, EnvironmentSettings())

    assert resolution.environment is not None
    assert (resolution.environment.source, resolution.environment.python) == ("conda", str(conda))


@pytest.mark.asyncio
async def test_autodevs_own_interpreter_runs_a_strict_project_without_autodevs_pytest_plugins(
    project: Path, bare_shell: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # This suite's own interpreter has pytest plugins (pytest-asyncio among them) that, loaded into a
    # project with filterwarnings = ["error"], crash pytest before a single test runs.
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    resolution = await resolve_environment(project, EnvironmentSettings())
    assert resolution.environment is not None and resolution.environment.source == "autodev"
    assert [candidate.source for candidate in resolution.considered][-2:] == ["python_on_path", "autodev"]

    test = await _test_gate(project)

    assert test.status == "pass", test.reason
    assert test.checks[0].argv[:3] == [sys.executable, "-m", "pytest"]
    assert test.counts is not None and test.counts.passed == 1


@pytest.mark.asyncio
async def test_a_python3_on_path_without_pytest_is_passed_over_for_autodevs_own(
    project: Path, bare_shell: Path
) -> None:
    plain = make_venv(project.parent / "plain", with_test_tools=False)
    (bare_shell / "python3").write_text(f'#!/bin/sh\nexec {plain} "$@"\n')
    (bare_shell / "python3").chmod(0o755)

    resolution = await resolve_environment(project, EnvironmentSettings())

    assert resolution.environment is not None and resolution.environment.source == "autodev"
    skipped = next(c for c in resolution.considered if c.source == "python_on_path")
    assert skipped.detail.endswith("cannot import pytest") and not skipped.usable


@pytest.mark.asyncio
async def test_an_environment_without_pytest_in_a_repository_without_tests_is_no_tests(
    repo: Path, tmp_path: Path
) -> None:
    write_files(repo, {"mini/core.py": "X = 1\n", "pyproject.toml": '[project]\nname = "mini"\n'})
    bare = make_venv(tmp_path / "bare", with_test_tools=False)
    resolution = await resolve_environment(repo, EnvironmentSettings(python=str(bare)))
    assert resolution.environment is not None and not resolution.environment.has_pytest

    test = await _test_gate(repo, environment=resolution.environment)
    assert (test.status, test.checks) == ("no_tests", [])

    write_files(repo, {"tests/test_core.py": "def test_x() -> None:\n    pass\n"})
    test = await _test_gate(repo, environment=resolution.environment)
    assert test.status == "error" and test.cause == "environment"
    assert test.reason is not None and "cannot import pytest; install pytest there" in test.reason


@pytest.mark.asyncio
async def test_a_uv_project_is_run_in_the_environment_uv_run_gives(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not installed")
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    # The project's environment lives outside the repository, as UV_PROJECT_ENVIRONMENT allows.
    environment_dir = tmp_path / "uv-env"
    monkeypatch.setenv("UV_PROJECT_ENVIRONMENT", str(environment_dir))
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_PYTHON", sys.executable)
    monkeypatch.setenv("PATH", f"{Path(uv).parent}{os.pathsep}{os.environ['PATH']}")
    await anyio.to_thread.run_sync(_uv_project, project, uv, environment_dir)

    resolution = await resolve_environment(project, EnvironmentSettings())

    assert resolution.environment is not None
    assert resolution.environment.source == "uv"
    assert Path(resolution.environment.python).parent.parent == environment_dir
    assert "`uv run --frozen python`" in resolution.environment.description
    test = await _test_gate(project, environment=resolution.environment)
    assert test.status == "pass", test.reason
    assert Path(test.checks[0].argv[0]).parent.parent == environment_dir


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("tool", "marker"),
    [("poetry", "poetry.lock"), ("pdm", "pdm.lock"), ("hatch", "hatch.toml")],
)
async def test_poetry_pdm_and_hatch_projects_are_asked_for_their_interpreter(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str, marker: str
) -> None:
    # Stand-ins for the tools themselves (not on this machine); each answers `<tool> run python ...` by
    # running the interpreter of an environment outside the repository, as the real tools do.
    target = make_venv(tmp_path / f"{tool}-env")
    bin_dir = tmp_path / "tools"
    bin_dir.mkdir()
    (bin_dir / tool).write_text(
        f'#!/bin/sh\n[ "$1" = run ] && [ "$2" = python ] || exit 64\nshift 2\nexec {target} "$@"\n'
    )
    (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    (project / marker).write_text("")

    resolution = await resolve_environment(project, EnvironmentSettings())

    assert resolution.environment is not None
    assert (resolution.environment.source, resolution.environment.python) == (tool, str(target))
    assert f"`{tool} run python`" in resolution.environment.description


def test_autodevs_own_environment_turns_plugin_autoloading_off() -> None:
    own = autodev_environment()
    assert own.own and own.tool("ruff") is None
    assert own.env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"


@pytest.mark.asyncio
async def test_in_a_worktree_the_worktrees_code_is_tested_not_an_editable_install_of_the_main_checkout(
    tmp_path: Path,
) -> None:
    # A src layout installed editable by path (a .pth line naming the main checkout's src/), as build
    # backends do: in the worktree, its own code must be imported, and nothing only the main checkout has.
    main = tmp_path / "main"
    worktree = main / ".autodev" / "task-worktrees" / "task-1"
    test = (
        "import importlib.util\n\nfrom pkg.mod import VALUE\n\n\ndef test_worktree_code() -> None:\n"
        "    assert VALUE == 2\n    assert importlib.util.find_spec('legacy') is None\n"
    )
    write_files(main, {"src/pkg/__init__.py": "", "src/pkg/mod.py": "VALUE = 1\n", "src/legacy.py": ""})
    write_files(
        worktree, {"src/pkg/__init__.py": "", "src/pkg/mod.py": "VALUE = 2\n", "tests/test_mod.py": test}
    )
    python = make_venv(tmp_path / "env")
    site = python.parent.parent / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    (site / "site-packages" / "__editable__.pkg-0.1.pth").write_text(f"{main / 'src'}\n")
    resolution = await resolve_environment(worktree, EnvironmentSettings(python=str(python)))

    in_worktree = await _test_gate(worktree, environment=resolution.environment, main_root=main)
    assert in_worktree.status == "pass", in_worktree.checks[0].output_excerpt

    # Without knowing it is a worktree, the main checkout's module leaks in: the case the shim closes.
    unaware = await _test_gate(worktree, environment=resolution.environment)
    assert unaware.status == "fail"
