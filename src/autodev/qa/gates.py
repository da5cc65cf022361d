"""The five QA gates a change must pass before review: syntax, lint, build, test, secretscan.

``run_gates`` runs every enabled gate, in that order, for each language of the repository (``detect``),
and returns one ``GateResult`` per gate and language; secretscan and a gate whose command comes from the
configuration run once, with no language. All gates run even after a failure, so one round reports every
problem; only ``test`` is not run for a language whose ``syntax`` gate failed (status ``skipped``,
``skipped_by="syntax_failed"``, which is not a pass). Every command goes through ``run_check``: argv, no
shell, cwd pinned to the repository root, the gate's ``timeout_s`` as deadline (shared by the commands of
one gate), bounded output and a digest, all kept in ``GateResult.checks``.

Changed files are validated with ``normalize_repo_path`` (a path leaving the repository raises
``PathEscapeError``); files under ``.autodev/`` or ``.git/``, and files that no longer exist (deleted by
the change), are never checked.

Commands per language (``{files}``: the changed files of that language; tools are resolved as
``autodev.qa.tools`` describes, the repository's own first):

- python: syntax ``python -c <py_compile each file>`` over changed ``.py`` (all files, not just the first
  error); lint ``ruff check --no-cache --force-exclude {files}`` (the repository's ruff configuration
  applies); build imports every changed module that is library code (inside a package at the root, or
  anywhere under ``src/``, which is put on ``PYTHONPATH``) and, when the change has no such module,
  ``python -m compileall -q {files}``; test ``pytest -q``. Bytecode goes to a scratch directory
  (``PYTHONPYCACHEPREFIX``), never into the repository.
- nodejs: syntax ``node --check`` once per changed ``.js/.mjs/.cjs``; lint ``eslint {files}`` (the
  project's ``node_modules/.bin/eslint``) when package.json declares eslint or an ESLint config file exists;
  build ``npm run build`` when package.json has a ``build`` script; test ``npm test`` when it has a ``test``
  script other than npm's "no test specified" placeholder.
- rust: syntax ``cargo check --all-targets``; lint ``cargo clippy --all-targets``; build ``cargo build``;
  test ``cargo test`` (a run of zero tests fails).
- go: syntax ``gofmt -l -e {files}`` (a file needing formatting fails); lint ``go vet ./...``; build
  ``go build ./...``; test ``go test ./...`` (no package with tests fails).

secretscan: ``detect-secrets scan --no-verify {every changed file}``; each finding is reported as
``file:line: type`` (the report holds only a hash of the secret, never the secret).

How a result is read:

- ``pass``: the tool ran and found nothing. A gate with nothing to check (syntax, lint and Python's build
  look only at changed files of their language, so a change without any is "nothing to check") is a
  ``pass`` whose ``reason`` says so. A test gate that finds no test is a ``fail`` ("no tests collected"):
  an empty suite proves nothing.
- ``fail``: the tool ran and reported a problem, or the gate ran out of time.
- ``error``: the gate could not run: its tool is missing, was killed by a signal or could not start, or
  (nodejs lint/build/test) the project configures no such step, or no supported language was detected.
  Nothing that could not run counts as passed.
- ``skipped``: ``enabled = false`` gives ``skipped_by="config:disabled"``; ``on_missing_tool = "skip"``
  turns a missing tool or an unconfigured step (never a crash) into
  ``skipped_by="config:on_missing_tool=skip"``. Only these explicit settings make a skip count as a pass
  (``counts_as_pass``), and ``skipped_by`` keeps them visible; a test gate skipped because syntax failed
  (``skipped_by="syntax_failed"``) does not count.

``qa_gates.<gate>.command`` replaces the detected command(s) of that gate: it runs once, from the
repository root, with each argv element that is exactly ``{files}`` replaced by the changed files of the
detected languages (every changed file for secretscan; nothing to check when there are none). Its exit
status decides, except that a secretscan command printing a detect-secrets report is read as one.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal, get_args

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, model_validator

from autodev.config.schema import GateSettings, QAGatesSettings
from autodev.qa.detect import LANGUAGES, Language, detect_languages
from autodev.qa.runner import CheckResult, CheckSpec, run_check
from autodev.qa.tools import looked_for, python_interpreter, resolve_tool
from autodev.state.paths import STATE_DIR_NAME, normalize_repo_path

__all__ = [
    "FILES_TOKEN",
    "GATE_NAMES",
    "GateName",
    "GateResult",
    "GateStatus",
    "SkipCause",
    "run_gates",
]

GateName = Literal["syntax", "lint", "build", "test", "secretscan"]
GATE_NAMES: tuple[GateName, ...] = get_args(GateName)
"""Every gate, in the order ``run_gates`` runs them."""
GateStatus = Literal["pass", "fail", "error", "skipped"]
SkipCause = Literal["config:disabled", "config:on_missing_tool=skip", "syntax_failed"]
FILES_TOKEN = "{files}"
"""The argv element of a configured command that stands for the changed files."""

_SKIPS_THAT_PASS: frozenset[SkipCause | None] = frozenset({"config:disabled", "config:on_missing_tool=skip"})
_EXCLUDED_TOPS = frozenset({STATE_DIR_NAME, ".git"})
_REPORT_LIMIT = 16 * 1024 * 1024
_SHOWN_FINDINGS = 10

_NODE_SCRIPTS = (".js", ".mjs", ".cjs")
_NODE_SOURCES = (*_NODE_SCRIPTS, ".jsx", ".ts", ".tsx", ".mts", ".cts")
_ESLINT_CONFIGS = (
    "eslint.config.js",
    "eslint.config.mjs",
    "eslint.config.cjs",
    "eslint.config.ts",
    "eslint.config.mts",
    "eslint.config.cts",
    ".eslintrc",
    ".eslintrc.js",
    ".eslintrc.cjs",
    ".eslintrc.json",
    ".eslintrc.yaml",
    ".eslintrc.yml",
)
# npm would otherwise reach out to the registry to advertise updates and funding while a gate runs.
_NPM_ENV = {"npm_config_update_notifier": "false", "npm_config_fund": "false", "npm_config_audit": "false"}
_CARGO_ENV = {"CARGO_TERM_COLOR": "never"}
_CARGO_TEST_RESULT = re.compile(rb"test result: \w+\. (\d+) passed")

# `python -m py_compile a b` stops at the first broken file (3.11); this reports every one.
_COMPILE_FILES = """\
import py_compile, sys
failed = 0
for name in sys.argv[1:]:
    try:
        py_compile.compile(name, doraise=True)
    except py_compile.PyCompileError as exc:
        sys.stderr.write(exc.msg.rstrip() + "\\n")
        failed = 1
