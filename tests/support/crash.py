"""Crash tests: a scenario to kill, a harness that kills it, and the invariants a resumed run must keep.

The scenario is a small Python project (``mathkit``) in a fresh git repository plus a script for the
scripted adapter that plays every role: the plan phase produces 8 tasks in 2 phases (with dependencies inside
and across phases), each task adds one module and one test file that pass ruff and pytest, the reviewer
approves, and the test engineer reports exactly the pass count AutoDev's own pytest run will see at that
point of the plan. Agent calls take 0.05-0.2 s, so kills land inside them as well as inside gate runs,
ledger appends, evidence writes and commits.

``autodev run`` and ``autodev resume`` run as child processes, each leading its own process group, and a kill
is a SIGKILL to that whole group at once, the way a CI timeout or ``kill -9 -PGID`` does it. A kill happens
after a delay (from the start, or from a line of output), optionally at the first moment a trigger holds
(ledger lock held, evidence file being written, a git lock held, commit made but not yet recorded).
``check_invariants`` then holds the resumed repository to the uninterrupted reference run.

With ``hostile=True`` the same scenario is played by an agent CLI with a shell (a fake ``cursor-agent`` on
PATH) that, besides its scripted edits, on a few seeded calls also plants a hook and an fsmonitor, moves a
ref (a new tag) or commits on its own. Each act happens at most once across every process of a scenario.
AutoDev puts planted files back after a live call, folds the agent's commits into the task's change, and
stops the run (exit 3) naming a moved ref, or naming whatever changed across a call it did not live to
check; the harness then does what the user would (removes the tag, the hook and the fsmonitor) and resumes
(``undo_agent``). ``check_hostile`` holds it to that: no planted program ever ran, and nothing planted was
left in place without AutoDev naming it.

Used by ``tests/crash`` (a few kill points on every CI run) and ``bench/crash_sweep.py`` (the full sweep).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from filelock import FileLock, Timeout

from support.cli import WHOLE_REPOSITORY_SCOPE, Run, with_write_scope

__all__ = [
    "HOSTILE_ACT_KINDS",
    "INTENT",
    "TASK_IDS",
    "AgentStop",
    "Fingerprint",
    "Hostile",
    "KillAt",
    "KillOutcome",
    "Recovery",
    "Scenario",
    "TimedRun",
    "act_outcomes",
    "base_env",
    "check_hostile",
    "check_invariants",
    "final_fingerprint",
    "git_locks",
    "hostile_acts",
    "kill_and_recover",
    "make_scenario",
    "progress_lines",
    "restore_git_speed",
    "run_cli",
    "run_timed",
    "run_timed_as_user",
    "slow_down_git_add",
    "start_and_kill",
    "stray_processes",
    "undo_agent",
]

INTENT = (
    "Add eight small math helpers to mathkit (arithmetic, then statistics and geometry), each with tests."
)

# --- the project and the plan ------------------------------------------------------------------------------

_PROJECT: dict[str, str] = {
    "pyproject.toml": (
        '[project]\nname = "mathkit"\nversion = "0.1.0"\nrequires-python = ">=3.11"\n\n'
        "[tool.ruff]\nline-length = 100\n\n"
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\npythonpath = ["."]\n'
        'addopts = ["-p", "no:cacheprovider"]\n'
    ),
    ".gitignore": "__pycache__/\n.pytest_cache/\n",
    "README.md": "# mathkit\n\nSmall math helpers.\n",
    "mathkit/__init__.py": '"""Small math helpers, one module each."""\n',
    "mathkit/base.py": (
        '"""The helper every other one is checked against."""\n\n\n'
        "def identity(value: float) -> float:\n"
        '    """``value`` unchanged."""\n'
        "    return value\n"
    ),
    "tests/test_base.py": (
        "from mathkit.base import identity\n\n\ndef test_identity() -> None:\n    assert identity(3) == 3\n"
    ),
}


@dataclass(frozen=True, slots=True)
class _TaskSpec:
    """One task of the scripted plan: the module the developer writes and the tests the test engineer adds."""

    id: str
    title: str
    description: str
    module: str
    code: str
    test_file: str
    tests: str
    acceptance: str
    depends: tuple[str, ...] = ()

    @property
    def test_count(self) -> int:
        return self.tests.count("\ndef test_")


_PHASES: tuple[tuple[str, str, str], ...] = (
    ("1", "Arithmetic", "The basic operations the later helpers build on."),
    ("2", "Statistics and geometry", "Helpers built from the arithmetic of phase 1."),
)

_TASKS: tuple[_TaskSpec, ...] = (
    _TaskSpec(
        id="1.1",
        title="Add numbers",
        description="Add add(a, b) to mathkit/add.py.",
        module="mathkit/add.py",
        code=(
            '"""Adding numbers."""\n\n\n'
            "def add(a: float, b: float) -> float:\n"
            '    """The sum of ``a`` and ``b``."""\n'
            "    return a + b\n"
        ),
        test_file="tests/test_add.py",
        tests=(
            "from mathkit.add import add\n\n\n"
            "def test_add_integers() -> None:\n    assert add(2, 3) == 5\n\n\n"
            "def test_add_opposites() -> None:\n    assert add(-2, 2) == 0\n"
        ),
        acceptance="add(2, 3) == 5",
    ),
    _TaskSpec(
        id="1.2",
        title="Multiply numbers",
        description="Add multiply(a, b) to mathkit/mul.py.",
        module="mathkit/mul.py",
        code=(
            '"""Multiplying numbers."""\n\n\n'
            "def multiply(a: float, b: float) -> float:\n"
            '    """The product of ``a`` and ``b``."""\n'
            "    return a * b\n"
        ),
        test_file="tests/test_mul.py",
        tests=(
            "from mathkit.mul import multiply\n\n\n"
            "def test_multiply() -> None:\n    assert multiply(4, 5) == 20\n\n\n"
            "def test_multiply_by_zero() -> None:\n    assert multiply(7, 0) == 0\n"
        ),
        acceptance="multiply(4, 5) == 20",
    ),
    _TaskSpec(
        id="1.3",
        title="Integer powers",
        description="Add power(base, exponent) to mathkit/power.py, built on multiply.",
        module="mathkit/power.py",
        code=(
            '"""Integer powers, built on multiply."""\n\n'
            "from mathkit.mul import multiply\n\n\n"
            "def power(base: float, exponent: int) -> float:\n"
            '    """``base`` raised to a non-negative integer ``exponent``."""\n'
            "    if exponent < 0:\n"
            '        raise ValueError("exponent must not be negative")\n'
            "    result = 1.0\n"
            "    for _ in range(exponent):\n"
            "        result = multiply(result, base)\n"
            "    return result\n"
        ),
        test_file="tests/test_power.py",
        tests=(
            "import pytest\n\nfrom mathkit.power import power\n\n\n"
            "def test_power() -> None:\n    assert power(2, 10) == 1024\n\n\n"
            "def test_power_zero() -> None:\n    assert power(5, 0) == 1\n\n\n"
            "def test_negative_exponent() -> None:\n"
            "    with pytest.raises(ValueError):\n        power(2, -1)\n"
        ),
        acceptance="power(2, 10) == 1024",
        depends=("1.2",),
    ),
    _TaskSpec(
        id="1.4",
        title="Arithmetic mean",
        description="Add mean(values) to mathkit/mean.py, built on add.",
        module="mathkit/mean.py",
        code=(
            '"""The arithmetic mean."""\n\n'
            "from functools import reduce\n\n"
            "from mathkit.add import add\n\n\n"
            "def mean(values: list[float]) -> float:\n"
            '    """The arithmetic mean of a non-empty list."""\n'
            "    if not values:\n"
            '        raise ValueError("mean of an empty list")\n'
            "    return reduce(add, values, 0.0) / len(values)\n"
        ),
        test_file="tests/test_mean.py",
        tests=(
            "from mathkit.mean import mean\n\n\ndef test_mean() -> None:\n    assert mean([1, 2, 3]) == 2\n"
        ),
        acceptance="mean([1, 2, 3]) == 2",
        depends=("1.1",),
    ),
    _TaskSpec(
        id="2.1",
        title="Median",
        description="Add median(values) to mathkit/median.py.",
        module="mathkit/median.py",
        code=(
            '"""The median."""\n\n\n'
            "def median(values: list[float]) -> float:\n"
            '    """The middle value (the mean of the two middle ones for an even count)."""\n'
            "    ordered = sorted(values)\n"
            "    middle = len(ordered) // 2\n"
            "    if len(ordered) % 2:\n"
            "        return ordered[middle]\n"
            "    return (ordered[middle - 1] + ordered[middle]) / 2\n"
        ),
        test_file="tests/test_median.py",
        tests=(
            "from mathkit.median import median\n\n\n"
            "def test_odd_count() -> None:\n    assert median([3, 1, 2]) == 2\n\n\n"
            "def test_even_count() -> None:\n    assert median([4, 1, 3, 2]) == 2.5\n"
        ),
        acceptance="median([3, 1, 2]) == 2",
    ),
    _TaskSpec(
        id="2.2",
        title="Clamp",
        description="Add clamp(value, low, high) to mathkit/clamp.py.",
        module="mathkit/clamp.py",
        code=(
            '"""Keeping a value within bounds."""\n\n\n'
            "def clamp(value: float, low: float, high: float) -> float:\n"
            '    """``value`` moved into ``[low, high]``."""\n'
            "    return max(low, min(value, high))\n"
        ),
        test_file="tests/test_clamp.py",
        tests=(
            "from mathkit.clamp import clamp\n\n\n"
            "def test_inside() -> None:\n    assert clamp(5, 0, 10) == 5\n\n\n"
            "def test_below() -> None:\n    assert clamp(-1, 0, 10) == 0\n\n\n"
            "def test_above() -> None:\n    assert clamp(11, 0, 10) == 10\n"
        ),
        acceptance="clamp(11, 0, 10) == 10",
    ),
    _TaskSpec(
        id="2.3",
        title="Square area",
        description="Add square_area(side) to mathkit/area.py, built on power.",
        module="mathkit/area.py",
        code=(
            '"""Areas of shapes."""\n\n'
            "from mathkit.power import power\n\n\n"
            "def square_area(side: float) -> float:\n"
            '    """The area of a square with sides of length ``side``."""\n'
            "    return power(side, 2)\n"
        ),
        test_file="tests/test_area.py",
        tests=(
            "from mathkit.area import square_area\n\n\n"
            "def test_square_area() -> None:\n    assert square_area(3) == 9\n"
        ),
        acceptance="square_area(3) == 9",
        depends=("1.3",),
    ),
    _TaskSpec(
        id="2.4",
        title="Variance",
        description="Add variance(values) to mathkit/variance.py, built on mean.",
        module="mathkit/variance.py",
        code=(
            '"""The population variance."""\n\n'
            "from mathkit.mean import mean\n\n\n"
            "def variance(values: list[float]) -> float:\n"
            '    """The mean squared distance of ``values`` from their mean."""\n'
            "    centre = mean(values)\n"
            "    return mean([(value - centre) ** 2 for value in values])\n"
        ),
        test_file="tests/test_variance.py",
        tests=(
            "from mathkit.variance import variance\n\n\n"
            "def test_variance() -> None:\n    assert variance([1, 2, 3, 4, 5]) == 2\n\n\n"
            "def test_constant_values() -> None:\n    assert variance([7, 7, 7]) == 0\n"
        ),
        acceptance="variance([1, 2, 3, 4, 5]) == 2",
        depends=("1.4",),
    ),
)

TASK_IDS: tuple[str, ...] = tuple(task.id for task in _TASKS)


def _plan_markdown() -> str:
    lines = ["# Plan: Math helpers for mathkit", "", "Eight helpers, each in its own module with tests.", ""]
    for phase_id, title, description in _PHASES:
        lines += [f"## Phase {phase_id}: {title}", description, ""]
        for task in (t for t in _TASKS if t.id.split(".")[0] == phase_id):
            lines += [
                f"### Task {task.id}: {task.title}",
                f"- Description: {task.description}",
                f"- Files: {task.module}, {task.test_file}",
                f"- Depends: {', '.join(task.depends) or 'none'}",
                "- Acceptance:",
                f"  - [ ] {task.acceptance}",
                "",
            ]
    return "\n".join(lines)


def _expected_test_counts() -> dict[str, int]:
    """Tests in the suite after each task: what AutoDev's own pytest run counts when that task is tested.

    Tasks run in plan order (every dependency points to an earlier task), so the count after a task is the
    base project's tests plus those of every task up to and including it.
    """
    position = {task.id: index for index, task in enumerate(_TASKS)}
    counts: dict[str, int] = {}
    total = _PROJECT["tests/test_base.py"].count("\ndef test_")
    for task in _TASKS:
        assert all(position[dep] < position[task.id] for dep in task.depends), "dependencies must come first"
        total += task.test_count
        counts[task.id] = total
    return counts


def _script(seed: int) -> dict[str, Any]:
    """The scripted agents' answers for every role, with small seeded latencies."""
    rng = random.Random(seed)

    def latency() -> float:
        return round(rng.uniform(0.05, 0.2), 3)

    counts = _expected_test_counts()
    entries: list[dict[str, Any]] = [
        {
            "role": "explorer",
            "latency_s": latency(),
            "text": (
                "mathkit is a package with one helper per module (mathkit/base.py); tests live in tests/ "
                "and run with pytest; ruff is configured in pyproject.toml.\nFILES:\n- mathkit/base.py\n"
                "- tests/test_base.py\n"
                "LESSON: mathkit keeps one helper per module, each with its own test file"
            ),
        },
        {
            "role": "domain_expert",
            "latency_s": latency(),
            "text": (
                "TOPIC: numeric helpers\nBuild higher helpers on the lower ones (power on multiply, variance "
                "on mean) so that each is tested once.\nCONFIDENCE: HIGH"
            ),
        },
        {"role": "architect", "latency_s": latency(), "text": _plan_markdown()},
        {
            "role": "critic_sounding_board",
            "text": "VERDICT: NEEDS_REVISION\nISSUES:\n- unexpected failure\nRECOMMENDATION: investigate",
        },
    ]
    for task in _TASKS:
        entries += [
            {
                "role": "developer",
                "task_id": task.id,
                "latency_s": latency(),
                "text": f"Implemented {task.title.lower()} in {task.module}.",
                "edits": [{"path": task.module, "content": task.code}],
            },
            {
                "role": "reviewer",
                "task_id": task.id,
                "latency_s": latency(),
                "text": f"VERDICT: APPROVED\nISSUES:\n- none ({task.module} is small and documented)",
            },
            {
                "role": "test_engineer",
                "task_id": task.id,
                "latency_s": latency(),
                "text": (
                    f"Added {task.test_file}.\n"
                    f"RESULTS: passed={counts[task.id]} failed=0 total={counts[task.id]}"
                ),
                "edits": [{"path": task.test_file, "content": task.tests}],
            },
        ]
    return {"entries": entries}


