"""The five QA gates a change must pass before review: syntax, lint, build, test, secretscan.

``run_gate_suite`` runs every enabled gate, in that order, for each language of the repository
(``detect``), and returns one ``GateResult`` per gate and language; secretscan and a gate whose command
comes from the configuration run once, with no language. All gates run even after a failure, so one round
reports every problem; only ``test`` is not run for a language whose ``syntax`` gate failed (status
``skipped``, ``skipped_by="syntax_failed"``, which is not a pass). Every command goes through
``run_check``: argv, no shell, cwd pinned to the working copy's root, the gate's ``timeout_s`` as deadline
(shared by the commands of one gate), bounded output and a digest, all kept in ``GateResult.checks``.

Gates never change the tree. Every command runs read-only (``ruff check --no-fix --no-cache``, pytest
without its cache provider, bytecode outside the tree through ``PYTHONPYCACHEPREFIX``: ``_bytecode_env``);
and with a ``TreeGuard`` the working copy's content is snapshotted before the gates and compared after each
one: a gate that changed anything becomes an ``error`` naming the files, and the files are put back.

Changed files are validated with ``normalize_repo_path`` (a path leaving the repository raises
``PathEscapeError``); files under ``.autodev/`` or ``.git/``, and files that no longer exist (deleted by
the change), are never checked.

Commands per language (``{files}``: the changed files of that language; tools are resolved as
``autodev.qa.tools`` describes; ``python`` is the project's environment, ``autodev.qa.environment``, with
the working copy's source root, ``src/`` or the root, first on ``PYTHONPATH`` so that an editable install of
another checkout never stands in for the code under test):

- python: syntax compiles each changed ``.py`` (every file, not just the first error); lint ``ruff check
  --no-fix --no-cache --force-exclude --output-format=json {files}`` (the project's ruff configuration
  applies, its ``fix = true`` does not); build imports every changed module that is library code (inside
  a package at the root, or anywhere under ``src/``) and compiles the other changed files; test
  ``python -m pytest -q -p no:cacheprovider --junitxml=<scratch>``, read from the JUnit report.
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

Findings carry a key that does not depend on line numbers (a failing test's id; a lint finding's file, rule
and message; a secret's file, type and hash; a file that does not compile; a module that does not import),
so that ``autodev.qa.baseline`` can tell what a change introduced from what its base commit already had.

How a result is read:

- ``pass``: the tool ran and found nothing. A gate with nothing to check (syntax, lint and Python's build
  look only at changed files of their language, so a change without any is "nothing to check") is a
  ``pass`` whose ``reason`` says so.
- ``no_tests``: the test gate found no test to run (pytest collected none; or the project's environment
  has no pytest and the repository has no test file). Neither a pass nor a failure: shown as what it is.
- ``fail``: the tool ran and reported a problem, or the gate ran out of time.
- ``error``: the gate could not run: its tool is missing, was killed by a signal or could not start, or
  (nodejs lint/build/test) the project configures no such step, or no supported language was detected;
  or it changed the tree. ``cause`` says whether the environment is to blame (a missing tool, a tool that
  cannot start) or the change. Nothing that could not run counts as passed.
- ``skipped``: ``enabled = false`` gives ``skipped_by="config:disabled"``; ``on_missing_tool = "skip"``
  turns a missing tool or an unconfigured step (never a crash) into
  ``skipped_by="config:on_missing_tool=skip"``. Only these explicit settings make a skip count as a pass
  (``counts_as_pass``), and ``skipped_by`` keeps them visible; a test gate skipped because syntax failed
  (``skipped_by="syntax_failed"``) does not count.

``qa_gates.<gate>.command`` replaces the detected command(s) of that gate: it runs once, from the
working copy's root, in the project's environment, with each argv element that is exactly ``{files}``
replaced by the changed files of the detected languages (every changed file for secretscan; nothing to
check when there are none). Its exit status decides, except that a secretscan command printing a
detect-secrets report is read as one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal, Protocol, get_args

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, model_validator

from autodev.config.schema import EnvironmentSettings, GateSettings, QAGatesSettings
from autodev.qa.detect import IGNORED_DIRS, LANGUAGES, Language, detect_languages
from autodev.qa.environment import ProjectEnvironment, resolve_environment
from autodev.qa.junit import read_junit
from autodev.qa.runner import STDERR_MARKER, CheckResult, CheckSpec, run_check
from autodev.qa.tools import looked_for, resolve_tool
from autodev.scratch import owned_prefix
from autodev.state.paths import STATE_DIR_NAME, normalize_repo_path

__all__ = [
    "FILES_TOKEN",
    "GATE_NAMES",
    "GateCause",
    "GateName",
    "GateResult",
    "GateRun",
    "GateStatus",
    "RunCounts",
    "SkipCause",
    "TreeGuard",
    "missing_requirements",
    "run_gate_suite",
    "run_gates",
    "run_on_base_versions",
    "source_roots",
]

GateName = Literal["syntax", "lint", "build", "test", "secretscan"]
GATE_NAMES: tuple[GateName, ...] = get_args(GateName)
"""Every gate, in the order ``run_gates`` runs them."""
GateStatus = Literal["pass", "fail", "error", "skipped", "no_tests"]
GateCause = Literal["change", "environment"]
SkipCause = Literal["config:disabled", "config:on_missing_tool=skip", "syntax_failed"]
FILES_TOKEN = "{files}"
"""The argv element of a configured command that stands for the changed files."""

_WORKTREE_SITE = Path(__file__).resolve().parent / "worktree_site"
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

# Each failure is also printed as a tab-separated stdout line starting with this marker, so that the
# gate can name what failed (a file, a module) beside the tool's own messages.
_FINDING_MARKER = b"AUTODEV-FINDING\t"
# `python -m py_compile a b` stops at the first broken file (3.11); this reports every one. It compiles in
# memory: no bytecode file is written anywhere.
_COMPILE_FILES = """\
import sys
failed = 0
for name in sys.argv[1:]:
    try:
        with open(name, "rb") as source:
            compile(source.read(), name, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"{name}:{exc.lineno}:{exc.offset}" if exc.lineno else name
        line = (exc.text or "").rstrip()
        sys.stderr.write(f'  File "{name}", line {exc.lineno}\\n    {line}\\n')
        sys.stderr.write(f"{type(exc).__name__}: {exc.msg}\\n")
        print(f"AUTODEV-FINDING\\t{name}\\t{where}: {exc.msg}")
        failed = 1
    except ValueError as exc:  # source bytes that are not code at all (a NUL byte)
        sys.stderr.write(f"{name}: {exc}\\n")
        print(f"AUTODEV-FINDING\\t{name}\\t{name}: {exc}")
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
    except BaseException as exc:
        sys.stderr.write(f"cannot import {name}:\\n")
        traceback.print_exc()
        summary = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        print(f"AUTODEV-FINDING\\t{name}\\t{name}: {summary}")
        failed = 1
sys.exit(failed)
"""


class RunCounts(BaseModel):
    """How the test cases of one test run ended, as its JUnit report records them."""

    model_config = ConfigDict(extra="forbid")

    passed: int = Field(ge=0)
    failed: int = Field(ge=0, description="Failed and errored cases.")
    skipped: int = Field(ge=0)
    total: int = Field(ge=0)


class GateResult(BaseModel):
    """What one gate found for one language (``None``: a configured command, or secretscan).

    ``checks`` are the commands it ran, in order, each with exit status and output digest; ``reason``
    explains anything but a plain pass; ``findings`` lists what the tool reported one by one (failing tests,
    lint findings, secrets, files, modules) and ``finding_keys`` the identity of each, in the same order;
    ``preexisting`` the findings the base commit has as well (``autodev.qa.baseline``), which do not fail
    the gate; ``counts`` the test gate's JUnit counts; ``skipped_by`` says who skipped the gate and is set
    exactly when it was skipped; ``cause`` says, for an error, whether the environment or the change is to
    blame; ``changed_files`` the files the gate changed in the working copy (and AutoDev put back).
    """

    model_config = ConfigDict(extra="forbid")

    gate: GateName
    status: GateStatus
    language: Language | None = None
    checks: list[CheckResult] = Field(default_factory=list)
    reason: str | None = None
    skipped_by: SkipCause | None = None
    findings: list[str] = Field(default_factory=list)
    finding_keys: list[str] = Field(default_factory=list)
    preexisting: list[str] = Field(default_factory=list)
    counts: RunCounts | None = None
    cause: GateCause | None = None
    changed_files: list[str] = Field(default_factory=list)
    # The test gate's cases (pytest's JUnit report): the ids that ran to an outcome, and those that did not
    # (skipped or xfailed), as "id: how (message)".
    executed: list[str] = Field(default_factory=list)
    not_run: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> GateResult:
        if (self.status == "skipped") != (self.skipped_by is not None):
            raise ValueError("skipped_by is set exactly when status is 'skipped'")
        if self.finding_keys and len(self.finding_keys) != len(self.findings):
            raise ValueError("finding_keys must name each finding, in order")
        return self

    @property
    def counts_as_pass(self) -> bool:
        """A pass, or a skip the configuration asked for; never a gate that could not run or was blocked."""
        return self.status == "pass" or (self.status == "skipped" and self.skipped_by in _SKIPS_THAT_PASS)

    @property
    def acceptable(self) -> bool:
        """Nothing here stops the change: a pass, a configured skip, or a test gate with no tests at all."""
        return self.counts_as_pass or self.status == "no_tests"

    @property
    def environmental(self) -> bool:
        """The gate could not run for a reason the change cannot fix (a missing or unstartable tool)."""
        return self.status == "error" and self.cause == "environment"


class TreeGuard(Protocol):
    """Snapshots of a working copy's content, to prove that a gate left it as it found it."""

    async def snapshot(self) -> str:
        """An id of everything in the working copy (tracked and untracked, ignored files excepted)."""

    async def changed_paths(self, before: str, after: str) -> list[str]:
        """The paths whose content differs between two snapshots."""

    async def restore(self, snapshot: str, paths: Sequence[str]) -> None:
        """Put ``paths`` back as ``snapshot`` had them (deleting those it did not have)."""


@dataclass(frozen=True, slots=True)
class GateRun:
    """The results of one run of the gates, the snapshot of the tree they checked (None without a
    ``TreeGuard``) and the project environment they ran in."""

    results: list[GateResult]
    tree: str | None
    environment: ProjectEnvironment | None


async def run_gates(
    repo_root: Path,
    changed_files: Sequence[str],
    config: QAGatesSettings,
    *,
    environment: ProjectEnvironment | None = None,
    languages: Sequence[Language] | None = None,
    state_dir: Path | None = None,
    guard: TreeGuard | None = None,
    main_root: Path | None = None,
) -> list[GateResult]:
    """``run_gate_suite``'s results alone."""
    run = await run_gate_suite(
        repo_root,
        changed_files,
        config,
        environment=environment,
        languages=languages,
        state_dir=state_dir,
        guard=guard,
        main_root=main_root,
    )
    return run.results


async def run_gate_suite(
    repo_root: Path,
    changed_files: Sequence[str],
    config: QAGatesSettings,
    *,
    environment: ProjectEnvironment | None = None,
    languages: Sequence[Language] | None = None,
    state_dir: Path | None = None,
    guard: TreeGuard | None = None,
    only: Sequence[GateName] | None = None,
    main_root: Path | None = None,
) -> GateRun:
    """Run the enabled gates over ``changed_files`` (paths relative to ``repo_root``), as the module says.

    ``environment`` is the project's (found with the default settings when not given; an environment
    that cannot be found makes every Python gate an ``error``). ``languages`` replaces detection.
    ``state_dir`` is the AutoDev state directory whose bytecode cache and child-process registry the gates
    use (default ``<repo_root>/.autodev``): a task's worktree passes its main repository's, so that a new
    worktree does not compile the test runner again and a gate tool a kill orphans is found and stopped by
    the next run. ``guard`` proves the gates read-only (see the module docstring). ``only`` runs just those
    gates (the others are not reported at all). ``main_root`` is the main checkout when ``repo_root`` is
    one of its worktrees (its editable installs are then pointed at the worktree). Raises
    ``PathEscapeError`` for a changed path outside the repository; every other problem is a
    ``GateResult``.
    """
    problem = None
    if environment is None:
        root = Path(await anyio.Path(repo_root).resolve())
        resolution = await resolve_environment(root, EnvironmentSettings())
        environment, problem = resolution.environment, resolution.problem
    results: list[GateResult] = []
    before = await guard.snapshot() if guard is not None else None
    asked = [gate for gate in GATE_NAMES if only is None or gate in only]
    if not any(_gate_settings(config, gate).enabled for gate in asked):
        # Nothing will run: no scratch directory, and no walk of the tree to find its languages (it grows
        # with the repository, and a run with its gates off paid it at every check).
        _changed_files(Path(await anyio.Path(repo_root).resolve()), tuple(changed_files))
        return GateRun([_disabled(gate) for gate in asked], before, environment)
    with tempfile.TemporaryDirectory(prefix=owned_prefix("autodev-qa-")) as scratch:
        project = await anyio.to_thread.run_sync(
            _load_project,
            repo_root,
            tuple(changed_files),
            languages,
            Path(scratch),
            state_dir,
            environment,
            problem,
            main_root,
        )
        for gate in GATE_NAMES:
            if only is not None and gate not in only:
                continue
            settings = _gate_settings(config, gate)
            if not settings.enabled:
                results.append(_disabled(gate))
                continue
            steps = await anyio.to_thread.run_sync(_plan_gate, gate, settings, project)
            for language, step in steps:
                if gate == "test" and _syntax_failed(results, language):
                    results.append(_blocked_by_syntax(language))
                    continue
                result = await _settle(gate, language, step, settings, config, project)
                if guard is not None and before is not None:
                    result = await _guarded(result, guard, before)
                results.append(result)
    return GateRun(results, before, environment)


async def _guarded(result: GateResult, guard: TreeGuard, before: str) -> GateResult:
    """``result``, or an error naming the files its gate changed (which are put back first)."""
    after = await guard.snapshot()
    if after == before:
        return result
    paths = await guard.changed_paths(before, after)
    await guard.restore(before, paths)
    shown = ", ".join(paths[:10]) + (f" and {len(paths) - 10} more" if len(paths) > 10 else "")
    reason = (
        f"the {result.gate} gate changed the working tree ({shown}); AutoDev put the files back. Gates "
        "must not write into the repository: a tool that rewrites files, or tests that write where they "
        "run"
    )
    return result.model_copy(
        update={
            "status": "error",
            "reason": reason,
            "cause": "change",
            "skipped_by": None,
            "changed_files": paths,
        }
    )


async def run_on_base_versions(
    gate: GateName,
    versions: Mapping[str, bytes],
    repo_root: Path,
    config: QAGatesSettings,
    *,
    environment: ProjectEnvironment | None,
    state_dir: Path | None = None,
) -> GateResult:
    """One file-by-file gate (syntax, lint, secretscan) on other versions of some files: their content
    at a task's base commit, by path. The findings' keys compare with the same gate's on the change.

    Lint reads each version from stdin under its own path (``--stdin-filename``), so the working copy's
    ruff configuration applies exactly; syntax and secretscan check copies written under their own paths
    in a scratch directory. Nothing is written into ``repo_root``.
    """
    if gate not in ("syntax", "lint", "secretscan"):
        raise ValueError(f"the {gate} gate does not check files one by one")
    settings = _gate_settings(config, gate)
    with tempfile.TemporaryDirectory(prefix="autodev-base-") as scratch:
        root = Path(scratch) / "tree"
        if gate != "lint":
            for path, content in versions.items():
                target = root / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
            run = await run_gate_suite(
                root,
                list(versions),
                config,
                environment=environment,
                languages=["python"] if gate == "syntax" else None,
                state_dir=state_dir,
                only=(gate,),
            )
            return run.results[0]
        project = _load_project(repo_root, (), ["python"], Path(scratch), state_dir, environment)
        ruff = resolve_tool("ruff", project.root, environment)
        if ruff is None:
            return _result(gate, "python", [_Outcome("missing", "ruff not found")], [], config)
        args = ("check", "--no-fix", "--no-cache", "--output-format=json")
        step = tuple(
            _Command(
                (*ruff.argv, *args, "--stdin-filename", path, "-"),
                judge=_ruff_judge,
                reads_output=True,
                stdin=content,
            )
            for path, content in sorted(versions.items())
            if path.endswith(".py")
        )
        if not step:
            return _result(gate, "python", [_Outcome("pass", "nothing to check")], [], config)
        return await _settle(gate, "python", step, settings, config, project)


# One file of each language stands for "a change touching it": planning a gate over these names shows
# which tools it would run, without running anything.
_PROBE_FILES = (
    "autodev-preflight.py",
    "autodev-preflight.js",
    "autodev-preflight.rs",
    "autodev-preflight.go",
)


def missing_requirements(
    repo_root: Path,
    config: QAGatesSettings,
    environment: ProjectEnvironment | None,
    *,
    environment_problem: str | None = None,
    state_dir: Path | None = None,
) -> list[GateResult]:
    """The enabled gates that could not run here, as ``error`` results saying what is missing and what
    fixes it (a tool not installed, a step the project does not configure, no project environment).

    Nothing runs: each gate is planned for a change touching a file of every detected language, and
    every program the plan would start is looked up. A gate ``on_missing_tool = "skip"`` lets skip is
    not a problem.
    """
    root = repo_root.resolve()
    found = detect_languages(root)
    project = _Project(
        root,
        _PROBE_FILES,
        tuple(found),
        root,
        _read_package_json(root) if "nodejs" in found else None,
        state_dir if state_dir is not None else root / STATE_DIR_NAME,
        environment,
        environment_problem,
    )
    problems: list[GateResult] = []
    for gate in GATE_NAMES:
        settings = _gate_settings(config, gate)
        if not settings.enabled:
            continue
        for language, step in _plan_gate(gate, settings, project):
            if isinstance(step, _Decided):
                outcome = step.outcome
            else:
                absent = [command.argv[0] for command in step if not _startable(command.argv[0], root)]
                outcome = _Outcome("missing", f"{absent[0]} not found") if absent else _Outcome("pass")
            if outcome.status == "missing":
                result = _result(gate, language, [outcome], [], config)
                if result.status == "error":
                    problems.append(result)
    return problems


def _startable(program: str, root: Path) -> bool:
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else root / program
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(program) is not None


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
    environment: ProjectEnvironment | None
    environment_problem: str | None  # why no environment was found, when none was
    main_root: Path | None = None  # the main checkout, when the working copy is one of its worktrees

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


def _disabled(gate: GateName) -> GateResult:
    reason = f"disabled by qa_gates.{gate}.enabled = false"
    return GateResult(gate=gate, status="skipped", reason=reason, skipped_by="config:disabled")


def _changed_files(root: Path, changed: tuple[str, ...]) -> tuple[str, ...]:
    """The changed files the gates look at (sorted); ``PathEscapeError`` for a path outside ``root``."""
    files: set[str] = set()
    for path in changed:
        clean = normalize_repo_path(path, root, context="changed file")
        if clean.split("/", 1)[0] not in _EXCLUDED_TOPS and (root / clean).is_file():
            files.add(clean)
    return tuple(sorted(files))


def _load_project(
    repo_root: Path,
    changed: tuple[str, ...],
    languages: Sequence[Language] | None,
    scratch: Path,
    state_dir: Path | None,
    environment: ProjectEnvironment | None,
    environment_problem: str | None = None,
    main_root: Path | None = None,
) -> _Project:
    root = repo_root.resolve()
    files = _changed_files(root, changed)
    found = detect_languages(root) if languages is None else sorted(set(languages), key=LANGUAGES.index)
    package = _read_package_json(root) if "nodejs" in found else None
    state = state_dir if state_dir is not None else root / STATE_DIR_NAME
    return _Project(
        root,
        files,
        tuple(found),
        scratch,
        package,
        state,
        environment,
        environment_problem,
        main_root,
    )


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

_Verdict = Literal["pass", "fail", "error", "missing", "no_tests"]


@dataclass(frozen=True, slots=True)
class _Finding:
    """One thing a tool reported: ``key`` identifies it across commits, ``text`` shows it."""

    key: str
    text: str


@dataclass(frozen=True, slots=True)
class _Outcome:
    """How one command went, as the gate reads it; ``missing`` is a tool or step that is not there.

    ``cause`` marks an error the environment is to blame for (a tool that cannot start)."""

    status: _Verdict
    reason: str | None = None
    findings: tuple[_Finding, ...] = ()
    counts: RunCounts | None = None
    cause: GateCause | None = None
    executed: tuple[str, ...] = ()
    not_run: tuple[str, ...] = ()


# A judge reads a finished command beyond its exit status: (check, stdout lines, outcome by exit status).
_Judge = Callable[[CheckResult, Sequence[bytes], _Outcome], _Outcome]


@dataclass(frozen=True, slots=True)
class _Command:
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    judge: _Judge | None = None
    reads_output: bool = False
    label: str | None = None
    stdin: bytes | None = None


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
    # A configured command runs in the project's environment too: its `pytest` or `tox` is the project's.
    env = _project_env(project) if project.environment is not None else {}
    if gate == "secretscan":
        return (_Command(tuple(argv), env, judge=_secrets_judge(strict=False), reads_output=True),)
    return (_Command(tuple(argv), env),)


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
    tool = resolve_tool(name, project.root, project.environment)
    if tool is None:
        return _Decided(_Outcome("missing", f"{name} not found ({looked_for(name)})"))
    return (_Command((*tool.argv, *args), env or {}, judge, reads_output),)


def _secretscan(project: _Project) -> _Step:
    if not project.files:
        return _nothing_to_check("no changed file")
    args = ("scan", "--no-verify", *_file_args(project.files))
    return _tool("detect-secrets", project, args, judge=_secrets_judge(strict=True), reads_output=True)


def source_roots(root: Path) -> tuple[Path, ...]:
    """Where a working copy's own Python code is imported from: ``src/`` in a src layout, else the root."""
    src = root / "src"
    return (src,) if src.is_dir() else (root,)


def _project_env(project: _Project) -> dict[str, str]:
    """The environment of a command that runs the project's Python code in this working copy."""
    assert project.environment is not None
    env = dict(project.environment.env)
    env.update(_bytecode_env(project))
    # The working copy's code first: an environment holding an editable install of the main checkout
    # (path- or finder-based) would otherwise import that checkout's code instead of this one's. In a
    # worktree, a start-up shim also points such installs at the worktree (see worktree_site/).
    entries = [str(path) for path in source_roots(project.root)]
    if project.main_root is not None and project.main_root.resolve() != project.root:
        entries.append(str(_WORKTREE_SITE))
        env["AUTODEV_MAIN_CHECKOUT"] = str(project.main_root.resolve())
        env["AUTODEV_WORKTREE"] = str(project.root)
    inherited = os.environ.get("PYTHONPATH")
    if inherited:
        entries.append(inherited)
    env["PYTHONPATH"] = os.pathsep.join(entries)
    return env


def _bytecode_env(project: _Project) -> dict[str, str]:
    """Where the gates' Python writes bytecode: never into a working copy, always somewhere it persists.

    Without a cache that outlives one gate run, pytest, the project and its dependencies are compiled
    again on every run (about 0.7 s for pytest alone), so a bytecode prefix the user set is kept when it
    is an absolute path outside the working copy and the main checkout (with their own choice of whether
    to write there). Otherwise the bytecode goes under ``.autodev/cache/`` (ignored, never in a diff) and
    is written there even when ``PYTHONDONTWRITEBYTECODE`` is set: what that setting keeps out of source
    trees and images never reaches them from AutoDev's own cache.
    """
    # The command's environment is this process's with the activation's PATH and VIRTUAL_ENV laid over it.
    inherited = os.environ.get("PYTHONPYCACHEPREFIX", "")
    if inherited and os.path.isabs(inherited):
        prefix = Path(os.path.realpath(inherited))
        checkouts = [project.root, *([project.main_root.resolve()] if project.main_root else [])]
        if not any(prefix.is_relative_to(checkout) for checkout in checkouts):
            return {"PYTHONPYCACHEPREFIX": inherited}
    return {"PYTHONPYCACHEPREFIX": str(project.state / "cache" / "pycache"), "PYTHONDONTWRITEBYTECODE": ""}


def _python(gate: GateName, project: _Project) -> _Step:
    files = project.files_with(".py")
    if gate == "lint":
        if not files:
            return _nothing_to_check("no Python file changed")
        args = ("check", "--no-fix", "--no-cache", "--force-exclude", "--output-format=json")
        return _tool("ruff", project, (*args, *_file_args(files)), judge=_ruff_judge, reads_output=True)
    environment = project.environment
    if environment is None:
        reason = f"the project's Python environment was not found: {project.environment_problem}"
        return _Decided(_Outcome("missing", reason, cause="environment"))
    python = (environment.python,)
    env = _project_env(project)
    if gate == "test":
        if not environment.has_pytest:
            if not _has_test_file(project.root):
                reason = "no test file in the repository (and no pytest in the project's environment)"
                return _Decided(_Outcome("no_tests", reason))
            reason = (
                f"the project's environment ({environment.summary()}) cannot import pytest; install pytest "
                "there, or set qa_gates.test.command"
            )
            return _Decided(_Outcome("missing", reason, cause="environment"))
        junit = project.scratch / "junit.xml"
        argv = (*python, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}")
        return (_Command(argv, env, judge=_pytest_judge(junit, project.root)),)
    if not files:
        return _nothing_to_check("no Python file changed")
    if gate == "syntax":
        return (_Command((*python, "-c", _COMPILE_FILES, *files), env, _marker_judge, reads_output=True),)
    modules = _importable_modules(files, project.root)
    if not modules:
        return (_Command((*python, "-c", _COMPILE_FILES, *files), env, _marker_judge, reads_output=True),)
    return (_Command((*python, "-c", _IMPORT_MODULES, *modules), env, _marker_judge, reads_output=True),)


def _has_test_file(root: Path) -> bool:
    """Whether the tree has a file pytest collects by default (``test_*.py`` or ``*_test.py``)."""
    for _directory, dirnames, filenames in os.walk(root):
        dirnames[:] = [name for name in dirnames if name not in IGNORED_DIRS]
        if any(
            name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))
            for name in filenames
        ):
            return True
    return False