sys.exit(failed)
"""
# BaseException too: a module that calls sys.exit() or raises KeyboardInterrupt at import is broken.
_IMPORT_MODULES = """\
import importlib, sys, traceback
failed = 0
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException:
        sys.stderr.write(f"cannot import {name}:\\n")
        traceback.print_exc()
        failed = 1
sys.exit(failed)
"""


class GateResult(BaseModel):
    """What one gate found for one language (``None``: a configured command, or secretscan).

    ``checks`` are the commands it ran, in order, each with exit status and output digest; ``reason``
    explains anything but a plain pass; ``findings`` lists what secretscan (``file:line: type``) or gofmt
    (files) reported; ``skipped_by`` says who skipped the gate and is set exactly when it was skipped.
    """

    model_config = ConfigDict(extra="forbid")

    gate: GateName
    status: GateStatus
    language: Language | None = None
    checks: list[CheckResult] = Field(default_factory=list)
    reason: str | None = None
    skipped_by: SkipCause | None = None
    findings: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _skipped_by_iff_skipped(self) -> GateResult:
        if (self.status == "skipped") != (self.skipped_by is not None):
            raise ValueError("skipped_by is set exactly when status is 'skipped'")
        return self

    @property
    def counts_as_pass(self) -> bool:
        """A pass, or a skip the configuration asked for; never a gate that could not run or was blocked."""
        return self.status == "pass" or (self.status == "skipped" and self.skipped_by in _SKIPS_THAT_PASS)


async def run_gates(
    repo_root: Path,
    changed_files: Sequence[str],
    config: QAGatesSettings,
    *,
    languages: Sequence[Language] | None = None,
    state_dir: Path | None = None,
) -> list[GateResult]:
    """Run the enabled gates over ``changed_files`` (paths relative to ``repo_root``), as the module says.

    ``languages`` replaces detection. ``state_dir`` is the AutoDev state directory whose bytecode cache and
    child-process registry the gates use (default ``<repo_root>/.autodev``): a task's worktree passes its
    main repository's, so that a new worktree does not compile the test runner again and a gate tool a kill
    orphans is found and stopped by the next run. Raises ``PathEscapeError`` for a changed path outside
    the repository; every other problem is a ``GateResult``.
    """
    results: list[GateResult] = []
    with tempfile.TemporaryDirectory(prefix="autodev-qa-") as scratch:
        project = await anyio.to_thread.run_sync(
            _load_project, repo_root, tuple(changed_files), languages, Path(scratch), state_dir
        )
        for gate in GATE_NAMES:
            settings = _gate_settings(config, gate)
            if not settings.enabled:
                reason = f"disabled by qa_gates.{gate}.enabled = false"
                results.append(
                    GateResult(gate=gate, status="skipped", reason=reason, skipped_by="config:disabled")
                )
                continue
            steps = await anyio.to_thread.run_sync(_plan_gate, gate, settings, project)
            for language, step in steps:
                if gate == "test" and _syntax_failed(results, language):
                    results.append(_blocked_by_syntax(language))
                    continue
                results.append(await _settle(gate, language, step, settings, config, project))
    return results


def _gate_settings(config: QAGatesSettings, gate: GateName) -> GateSettings:
    return {
        "syntax": config.syntax,
        "lint": config.lint,
        "build": config.build,
        "test": config.test,
        "secretscan": config.secretscan,
    }[gate]


# --- what the gates look at -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Project:
    """The repository as the gates see it: changed files to check, languages, where bytecode goes."""

    root: Path
    files: tuple[str, ...]
    languages: tuple[Language, ...]
    scratch: Path
    # package.json as parsed, or why it could not be; None when the project is not a nodejs one.
    package: Mapping[str, Any] | str | None
    state: Path  # the .autodev directory: bytecode cache and child registry

    def files_where(self, keep: Callable[[PurePosixPath], bool]) -> tuple[str, ...]:
        return tuple(path for path in self.files if keep(PurePosixPath(path)))

    def files_with(self, *suffixes: str) -> tuple[str, ...]:
        return self.files_where(lambda path: path.suffix in suffixes)

    def source_files(self) -> tuple[str, ...]:
        """Changed files of the detected languages; every changed file when no language was detected."""
        if not self.languages:
            return self.files
        return self.files_where(lambda path: any(_LANGUAGE_FILES[lang](path) for lang in self.languages))


_LANGUAGE_FILES: dict[Language, Callable[[PurePosixPath], bool]] = {
    "python": lambda path: path.suffix == ".py",
    "nodejs": lambda path: path.suffix in _NODE_SOURCES,
    "rust": lambda path: path.suffix == ".rs" or path.name in ("Cargo.toml", "Cargo.lock"),
    "go": lambda path: path.suffix == ".go" or path.name in ("go.mod", "go.sum"),
}


def _load_project(
    repo_root: Path,
    changed: tuple[str, ...],
    languages: Sequence[Language] | None,
    scratch: Path,
    state_dir: Path | None = None,
) -> _Project:
    root = repo_root.resolve()
    files: set[str] = set()
    for path in changed:
        clean = normalize_repo_path(path, root, context="changed file")
        if clean.split("/", 1)[0] not in _EXCLUDED_TOPS and (root / clean).is_file():
            files.add(clean)
    found = detect_languages(root) if languages is None else sorted(set(languages), key=LANGUAGES.index)
    package = _read_package_json(root) if "nodejs" in found else None
    state = state_dir if state_dir is not None else root / STATE_DIR_NAME
    return _Project(root, tuple(sorted(files)), tuple(found), scratch, package, state)


def _read_package_json(root: Path) -> Mapping[str, Any] | str | None:
    path = root / "package.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"package.json cannot be read: {exc}"
    if not isinstance(data, dict):
        return "package.json cannot be read: it is not a JSON object"
    return data


# --- planning: what each gate runs ----------------------------------------------------------------------

_Verdict = Literal["pass", "fail", "error", "missing"]


@dataclass(frozen=True, slots=True)
class _Outcome:
    """How one command went, as the gate reads it; ``missing`` is a tool or step that is not there."""

    status: _Verdict
    reason: str | None = None
    findings: tuple[str, ...] = ()


# A judge reads a finished command beyond its exit status: (check, stdout lines, outcome by exit status).
_Judge = Callable[[CheckResult, Sequence[bytes], _Outcome], _Outcome]


@dataclass(frozen=True, slots=True)
class _Command:
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    judge: _Judge | None = None
    reads_output: bool = False
    label: str | None = None


@dataclass(frozen=True, slots=True)
class _Decided:
    """A gate whose outcome is known without running anything."""

    outcome: _Outcome


_Step = tuple[_Command, ...] | _Decided


def _nothing_to_check(what: str) -> _Decided:
    return _Decided(_Outcome("pass", f"nothing to check: {what}"))


def _not_configured(what: str) -> _Decided:
    return _Decided(_Outcome("missing", f"not configured by the project: {what}"))


def _plan_gate(
    gate: GateName, settings: GateSettings, project: _Project
) -> list[tuple[Language | None, _Step]]:
    if settings.command is not None:
        return [(None, _configured_command(gate, tuple(settings.command), project))]
    if gate == "secretscan":
        return [(None, _secretscan(project))]
    if not project.languages:
        supported = ", ".join(LANGUAGES)
        outcome = _Outcome("missing", f"no supported language ({supported}) detected in the repository")
        return [(None, _Decided(outcome))]
    return [(language, _PLANNERS[language](gate, project)) for language in project.languages]


def _configured_command(gate: GateName, command: tuple[str, ...], project: _Project) -> _Step:
    files = project.files if gate == "secretscan" else project.source_files()
    if FILES_TOKEN in command and not files:
        return _nothing_to_check(f"no changed file for {FILES_TOKEN}")
    argv: list[str] = []
    for token in command:
        argv.extend(_file_args(files) if token == FILES_TOKEN else (token,))
    if gate == "secretscan":
        return (_Command(tuple(argv), judge=_secrets_judge(strict=False), reads_output=True),)
    return (_Command(tuple(argv)),)


def _file_args(files: Sequence[str]) -> tuple[str, ...]:
    # A file named "-x.py" must not be read as an option by the tool.
    return tuple(f"./{path}" if path.startswith("-") else path for path in files)


def _tool(
    name: str,
    project: _Project,
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    judge: _Judge | None = None,
    reads_output: bool = False,
) -> _Step:
    tool = resolve_tool(name, project.root)
    if tool is None:
        return _Decided(_Outcome("missing", f"{name} not found ({looked_for(name)})"))
    return (_Command((*tool.argv, *args), env or {}, judge, reads_output),)


def _secretscan(project: _Project) -> _Step:
    if not project.files:
        return _nothing_to_check("no changed file")
    args = ("scan", "--no-verify", *_file_args(project.files))
    return _tool("detect-secrets", project, args, judge=_secrets_judge(strict=True), reads_output=True)


def _python(gate: GateName, project: _Project) -> _Step:
    files = project.files_with(".py")
    # Bytecode goes under .autodev/ (ignored, never in a diff): a gate must not leave files in the working
    # tree, and a cache that persists between gate runs spares pytest re-compiling itself every time.
    env = {"PYTHONPYCACHEPREFIX": str(project.state / "cache" / "pycache")}
    if gate == "test":
        return _tool("pytest", project, ("-q",), env=env, judge=_pytest_judge)
    if not files:
        return _nothing_to_check("no Python file changed")
    python = python_interpreter(project.root)
    if gate == "syntax":
        return (_Command((*python, "-c", _COMPILE_FILES, *files), env),)
    if gate == "lint":
        return _tool("ruff", project, ("check", "--no-cache", "--force-exclude", *_file_args(files)))
    modules, from_src = _importable_modules(files, project.root)
    if not modules:
        return (_Command((*python, "-m", "compileall", "-q", *_file_args(files)), env),)
    if from_src:
        # Import the changed source, not a copy installed earlier; src/ is not on sys.path by itself.
        inherited = os.environ.get("PYTHONPATH")
        src = str(project.root / "src")
        env["PYTHONPATH"] = src if not inherited else f"{src}{os.pathsep}{inherited}"
    return (_Command((*python, "-c", _IMPORT_MODULES, *modules), env),)


def _importable_modules(files: Sequence[str], root: Path) -> tuple[list[str], bool]:
    """Dotted names of the changed modules that are library code, and whether any lives under ``src/``.

    Under ``src/`` every module counts; elsewhere only modules inside packages (each directory down from
    the root has an ``__init__.py``), because a loose top-level file is usually a script that does its work
    when imported. ``__main__``, ``conftest`` and ``setup`` modules are never imported.
    """
    modules: list[str] = []
    from_src = False
    for path in files:
        parts = path.split("/")
        stem = parts[-1].removesuffix(".py")
        if stem in ("__main__", "conftest", "setup"):
            continue
        in_src = parts[0] == "src" and len(parts) > 1
        dirs = parts[1:-1] if in_src else parts[:-1]
        if not in_src and (not dirs or not _all_packages(root, dirs)):
            continue
        names = [*dirs] if stem == "__init__" else [*dirs, stem]
        if names and all(name.isidentifier() for name in names):
            modules.append(".".join(names))
            from_src = from_src or in_src
    return modules, from_src


def _all_packages(root: Path, dirs: Sequence[str]) -> bool:
    return all((root.joinpath(*dirs[: depth + 1]) / "__init__.py").is_file() for depth in range(len(dirs)))


def _nodejs(gate: GateName, project: _Project) -> _Step:
    if gate == "syntax":
        scripts = project.files_with(*_NODE_SCRIPTS)
        if not scripts:
            return _nothing_to_check("no JavaScript file changed")
        node = resolve_tool("node", None)
        if node is None:
            return _Decided(_Outcome("missing", f"node not found ({looked_for('node')})"))
        # `node --check` takes one file per run.
        return tuple(_Command((*node.argv, "--check", *_file_args([path])), label=path) for path in scripts)
    sources = project.files_with(*_NODE_SOURCES)
    if gate == "lint" and not sources:
        return _nothing_to_check("no JavaScript or TypeScript file changed")
    if isinstance(project.package, str):
        return _Decided(_Outcome("fail", project.package))
    package = project.package or {}
    if gate == "lint":
        if not _eslint_configured(project.root, package):
            return _not_configured("no eslint in package.json and no ESLint config file")
        return _tool("eslint", project, _file_args(sources))
    script = "build" if gate == "build" else "test"
    if not _has_script(package, script):
        return _not_configured(f'package.json has no "{script}" script')
    args = ("run", "build") if script == "build" else ("test",)
    return _tool("npm", project, args, env=_NPM_ENV)


def _eslint_configured(root: Path, package: Mapping[str, Any]) -> bool:
    for key in ("dependencies", "devDependencies"):
        declared = package.get(key)
        if isinstance(declared, dict) and "eslint" in declared:
            return True
    return any((root / name).is_file() for name in _ESLINT_CONFIGS)


def _has_script(package: Mapping[str, Any], script: str) -> bool:
    scripts = package.get("scripts")
    command = scripts.get(script) if isinstance(scripts, dict) else None
    if not isinstance(command, str) or not command.strip():
        return False
    # `npm init` writes a test script that only fails; it is a placeholder, not a test suite.
    return not (script == "test" and "no test specified" in command)


def _rust(gate: GateName, project: _Project) -> _Step:
    if gate in ("syntax", "lint") and not project.files_where(_LANGUAGE_FILES["rust"]):
        return _nothing_to_check("no Rust file changed")
    if gate == "syntax":
        return _tool("cargo", project, ("check", "--all-targets", "--message-format=short"), env=_CARGO_ENV)
    if gate == "lint":
        args = ("clippy", "--all-targets", "--message-format=short")
        return _tool("cargo", project, args, env=_CARGO_ENV, judge=_clippy_judge)
    if gate == "build":
        return _tool("cargo", project, ("build",), env=_CARGO_ENV)
    return _tool("cargo", project, ("test",), env=_CARGO_ENV, judge=_cargo_test_judge, reads_output=True)


def _go(gate: GateName, project: _Project) -> _Step:
    go_files = project.files_with(".go")
    if gate in ("syntax", "lint") and not go_files:
        return _nothing_to_check("no Go file changed")
    if gate == "syntax":
        return _tool(
            "gofmt", project, ("-l", "-e", *_file_args(go_files)), judge=_gofmt_judge, reads_output=True
        )
    if gate == "lint":
        return _tool("go", project, ("vet", "./..."))
    if gate == "build":
        return _tool("go", project, ("build", "./..."))
    return _tool("go", project, ("test", "./..."), judge=_go_test_judge, reads_output=True)


_PLANNERS: dict[Language, Callable[[GateName, _Project], _Step]] = {
    "python": _python,
    "nodejs": _nodejs,
    "rust": _rust,
    "go": _go,
}


# --- judges: reading a tool's answer beyond its exit status ----------------------------------------------


def _pytest_judge(check: CheckResult, _lines: Sequence[bytes], outcome: _Outcome) -> _Outcome:
    meaning: dict[int | None, _Outcome] = {
        1: _Outcome("fail", "tests failed"),
        2: _Outcome("fail", "test collection failed or the run was interrupted"),
        3: _Outcome("error", "pytest hit an internal error"),
        4: _Outcome("error", "pytest usage error: check the project's pytest options and plugins"),
        5: _Outcome("fail", "no tests collected"),
    }
    return meaning.get(check.exit_code, outcome)


def _secrets_judge(*, strict: bool) -> _Judge:
    """Findings from a detect-secrets report; ``strict``: a missing report is an error, not a pass."""

    def judge(_check: CheckResult, lines: Sequence[bytes], outcome: _Outcome) -> _Outcome:
        if outcome.status != "pass":
            return outcome
        try:
            results = json.loads(b"\n".join(lines))["results"]
            findings = sorted(
                f"{item['filename']}:{item['line_number']}: {item['type']}"
                for items in results.values()
                for item in items
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return _Outcome("error", "detect-secrets printed no readable report") if strict else outcome
        if not findings:
            return outcome
        shown = ", ".join(findings[:_SHOWN_FINDINGS])
        more = f" and {len(findings) - _SHOWN_FINDINGS} more" if len(findings) > _SHOWN_FINDINGS else ""
        return _Outcome(
            "fail", f"{len(findings)} potential secret(s) in the change: {shown}{more}", tuple(findings)
        )

    return judge


def _gofmt_judge(_check: CheckResult, lines: Sequence[bytes], outcome: _Outcome) -> _Outcome:
    unformatted = tuple(line.decode("utf-8", errors="replace").strip() for line in lines if line.strip())
    if outcome.status != "pass" or not unformatted:
        return outcome
    return _Outcome("fail", f"not gofmt-formatted: {', '.join(unformatted)}", unformatted)


def _go_test_judge(_check: CheckResult, lines: Sequence[bytes], outcome: _Outcome) -> _Outcome:
    if outcome.status == "pass" and not any(line.startswith(b"ok") for line in lines):
        return _Outcome("fail", "no tests: go test found no test in any package")
    return outcome


def _cargo_test_judge(_check: CheckResult, lines: Sequence[bytes], outcome: _Outcome) -> _Outcome:
    passed = sum(int(match.group(1)) for line in lines if (match := _CARGO_TEST_RESULT.search(line)))
    if outcome.status == "pass" and passed == 0:
        return _Outcome("fail", "no tests: cargo test ran none")
    return outcome


def _clippy_judge(check: CheckResult, _lines: Sequence[bytes], outcome: _Outcome) -> _Outcome:
    text = check.output_excerpt
    if outcome.status == "fail" and (
        "no such command: `clippy`" in text or "cargo-clippy' is not installed" in text
    ):
        return _Outcome("missing", "cargo clippy is not installed (rustup component add clippy)")
    return outcome


# --- running ----------------------------------------------------------------------------------------------


class _Lines:
    """Stdout lines kept for a judge, up to ``_REPORT_LIMIT`` bytes (a report beyond that is unreadable)."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self._size = 0

    def add(self, line: bytes) -> None:
        self._size += len(line)
        if self._size <= _REPORT_LIMIT:
            self.lines.append(line)


