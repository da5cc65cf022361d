"""Run the installed ``autodev`` executable as a user would: a subprocess in a temporary repository."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import WHOLE_REPOSITORY_SCOPE, Run, RunCli, with_write_scope


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
