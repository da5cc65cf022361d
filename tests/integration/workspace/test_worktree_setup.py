"""A task worktree is a working copy the project's tests accept.

The project is built like a popular library's checkout: its version file is a git-ignored build output,
and its environment (outside the repository, active through ``VIRTUAL_ENV``) holds a real editable install
of the main checkout (setuptools, finder-based). Tasks run in parallel worktrees.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.orchestration import orchestrator, run
from support.projects import git, make_venv, write_files

from autodev.adapters.scripted import Script
from autodev.orchestrator.preflight import PreflightError

pytestmark = pytest.mark.slow

PROJECT = {
    "pyproject.toml": (
        '[build-system]\nrequires = ["setuptools>=70.1"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "verpkg"\nversion = "0.1.0"\n\n[tool.setuptools]\npackages = ["verpkg"]\n\n'
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\nfilterwarnings = ["error"]\n'
    ),
    ".gitignore": "verpkg/_version.py\n*.egg-info/\nbuild/\n__pycache__/\n",
    "verpkg/__init__.py": '"""Generated version."""\n\nfrom verpkg._version import VERSION\n',
    "verpkg/core.py": "def double(x: int) -> int:\n    return 2 * x\n",
    "tests/test_core.py": (
        "from verpkg.core import double\n\n\ndef test_double() -> None:\n    assert double(2) == 4\n"
    ),
}
PLAN = """# Plan: Two helpers

## Phase 1: Helpers

### Task 1.1: Triple
- Description: Add verpkg/triple.py.
- Files: verpkg/triple.py, tests/test_triple.py
- Acceptance:
  - [ ] triple(2) == 6

### Task 1.2: Quadruple
- Description: Add verpkg/quad.py.
- Files: verpkg/quad.py, tests/test_quad.py
- Acceptance:
  - [ ] quad(2) == 8
"""


def _helper(name: str, factor: int) -> list[dict[str, str]]:
    return [
        {"path": f"verpkg/{name}.py", "content": f"def {name}(x: int) -> int:\n    return {factor} * x\n"}
    ]


def _tests(name: str, factor: int) -> list[dict[str, str]]:
    # Imports through the package: with the editable install of the main checkout winning, the new module
    # (only in the task's worktree) would not be found and this test would fail.
    body = (
        f"from verpkg.{name} import {name}\n\n\ndef test_{name}() -> None:\n"
        f"    assert {name}(2) == {2 * factor}\n"
    )
    return [{"path": f"tests/test_{name}.py", "content": body}]


def _script() -> Script:
    entries: list[dict[str, Any]] = [
        {"role": "explorer", "text": "verpkg: one helper per module.\nFILES:\n- verpkg/core.py\n"},
        {"role": "domain_expert", "text": "TOPIC: helpers\nNothing special.\nCONFIDENCE: HIGH\n"},
        {"role": "architect", "text": PLAN},
        {"role": "reviewer", "text": "VERDICT: APPROVED\nISSUES:\n"},
    ]
    for task_id, name, factor in (("1.1", "triple", 3), ("1.2", "quad", 4)):
        entries += [
            {"role": "developer", "task_id": task_id, "text": "done", "edits": _helper(name, factor)},
            {
                "role": "test_engineer",
                "task_id": task_id,
                "text": "RESULTS: passed=2 failed=0 total=2",
                "edits": _tests(name, factor),
            },
        ]
    return Script.model_validate({"entries": entries})


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "verpkg"
    write_files(root, PROJECT)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "verpkg: initial version")
    (root / "verpkg" / "_version.py").write_text('VERSION = "0.1.0"\n')  # what the build backend writes
    python = make_venv(tmp_path / "envs" / "verpkg")
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "-e", str(root)],
        check=True,
        capture_output=True,
    )
    monkeypatch.setenv("VIRTUAL_ENV", str(python.parent.parent))
    assert git(root, "status", "--porcelain") == ""  # the build outputs are ignored
    return root


def _config(**settings: Any) -> dict[str, Any]:
    return {"tournaments.execute_max_parallel_tasks": 2, "qa_gates.build.enabled": False, **settings}


def test_a_base_that_works_only_in_the_main_checkout_stops_the_run_naming_the_missing_files(
    checkout: Path,
) -> None:
    orch, adapter = orchestrator(checkout, _script(), **_config())

    with pytest.raises(PreflightError) as stopped:
        run(orch, "add two helpers")

    message = stopped.value.message
    assert "works in the main checkout but not in a fresh worktree" in message
    assert "git-ignored files the main checkout has and the worktree lacks: " in message
    assert "verpkg/_version.py" in message
    assert "worktree_setup.copy_ignored" in message and "worktree_setup.command" in message
    assert adapter.calls == []


def test_copied_build_outputs_make_worktrees_pass_and_the_worktrees_code_is_what_is_tested(
    checkout: Path,
) -> None:
    orch, _ = orchestrator(
        checkout, _script(), **_config(**{"worktree_setup.copy_ignored": ["verpkg/_version.py"]})
    )

    outcome = run(orch, "add two helpers")

    assert sorted((task.id, task.status, task.retry_count) for task in outcome.tasks) == [
        ("1.1", "complete", 0),
        ("1.2", "complete", 0),
    ]
    for task_id in ("1.1", "1.2"):
        evidence = json.loads((checkout / ".autodev" / "evidence" / f"{task_id}-test-1.json").read_text())
        assert evidence["run_status"] == "pass" and evidence["run_passed"] == 2, evidence
    assert (checkout / "verpkg" / "triple.py").exists() and (checkout / "verpkg" / "quad.py").exists()


def test_a_setup_command_runs_once_in_each_new_worktree_of_the_pool(checkout: Path, tmp_path: Path) -> None:
    log = tmp_path / "setup.log"
    generate = (
        "import pathlib, os; pathlib.Path('verpkg/_version.py').write_text('VERSION = \"0.1.0\"\\n'); "
        f"open({str(log)!r}, 'a').write(os.getcwd() + '\\n')"
    )
    settings = {"worktree_setup.command": [sys.executable, "-c", generate], "worktree_pool_enabled": True}
    orch, _ = orchestrator(checkout, _script(), **_config(**settings))

    outcome = run(orch, "add two helpers")

    assert {task.status for task in outcome.tasks} == {"complete"}
    ran_in = log.read_text().splitlines()
    # The baseline's worktree and the pool's two, once each: recycling a worktree does not set it up again.
    assert len(ran_in) == len(set(ran_in)) == 3
    assert all(".autodev" in path for path in ran_in)
