"""Where the QA tools come from, and what ``probe_tools`` (the tool list of ``autodev doctor``) reports."""

from __future__ import annotations

import dataclasses
import shutil
import sys
import sysconfig
from pathlib import Path

import pytest

from autodev.qa import PROBED_TOOLS, probe_tools, resolve_tool
from autodev.qa.environment import ProjectEnvironment, autodev_environment


def _executable(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _argv(name: str, repo: Path, environment: ProjectEnvironment | None = None) -> tuple[str, ...]:
    tool = resolve_tool(name, repo, environment)
    assert tool is not None, f"{name} not resolved"
    return tool.argv


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH of one empty directory, so only what a test puts there is on it."""
    directory = tmp_path / "bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", str(directory))
    return directory


@pytest.mark.asyncio
async def test_every_tool_is_reported_found_with_its_version_or_missing(bare_path: Path) -> None:
    git = shutil.which("git", path="/usr/bin:/bin:/usr/local/bin")
    if git is None:
        pytest.skip("git is not installed")
    (bare_path / "git").symlink_to(git)

    probes = await probe_tools(environment=autodev_environment())

    assert [probe.name for probe in probes] == list(PROBED_TOOLS)
    found = {probe.name: probe for probe in probes}
    # AutoDev's own copies (dependencies of AutoDev) serve when the project pins none.
    assert found["ruff"].path == str(Path(sysconfig.get_path("scripts")) / "ruff")
    assert found["pytest"].path == f"{sys.executable} -m pytest"
    assert found["ruff"].version is not None and found["ruff"].version.startswith("ruff ")
    assert found["pytest"].version is not None and found["pytest"].version.startswith("pytest ")
    assert found["detect-secrets"].found and found["detect-secrets"].version
    assert found["git"].version is not None and found["git"].version.startswith("git version")
    for name in ("node", "npm", "cargo", "go"):
        assert (found[name].found, found[name].error) == (False, "not on PATH")


@pytest.mark.asyncio
async def test_a_tool_that_hangs_or_fails_is_reported_not_raised(bare_path: Path) -> None:
    _executable(bare_path, "node", f"exec {sys.executable} -c 'import time; time.sleep(30)'")
    _executable(bare_path, "npm", "echo 'npm is broken' >&2; exit 7")

    probes = {probe.name: probe for probe in await probe_tools(timeout_s=0.5)}

    assert probes["node"].found
    assert probes["node"].error == "did not finish within 0.5s; its process group was killed"
    assert probes["npm"].found
    assert probes["npm"].error == "exited with status 7: npm is broken"


def test_the_projects_pinned_python_tool_comes_first(repo: Path, bare_path: Path) -> None:
    _executable(bare_path, "ruff", "exit 0")
    own = repo / ".venv" / "bin"
    own.mkdir(parents=True)
    environment = dataclasses.replace(
        autodev_environment(), source="repo_venv", python=str(own / "python"), env={}
    )
    assert _argv("ruff", repo, environment) == (str(Path(sysconfig.get_path("scripts")) / "ruff"),)

    _executable(own, "ruff", "exit 0")

    assert _argv("ruff", repo, environment) == (str(own / "ruff"),)
    # AutoDev's own interpreter pins nothing: its copy is AutoDev's.
    assert _argv("ruff", repo, autodev_environment())[0] != str(own / "ruff")


def test_eslint_comes_from_the_projects_node_modules(repo: Path, bare_path: Path) -> None:
    assert resolve_tool("eslint", repo) is None

    local = repo / "node_modules" / ".bin"
    local.mkdir(parents=True)
    _executable(local, "eslint", "exit 0")

    assert _argv("eslint", repo) == (str(local / "eslint"),)