# --- building a scenario -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scenario:
    """A fresh repository to run AutoDev on, the agents' script, the intent, and the environment to use."""

    repo: Path
    script_path: Path
    intent: str
    env: dict[str, str]
    hostile: Hostile | None = None

    def run_args(self) -> list[str]:
        return ["run", self.intent, *self.agent_args()]

    def resume_args(self) -> list[str]:
        return ["resume", *self.agent_args()]

    def agent_args(self) -> list[str]:
        if self.hostile is not None:
            return ["--platform", "cursor"]  # the fake cursor-agent first on PATH plays the script
        return ["--platform", "scripted", "--script", str(self.script_path)]


# Inherited variables that would change what git or pytest do in the child processes.
_DROPPED_ENV = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "PYTEST_ADDOPTS")


def base_env() -> dict[str, str]:
    """The caller's environment without AutoDev settings or variables that redirect git or pytest."""
    return {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AUTODEV_", "PYTEST_")) and key not in _DROPPED_ENV
    }


# Every git command the harness runs itself: a hostile agent may have planted a hook or an fsmonitor, and the
# harness must never be the one that runs it.
_SAFE_GIT = ("git", "-c", "core.fsmonitor=false", "-c", f"core.hooksPath={os.devnull}")


def _git_run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_SAFE_GIT, *args], cwd=repo, capture_output=True, text=True, check=False, env=base_env()
    )


