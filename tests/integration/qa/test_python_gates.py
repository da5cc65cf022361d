"""The QA gates on real Python projects in temp directories, with the real py_compile, ruff, pytest and
detect-secrets: what each gate reports, what counts as a pass, and what is never looked at."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

import pytest
from support.projects import make_venv

from autodev.config.schema import GateSettings, QAGatesSettings
from autodev.errors import PathEscapeError
from autodev.qa import GATE_NAMES, GateResult, run_gates

# The AWS documentation's example access key id: shaped like a real key, valid nowhere.
EXAMPLE_AWS_KEY = "AKIA" + "IOSFODNN7EXAMPLE"

CLEAN_PROJECT = {
    "pyproject.toml": (
        '[project]\nname = "demo"\nversion = "0.1.0"\n\n'
        '[tool.pytest.ini_options]\npythonpath = ["src"]\nasyncio_default_fixture_loop_scope = "function"\n'
    ),
    "src/demo/__init__.py": '"""Demo package."""\n',
    "src/demo/calc.py": "def add(a: int, b: int) -> int:\n    return a + b\n",
    "tests/test_calc.py": (
        "from demo.calc import add\n\n\ndef test_add() -> None:\n    assert add(1, 2) == 3\n"
    ),
}


def _write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


@pytest.fixture
def project(repo: Path) -> Path:
    _write(repo, CLEAN_PROJECT)
    return repo


def _only(
    *gates: str, on_missing_tool: Literal["error", "skip"] = "error", **settings: GateSettings
) -> QAGatesSettings:
    """Gates config with just ``gates`` enabled (keeps each test to the tools it is about)."""
    fields: dict[str, Any] = {gate: GateSettings(enabled=gate in gates) for gate in GATE_NAMES}
    fields.update(settings)
    return QAGatesSettings(on_missing_tool=on_missing_tool, **fields)


def _leftovers(root: Path) -> list[str]:
    """Caches a Python tool would write into the working tree when left to its defaults.

    ``.autodev/`` is AutoDev's own (ignored, never part of a diff); the bytecode cache lives there on purpose.
    """
    found = [*root.rglob("__pycache__"), *root.rglob("*.pyc"), root / ".ruff_cache"]
    return sorted(
        str(path.relative_to(root))
        for path in found
        if path.exists() and path.relative_to(root).parts[0] != ".autodev"
    )


def _gate(results: list[GateResult], gate: str) -> GateResult:
    (found,) = [result for result in results if result.gate == gate]
    return found


@pytest.mark.asyncio
async def test_a_clean_change_passes_every_gate_with_evidence_and_leaves_no_bytecode(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)

    results = await run_gates(project, ["src/demo/calc.py", "tests/test_calc.py"], QAGatesSettings())

    assert [(r.gate, r.language, r.status) for r in results] == [
        ("syntax", "python", "pass"),
        ("lint", "python", "pass"),
        ("build", "python", "pass"),
        ("test", "python", "pass"),
        ("secretscan", None, "pass"),
    ]
    assert all(result.counts_as_pass for result in results)
    for result in results:
        (check,) = result.checks
        assert check.status == "pass" and check.exit_code == 0
        assert check.cwd == str(project)
        assert len(check.output_sha256) == 64
    assert _gate(results, "build").checks[0].argv[-1] == "demo.calc"
    assert "1 passed" in _gate(results, "test").checks[0].output_excerpt
    assert _leftovers(project) == []


def _compiled(prefix: Path) -> set[str]:
    """The source files with bytecode under ``prefix`` (a ``PYTHONPYCACHEPREFIX``), by file name."""
    return {path.name.split(".")[0] + ".py" for path in prefix.rglob("*.pyc")}


@pytest.mark.asyncio
async def test_with_bytecode_writing_off_the_test_gate_still_caches_it_under_autodev_for_the_next_run(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A shell (or a container image) that keeps bytecode out of source trees: the gates' own cache is not
    # one, and without it every run would compile pytest and the project again.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)

    results = await run_gates(project, ["tests/test_calc.py"], _only("test"))

    assert _gate(results, "test").status == "pass"
    compiled = _compiled(project / ".autodev" / "cache" / "pycache")
    assert {"calc.py", "test_calc.py", "fixtures.py"} <= compiled  # the project's, the test's, pytest's
    assert _leftovers(project) == []


@pytest.mark.asyncio
async def test_a_bytecode_prefix_the_user_set_outside_the_project_is_kept(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    users = tmp_path / "bytecode"
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(users))
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)

    results = await run_gates(project, ["tests/test_calc.py"], _only("test"))

    assert _gate(results, "test").status == "pass"
    assert {"calc.py", "test_calc.py"} <= _compiled(users)
    assert not (project / ".autodev" / "cache" / "pycache").exists()
    assert _leftovers(project) == []


@pytest.mark.parametrize("inside", ["build/bytecode", "relative"])
@pytest.mark.asyncio
async def test_a_bytecode_prefix_inside_the_working_copy_gives_way_to_autodevs_cache(
    project: Path, inside: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Absolute and inside the working copy, or relative (to each command's directory, the working copy):
    # either would put bytecode into the tree.
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(project / inside) if inside != "relative" else "pyc")
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)

    results = await run_gates(project, ["tests/test_calc.py"], _only("test"))

    assert _gate(results, "test").status == "pass"
    assert {"calc.py", "test_calc.py"} <= _compiled(project / ".autodev" / "cache" / "pycache")
    assert not (project / "build").exists() and not (project / "pyc").exists()
    assert _leftovers(project) == []


@pytest.mark.asyncio
async def test_a_syntax_error_fails_syntax_and_blocks_the_tests(project: Path) -> None:
    _write(project, {"src/demo/calc.py": "def add(a, b:\n    return a + b\n", "src/demo/more.py": "x = (\n"})

    results = await run_gates(project, ["src/demo/calc.py", "src/demo/more.py"], _only("syntax", "test"))

    syntax, test = _gate(results, "syntax"), _gate(results, "test")
    assert syntax.status == "fail"
    assert syntax.reason == "exited with status 1"
    # Every broken file is reported, not only the first.
    assert 'calc.py", line 1' in syntax.checks[0].output_excerpt
    assert 'more.py", line 1' in syntax.checks[0].output_excerpt
    assert (test.status, test.skipped_by, test.checks) == ("skipped", "syntax_failed", [])
    assert test.reason == "not run: the syntax gate failed for python"
    assert not test.counts_as_pass


@pytest.mark.asyncio
async def test_a_ruff_violation_in_a_changed_file_fails_lint_with_the_rule(project: Path) -> None:
    _write(project, {"src/demo/calc.py": "import os\n\n\ndef add(a: int, b: int) -> int:\n    return a\n"})
    # A problem in a file the change did not touch is not this change's to fix.
    _write(project, {"src/demo/legacy.py": "import sys\n"})

    results = await run_gates(project, ["src/demo/calc.py"], _only("lint"))

    lint = _gate(results, "lint")
    assert lint.status == "fail"
    excerpt = lint.checks[0].output_excerpt
    assert "F401" in excerpt
    assert "src/demo/calc.py" in excerpt
    assert "legacy.py" not in excerpt


@pytest.mark.asyncio
async def test_a_module_that_cannot_be_imported_fails_the_build(project: Path) -> None:
    _write(project, {"src/demo/calc.py": "import demo.nowhere\n"})

    results = await run_gates(project, ["src/demo/calc.py"], _only("build"))

    build = _gate(results, "build")
    assert build.status == "fail"
    assert "ModuleNotFoundError: No module named 'demo.nowhere'" in build.checks[0].output_excerpt


@pytest.mark.asyncio
async def test_a_change_to_loose_scripts_is_compiled_not_imported(project: Path) -> None:
    # Importing a script would run it; the build gate byte-compiles it instead.
    _write(project, {"scripts/wipe.py": "open('wiped', 'w').write('ran')\n"})

    results = await run_gates(project, ["scripts/wipe.py"], _only("build"))

    build = _gate(results, "build")
    assert build.status == "pass"
    assert build.checks[0].argv[1] == "-c"
    assert "compile(" in build.checks[0].argv[2]
    assert not (project / "wiped").exists()


@pytest.mark.asyncio
async def test_a_failing_test_fails_the_test_gate(project: Path) -> None:
    _write(project, {"src/demo/calc.py": "def add(a: int, b: int) -> int:\n    return a - b\n"})

    results = await run_gates(project, ["src/demo/calc.py"], _only("test"))

    test = _gate(results, "test")
    assert (test.status, test.reason) == ("fail", "1 of 1 tests failed")
    assert "1 failed" in test.checks[0].output_excerpt
    # Read from pytest's JUnit report: the failing test by its id, and the counts.
    assert test.finding_keys == ["tests.test_calc::test_add"]
    assert test.findings[0].startswith("tests.test_calc::test_add: failed: assert")
    assert test.counts is not None
    assert (test.counts.passed, test.counts.failed, test.counts.total) == (0, 1, 1)


@pytest.mark.asyncio
async def test_no_tests_is_neither_a_pass_nor_a_failure(project: Path) -> None:
    (project / "tests" / "test_calc.py").unlink()

    results = await run_gates(project, ["src/demo/calc.py"], _only("test"))

    test = _gate(results, "test")
    assert (test.status, test.reason) == ("no_tests", "pytest collected no tests")
    assert test.checks[0].exit_code == 5
    assert not test.counts_as_pass
    assert test.acceptable


@pytest.mark.asyncio
async def test_a_secret_fails_secretscan_naming_file_and_line_but_never_the_secret(project: Path) -> None:
    _write(project, {"src/demo/settings.py": f'"""Settings."""\nAWS_ACCESS_KEY_ID = "{EXAMPLE_AWS_KEY}"\n'})

    results = await run_gates(project, ["src/demo/settings.py", "src/demo/calc.py"], _only("secretscan"))

    scan = _gate(results, "secretscan")
    assert scan.status == "fail"
    assert "src/demo/settings.py:2: AWS Access Key" in scan.findings
    assert scan.reason is not None and "src/demo/settings.py:2: AWS Access Key" in scan.reason
    assert EXAMPLE_AWS_KEY not in scan.model_dump_json()


@pytest.mark.asyncio
async def test_autodev_state_and_git_internals_are_never_checked(project: Path) -> None:
    _write(
        project,
        {
            ".autodev/notes.md": f"key {EXAMPLE_AWS_KEY}\n",
            ".autodev/scratch.py": "def broken(:\n",
            ".git/hooks/helper.py": "def broken(:\n",
        },
    )
    changed = [".autodev/notes.md", ".autodev/scratch.py", "./.git/hooks/helper.py"]

    results = await run_gates(project, changed, _only("syntax", "lint", "secretscan"))

    assert [(r.gate, r.status, r.reason, r.checks) for r in results if r.skipped_by is None] == [
        ("syntax", "pass", "nothing to check: no Python file changed", []),
        ("lint", "pass", "nothing to check: no Python file changed", []),
        ("secretscan", "pass", "nothing to check: no changed file", []),
    ]


@pytest.mark.asyncio
async def test_a_path_outside_the_repository_is_refused(project: Path) -> None:
    with pytest.raises(PathEscapeError):
        await run_gates(project, ["../elsewhere.py"], _only("syntax"))


@pytest.mark.asyncio
async def test_deleted_files_are_not_checked(project: Path) -> None:
    results = await run_gates(project, ["src/demo/removed.py", "src/demo/calc.py"], _only("syntax"))

    (check,) = _gate(results, "syntax").checks
    assert check.argv[3:] == ["src/demo/calc.py"]


@pytest.mark.asyncio
async def test_a_configured_command_replaces_the_tool_and_expands_the_changed_files(project: Path) -> None:
    _write(project, {"README.md": "# demo\n"})
    command = [sys.executable, "-c", "import sys; print('linted', *sys.argv[1:]); sys.exit(4)", "{files}"]
    config = _only("lint", lint=GateSettings(command=command))

    results = await run_gates(project, ["README.md", "src/demo/calc.py", "tests/test_calc.py"], config)

    lint = _gate(results, "lint")
    assert (lint.status, lint.language, lint.reason) == ("fail", None, "exited with status 4")
    assert lint.checks[0].argv == [*command[:3], "src/demo/calc.py", "tests/test_calc.py"]
    assert lint.checks[0].output_excerpt == "linted src/demo/calc.py tests/test_calc.py\n"


@pytest.mark.asyncio
async def test_a_configured_command_with_no_files_to_check_is_not_run(project: Path) -> None:
    config = _only("lint", lint=GateSettings(command=["autodev-no-such-linter", "{files}"]))

    results = await run_gates(project, ["README.md"], config)

    lint = _gate(results, "lint")
    assert (lint.status, lint.checks) == ("pass", [])
    assert lint.reason == "nothing to check: no changed file for {files}"


@pytest.mark.asyncio
async def test_a_missing_tool_is_an_error_unless_configured_to_skip(project: Path) -> None:
    test_settings = GateSettings(command=["autodev-no-such-test-runner", "-q"])

    default = _gate(await run_gates(project, [], _only("test", test=test_settings)), "test")
    skipping = _gate(
        await run_gates(project, [], _only("test", test=test_settings, on_missing_tool="skip")), "test"
    )

    assert default.status == "error"
    assert default.skipped_by is None
    assert default.reason is not None
    assert default.reason.startswith("autodev-no-such-test-runner: not found; ")
    assert default.checks[0].tool_missing
    assert not default.counts_as_pass
    assert (skipping.status, skipping.skipped_by) == ("skipped", "config:on_missing_tool=skip")
    assert skipping.reason == "autodev-no-such-test-runner: not found"
    assert skipping.counts_as_pass


@pytest.mark.asyncio
async def test_a_crashing_tool_is_an_error_even_when_missing_tools_are_skipped(project: Path) -> None:
    command = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"]
    config = _only("test", test=GateSettings(command=command), on_missing_tool="skip")

    results = await run_gates(project, [], config)

    test = _gate(results, "test")
    assert (test.status, test.reason) == ("error", "killed by SIGSEGV")
    assert not test.counts_as_pass


@pytest.mark.asyncio
async def test_a_gate_that_runs_out_of_time_fails(project: Path) -> None:
    command = [sys.executable, "-c", "import time; time.sleep(30)"]
    config = _only("test", test=GateSettings(command=command, timeout_s=1))

    test = _gate(await run_gates(project, [], config), "test")

    assert (test.status, test.reason) == ("fail", "timed out after 1s (qa_gates.test.timeout_s)")
    assert test.checks[0].status == "timeout"


@pytest.mark.asyncio
async def test_disabled_gates_are_reported_as_skipped_by_config(project: Path) -> None:
    results = await run_gates(project, ["src/demo/calc.py"], _only("syntax"))

    assert [(r.gate, r.status, r.skipped_by) for r in results] == [
        ("syntax", "pass", None),
        ("lint", "skipped", "config:disabled"),
        ("build", "skipped", "config:disabled"),
        ("test", "skipped", "config:disabled"),
        ("secretscan", "skipped", "config:disabled"),
    ]
    assert _gate(results, "lint").reason == "disabled by qa_gates.lint.enabled = false"
    assert all(result.counts_as_pass for result in results)


@pytest.mark.asyncio
async def test_with_every_gate_off_nothing_is_looked_at(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No gate runs, so the project is not loaded (its languages are found by a walk of the tree, which
    grows with the repository); the gates are still reported, and a bad path still refused."""

    def not_needed(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("nothing runs: not needed")

    monkeypatch.setattr("autodev.qa.gates.detect_languages", not_needed)
    monkeypatch.setattr("autodev.qa.gates._load_project", not_needed)

    results = await run_gates(project, ["src/demo/calc.py"], _only())

    assert [(r.gate, r.status, r.skipped_by) for r in results] == [
        (gate, "skipped", "config:disabled") for gate in GATE_NAMES
    ]
    with pytest.raises(PathEscapeError):
        await run_gates(project, ["../elsewhere.py"], _only())


@pytest.mark.asyncio
async def test_the_projects_pinned_tools_come_first(project: Path) -> None:
    own_bin = make_venv(project / ".venv").parent
    ruff = Path(sys.executable).parent / "ruff"
    (own_bin / "ruff").symlink_to(ruff)

    results = await run_gates(project, ["src/demo/calc.py"], _only("lint"))

    lint = _gate(results, "lint")
    assert lint.status == "pass"
    assert lint.checks[0].argv[0] == str(own_bin / "ruff")


@pytest.mark.asyncio
async def test_a_repository_with_no_known_language_cannot_pass_by_default(repo: Path) -> None:
    _write(repo, {"README.md": "# notes\n"})

    results = await run_gates(repo, ["README.md"], _only("build"))

    build = _gate(results, "build")
    assert build.status == "error"
    assert build.reason is not None
    assert build.reason.startswith("no supported language (python, nodejs, rust, go) detected")


def test_gate_results_round_trip_and_reject_unknown_fields() -> None:
    result = GateResult(gate="lint", status="skipped", skipped_by="config:disabled")

    assert GateResult.model_validate_json(result.model_dump_json()) == result
    with pytest.raises(ValueError, match="extra"):
        GateResult.model_validate({**result.model_dump(), "passed": True})
    with pytest.raises(ValueError, match="skipped_by is set exactly when"):
        GateResult(gate="lint", status="pass", skipped_by="config:disabled")