def _importable_modules(files: Sequence[str], root: Path) -> list[str]:
    """Dotted names of the changed modules that are library code.

    Under ``src/`` every module counts; elsewhere only modules inside packages (each directory down from
    the root has an ``__init__.py``), because a loose top-level file is usually a script that does its work
    when imported. ``__main__``, ``conftest`` and ``setup`` modules are never imported.
    """
    modules: list[str] = []
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
    return modules


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


def _pytest_judge(junit: Path, root: Path) -> _Judge:
    """Read a pytest run from its JUnit report: failing test ids as findings, the counts, no tests."""

    def judge(check: CheckResult, _lines: Sequence[bytes], outcome: _Outcome) -> _Outcome:
        code = check.exit_code
        if code == 5:
            report = read_junit(junit)
            none = RunCounts(passed=0, failed=0, skipped=0, total=0)
            return _Outcome(
                "no_tests", "pytest collected no tests", counts=none if not isinstance(report, str) else None
            )
        if code == 3:
            return _Outcome("error", "pytest hit an internal error")
        if code == 4:
            return _Outcome("error", "pytest usage error: check the project's pytest options and plugins")
        report = read_junit(junit)
        if isinstance(report, str):
            # Exit 0 is pytest's word; the report is the evidence, and without it nothing is proven. Without
            # it pytest stopped before it ran anything (a configuration or start-up error).
            last = _last_line(check.output_excerpt)
            return _Outcome(
                "error", f"pytest exited with status {code} and {report}" + (f": {last}" if last else "")
            )
        counts = RunCounts(
            passed=report.passed, failed=report.failed, skipped=report.skipped, total=report.total
        )
        findings = tuple(
            _Finding(case.id, f"{case.id}: {case.outcome}" + (f": {case.message}" if case.message else ""))
            for case in report.failing
        )
        executed = tuple(case.id for case in report.cases if case.executed)
        not_run = tuple(case.not_run_text() for case in report.cases if not case.executed)

        def outcome_of(status: _Verdict, reason: str, found: tuple[_Finding, ...] = ()) -> _Outcome:
            return _Outcome(status, reason, found, counts, executed=executed, not_run=not_run)

        if code == 0 and not findings and report.total and not report.executed:
            # Every test skipped or xfailed: nothing was tested, which is no pass.
            return outcome_of("no_tests", f"pytest ran no test: all {report.total} were skipped")
        if code == 0 and not findings:
            return outcome_of("pass", f"{report.passed} passed, {report.skipped} skipped")
        if code == 2:
            return outcome_of("fail", "test collection failed or the run was interrupted", findings)
        if not findings:
            return outcome_of("fail", f"pytest exited with status {code} and its report shows no failure")
        return outcome_of("fail", f"{len(findings)} of {report.total} tests failed", findings)

    return judge


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and line.strip() != STDERR_MARKER]
    return lines[-1][:300] if lines else ""