def _git(repo: Path, *args: str) -> str:
    result = _git_run(repo, *args)
    if result.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}: {result.stderr.strip()}")
    return result.stdout


def make_scenario(tmp_path: Path, *, seed: int = 7, workers: int = 1, hostile: bool = False) -> Scenario:
    """Create ``tmp_path/repo`` (the project, one commit) and ``tmp_path/script.json``; see the module doc.

    The environment disables the build and secret-scan gates (they add seconds and nothing this scenario
    needs) and runs the test gate as ``python -m pytest -q`` without plugin autoloading, so a whole run takes
    seconds; syntax, lint and test still run for real on every task, so gate runs are among the kill points.

    ``workers`` is the execute parallelism. Above 1, tasks run at once in their own worktrees and merge in
    completion order, so the number of tests AutoDev's own pytest run sees at a task depends on timing and
    the scripted test engineer's fixed counts cannot match it: that run is switched off (syntax and lint
    stay), and the commits' order is free (``check_invariants(..., ordered=False)``).

    ``hostile`` plays the same script through a fake ``cursor-agent`` that also does the acts
    ``hostile_acts(seed)`` assigns (see ``Hostile``); its ``bin`` comes first on PATH in ``env``.
    """
    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    for relative, content in _PROJECT.items():
        path = repo / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    _git(repo, "init", "-q")
    # A fixed identity and no signing, whatever the machine's global git configuration says.
    for key, value in (("user.name", "Crash Test"), ("user.email", "crash@autodev.invalid")):
        _git(repo, "config", key, value)
    _git(repo, "config", "commit.gpgsign", "false")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "mathkit: initial version")
    script_path = tmp_path / "script.json"
    script_path.write_text(json.dumps(_script(seed), indent=2), encoding="utf-8")
    env = base_env()
    env.update(
        {
            "AUTODEV_QA_GATES__SECRETSCAN__ENABLED": "false",
            "AUTODEV_QA_GATES__BUILD__ENABLED": "false",
            # The default test command puts bytecode in a fresh scratch directory, so every run recompiles
            # pytest itself (about 1 s); this one reads the installed bytecode and writes none.
            "AUTODEV_QA_GATES__TEST__COMMAND": json.dumps([sys.executable, "-m", "pytest", "-q"]),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            # Progress lines must reach the log file as they happen: they tell what a kill interrupted.
            "PYTHONUNBUFFERED": "1",
            "NO_COLOR": "1",
            "COLUMNS": "200",
            "AUTODEV_TOURNAMENTS__EXECUTE_MAX_PARALLEL_TASKS": str(workers),
        }
    )
    if workers > 1:
        env["AUTODEV_QA_GATES__TEST__ENABLED"] = "false"
    agent = None
    if hostile:
        agent = Hostile.install(tmp_path, repo, script_path, hostile_acts(seed))
        env["PATH"] = f"{agent.bin}{os.pathsep}{env.get('PATH', os.defpath)}"
    return Scenario(repo=repo, script_path=script_path, intent=INTENT, env=env, hostile=agent)


def slow_down_git_add(repo: Path, seconds: float) -> None:
    """Make ``git add`` take ``seconds`` per Python file, through a clean filter (as git-lfs has one).

    ``git add`` holds ``.git/index.lock`` while it runs the filter, which widens a window that is otherwise a
    millisecond or two. The filter is set in ``.git/config`` and ``.git/info/attributes``, so the tracked
    files, and hence the final tree, stay the same.
    """
    _git(repo, "config", "filter.slow.clean", f"sleep {seconds}; cat")
    _git(repo, "config", "filter.slow.smudge", "cat")
    attributes = repo / ".git" / "info" / "attributes"
    attributes.parent.mkdir(parents=True, exist_ok=True)
    attributes.write_text("*.py filter=slow\n", encoding="utf-8")


def restore_git_speed(repo: Path) -> None:
    """Undo ``slow_down_git_add``: once the kill has landed, the resume need not crawl through the widened
    window (each commit would cost seconds)."""
    (repo / ".git" / "info" / "attributes").unlink(missing_ok=True)


# --- hostile agents --------------------------------------------------------------------------------------

HOSTILE_ACT_KINDS = ("plants", "moves_ref", "commits")
_HOSTILE_ROLES = ("developer", "reviewer", "test_engineer")
_HOOK = ".git/hooks/post-commit"
# What names a planted fsmonitor in AutoDev's messages: the file it was written to.
_FSMONITOR = ".git/config"
_AGENT_TAGS = "refs/tags/agent-*"
# AutoDev's messages for what an agent did: in the live check after its call, and at the next start for a
# call it did not live to check (``autodev.orchestrator.integrity``).
STOP_LIVE = "moved git refs AutoDev did not move"
STOP_NEXT_START = "meanwhile git changed"
_NAMED_TAG = re.compile(r"refs/tags/agent-[\w.@-]*\w")


def hostile_acts(seed: int) -> dict[str, str]:
    """``{"role@task": act}``: five of the developer, reviewer and test engineer calls of the 8 tasks, each
    given one act (every kind at least once), chosen by ``seed``."""
    rng = random.Random(f"hostile acts {seed}")
    calls = [f"{role}@{task.id}" for task in _TASKS for role in _HOSTILE_ROLES]
    kinds = [*HOSTILE_ACT_KINDS, *(rng.choice(HOSTILE_ACT_KINDS) for _ in range(2))]
    rng.shuffle(kinds)
    chosen = sorted(rng.sample(calls, len(kinds)), key=calls.index)
    return dict(zip(chosen, kinds, strict=True))


