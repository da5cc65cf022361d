"""Projects built like real ones: strict configs, environments outside or inside the repository, git-ignored
build outputs, pre-existing failures, no tests at all; and a one-task script that drives them."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autodev.adapters.scripted import Script
from support.parallel import git

__all__ = [
    "STRICT_PYPROJECT",
    "git",
    "make_venv",
    "mini_project",
    "one_task_script",
    "write_files",
]

# What serious projects set: ruff allowed to fix files on its own, every warning an error in the tests.
STRICT_PYPROJECT = """\
[project]
name = "mini"
version = "0.1.0"
requires-python = ">=3.11"

[tool.ruff]
fix = true
line-length = 100

[tool.ruff.lint]
select = ["E", "F", "I"]

[tool.pytest.ini_options]
testpaths = ["tests"]
filterwarnings = ["error"]
"""

MINI_FILES = {
    "pyproject.toml": STRICT_PYPROJECT,
    "mini/__init__.py": '"""A small package."""\n',
    "mini/core.py": '"""Arithmetic."""\n\n\ndef double(x: int) -> int:\n    return 2 * x\n',
    "tests/test_core.py": (
        "from mini.core import double\n\n\ndef test_double() -> None:\n    assert double(2) == 4\n"
    ),
    ".gitignore": "__pycache__/\n",
}

TRIPLE = (
    '"""Arithmetic."""\n\n\ndef double(x: int) -> int:\n    return 2 * x\n\n\n'
    "def triple(x: int) -> int:\n    return 3 * x\n"
)
TRIPLE_TESTS = "from mini.core import triple\n\n\ndef test_triple() -> None:\n    assert triple(2) == 6\n"

PLAN = """# Plan: Add triple to mini

## Phase 1: Triple

### Task 1.1: Add triple
- Description: Add triple(x) to mini/core.py, with a test.
- Files: mini/core.py, tests/test_triple.py
- Acceptance:
  - [ ] triple(2) == 6
"""


def write_files(root: Path, files: Mapping[str, str]) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def mini_project(root: Path, extra: Mapping[str, str] | None = None, *, drop: Sequence[str] = ()) -> Path:
    """The strict ``mini`` package as a committed git repository (``extra`` added, ``drop`` left out)."""
    root.mkdir(parents=True, exist_ok=True)
    files = {path: text for path, text in {**MINI_FILES, **(extra or {})}.items() if path not in drop}
    write_files(root, files)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "mini: initial version")
    return root


def make_venv(prefix: Path, *, with_test_tools: bool = True) -> Path:
    """A real virtual environment at ``prefix`` (no pip: fast); its interpreter.

    ``with_test_tools`` makes the packages installed beside this test session (pytest among them)
    importable in it through a ``.pth`` file, as if they had been installed there, without a network.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    python = prefix / "bin" / "python"
    if with_test_tools:
        site = prefix / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
        (site / "autodev-test-tools.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return python


def one_task_script(
    *,
    plan: str = PLAN,
    developer: Sequence[Mapping[str, Any]] = ({"path": "mini/core.py", "content": TRIPLE},),
    tests: Sequence[Mapping[str, Any]] = ({"path": "tests/test_triple.py", "content": TRIPLE_TESTS},),
    results: str = "RESULTS: passed=2 failed=0 total=2",
    reviewer: Sequence[str] = ("VERDICT: APPROVED\nISSUES:\n",),
    test_replies: Sequence[str] | None = None,
    test_responses: Sequence[Mapping[str, Any]] | None = None,
    explorer: str = "mini is a package; tests in tests/ run with pytest.\nFILES:\n- mini/core.py\n",
    extra_entries: Sequence[Mapping[str, Any]] = (),
) -> Script:
    """A script for ``plan`` (one task, 1.1 by default): the developer writes ``developer``, the reviewer
    answers ``reviewer`` in turn, the test engineer writes ``tests`` and answers ``results`` (or
    ``test_replies`` in turn, or gives ``test_responses`` as they are)."""
    test_entry: dict[str, Any] = {"role": "test_engineer"}
    if test_responses is not None:
        test_entry["responses"] = list(test_responses)
    elif test_replies is not None:
        test_entry["responses"] = [{"text": reply, "edits": list(tests)} for reply in test_replies]
    else:
        test_entry.update(text=f"Added the tests.\n{results}", edits=list(tests))
    return Script.model_validate(
        {
            "entries": [
                {"role": "explorer", "text": explorer},
                {"role": "domain_expert", "text": "TOPIC: arithmetic\nKeep it simple.\nCONFIDENCE: HIGH\n"},
                {"role": "architect", "text": plan},
                {"role": "developer", "text": "Implemented it.", "edits": list(developer)},
                {"role": "reviewer", "responses": [{"text": reply} for reply in reviewer]},
                test_entry,
                {"role": "critic_sounding_board", "text": "VERDICT: REJECTED\nRECOMMENDATION: re-plan\n"},
                *extra_entries,
            ]
        }
    )
