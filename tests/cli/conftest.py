"""Run the installed ``autodev`` executable as a user would: a subprocess in a temporary repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import WHOLE_REPOSITORY_SCOPE, Run, RunCli, with_write_scope

from autodev.cli.demo import DemoSetup, prepare_demo


@pytest.fixture
def autodev_exe() -> Path:
    exe = Path(sys.executable).with_name("autodev")
    assert exe.exists(), f"the autodev console script is not installed next to {sys.executable}"
    return exe


@pytest.fixture
def run_cli(autodev_exe: Path, repo: Path) -> RunCli:
    def run(
        *args: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        write_scope: str | None = WHOLE_REPOSITORY_SCOPE,
    ) -> Run:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("AUTODEV_")}
        full_env.update(env or {})
        proc = subprocess.run(
            [str(autodev_exe), *with_write_scope(args, write_scope)],
            cwd=cwd or repo,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        return Run(proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture
def demo(tmp_path: Path) -> DemoSetup:
    """The demo project (``autodev demo``'s repository and script), for the tests that drive it."""
    return prepare_demo(tmp_path / "project")


@pytest.fixture
def agents(demo: DemoSetup, tmp_path: Path) -> list[str]:
    """The options that make ``run``/``execute``/``resume`` play the demo's scripted agents."""
    script = tmp_path / "script.json"
    script.write_text(demo.script.model_dump_json(exclude_defaults=True), encoding="utf-8")
    return ["--platform", "scripted", "--script", str(script)]