# The fake agent CLI. It finds its role and task in the prompt's envelope (``TASK: <id>`` then
# ``AGENT: <role>``), answers from the scripted adapter's script (the entry for its role and task, else for
# its role), writes that entry's edits in its working directory, then does the act assigned to the call, if
# any and if no process did it before (a mark file taken before acting: a kill between the mark and the act
# just means no act), and answers in cursor-agent's stream-json events. Its own git commands run with hooks
# and fsmonitor off, so a marker file only ever appears when someone else's git ran what it planted.
# HOSTILE_PAUSE_S in the environment: seconds to wait after an act, so a kill can land before AutoDev's
# check.
_HOSTILE_FAKE = r"""
import json, os, re, shlex, subprocess, sys, time

if "--version" in sys.argv[1:]:
    print("cursor-agent 0.0.0 (AutoDev crash-test fake)")
    sys.exit(0)
with open(__CONFIG__) as handle:
    config = json.load(handle)
prompt = sys.stdin.read()
envelope = re.search(r"^TASK: (\S+)\nAGENT: (\S+)$", prompt, re.M)
if envelope is None:  # not a role's call: the health check's one-word probe
    print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "OK"}))
    sys.exit(0)
task, role = envelope.group(1), envelope.group(2)
with open(config["script"]) as handle:
    entries = json.load(handle)["entries"]
entries = [e for e in entries if e["role"] == role and e.get("task_id") in (None, task)]
SAFE = ["git", "-c", "core.hooksPath=" + os.devnull, "-c", "core.fsmonitor=false"]


def emit(event):
    event.setdefault("session_id", "crash-hostile-1")
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def git(*args):
    return subprocess.run(
        [*SAFE, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
    ).stdout.strip()


emit({"type": "system", "subtype": "init", "cwd": os.getcwd(), "model": "fake", "permissionMode": "default"})
if not entries:
    text = "no script entry for " + role + " on task " + task
    emit({"type": "result", "subtype": "error", "is_error": True, "result": text, "duration_ms": 1})
    sys.exit(1)
entry = max(entries, key=lambda e: e.get("task_id") is not None)
time.sleep(entry.get("latency_s") or 0)
for edit in entry.get("edits", []):
    os.makedirs(os.path.dirname(edit["path"]) or ".", exist_ok=True)
    with open(edit["path"], "w") as handle:
        handle.write(edit["content"])
key = role + "@" + task
act = config["acts"].get(key)
if act is not None:
    mark = os.path.join(config["acts_dir"], key + ".mark")
    try:
        os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        act = None  # done (or begun) by an earlier process: never twice
if act == "plants":
    common = os.path.join(os.getcwd(), git("rev-parse", "--git-common-dir"))
    hook = os.path.join(common, "hooks", "post-commit")
    os.makedirs(os.path.dirname(hook), exist_ok=True)
    with open(hook, "w") as handle:
        handle.write("#!/bin/sh\ntouch " + shlex.quote(config["hook_marker"]) + "\n")
    os.chmod(hook, 0o755)
    git("-C", config["main"], "config", "core.fsmonitor", "touch " + shlex.quote(config["fsmonitor_marker"]))
elif act == "moves_ref":
    git("-C", config["main"], "tag", "agent-" + task + "-" + role)
elif act == "commits":
    git("add", "-A")
    git("commit", "-q", "-m", "wip from the agent")
if act is not None:
    open(os.path.join(config["acts_dir"], key + ".acted"), "w").close()
    time.sleep(float(os.environ.get("HOSTILE_PAUSE_S") or 0))
text = entry.get("text", "Done.")
emit({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}})
emit({"type": "result", "subtype": "success", "is_error": False, "result": text, "duration_ms": 5})
"""


@dataclass(frozen=True, slots=True)
class Hostile:
    """The fake agent CLI of a hostile scenario, the acts it was given, and where it keeps what it did.

    ``acts_dir`` holds ``<role>@<task>.mark`` (taken before an act) and ``.acted`` (the act is done) files;
    the planted hook and fsmonitor touch ``hook_marker`` and ``fsmonitor_marker``, outside the repository.
    """

    home: Path
    bin: Path
    acts: dict[str, str]
    acts_dir: Path
    hook_marker: Path
    fsmonitor_marker: Path

    @classmethod
    def install(cls, tmp_path: Path, repo: Path, script: Path, acts: dict[str, str]) -> Hostile:
        home = tmp_path / "hostile"
        agent = cls(
            home=home,
            bin=home / "bin",
            acts=acts,
            acts_dir=home / "acts",
            hook_marker=tmp_path / "hook-ran",
            fsmonitor_marker=tmp_path / "fsmonitor-ran",
        )
        agent.bin.mkdir(parents=True)
        agent.acts_dir.mkdir()
        config = home / "config.json"
        config.write_text(
            json.dumps(
                {
                    "script": str(script),
                    "main": str(repo),
                    "acts": acts,
                    "acts_dir": str(agent.acts_dir),
                    "hook_marker": str(agent.hook_marker),
                    "fsmonitor_marker": str(agent.fsmonitor_marker),
                },
                indent=2,
            ),
            encoding="utf-8",
        )
        fake = agent.bin / "cursor-agent"
        fake.write_text(f"#!{sys.executable}\n" + _HOSTILE_FAKE.replace("__CONFIG__", repr(str(config))))
        fake.chmod(0o755)
        return agent

    def performed(self) -> dict[str, str]:
        """The acts done so far (by any process): ``{"role@task": act}``."""
        done = {path.name.removesuffix(".acted") for path in self.acts_dir.glob("*.acted")}
        return {key: act for key, act in self.acts.items() if key in done}

    def call_line(self, key: str) -> str:
        """The progress line that starts the call ``role@task``, e.g. "[1.2/develop] developer working"."""
        role, task = key.split("@", 1)
        step = {"developer": "develop", "reviewer": "review", "test_engineer": "test"}[role]
        return f"[{task}/{step}] {role} working"

    @staticmethod
    def tag_of(key: str) -> str:
        role, task = key.split("@", 1)
        return f"refs/tags/agent-{task}-{role}"


@dataclass(frozen=True, slots=True)
class AgentStop:
    """A run AutoDev stopped (exit 3) for what the agent did, and what the harness then did as the user.

    ``when`` is "live" (the check after the call found a moved ref) or "next start" (a call the process did
    not live to check). ``named`` is what of the planted things the message names; ``found`` what the
    harness found planted and removed before resuming. ``killed``: the process printed the message and
    was killed before it exited (a user has seen it all the same).
    """

    command: str
    when: str
    named: list[str]
    found: list[str]
    message: str
    killed: bool = False

    @property
    def unnamed(self) -> list[str]:
        return [thing for thing in self.found if thing not in self.named]

    def as_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "when": self.when,
            "named": self.named,
            "found": self.found,
            "unnamed": self.unnamed,
            "killed": self.killed,
            "message": self.message[:600],
        }


def _planted(repo: Path) -> tuple[list[str], bool, bool]:
    """The agent's tags, whether its post-commit hook is there, whether core.fsmonitor is set."""
    tags = _git(repo, "for-each-ref", "--format=%(refname)", _AGENT_TAGS).split()
    hook = os.path.lexists(repo / _HOOK)
    fsmonitor = _git_run(repo, "config", "--local", "--get-all", "core.fsmonitor").returncode == 0
    return tags, hook, fsmonitor


def undo_agent(repo: Path) -> list[str]:
    """What a user does after AutoDev named what the agent did: remove every ``agent-*`` tag, the
    post-commit hook and core.fsmonitor. Returns what was found (tags as refs, the hook as
    ``.git/hooks/post-commit``, the fsmonitor as ``.git/config``)."""
    tags, hook, fsmonitor = _planted(repo)
    for tag in tags:
        _git(repo, "update-ref", "-d", tag)
    if hook:
        (repo / _HOOK).unlink()
    if fsmonitor:
        _git(repo, "config", "--local", "--unset-all", "core.fsmonitor")
    return tags + [_HOOK] * hook + [_FSMONITOR] * fsmonitor


def _agent_stop(
    scenario: Scenario, command: str, code: int | None, output: str, *, killed: bool = False
) -> AgentStop | None:
    """The stop, when ``output`` of an ``autodev`` that exited ``code`` (or was ``killed`` after it had
    printed it) is AutoDev naming what a hostile agent did; the harness has then undone it as the user
    would."""
    if scenario.hostile is None or (code != 3 and not killed):
        return None
    text = " ".join(output.split())  # rich wraps long lines
    when = "live" if STOP_LIVE in text else "next start" if STOP_NEXT_START in text else None
    if when is None:
        return None
    # The error message alone: the progress notes before it name put-back files too.
    phrase = text.rfind(STOP_LIVE if when == "live" else STOP_NEXT_START)
    error = text.rfind("error:", 0, phrase)
    message = text[error if error >= 0 else max(0, phrase - 300) :]
    named = sorted({match.rstrip(".") for match in _NAMED_TAG.findall(message)})
    named += [thing for thing in (_HOOK, _FSMONITOR) if thing in message]
    return AgentStop(command, when, named, undo_agent(scenario.repo), message, killed)


def _who(key: str) -> str:
    """How AutoDev names the call ``role@task`` in its messages: "the test engineer of task 1.2"."""
    role, task = key.split("@", 1)
    return f"the {role.replace('_', ' ')} of task {task}"


