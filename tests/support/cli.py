"""Types and helpers for the CLI tests: the subprocess runner's result, and the installed executable run
as a user would, with its one-line errors checked."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

AUTODEV = Path(sys.executable).with_name("autodev")
# The keys of `autodev status --json`.
STATUS_KEYS = frozenset(
    {
        "plan",
        "session_id",
        "tasks",
        "totals",
        "in_flight",
        "policy",
        "baseline",
        "waiting_for",
        "missing_commits",
        "cost",
        "results",
    }
)


@dataclass(frozen=True, slots=True)
class Run:
    """One finished ``autodev`` process."""

    code: int
    out: str
    err: str


RunCli = Callable[..., Run]


def clean_env() -> dict[str, str]:
    """This process's environment without any ``AUTODEV_*`` setting."""
    return {key: value for key, value in os.environ.items() if not key.upper().startswith("AUTODEV_")}


# The write scope tests declare for ``run`` and ``execute`` unless they test write scopes themselves.
WHOLE_REPOSITORY_SCOPE = "**"


def with_write_scope(args: Sequence[str], write_scope: str | None) -> tuple[str, ...]:
    """``args`` with ``--write-scope write_scope`` after a ``run`` or ``execute`` (past the global options)
    that declares none."""
    args = tuple(args)
    at = 0
    while at < len(args) and args[at] in ("-C", "--repo", "-v", "--verbose"):
        at += 2 if args[at] in ("-C", "--repo") else 1
    if (
        write_scope is None
        or at >= len(args)
        or args[at] not in ("run", "execute")
        or "--write-scope" in args
    ):
        return args
    return (*args[: at + 1], "--write-scope", write_scope, *args[at + 1 :])


def autodev(
    cwd: Path,
    *args: str,
    env: dict[str, str] | None = None,
    file_size_limit: int | None = None,
    write_scope: str | None = WHOLE_REPOSITORY_SCOPE,
) -> Run:
    """Run the installed executable in ``cwd`` with no inherited ``AUTODEV_*`` setting; with
    ``file_size_limit`` no file it writes may grow past that size. ``run`` and ``execute`` get
    ``--write-scope write_scope`` (the whole repository by default; None: none)."""
    argv = [str(AUTODEV), *with_write_scope(args, write_scope)]
    if file_size_limit is not None:
        # Set in a wrapper that then execs autodev: the limit is inherited, and Python ignores SIGXFSZ, so an
        # oversized write fails with EFBIG instead of killing the process.
        limiter = (
            "import os, resource, sys\n"
            "limit = int(sys.argv[1])\n"
            "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))\n"
            "os.execv(sys.argv[2], sys.argv[2:])\n"
        )
        argv = [sys.executable, "-c", limiter, str(file_size_limit), *argv]
    proc = subprocess.run(
        argv,
        cwd=cwd,
        env={**clean_env(), **(env or {})},
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def assert_clean_error(result: Run, code: int = 2) -> None:
    """One ``error: `` line on stderr, no traceback, exit ``code``."""
    assert "Traceback" not in result.err, result.err
    assert result.code == code, result
    assert result.err.startswith("error: "), result.err
    assert len(result.err.strip().splitlines()) == 1, result.err
