"""Gates never change the tree: ruff does not fix, and a gate that writes anyway is caught and undone.

Real git repositories, the real ruff and pytest; the guard is the one the execute phase uses.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.projects import mini_project, write_files

from autodev.config.schema import GateSettings, QAGatesSettings
from autodev.orchestrator.checks import GitTreeGuard
from autodev.qa import GATE_NAMES, GateResult, run_gates
from autodev.qa.gates import run_on_base_versions
from autodev.workspace.git import GitRepo


def _only(*gates: str) -> QAGatesSettings:
    return QAGatesSettings(**{gate: GateSettings(enabled=gate in gates) for gate in GATE_NAMES})


def _gate(results: list[GateResult], name: str) -> GateResult:
    (found,) = [result for result in results if result.gate == name]
    return found


@pytest.fixture
def strict(repo: Path) -> Path:
    return mini_project(repo)


@pytest.mark.asyncio
async def test_ruff_with_fix_true_reports_the_finding_and_leaves_the_file_as_written(strict: Path) -> None:
    written = "import os\nimport sys\n\n\ndef double(x: int) -> int:\n    return 2 * x\n"
    (strict / "mini" / "core.py").write_text(written)

    results = await run_gates(strict, ["mini/core.py"], _only("lint"), guard=GitTreeGuard(GitRepo(strict)))

    lint = _gate(results, "lint")
    assert lint.status == "fail"
    assert lint.findings == [
        "mini/core.py:1:8: F401 `os` imported but unused",
        "mini/core.py:2:8: F401 `sys` imported but unused",
    ]
    # Keys leave the line out: the same finding a few lines lower is the same finding.
    assert lint.finding_keys[0] == "mini/core.py\0F401\0`os` imported but unused"
    assert (strict / "mini" / "core.py").read_text() == written
    assert lint.checks[0].argv[1:3] == ["check", "--no-fix"]


@pytest.mark.asyncio
async def test_a_gate_that_writes_into_the_tree_is_an_error_naming_the_files_and_they_are_put_back(
    strict: Path,
) -> None:
    write_files(
        strict,
        {
            "tests/test_core.py": (
                "from pathlib import Path\n\n\ndef test_writes() -> None:\n"
                "    Path('report.txt').write_text('x')\n"
                "    Path('mini/core.py').write_text('BROKEN = True\\n')\n"
            )
        },
    )
    before = (strict / "mini" / "core.py").read_text()

    results = await run_gates(strict, [], _only("test"), guard=GitTreeGuard(GitRepo(strict)))

    test = _gate(results, "test")
    assert test.status == "error" and test.cause == "change"
    assert test.changed_files == ["mini/core.py", "report.txt"]
    assert test.reason is not None and test.reason.startswith(
        "the test gate changed the working tree (mini/core.py, report.txt); AutoDev put the files back"
    )
    assert not (strict / "report.txt").exists()
    assert (strict / "mini" / "core.py").read_text() == before


@pytest.mark.asyncio
async def test_base_versions_are_linted_under_their_own_path_with_the_projects_config(strict: Path) -> None:
    # The project's config selects I (import order): a base version with unsorted imports has that
    # finding there too, judged as if the file were at its own path in the working copy.
    base = b"import sys\nimport os\n\nprint(os, sys)\n"

    result = await run_on_base_versions(
        "lint", {"mini/tool.py": base}, strict, _only("lint"), environment=None
    )

    assert result.status == "fail"
    assert [key.split("\0")[:2] for key in result.finding_keys] == [["mini/tool.py", "I001"]]
    assert not (strict / "mini" / "tool.py").exists()