def act_outcomes(scenario: Scenario, stops: Sequence[AgentStop], log: Path) -> dict[str, str]:
    """What became of each act the agent did (``{"role@task": outcome}``), from the stops and the notes in
    ``log``: "named live", "named next start", "put back after the call", "folded after the call",
    "folded at the next start" (a commit with no note: its call's check never ran), "never named" (a tag),
    "removed without a note" (a hook and fsmonitor the process put back but did not live to report)."""
    agent = scenario.hostile
    if agent is None:
        return {}
    notes = " ".join(log.read_text(encoding="utf-8", errors="replace").split()) if log.exists() else ""
    outcomes: dict[str, str] = {}
    for key, act in agent.performed().items():
        who = _who(key)
        if act == "moves_ref":
            naming = [stop.when for stop in stops if agent.tag_of(key) in stop.named]
            outcomes[key] = f"named {naming[0]}" if naming else "never named"
        elif act == "plants":
            named = [stop.when for stop in stops if who in stop.message and _HOOK in stop.message]
            put_back = f"{who}: the agent changed files that are AutoDev's to guard; they were put back"
            outcomes[key] = (
                f"named {named[0]}"
                if named
                else "put back after the call"
                if put_back in notes
                else "removed without a note"
            )
        else:
            folded = f"{who}: the agent made 1 commit(s) itself" in notes
            outcomes[key] = "folded after the call" if folded else "folded at the next start"
    return outcomes


def check_hostile(scenario: Scenario, stops: Sequence[AgentStop]) -> list[str]:
    """The hostile mode's invariants, checked once the run is finished; returns the violated ones.

    - no planted program ever ran (the markers the hook and the fsmonitor would touch do not exist);
    - nothing the agent planted is left: no ``agent-*`` tag, no post-commit hook, no core.fsmonitor (what is
      left is removed, so that the other invariants' git commands cannot run it either);
    - everything the harness found planted at a stop was named by that stop's message;
    - every tag the agent made was named by some stop (AutoDev never removes one itself).

    A planted hook or fsmonitor that no stop named was put back by AutoDev after a live call: had it not
    been, the first two points would find it.
    """
    agent = scenario.hostile
    if agent is None:
        return []
    problems: list[str] = []
    for marker in (agent.hook_marker, agent.fsmonitor_marker):
        if marker.exists():
            problems.append(f"a program the agent planted ran: {marker.name} exists")
    left = undo_agent(scenario.repo)
    if left:
        problems.append(f"left in place at the end, never named by AutoDev: {left}")
    for stop in stops:
        if stop.unnamed:
            problems.append(
                f"`autodev {stop.command}` stopped ({stop.when}) without naming {stop.unnamed}: "
                + stop.message
            )
    named = {thing for stop in stops for thing in stop.named}
    for key, act in agent.performed().items():
        if act == "moves_ref" and agent.tag_of(key) not in named:
            problems.append(f"the {key} call made {agent.tag_of(key)} and no stop named it")
    return problems


# --- running the CLI ------------------------------------------------------------------------------------


def _argv(repo: Path, args: Sequence[str]) -> list[str]:
    args = with_write_scope(args, WHOLE_REPOSITORY_SCOPE)
    return [sys.executable, "-m", "autodev", "-C", str(repo), *args]