async def _settle(
    gate: GateName,
    language: Language | None,
    step: _Step,
    settings: GateSettings,
    config: QAGatesSettings,
    project: _Project,
) -> GateResult:
    if isinstance(step, _Decided):
        return _result(gate, language, [step.outcome], [], config)
    checks: list[CheckResult] = []
    outcomes: list[_Outcome] = []
    deadline = time.monotonic() + settings.timeout_s
    for command in step:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            outcomes.append(_labelled(command, _timed_out(gate, settings)))
            break
        lines = _Lines()
        spec = CheckSpec(
            argv=command.argv,
            cwd=project.root,
            timeout_s=remaining,
            env=command.env,
            children_dir=project.state / "children",
        )
        check = await run_check(spec, on_line=lines.add if command.reads_output else None)
        checks.append(check)
        outcomes.append(_labelled(command, _read(check, command, lines.lines, gate, settings)))
    return _result(gate, language, outcomes, checks, config)


def _read(
    check: CheckResult, command: _Command, lines: Sequence[bytes], gate: GateName, settings: GateSettings
) -> _Outcome:
    if check.status == "timeout":
        return _timed_out(gate, settings)
    if check.status == "error":
        return _Outcome("missing" if check.tool_missing else "error", check.reason)
    outcome = _Outcome("pass") if check.status == "pass" else _Outcome("fail", check.reason)
    return command.judge(check, lines, outcome) if command.judge is not None else outcome