def _ruff_judge(check: CheckResult, lines: Sequence[bytes], outcome: _Outcome) -> _Outcome:
    """ruff's JSON report: each finding keyed by file, rule and message (not the line, which moves)."""
    if check.exit_code not in (0, 1):
        return _Outcome("fail", f"ruff could not check the files ({check.reason})")
    try:
        items = json.loads(b"\n".join(lines) or b"[]")
        findings = []
        for item in items:
            path = _relative(str(item["filename"]), check.cwd)
            code = item.get("code") or "syntax-error"
            message = " ".join(str(item["message"]).split())
            row, column = item["location"]["row"], item["location"]["column"]
            findings.append(
                _Finding(f"{path}\0{code}\0{message}", f"{path}:{row}:{column}: {code} {message}")
            )
    except (ValueError, KeyError, TypeError) as exc:
        return _Outcome("error", f"ruff printed no readable JSON report ({exc})")
    if not findings:
        return outcome if outcome.status == "pass" else _Outcome("fail", check.reason)
    return _Outcome("fail", f"{len(findings)} lint finding(s)", tuple(findings))


def _marker_judge(_check: CheckResult, lines: Sequence[bytes], outcome: _Outcome) -> _Outcome:
    """The files or modules a compile or import script reported as broken, one marker line each."""
    findings = []
    for line in lines:
        if line.startswith(_FINDING_MARKER):
            name, _, message = line[len(_FINDING_MARKER) :].decode("utf-8", errors="replace").partition("\t")
            findings.append(_Finding(name, message or name))
    if outcome.status == "fail" and findings:
        return _Outcome("fail", outcome.reason, tuple(findings))
    return outcome