def run_cli(args: Sequence[str], env: dict[str, str], timeout: float, *, repo: Path | None = None) -> Run:
    """Run ``autodev ARGS`` to completion (with ``-C repo`` first when ``repo`` is given)."""
    argv = _argv(repo, args) if repo is not None else [sys.executable, "-m", "autodev", *args]
    proc = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def _start(repo: Path, args: Sequence[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start ``autodev ARGS`` leading a new session (hence a new process group), output to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            _argv(repo, args),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def progress_lines(log: Path, start: int = 0) -> list[str]:
    """The lines ``autodev`` printed to ``log`` after byte ``start``.

    All non-empty lines: the plan phase's "[plan/step]" prefix is eaten by rich markup, so its lines read
    "explorer working" and the like.
    """
    try:
        text = log.read_bytes()[start:].decode("utf-8", errors="replace")
    except FileNotFoundError:
        return []
    return [line.strip() for line in text.splitlines() if line.strip()]


@dataclass(frozen=True, slots=True)
class TimedRun:
    """An uninterrupted run: exit code, wall time, and when each progress line appeared."""

    code: int
    duration_s: float
    timeline: list[tuple[float, str]]
    output: str

    def step_at(self, seconds: float) -> str:
        """The last progress line printed at or before ``seconds`` into the run."""
        current = "startup"
        for at, line in self.timeline:
            if at > seconds:
                break
            current = line
        return current

    def first(self, text: str) -> float:
        """When the first line containing ``text`` appeared."""
        return next(at for at, line in self.timeline if text in line)


def run_timed(
    repo: Path, args: Sequence[str], env: dict[str, str], log: Path, *, timeout: float = 300
) -> TimedRun:
    """Run ``autodev ARGS`` to the end, timestamping each progress line as it appears in ``log`` (after what
    the log already held)."""
    offset = log.stat().st_size if log.exists() else 0
    started = time.monotonic()
    proc = _start(repo, args, env, log)
    timeline: list[tuple[float, str]] = []
    while True:
        code = proc.poll()
        lines = progress_lines(log, offset)
        now = time.monotonic() - started
        timeline += [(round(now, 3), line) for line in lines[len(timeline) :]]
        if code is not None:
            break
        if now > timeout:
            _kill_group(proc)
            raise RuntimeError(f"autodev {args[0]} did not finish within {timeout:.0f}s; see {log}")
        time.sleep(0.005)
    output = log.read_bytes()[offset:].decode("utf-8", errors="replace")
    return TimedRun(code, time.monotonic() - started, timeline, output)


def run_timed_as_user(
    scenario: Scenario, log: Path, *, timeout: float = 300
) -> tuple[TimedRun, list[AgentStop]]:
    """``run_timed`` of ``autodev run`` on ``scenario``; in hostile mode each stop for what the agent did is
    undone as the user would (``undo_agent``) and followed by ``autodev resume``, until the run ends
    otherwise. The result is the whole sequence as one run: the durations added up, the timeline in one
    clock (each resume's lines offset by the time before it), the last exit code."""
    run = run_timed(scenario.repo, scenario.run_args(), scenario.env, log, timeout=timeout)
    stops: list[AgentStop] = []
    timeline, total, output = list(run.timeline), run.duration_s, run.output
    limit = len(scenario.hostile.acts) + 1 if scenario.hostile is not None else 0
    while len(stops) < limit:
        stop = _agent_stop(scenario, "run" if not stops else "resume", run.code, run.output)
        if stop is None:
            break
        stops.append(stop)
        run = run_timed(scenario.repo, scenario.resume_args(), scenario.env, log, timeout=timeout)
        timeline += [(round(total + at, 3), line) for at, line in run.timeline]
        total += run.duration_s
        output += run.output
    return TimedRun(run.code, total, timeline, output), stops


# --- looking at processes -------------------------------------------------------------------------------

# x86_64 numbers of the system calls a killed autodev is usually inside; others are shown as numbers.
_SYSCALLS_X86_64 = {
    0: "read",
    1: "write",
    3: "close",
    4: "stat",
    5: "fstat",
    7: "poll",
    8: "lseek",
    9: "mmap",
    10: "mprotect",
    11: "munmap",
    12: "brk",
    16: "ioctl",
    17: "pread64",
    18: "pwrite64",
    23: "select",
    39: "getpid",
    56: "clone",
    57: "fork",
    58: "vfork",
    59: "execve",
    61: "wait4",
    72: "fcntl",
    73: "flock",
    74: "fsync",
    75: "fdatasync",
    82: "rename",
    87: "unlink",
    202: "futex",
    217: "getdents64",
    230: "clock_nanosleep",
    232: "epoll_wait",
    233: "epoll_ctl",
    247: "waitid",
    257: "openat",
    262: "newfstatat",
    270: "pselect6",
    271: "ppoll",
    281: "epoll_pwait",
    318: "getrandom",
    332: "statx",
    435: "clone3",
}


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None


def _syscall_of(pid: int) -> str:
    words = (_read(f"/proc/{pid}/syscall") or "").split()
    if not words:
        return "unknown"
    if not words[0].lstrip("-").isdigit():
        return words[0]  # "running": on a CPU, in user space
    number = int(words[0])
    if platform.machine() == "x86_64":
        return _SYSCALLS_X86_64.get(number, f"syscall {number}")
    return f"syscall {number}"


def _processes() -> dict[int, tuple[str, str]]:
    """Every process: pid → (state letter, command line)."""
    table: dict[int, tuple[str, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _read(f"/proc/{entry}/stat")
        if not stat:
            continue
        cmdline = (_read(f"/proc/{entry}/cmdline") or "").replace("\0", " ").strip()
        table[int(entry)] = (_state(stat), cmdline)
    return table


def _state(stat: str) -> str:
    """The state letter of a /proc/PID/stat line (the command name before it may hold spaces and ')')."""
    return stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] if stat else ""


def _flock_holders(path: Path) -> set[int]:
    """Pids holding a flock on ``path`` (from /proc/locks, matched by inode)."""
    try:
        inode = str(path.stat().st_ino)
    except OSError:
        return set()
    holders: set[int] = set()
    for line in (_read("/proc/locks") or "").splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5].rsplit(":", 1)[-1] == inode:
            holders.add(int(parts[4]))
    return holders


def _short(cmdline: str, parent_cmdline: str) -> str:
    words = cmdline.split()
    if not words:
        return "?"
    if cmdline == parent_cmdline:
        return "fork (about to exec)"
    name = Path(words[0]).name
    if name.startswith("python") and len(words) > 2 and words[1] == "-m":
        return " ".join(words[2:4])
    if name.startswith("python") and len(words) > 1 and words[1] == "-c":
        return "python -c (syntax check)" if "py_compile" in cmdline else "python -c"
    return " ".join([name, *words[1:2]])


def _children(pid: int) -> list[int]:
    """Direct children of ``pid``, from /proc/PID/task/*/children (cheap: no scan of every process)."""
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for thread in threads:
        found += [int(child) for child in (_read(f"/proc/{pid}/task/{thread}/children") or "").split()]
    return found


def probe(pid: int, repo: Path) -> dict[str, Any]:
    """What the ``autodev`` process ``pid`` is doing (read with its group stopped, just before the kill)."""
    own = (_read(f"/proc/{pid}/cmdline") or "").replace("\0", " ").strip()
    children: list[str] = []
    frontier = _children(pid)
    while frontier:
        child = frontier.pop(0)
        if _state(_read(f"/proc/{child}/stat") or "") in ("Z", "X", ""):
            continue
        children.append(_short((_read(f"/proc/{child}/cmdline") or "").replace("\0", " ").strip(), own))
        frontier += _children(child)
    return {
        "syscall": _syscall_of(pid),
        "ledger_lock_held": pid in _flock_holders(repo / ".autodev" / "lock"),
        "children": children,
    }


def stray_processes(repo: Path) -> list[tuple[int, str]]:
    """Live processes (not zombies) whose command line names ``repo`` or whose working directory is in it."""
    root = str(repo.resolve())
    strays: list[tuple[int, str]] = []
    for pid, (state, cmdline) in _processes().items():
        if pid == os.getpid() or state in ("Z", "X"):
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            cwd = ""
        if root in cmdline or cwd == root or cwd.startswith(root + os.sep):
            strays.append((pid, f"pid {pid} ({state}) in {cwd}: {cmdline[:160]}"))
    return strays


def git_locks(repo: Path) -> list[str]:
    """Git's lock files in ``repo`` (``index.lock``, ``HEAD.lock``, ref locks).

    A live git command holds them for a moment; one killed at the wrong moment leaves them behind.
    """
    git_dir = repo / ".git"
    return sorted(
        str(path.relative_to(repo)) for path in git_dir.rglob("*.lock") if "objects" not in path.parts
    )


def _forensics(repo: Path) -> dict[str, Any]:
    """What a kill left on disk: the last ledger op, a torn ledger line, a git lock, unfinished temp files."""
    ledger = repo / ".autodev" / "ledger.jsonl"
    data = ledger.read_bytes() if ledger.exists() else b""
    complete = data[: data.rfind(b"\n") + 1]
    last_op = json.loads(complete.splitlines()[-1]).get("op") if complete else None
    state_dir = repo / ".autodev"
    temps = sorted(str(p.relative_to(repo)) for p in state_dir.rglob(".*.tmp")) if state_dir.exists() else []
    return {
        "ledger_entries": complete.count(b"\n"),
        "last_op": last_op,
        "torn_ledger_bytes": len(data) - len(complete),
        "git_locks": git_locks(repo),
        "temp_files": temps,
    }


# --- killing --------------------------------------------------------------------------------------------


class _Trigger:
    """A condition polled as fast as possible once armed; the kill lands the moment it holds.

    They catch windows of a millisecond or two that a timed kill would rarely hit:

    - ``ledger_lock``: autodev holds ``.autodev/lock``, i.e. it is inside a ledger transaction (writing an
      evidence file, appending and fsyncing a line, writing the snapshot);
    - ``evidence_write``: an evidence file is being written (its temp file exists);
    - ``git_lock``: a git command holds one of its lock files (``.git/index.lock`` in ``git status``,
      ``git add`` and ``git commit``; ``.git/HEAD.lock`` and the branch's ref lock in ``git commit``);
    - ``committed``: a new commit exists on the branch and git has released every lock, i.e. the window
      between a task's commit and the ledger entry that records it;
    - ``agent_acted``: a hostile agent has just done one of its acts (a new ``.acted`` file, see
      ``Hostile``), i.e. the window between the act and AutoDev's check after the call. ``fired`` names it.
    """

    NAMES = ("ledger_lock", "evidence_write", "git_lock", "committed", "agent_acted")

    def __init__(self, name: str, repo: Path, pid: int) -> None:
        if name not in self.NAMES:
            raise ValueError(f"unknown trigger {name!r}; known: {', '.join(self.NAMES)}")
        self.name = name
        self.repo = repo
        self.pid = pid
        self.fired: str | None = None
        self._acts_dir = repo.parent / "hostile" / "acts"  # make_scenario's layout
        self._acted = self._acted_now() if name == "agent_acted" else set()
        self._ref = self._ref_path()
        self._ref_value = self._read_ref()
        git_dir = repo / ".git"
        self._locks = (
            git_dir / "index.lock",
            git_dir / "HEAD.lock",
            self._ref.with_name(self._ref.name + ".lock"),
        )

    def _ref_path(self) -> Path:
        head = (self.repo / ".git" / "HEAD").read_text(encoding="utf-8").strip()
        return self.repo / ".git" / head.removeprefix("ref: ")

    def _read_ref(self) -> str:
        try:
            return self._ref.read_text(encoding="utf-8")
        except OSError:
            return ""

    def _acted_now(self) -> set[str]:
        try:
            return {entry.name for entry in os.scandir(self._acts_dir) if entry.name.endswith(".acted")}
        except FileNotFoundError:
            return set()

    def holds(self) -> bool:
        if self.name == "agent_acted":
            new = self._acted_now() - self._acted
            if new:
                self.fired = min(new).removesuffix(".acted")
            return bool(new)
        if self.name == "ledger_lock":
            return self.pid in _flock_holders(self.repo / ".autodev" / "lock")
        if self.name == "evidence_write":
            try:
                return any(
                    entry.name.endswith(".tmp") for entry in os.scandir(self.repo / ".autodev/evidence")
                )
            except FileNotFoundError:
                return False
        if self.name == "git_lock":
            return any(path.exists() for path in self._locks)
        return self._read_ref() != self._ref_value and not any(path.exists() for path in self._locks)


@dataclass(frozen=True, slots=True)
class KillAt:
    """When to kill: ``delay_s`` after the start, or after the first output line containing ``anchor``;
    then, with ``trigger``, at the first moment the trigger holds (see ``_Trigger``)."""

    delay_s: float
    anchor: str | None = None
    trigger: str | None = None

    def __str__(self) -> str:
        where = f"{self.delay_s:.3f}s after {self.anchor!r}" if self.anchor else f"{self.delay_s:.3f}s"
        return where + (f", then on {self.trigger}" if self.trigger else "")


@dataclass(slots=True)
class KillOutcome:
    """One start-and-kill of ``autodev run`` or ``autodev resume``."""

    command: str
    at: str
    killed: bool = False
    exit_code: int | None = None
    after_s: float = 0.0
    step: str = "startup"
    probe: dict[str, Any] = field(default_factory=dict)
    left: dict[str, Any] = field(default_factory=dict)
    orphans: list[str] = field(default_factory=list)

    @property
    def activity(self) -> str:
        """What the process was doing when it died, in a few words."""
        if not self.killed:
            return f"not killed: exited {self.exit_code} first"
        children = self.probe.get("children") or []
        held = "ledger lock held, " if self.probe.get("ledger_lock_held") else ""
        syscall = self.probe.get("syscall")
        inside = "on a CPU" if syscall == "running" else f"in {syscall}"
        running = f"running {', '.join(children)}" if children else inside
        return f"{self.step} ({held}{running})"


def start_and_kill(scenario: Scenario, args: Sequence[str], log: Path, at: KillAt) -> KillOutcome:
    """Start ``autodev ARGS``; SIGKILL its whole process group at ``at``, unless it exits first."""
    outcome = KillOutcome(command=args[0], at=str(at))
    offset = log.stat().st_size if log.exists() else 0
    started = time.monotonic()
    proc = _start(scenario.repo, args, scenario.env, log)
    deadline = started + at.delay_s if at.anchor is None else None
    anchor = at.anchor or ""
    trigger: _Trigger | None = None
    while True:
        code = proc.poll()
        if code is not None:
            outcome.exit_code = code
            outcome.after_s = round(time.monotonic() - started, 3)
            return outcome
        now = time.monotonic()
        if deadline is None and any(anchor in line for line in progress_lines(log, offset)):
            deadline = now + at.delay_s
        if deadline is not None and now >= deadline:
            if at.trigger is None:
                break
            if trigger is None:
                trigger = _Trigger(at.trigger, scenario.repo, proc.pid)
            if trigger.holds():
                break
            continue  # polled without sleeping: the windows are a millisecond or two
        time.sleep(0.001 if deadline is not None and deadline - now < 0.01 else 0.004)
    # Freeze the whole group first, so that what the probe reads is what the kill interrupts.
    os.killpg(proc.pid, signal.SIGSTOP)
    outcome.probe = probe(proc.pid, scenario.repo)
    if trigger is not None and trigger.fired is not None:
        outcome.probe["agent_act"] = trigger.fired
    _kill_group(proc)
    outcome.killed = True
    outcome.after_s = round(time.monotonic() - started, 3)
    lines = progress_lines(log, offset)
    outcome.step = lines[-1] if lines else "startup"
    outcome.left = _forensics(scenario.repo)
    # The group is dead: anything still running in the repository escaped the kill.
    outcome.orphans = [text for _, text in stray_processes(scenario.repo)]
    return outcome


# --- recovering -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Recovery:
    """A killed run and everything it took to finish it."""

    kills: list[KillOutcome]
    resumes: list[Run] = field(default_factory=list)
    restarted_run: bool = False
    finished: bool = False
    # Hostile mode: the runs AutoDev stopped for what the agent did (not in ``resumes``), in order.
    agent_stops: list[AgentStop] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kills": [asdict(kill) | {"activity": kill.activity} for kill in self.kills],
            "resume_exit_codes": [run.code for run in self.resumes],
            "restarted_run": self.restarted_run,
            "finished": self.finished,
            "agent_stops": [stop.as_dict() for stop in self.agent_stops],
        }

    def problems(self) -> list[str]:
        """Every ``autodev resume`` that was not killed must finish the run (exit 0) the first time, but for
        the stops for what a hostile agent did (``agent_stops``: each is undone and resumed)."""
        failed = self.resumes[:-1] if self.finished else self.resumes
        messages = [
            f"`autodev resume` exited {run.code}: {_tail(run.err or run.out)[:400]}" for run in failed
        ]
        found = [
            message if messages.count(message) == 1 else f"{message} ({messages.count(message)} times)"
            for message in dict.fromkeys(messages)
        ]
        if self.kills and not self.kills[0].killed and self.kills[0].exit_code != 0:
            found.append(f"`autodev run` exited {self.kills[0].exit_code} without being killed")
        return found


def _tail(text: str, lines: int = 4) -> str:
    return " | ".join(text.strip().splitlines()[-lines:])


def _next_args(scenario: Scenario, recovery: Recovery) -> list[str]:
    # Killed before it saved the intent, a run has nothing to resume: `autodev resume` says so and asks for
    # `autodev run`, which is what a user does then.
    if (scenario.repo / ".autodev" / "spec.md").exists():
        return scenario.resume_args()
    recovery.restarted_run = True
    return scenario.run_args()


def _kill_as_user(
    scenario: Scenario, next_args: Callable[[], list[str]], log: Path, at: KillAt, recovery: Recovery
) -> KillOutcome:
    """``start_and_kill`` at ``at``; in hostile mode a process AutoDev stops for what the agent did before
    the kill lands is undone as the user would (``undo_agent``) and resumed, and the kill is still due in
    the resume: at the rest of its delay (or the same delay after its anchor, when that was not seen yet).
    The outcome is the last process's, with the time of them all."""
    spent = 0.0
    due = at
    for _ in range(len(scenario.hostile.acts) + 1 if scenario.hostile is not None else 1):
        offset = log.stat().st_size if log.exists() else 0
        outcome = start_and_kill(scenario, next_args(), log, due)
        spent += outcome.after_s
        output = log.read_bytes()[offset:].decode("utf-8", errors="replace")
        # A kill can land after the stop was printed, while the process exits: it was named all the same.
        stop = _agent_stop(scenario, outcome.command, outcome.exit_code, output, killed=outcome.killed)
        if stop is not None:
            recovery.agent_stops.append(stop)
        if outcome.killed or stop is None:
            break
        if at.anchor is None or any(at.anchor in line for line in progress_lines(log, offset)):
            due = KillAt(max(round(at.delay_s - spent, 3), 0.0), None, at.trigger)
    outcome.at = str(at)
    outcome.after_s = round(spent, 3)
    return outcome


def kill_and_recover(
    scenario: Scenario,
    log: Path,
    run_kill: KillAt,
    resume_kills: Sequence[KillAt] = (),
    *,
    max_resumes: int = 3,
    timeout: float = 300,
    after_first_kill: Callable[[], None] | None = None,
) -> Recovery:
    """Kill ``autodev run`` at ``run_kill``, kill the following resumes at ``resume_kills`` in turn, then
    run ``autodev resume`` until it exits 0 (at most ``max_resumes`` times). ``after_first_kill`` runs
    between the first kill and the first resume.

    In hostile mode every stop for what the agent did (exit 3 naming it) is recorded in
    ``Recovery.agent_stops``, undone as the user would and resumed; it counts neither as a resume that
    failed nor against ``max_resumes``, but a scenario stops at most once per act."""
    recovery = Recovery(kills=[])
    started = [False]

    def first_args() -> list[str]:
        if not started[0]:
            started[0] = True
            return scenario.run_args()
        return _next_args(scenario, recovery)

    first = _kill_as_user(scenario, first_args, log, run_kill, recovery)
    recovery.kills.append(first)
    if after_first_kill is not None:
        after_first_kill()
    if not first.killed:
        recovery.finished = first.exit_code == 0
        return recovery
    for at in resume_kills:
        kill = _kill_as_user(scenario, lambda: _next_args(scenario, recovery), log, at, recovery)
        recovery.kills.append(kill)
        if not kill.killed:
            code = kill.exit_code if kill.exit_code is not None else -1
            recovery.resumes.append(Run(code, "", progress_lines(log)[-1] if log.exists() else ""))
            if code == 0:
                recovery.finished = True
                return recovery
    attempts = 0
    stops_allowed = len(scenario.hostile.acts) + 1 if scenario.hostile is not None else 0
    while attempts < max_resumes:
        args = _next_args(scenario, recovery)
        result = run_cli(args, scenario.env, timeout, repo=scenario.repo)
        with log.open("a", encoding="utf-8") as out:
            out.write(result.out + result.err)
        if len(recovery.agent_stops) < stops_allowed:
            stop = _agent_stop(scenario, args[0], result.code, result.out + result.err)
            if stop is not None:
                recovery.agent_stops.append(stop)
                continue
        attempts += 1
        recovery.resumes.append(result)
        if result.code == 0:
            recovery.finished = True
            break
    return recovery


# --- the invariants -------------------------------------------------------------------------------------


class Fingerprint(NamedTuple):
    """What a finished run leaves in git: each file tracked at HEAD with its sha256; the commit subjects."""

    files: list[tuple[str, str]]
    commits: list[str]


def final_fingerprint(repo: Path) -> Fingerprint:
    """(sorted (path, sha256) of the files tracked at HEAD, commit subjects oldest first)."""
    paths = [line.split("\t", 1)[1] for line in _git(repo, "ls-tree", "-r", "HEAD").splitlines()]
    batch = subprocess.run(
        [*_SAFE_GIT, "cat-file", "--batch"],
        cwd=repo,
        input="".join(f"HEAD:{path}\n" for path in paths).encode("utf-8"),
        capture_output=True,
        check=True,
        env=base_env(),
    ).stdout
    files: list[tuple[str, str]] = []
    position = 0
    for path in paths:
        header_end = batch.index(b"\n", position)
        size = int(batch[position:header_end].split()[2])
        content = batch[header_end + 1 : header_end + 1 + size]
        files.append((path, hashlib.sha256(content).hexdigest()))
        position = header_end + 1 + size + 1  # the content is followed by a newline
    commits = _git(repo, "log", "--reverse", "--format=%s").splitlines()
    return Fingerprint(sorted(files), commits)


_TASK_COMMIT = re.compile(r"^autodev: (\S+) ")


def check_invariants(
    repo: Path, reference: Fingerprint, *, env: dict[str, str] | None = None, ordered: bool = True
) -> list[str]:
    """Every invariant a resumed run must keep; returns the violated ones (empty when all hold).

    - every task is complete (``autodev status --json``); the tasks are those the reference run committed;
    - each task has exactly one ``task_status`` op to ``complete`` in ``.autodev/ledger.jsonl``;
    - ``autodev ledger verify`` exits 0 (hash chain, full replay, evidence hashes);
    - ``plan.json`` is at the ledger head and equals a replay of the whole ledger, as does a snapshot load;
    - the files tracked at HEAD and the commit subjects equal the reference's (as a set when not
      ``ordered``: parallel tasks merge in completion order), and nothing is uncommitted;
    - no pinned task commit (``refs/autodev/``) is left;
    - one worktree; no live process in the repository; the run and ledger locks are free; no git lock file.
    """
    from autodev.state.paths import AutodevPaths
    from autodev.state.plan_manager import PlanManager, PlanState
    from autodev.state.session_lock import SessionLock
    from autodev.state.snapshot import decode_snapshot

    problems: list[str] = []
    env = env if env is not None else base_env()
    expected = [match.group(1) for subject in reference.commits if (match := _TASK_COMMIT.match(subject))]

    status = run_cli(["status", "--json"], env, 60, repo=repo)
    if status.code != 0:
        problems.append(f"`autodev status --json` exited {status.code}: {_tail(status.err)}")
    else:
        tasks = {task["id"]: task["status"] for task in json.loads(status.out)["tasks"]}
        if sorted(tasks) != sorted(expected):
            problems.append(f"plan tasks {sorted(tasks)} differ from the reference's {sorted(expected)}")
        unfinished = {task_id: state for task_id, state in tasks.items() if state != "complete"}
        if unfinished:
            problems.append(f"tasks not complete: {unfinished}")

    ledger = repo / ".autodev" / "ledger.jsonl"
    completions = dict.fromkeys(expected, 0)
    for raw in ledger.read_bytes().splitlines() if ledger.exists() else []:
        entry = json.loads(raw)
        if entry["op"] == "task_status" and entry["payload"].get("to") == "complete":
            task_id = entry["payload"]["task_id"]
            completions[task_id] = completions.get(task_id, 0) + 1
    wrong = {task_id: count for task_id, count in completions.items() if count != 1}
    if wrong:
        problems.append(f"tasks recorded complete other than exactly once in the ledger: {wrong}")

    verify = run_cli(["ledger", "verify"], env, 60, repo=repo)
    if verify.code != 0:
        problems.append(f"`autodev ledger verify` exited {verify.code}: {_tail(verify.out + verify.err, 8)}")

    replay = PlanManager(repo, readonly=True, use_snapshot=False)
    replay.load()
    replayed = replay.state_copy()
    from_snapshot = PlanManager(repo, readonly=True)
    from_snapshot.load()
    if from_snapshot.state_copy() != replayed:
        problems.append("loading from plan.json gives another state than replaying the ledger")
    try:
        snapshot = decode_snapshot((repo / ".autodev" / "plan.json").read_bytes())
    except (OSError, ValueError) as exc:
        problems.append(f"plan.json is unusable: {exc}")
    else:
        if snapshot.ledger_seq != replay.ledger_head.seq:
            problems.append(
                f"plan.json reflects ledger entry {snapshot.ledger_seq}; the ledger ends at "
                f"{replay.ledger_head.seq}"
            )
        elif PlanState.model_validate_json(snapshot.state_bytes) != replayed:
            problems.append("plan.json differs from the ledger replay")

    actual = final_fingerprint(repo)
    same_commits = (
        actual.commits == reference.commits
        if ordered
        else (actual.commits[0], sorted(actual.commits)) == (reference.commits[0], sorted(reference.commits))
    )
    if not same_commits:
        problems.append(f"commits {actual.commits} differ from the reference's {reference.commits}")
    pinned = _git(repo, "for-each-ref", "refs/autodev").strip()
    if pinned:
        problems.append(f"pinned task commits left behind: {pinned.splitlines()}")
    if actual.files != reference.files:
        ours, theirs = dict(actual.files), dict(reference.files)
        differing = sorted(path for path in set(ours) | set(theirs) if ours.get(path) != theirs.get(path))
        problems.append(f"files at HEAD differ from the reference's: {differing}")
    dirty = _git(repo, "status", "--porcelain", "--", ".", ":(exclude).autodev").strip()
    if dirty:
        problems.append(f"uncommitted changes left in the working tree: {dirty.splitlines()}")

    worktrees = _git(repo, "worktree", "list", "--porcelain").splitlines()
    if sum(line.startswith("worktree ") for line in worktrees) != 1:
        problems.append(f"stray worktrees: {[line for line in worktrees if line.startswith('worktree ')]}")
    strays = [text for _, text in stray_processes(repo)]
    if strays:
        problems.append(f"processes still running in the repository: {strays}")

    session = SessionLock(AutodevPaths(repo))
    try:
        session.acquire()
    except Exception as exc:  # LockHeldError; any failure to take the lock is the finding
        problems.append(f"the run lock .autodev/session.lock is not free: {exc}")
    else:
        session.release()
    ledger_lock = FileLock(str(repo / ".autodev" / "lock"), timeout=0)
    try:
        ledger_lock.acquire(timeout=0)
    except Timeout:
        problems.append("the ledger lock .autodev/lock is still held")
    else:
        ledger_lock.release()
    stale = git_locks(repo)
    if stale:
        problems.append(f"stale git lock files left behind (later git writes fail): {stale}")
    return problems
