"""The real agent CLIs, installed from npm at pinned versions into a git-ignored cache inside the repository.

The first test that needs them runs one ``npm install`` (about half a minute); later runs reuse the cache
while its stamp matches the pinned versions. Where ``npm`` itself is missing the tests are skipped with that
reason; an install that fails is a test error, not a skip (CI has npm and must run them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from filelock import FileLock

__all__ = ["CLI_PACKAGES", "NpmMissing", "cache_dir", "ensure_agent_clis", "isolated_env"]

# Versions verified against the local model server (see the project's agent CLI notes).
CLI_PACKAGES: dict[str, str] = {
    "claude": "@anthropic-ai/claude-code@2.1.328",
    "codex": "@openai/codex@0.169.0",
    "opencode": "opencode-ai@1.18.33",
    "gemini": "@google/gemini-cli@0.61.0",
}

_REPO_ROOT = Path(__file__).resolve().parents[2]


class NpmMissing(Exception):
    """npm is not on PATH: the real-CLI tests cannot run on this machine."""


def cache_dir() -> Path:
    return _REPO_ROOT / ".cache" / "agent-clis"


def ensure_agent_clis() -> dict[str, Path]:
    """Install (once) and return the path of each pinned CLI executable."""
    npm = shutil.which("npm")
    if npm is None:
        raise NpmMissing("npm is not on PATH; install Node.js and npm to run the real agent CLI tests")
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    stamp = root / "installed.json"
    wanted = sorted(CLI_PACKAGES.values())
    bin_dir = root / "node_modules" / ".bin"
    with FileLock(str(root / "install.lock"), timeout=600):
        current = json.loads(stamp.read_text()) if stamp.exists() else None
        missing = [name for name in CLI_PACKAGES if not (bin_dir / name).exists()]
        if current != wanted or missing:
            result = subprocess.run(
                [
                    npm,
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    "--prefix",
                    str(root),
                    *wanted,
                ],
                capture_output=True,
                text=True,
                timeout=900,
                stdin=subprocess.DEVNULL,
            )
            if result.returncode != 0:
                raise RuntimeError(f"npm install of the agent CLIs failed:\n{result.stderr[-3000:]}")
            stamp.write_text(json.dumps(wanted))
    return {name: bin_dir / name for name in CLI_PACKAGES}


def isolated_env(home: Path, cwd: Path, **extra: str) -> dict[str, str]:
    """The environment for one CLI run: its own HOME and XDG dirs, PWD pinned, no inherited agent settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(
            ("ANTHROPIC_", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_", "OPENCODE_", "CLAUDE_")
        )
    }
    env.update(
        {
            "HOME": str(home),
            "PWD": str(cwd),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "NO_COLOR": "1",
        }
    )
    env.update(extra)
    return env
