"""Projects built like real ones: virtual environments outside or inside the repository, strict configs."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

__all__ = ["make_venv", "write_files"]


def write_files(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def make_venv(prefix: Path, *, with_test_tools: bool = True) -> Path:
    """A real virtual environment at ``prefix`` (no pip: fast); its interpreter.

    ``with_test_tools`` makes the packages installed beside this test session (pytest among them)
    importable in it through a ``.pth`` file, as if they had been installed there, without a network.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    python = prefix / "bin" / "python"
    if with_test_tools:
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        site = prefix / "lib" / version / "site-packages"
        (site / "autodev-test-tools.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python
