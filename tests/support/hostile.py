"""An agent with a shell: a fake ``cursor-agent`` on PATH, found and run the way the real CLIs are.

Per role it writes the files it is given, runs a shell snippet in its working directory (with ``$ROLE``,
``$TASK_ID``, ``$MAIN`` — the main checkout — in the environment) and answers with the given text in the
documented ``stream-json`` events. A role's steps are used in turn (the last one repeats), counted per
role across processes in a file beside the script; a step's ``tasks`` maps a task id to what differs for
that task.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support.cli import WHOLE_REPOSITORY_SCOPE, with_write_scope
from support.projects import PLAN, TRIPLE, TRIPLE_TESTS, git

__all__ = ["HostileAgent", "Step", "default_steps", "run_autodev"]

Step = Mapping[str, Any]

_FAKE = r"""
import json, os, re, subprocess, sys

SCRIPT = __SCRIPT__
if sys.argv[1:] == ["--version"]:
    print("2025.11.25-hostile")
    sys.exit(0)
prompt = sys.stdin.read()
agent = re.search(r"^AGENT: (\S+)", prompt, re.M)
if agent is None:  # not a role's call: the health check's one-word probe
    print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": "OK"}))
    sys.exit(0)
role = agent.group(1)
task = re.search(r"^TASK: (\S+)", prompt, re.M).group(1)
with open(SCRIPT) as handle:
    steps = json.load(handle)
counts_path = SCRIPT + ".calls"
counts = json.load(open(counts_path)) if os.path.exists(counts_path) else {}
index = counts.get(role, 0)
counts[role] = index + 1
with open(counts_path, "w") as handle:
    json.dump(counts, handle)
mine = steps.get(role) or [{"text": "Nothing to say."}]
step = mine[min(index, len(mine) - 1)]
step = {**step, **step.get("tasks", {}).get(task, {})}


def emit(event):
    event.setdefault("session_id", "hostile-1")
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


# Events streamed before the step's shell runs (what a live agent shows while it works).
for event in step.get("events", []):
    emit(dict(event))
for path, content in step.get("files", {}).items():
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as handle:
        handle.write(content)
if step.get("shell"):
    env = {**os.environ, "ROLE": role, "TASK_ID": task, "MAIN": steps["_main"]}
    subprocess.run(["bash", "-c", step["shell"]], env=env, check=False, stdin=subprocess.DEVNULL)
text = step.get("text", "Done.")
emit({"type": "system", "subtype": "init", "cwd": os.getcwd(), "model": "fake", "permissionMode": "default"})
emit({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}})
emit({"type": "result", "subtype": "success", "is_error": False, "result": text, "duration_ms": 5})
"""


def default_steps() -> dict[str, list[dict[str, Any]]]:
    """A well-behaved run of the one-task ``mini`` plan: triple() implemented, approved, tested."""
    return {
        "developer": [{"files": {"mini/core.py": TRIPLE}, "text": "Implemented triple."}],
        "reviewer": [{"text": "VERDICT: APPROVED\nISSUES:\n"}],
        "test_engineer": [
            {"files": {"tests/test_triple.py": TRIPLE_TESTS}, "text": "RESULTS: passed=2 failed=0 total=2"}
        ],
        "critic_sounding_board": [{"text": "VERDICT: REJECTED\nRECOMMENDATION: re-plan\n"}],
    }


class HostileAgent:
    """The fake CLI in ``bin`` and the steps it plays for ``repo``."""

    def __init__(self, home: Path, repo: Path, steps: Mapping[str, Sequence[Step]]) -> None:
        self.bin = home / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        self.script = home / "hostile-steps.json"
        self.script.write_text(json.dumps({**steps, "_main": str(repo)}))
        fake = self.bin / "cursor-agent"
        fake.write_text(f"#!{sys.executable}\n" + _FAKE.replace("__SCRIPT__", repr(str(self.script))))
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def env(self) -> dict[str, str]:
        return {"PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}"}


def run_autodev(
    repo: Path, agent: HostileAgent, *args: str, timeout_s: float = 240.0
) -> subprocess.CompletedProcess[str]:
    """The installed ``autodev`` with the fake agent first on PATH, as a user would run it."""
    exe = Path(sys.executable).with_name("autodev")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTODEV_")}
    env.update(agent.env())
    return subprocess.run(
        [str(exe), "-C", str(repo), *with_write_scope(args, WHOLE_REPOSITORY_SCOPE)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@contextmanager
def executing_until(repo: Path, agent: HostileAgent, when: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``autodev execute`` with the fake agent, running in the background: yielded once ``when`` exists
    (two minutes at most), SIGKILLed on leaving."""
    exe = Path(sys.executable).with_name("autodev")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTODEV_")}
    env.update(agent.env())
    command = with_write_scope(("execute", "--platform", "cursor", "--no-tournament"), WHOLE_REPOSITORY_SCOPE)
    run = subprocess.Popen(
        [str(exe), "-C", str(repo), *command],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while not when.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert when.exists(), f"{when} never appeared"
        yield run
    finally:
        run.kill()
        run.wait()


def planned(repo: Path, plan: str = PLAN) -> Path:
    """``repo`` with ``plan`` saved as its plan (no planning agents involved)."""
    plan_file = repo.parent / "plan.md"
    plan_file.write_text(plan)
    exe = Path(sys.executable).with_name("autodev")
    subprocess.run([str(exe), "-C", str(repo), "plan", "--from-markdown", str(plan_file)], check=True)
    return repo


def log(repo: Path) -> list[str]:
    return git(repo, "log", "--format=%s").splitlines()
