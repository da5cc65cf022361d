"""The QA gates on real Node, Rust and Go projects, with the real toolchains when they are on PATH."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Literal

import pytest

from autodev.config.schema import GateSettings, QAGatesSettings
from autodev.qa import GATE_NAMES, GateResult, run_gates

needs_node = pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("npm") is None, reason="node and npm are not on PATH"
)
needs_cargo = pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not on PATH")
needs_go = pytest.mark.skipif(
    shutil.which("go") is None or shutil.which("gofmt") is None, reason="go and gofmt are not on PATH"
)


def _write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def _without_secretscan(on_missing_tool: Literal["error", "skip"] = "error") -> QAGatesSettings:
    fields: dict[str, Any] = {"secretscan": GateSettings(enabled=False)}
    return QAGatesSettings(on_missing_tool=on_missing_tool, **fields)


def _table(results: list[GateResult]) -> list[tuple[str, str | None, str, str | None]]:
    return [(r.gate, r.language, r.status, r.skipped_by) for r in results]


def _node_project(root: Path, *, scripts: dict[str, str]) -> None:
    package = {"name": "demo", "version": "1.0.0", "private": True, "scripts": scripts}
    _write(
        root,
        {
            "package.json": json.dumps(package, indent=2),
            "index.js": "exports.add = (a, b) => a + b;\n",
            "test/add.test.js": (
                "const test = require('node:test');\n"
                "const assert = require('node:assert');\n"
                "const { add } = require('../index.js');\n"
                "test('adds', () => assert.strictEqual(add(1, 2), 3));\n"
            ),
        },
    )


NODE_SCRIPTS = {"build": "node -e \"require('./index.js')\"", "test": "node --test"}


@needs_node
@pytest.mark.asyncio
async def test_node_project_runs_node_and_npm_and_an_unconfigured_linter_is_not_a_pass(repo: Path) -> None:
    _node_project(repo, scripts=NODE_SCRIPTS)

    results = await run_gates(repo, ["index.js"], _without_secretscan())

    assert _table(results) == [
        ("syntax", "nodejs", "pass", None),
        ("lint", "nodejs", "error", None),
        ("build", "nodejs", "pass", None),
        ("test", "nodejs", "pass", None),
        ("secretscan", None, "skipped", "config:disabled"),
    ]
    syntax, lint, build, test = results[:4]
    assert syntax.checks[0].argv[-2:] == ["--check", "index.js"]
    assert lint.reason is not None
    assert lint.reason.startswith("not configured by the project: no eslint in package.json")
    assert build.checks[0].argv[-2:] == ["run", "build"]
    assert test.checks[0].argv[-1] == "test"


@needs_node
@pytest.mark.asyncio
async def test_node_steps_the_project_lacks_are_skipped_only_when_configured_so(repo: Path) -> None:
    _node_project(repo, scripts={"test": 'echo "Error: no test specified" && exit 1'})

    results = await run_gates(repo, ["index.js"], _without_secretscan(on_missing_tool="skip"))

    assert _table(results)[1:4] == [
        ("lint", "nodejs", "skipped", "config:on_missing_tool=skip"),
        ("build", "nodejs", "skipped", "config:on_missing_tool=skip"),
        ("test", "nodejs", "skipped", "config:on_missing_tool=skip"),
    ]
    assert results[2].reason == 'not configured by the project: package.json has no "build" script'
    assert results[3].reason == 'not configured by the project: package.json has no "test" script'


@needs_node
@pytest.mark.asyncio
async def test_node_syntax_error_names_the_file_and_blocks_the_tests(repo: Path) -> None:
    _node_project(repo, scripts=NODE_SCRIPTS)
    _write(repo, {"lib/ok.mjs": "export const one = 1;\n", "lib/broken.js": "function (\n"})

    results = await run_gates(repo, ["lib/ok.mjs", "lib/broken.js"], _without_secretscan())

    syntax, test = results[0], results[3]
    assert (syntax.status, syntax.reason) == ("fail", "lib/broken.js: exited with status 1")
    assert [check.status for check in syntax.checks] == ["fail", "pass"]
    assert "SyntaxError" in syntax.checks[0].output_excerpt
    assert (test.status, test.skipped_by) == ("skipped", "syntax_failed")


@needs_node
@pytest.mark.asyncio
async def test_node_failing_test_fails_the_test_gate(repo: Path) -> None:
    _node_project(repo, scripts=NODE_SCRIPTS)
    _write(repo, {"index.js": "exports.add = (a, b) => a - b;\n"})

    results = await run_gates(repo, ["index.js"], _without_secretscan())

    assert (results[3].gate, results[3].status, results[3].reason) == ("test", "fail", "exited with status 1")


@needs_node
@pytest.mark.asyncio
async def test_a_broken_package_json_fails_the_project_steps(repo: Path) -> None:
    _node_project(repo, scripts=NODE_SCRIPTS)
    _write(repo, {"package.json": "{ not json"})

    results = await run_gates(repo, ["index.js"], _without_secretscan())

    # node itself refuses to check a file whose package.json it cannot read.
    assert [(r.gate, r.status) for r in results[:4]] == [
        ("syntax", "fail"),
        ("lint", "fail"),
        ("build", "fail"),
        ("test", "skipped"),
    ]
    assert results[1].reason is not None and results[1].reason.startswith("package.json cannot be read: ")
    assert results[2].reason == results[1].reason


@needs_cargo
@pytest.mark.slow
@pytest.mark.asyncio
async def test_rust_project_checks_lints_builds_and_tests_with_cargo(repo: Path) -> None:
    _write(
        repo,
        {
            "Cargo.toml": '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n',
            "src/lib.rs": (
                "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n"
                "#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n"
                "        assert_eq!(super::add(1, 2), 3);\n    }\n}\n"
            ),
        },
    )

    clean = await run_gates(repo, ["src/lib.rs"], _without_secretscan())
    _write(repo, {"src/lib.rs": 'pub fn add(a: i32, b: i32) -> i32 {\n    "not a number"\n}\n'})
    broken = await run_gates(repo, ["src/lib.rs"], _without_secretscan())

    lint = clean[1]
    if lint.status == "error" and lint.reason is not None and "clippy is not installed" in lint.reason:
        pytest.skip("cargo clippy is not installed")
    assert [(r.gate, r.status) for r in clean[:4]] == [
        ("syntax", "pass"),
        ("lint", "pass"),
        ("build", "pass"),
        ("test", "pass"),
    ]
    subcommands = [check.argv[1] for result in clean[:4] for check in result.checks]
    assert subcommands == ["check", "clippy", "build", "test"]
    assert (broken[0].status, broken[3].skipped_by) == ("fail", "syntax_failed")
    assert "mismatched types" in broken[0].checks[0].output_excerpt


@needs_go
@pytest.mark.asyncio
async def test_go_project_formats_vets_builds_and_tests(repo: Path) -> None:
    _write(
        repo,
        {
            "go.mod": "module example.com/demo\n\ngo 1.20\n",
            "add.go": "package demo\n\nfunc Add(a, b int) int {\n\treturn a + b\n}\n",
            "add_test.go": (
                'package demo\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n'
                '\tif Add(1, 2) != 3 {\n\t\tt.Fatal("wrong")\n\t}\n}\n'
            ),
        },
    )

    clean = await run_gates(repo, ["add.go"], _without_secretscan())
    _write(repo, {"add.go": "package demo\n\nfunc Add(a, b int) int {\n return a + b\n}\n"})
    unformatted = await run_gates(repo, ["add.go"], _without_secretscan())

    assert [(r.gate, r.status) for r in clean[:4]] == [
        ("syntax", "pass"),
        ("lint", "pass"),
        ("build", "pass"),
        ("test", "pass"),
    ]
    assert (unformatted[0].status, unformatted[0].findings) == ("fail", ["add.go"])


@pytest.mark.asyncio
async def test_a_missing_toolchain_is_an_error_or_an_explicit_skip(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(repo, {"go.mod": "module example.com/demo\n", "add.go": "package demo\n"})
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))

    failing = await run_gates(repo, ["add.go"], _without_secretscan())
    skipping = await run_gates(repo, ["add.go"], _without_secretscan(on_missing_tool="skip"))

    assert [(r.gate, r.language, r.status) for r in failing[:4]] == [
        (gate, "go", "error") for gate in GATE_NAMES[:4]
    ]
    assert failing[0].reason is not None and failing[0].reason.startswith("gofmt not found (not on PATH); ")
    assert not any(result.counts_as_pass for result in failing[:4])
    assert [(r.status, r.skipped_by, r.reason) for r in skipping[:2]] == [
        ("skipped", "config:on_missing_tool=skip", "gofmt not found (not on PATH)"),
        ("skipped", "config:on_missing_tool=skip", "go not found (not on PATH)"),
    ]
    assert all(result.counts_as_pass for result in skipping)