def _relative(path: str, cwd: str) -> str:
    try:
        return Path(path).resolve().relative_to(Path(cwd).resolve()).as_posix()
    except ValueError:
        return path


def _secrets_judge(*, strict: bool) -> _Judge:
    """Findings from a detect-secrets report; ``strict``: a missing report is an error, not a pass.

    A finding is keyed by file, type and the hash detect-secrets reports (never the secret itself).
    """

    def judge(_check: CheckResult, lines: Sequence[bytes], outcome: _Outcome) -> _Outcome:
        if outcome.status != "pass":
            return outcome
        try:
            results = json.loads(b"\n".join(lines))["results"]
            found = sorted(
                (
                    f"{item['filename']}:{item['line_number']}: {item['type']}",
                    f"{item['filename']}\0{item['type']}\0{item.get('hashed_secret', item['line_number'])}",
                )
                for items in results.values()
                for item in items
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return _Outcome("error", "detect-secrets printed no readable report") if strict else outcome
        if not found:
            return outcome
        findings = tuple(_Finding(key, text) for text, key in found)
        shown = ", ".join(text for text, _key in found[:_SHOWN_FINDINGS])
        more = f" and {len(found) - _SHOWN_FINDINGS} more" if len(found) > _SHOWN_FINDINGS else ""
        return _Outcome("fail", f"{len(found)} potential secret(s) in the change: {shown}{more}", findings)

    return judge


def _gofmt_judge(_check: CheckResult, lines: Sequence[bytes], outcome: _Outcome) -> _Outcome:
    unformatted = tuple(line.decode("utf-8", errors="replace").strip() for line in lines if line.strip())
    if outcome.status != "pass" or not unformatted:
        return outcome
    findings = tuple(_Finding(path, path) for path in unformatted)
    return _Outcome("fail", f"not gofmt-formatted: {', '.join(unformatted)}", findings)


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
            stdin=command.stdin,
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
        if check.tool_missing:
            return _Outcome("missing", check.reason)
        # A tool that could not start at all is the machine's problem; one killed by a signal or that
        # flooded its output ran, and the change may be what made it do so.
        cause: GateCause = "environment" if check.exit_code is None and not check.output_bytes else "change"
        return _Outcome("error", check.reason, cause=cause)
    outcome = _Outcome("pass") if check.status == "pass" else _Outcome("fail", check.reason)
    return command.judge(check, lines, outcome) if command.judge is not None else outcome


def _timed_out(gate: GateName, settings: GateSettings) -> _Outcome:
    return _Outcome("fail", f"timed out after {settings.timeout_s:g}s (qa_gates.{gate}.timeout_s)")


def _labelled(command: _Command, outcome: _Outcome) -> _Outcome:
    if command.label is None or outcome.reason is None or outcome.status == "pass":
        return outcome
    return replace(outcome, reason=f"{command.label}: {outcome.reason}")


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
    counts = next((outcome.counts for outcome in outcomes if outcome.counts is not None), None)
    shown = {
        "findings": [finding.text for finding in findings],
        "finding_keys": [finding.key for finding in findings],
        "counts": counts,
        "executed": [case for outcome in outcomes for case in outcome.executed],
        "not_run": [case for outcome in outcomes for case in outcome.not_run],
    }
    if "error" not in statuses and "missing" in statuses:
        if config.on_missing_tool == "skip":
            return GateResult(
                gate=gate,
                language=language,
                status="skipped",
                checks=checks,
                reason=reason,
                skipped_by="config:on_missing_tool=skip",
                **shown,
            )
        hint = (
            f"provide it, set qa_gates.{gate}.command, turn the gate off (qa_gates.{gate}.enabled = "
            'false), or set qa_gates.on_missing_tool = "skip"'
        )
        reason = f"{reason}; {hint}"
    status: GateStatus = (
        "error"
        if statuses & {"error", "missing"}
        else "fail"
        if "fail" in statuses
        else "no_tests"
        if statuses == {"no_tests"}
        else "pass"
    )
    cause: GateCause | None = None
    if status == "error":
        environmental = "missing" in statuses or any(
            outcome.cause == "environment" for outcome in outcomes if outcome.status == "error"
        )
        cause = "environment" if environmental else "change"
    return GateResult(
        gate=gate, language=language, status=status, checks=checks, reason=reason, cause=cause, **shown
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