def _timed_out(gate: GateName, settings: GateSettings) -> _Outcome:
    return _Outcome("fail", f"timed out after {settings.timeout_s:g}s (qa_gates.{gate}.timeout_s)")


def _labelled(command: _Command, outcome: _Outcome) -> _Outcome:
    if command.label is None or outcome.reason is None or outcome.status == "pass":
        return outcome
    return _Outcome(outcome.status, f"{command.label}: {outcome.reason}", outcome.findings)


def _result(
    gate: GateName,
    language: Language | None,
    outcomes: Sequence[_Outcome],
    checks: list[CheckResult],
    config: QAGatesSettings,
) -> GateResult:
    statuses = {outcome.status for outcome in outcomes}
    reasons = [outcome.reason for outcome in outcomes if outcome.reason and outcome.status != "pass"]
    if not reasons:
        reasons = [outcome.reason for outcome in outcomes if outcome.reason]
    reason = "; ".join(reasons) or None
    findings = [finding for outcome in outcomes for finding in outcome.findings]
    if "error" not in statuses and "missing" in statuses:
        if config.on_missing_tool == "skip":
            return GateResult(
                gate=gate,
                language=language,
                status="skipped",
                checks=checks,
                reason=reason,
                skipped_by="config:on_missing_tool=skip",
                findings=findings,
            )
        hint = f'provide it, set qa_gates.{gate}.command, or set qa_gates.on_missing_tool = "skip"'
        reason = f"{reason}; {hint}"
    status: GateStatus = (
        "error" if statuses & {"error", "missing"} else "fail" if "fail" in statuses else "pass"
    )
    return GateResult(
        gate=gate, language=language, status=status, checks=checks, reason=reason, findings=findings
    )


def _syntax_failed(results: Sequence[GateResult], language: Language | None) -> bool:
    return any(
        result.gate == "syntax"
        and result.status == "fail"
        and (result.language is None or language is None or result.language == language)
        for result in results
    )


def _blocked_by_syntax(language: Language | None) -> GateResult:
    where = f" for {language}" if language else ""
    return GateResult(
        gate="test",
        language=language,
        status="skipped",
        reason=f"not run: the syntax gate failed{where}",
        skipped_by="syntax_failed",
    )
