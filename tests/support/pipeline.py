"""A whole ``autodev run`` through a real agent CLI: the one-task plan the scripted model answers for every
role, and each CLI's environment set up the way its users set it up, pointed at the local model server.

Each role's prompt carries the envelope line ``AGENT: <role>``, which selects the role's scenario
(``pipeline_scenarios``): the planning roles and the reviewer answer with text (the demo's texts, and a
one-task plan), the developer and the test engineer first call the CLI's own write tool and then answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from autodev.cli.demo import DemoSetup
from support.agent_clis import isolated_env
from support.cli import WHOLE_REPOSITORY_SCOPE, with_write_scope
from support.cli_contract import (
    CODEX_MODEL,
    GEMINI_MODEL,
    OPENCODE_MODEL,
    claude_env,
    opencode_env,
    opencode_user_config,
)
from support.model_server import ModelServer, Scenario

__all__ = [
    "ABSOLUTE_PATHS",
    "AUTODEV",
    "EXECUTABLES",
    "INTENT",
    "PLAN",
    "PRICES",
    "ROLES",
    "SHOUT",
    "SHOUT_TESTS",
    "autodev_in",
    "cli_env",
    "marker",
    "pipeline_scenarios",
    "roles_served",
]

AUTODEV = Path(sys.executable).with_name("autodev")
INTENT = "Add a shout(text) helper to textutils: the text upper-cased, with an exclamation mark."
PLAN = """# Plan: Add a shout helper to textutils

## Phase 1: Shout
Add the helper with its tests.

### Task 1.1: Add shout
- Description: Add shout(text) to textutils/shout.py, returning the text upper-cased with "!" appended.
- Files: textutils/shout.py, tests/test_shout.py
- Acceptance:
  - [ ] shout("hi") == "HI!"
"""
SHOUT = '''"""Raising one's voice."""


def shout(text: str) -> str:
    """``text`` upper-cased, with an exclamation mark."""
    return text.upper() + "!"
'''
SHOUT_TESTS = """from textutils.shout import shout


def test_shout_upper_cases_and_exclaims() -> None:
    assert shout("hi") == "HI!"
"""
ROLES = ("explorer", "domain_expert", "architect", "developer", "reviewer", "test_engineer")


def marker(role: str) -> str:
    return f"AGENT: {role}"


def cli_env(
    platform: str, clis: dict[str, Path], server: ModelServer, home: Path, root: Path
) -> dict[str, str]:
    """The environment (and the config files in ``home``) a user of ``platform`` would have, pointed at
    ``server``, with the CLI's own executable first on PATH."""
    path = {"PATH": f"{clis[EXECUTABLES[platform]].parent}{os.pathsep}{os.environ['PATH']}"}
    if platform == "claude_code":
        return isolated_env(home, root, **path, **claude_env(server.url))
    if platform == "codex":
        codex_home = home / ".codex"
        codex_home.mkdir()
        (codex_home / "config.toml").write_text(
            'model_provider = "mock"\n\n[model_providers.mock]\nname = "mock"\n'
            f'base_url = "{server.url}/v1"\nwire_api = "responses"\nenv_key = "MOCK_API_KEY"\n'
        )
        return isolated_env(home, root, **path, CODEX_HOME=str(codex_home), MOCK_API_KEY="test-key")
    if platform == "opencode":
        config_file = home / "opencode.json"
        user_config = {**opencode_user_config(server, permissive=False), "model": OPENCODE_MODEL}
        config_file.write_text(json.dumps(user_config))
        return {**opencode_env(home, root, config_file), **path}
    settings = home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True)
    trust = {"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}}}
    settings.write_text(json.dumps(trust))
    return isolated_env(home, root, **path, GEMINI_API_KEY="test-key", GOOGLE_GEMINI_BASE_URL=server.url)


PRICES = (
    f'{{"{CODEX_MODEL}" = {{input_per_mtok = 2.0, output_per_mtok = 8.0}}, '
    f'"{OPENCODE_MODEL}" = {{input_per_mtok = 1.0, output_per_mtok = 2.0}}, '
    f'"{GEMINI_MODEL}" = {{input_per_mtok = 1.0, output_per_mtok = 2.0}}}}'
)
EXECUTABLES = {"claude_code": "claude", "codex": "codex", "opencode": "opencode", "gemini": "gemini"}
# OpenCode's write tool takes a path relative to its directory; the others are given absolute ones.
ABSOLUTE_PATHS = {"claude_code": True, "codex": True, "opencode": False, "gemini": True}


def pipeline_scenarios(
    platform: str, demo: DemoSetup, *, developer: Scenario | None = None
) -> list[Scenario]:
    """What the scripted model answers each role of the one-task plan; ``developer`` replaces the
    developer's answer (a refusal, say)."""
    root = demo.repo_root
    demo_texts = {entry.role: entry.text for entry in demo.script.entries if entry.task_id is None}

    def where(relative: str) -> str:
        return str(root / relative) if ABSOLUTE_PATHS[platform] else relative

    # Only a role's own prompt holds its `AGENT:` line; the writing roles come first all the same, so that
    # a prompt quoting another role's envelope could never make a writer answer as someone else.
    return [
        Scenario(
            marker=marker("test_engineer"),
            text="Added tests/test_shout.py.\nRESULTS: passed=2 failed=0 total=2",
            write_path=where("tests/test_shout.py"),
            write_content=SHOUT_TESTS,
        ),
        developer
        or Scenario(
            marker=marker("developer"),
            text="Implemented shout in textutils/shout.py.",
            write_path=where("textutils/shout.py"),
            write_content=SHOUT,
        ),
        Scenario(marker=marker("reviewer"), text="VERDICT: APPROVED\nISSUES:\n- none"),
        Scenario(marker=marker("architect"), text=PLAN),
        Scenario(marker=marker("domain_expert"), text=demo_texts["domain_expert"]),
        Scenario(marker=marker("explorer"), text=demo_texts["explorer"]),
    ]


def roles_served(server: ModelServer) -> list[str]:
    """The role of each request the model server saw, in order ("" for one no role's envelope marks)."""
    return [
        next((role for role in ROLES if marker(role) in json.dumps(request.body)), "")
        for request in server.requests
    ]


def autodev_in(root: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``autodev`` run on ``root`` with exactly ``env``; five minutes at most."""
    return subprocess.run(
        [str(AUTODEV), "-C", str(root), *with_write_scope(args, WHOLE_REPOSITORY_SCOPE)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
