"""``pip install autodev`` alone makes a working tool: the built wheel, no extras, a fresh environment.

The wheel is built from this checkout as a release would be, installed with pip into a new virtual
environment (its dependencies come from the package index, as for a user), and ``autodev demo`` runs the
whole pipeline with the QA gates' default tools, which must have come with the install.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

CHECKOUT = Path(__file__).resolve().parents[2]


def _user_environment() -> dict[str, str]:
    """A shell of a user who just installed autodev: none of this suite's settings or environments."""
    suite_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(entry for entry in os.environ["PATH"].split(os.pathsep) if entry != suite_bin)
    dropped = ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTHONPATH")
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in dropped and not key.startswith("AUTODEV_")
    }
    env["PATH"] = path
    return env


def test_the_built_wheel_installed_without_extras_runs_the_demo(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(CHECKOUT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = dist.glob("autodev-*.whl")
    user = tmp_path / "user-env"
    subprocess.run([sys.executable, "-m", "venv", str(user)], check=True, timeout=120)
    env = _user_environment()
    installed = subprocess.run(
        [str(user / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    # The default gates' tools came with it.
    for tool in ("autodev", "ruff", "detect-secrets", "pytest"):
        assert (user / "bin" / tool).exists(), f"{tool} was not installed with autodev"

    demo = subprocess.run(
        [str(user / "bin" / "autodev"), "demo", "--dir", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )

    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-2000:]
    assert "2 complete, 0 blocked" in demo.stdout
