"""What every subprocess adapter repeats: environment, transcript path, JSON lines, cost, health, failures.

An adapter built on this module runs one call like this::

    lines = JsonLines(parser.on_event)
    transcript = transcript_path(self.repo_root, inv)
    try:
        outcome = await run_cli(argv, inv, adapter_env=self.env, transcript=transcript, on_line=lines.feed)
    except ProcessStartError as exc:
        return start_failure(exc, install_hint=INSTALL_HINT)
    error = outcome_failure(outcome, cli="mycli", timeout_s=inv.timeout_s, result_seen=...,
                            skipped_lines=lines.skipped)
    # None: the process ended by itself and printed its result; the adapter judges it (is_error, ...).

The pieces: ``run_cli`` runs the CLI (prompt on stdin, environment from ``child_env``, ``PWD`` and cwd
pinned, the call's deadline, stdout kept at ``transcript_path``); ``JsonLines`` turns stdout lines into
events; ``outcome_failure`` and ``start_failure`` name the failures every CLI shares; ``cost_from_tokens``
prices tokens from ``price_table``; ``check_health`` and ``prepare_workspace`` implement ``healthcheck``
and ``init_workspace``.

Token convention shared by all adapters: ``tokens_in`` counts every input token of the call, including
those served from the provider's cache; ``tokens_cached`` is the cached part of ``tokens_in``;
``tokens_out`` counts output tokens (reasoning included). ``cost_from_tokens`` prices them that way.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Protocol

import anyio

from autodev.adapters.base import AgentError, AgentInvocation, AgentResult, PlatformAdapter
from autodev.adapters.process import ProcessOutcome, ProcessSpec, ProcessStartError, run_process
from autodev.config.schema import AutodevConfig
from autodev.errors import AutodevError
from autodev.logging import get_logger
from autodev.state.paths import AutodevPaths

__all__ = [
    "HEALTHCHECK_TIMEOUT_S",
    "CliAdapter",
    "JsonLines",
    "StreamParser",
    "check_health",
    "child_env",
    "cost_from_tokens",
    "outcome_failure",
    "prepare_workspace",
    "run_cli",
    "start_failure",
    "transcript_path",
]

HEALTHCHECK_TIMEOUT_S = 10.0

_log = get_logger("autodev.adapters")

# Task ids and roles come from plans and config; keep only characters that are safe in a file name.
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def child_env(adapter_env: Mapping[str, str] | None, inv: AgentInvocation) -> dict[str, str]:
    """The complete environment of the CLI: ours, then the adapter's overrides, then the call's own.

    ``PWD`` is pinned to the call's working directory because node-based CLIs take their project
    directory from it rather than from the process's actual cwd.
    """
    env = dict(os.environ)
    if adapter_env is not None:
        env.update(adapter_env)
    env.update(inv.env)
    env["PWD"] = os.path.abspath(inv.cwd)
    return env


# A long agent session streams tens of MB at most (tool results included); far more is a runaway CLI, and
# its transcript would fill the disk.
AGENT_OUTPUT_LIMIT_BYTES = 64 * 1024 * 1024


async def run_cli(
    argv: Sequence[str],
    inv: AgentInvocation,
    *,
    adapter_env: Mapping[str, str] | None,
    transcript: Path | None,
    on_line: Callable[[bytes], None],
    children_dir: Path | None = None,
) -> ProcessOutcome:
    """Run ``argv`` for ``inv``: prompt on stdin, ``child_env``, the call's cwd and deadline.

    Raises ``ProcessStartError`` when the executable is missing or cannot start, and also when the
    working directory does not exist (which the OS would otherwise report as a missing executable).
    """
    env = child_env(adapter_env, inv)
    spec = ProcessSpec(
        argv=argv,
        # The same absolute directory as PWD, so the CLI cannot see two different working directories.
        cwd=Path(env["PWD"]),
        timeout_s=inv.timeout_s,
        env=env,
        stdin_data=inv.prompt.encode("utf-8"),
        transcript_path=transcript,
        max_output_bytes=AGENT_OUTPUT_LIMIT_BYTES,
        children_dir=children_dir,
    )
    if not await anyio.Path(spec.cwd).is_dir():
        raise ProcessStartError(argv[0], False, f"working directory {spec.cwd} does not exist")
    return await run_process(spec, on_line)


def transcript_path(repo_root: Path, inv: AgentInvocation, *, now: datetime | None = None) -> Path:
    """Where the call's stdout is kept: ``.autodev/transcripts/<task>-<role>-<attempt>-<UTC>-<rand>.jsonl``.

    The random suffix keeps parallel calls of the same task, role and attempt (judges) apart.
    """
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = (
        f"{_file_part(inv.task_id)}-{_file_part(inv.role)}-{inv.attempt}-{stamp}-{secrets.token_hex(3)}.jsonl"
    )
    return AutodevPaths(repo_root).transcripts_dir / name


def _file_part(value: str) -> str:
    # Leading dots would hide the file (or read as a parent directory to a person skimming the listing).
    return _UNSAFE_NAME_CHARS.sub("_", value).lstrip(".") or "_"


class JsonLines:
    """Turns stdout lines into JSON objects for ``on_event``; pass ``feed`` to ``run_process``.

    Lines that are not a JSON object (banners, warnings, partial writes) are skipped and counted in
    ``skipped``; ``events`` counts the objects delivered.
    """

    def __init__(self, on_event: Callable[[dict[str, Any]], None]) -> None:
        self._on_event = on_event
        self.events = 0
        self.skipped = 0

    def feed(self, line: bytes) -> None:
        """Decode one stdout line (without its newline) and deliver it when it is a JSON object."""
        if not line.strip():
            return
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            self.skipped += 1
            return
        if not isinstance(value, dict):
            self.skipped += 1
            return
        self.events += 1
        self._on_event(value)


def cost_from_tokens(
    config: AutodevConfig,
    model: str | None,
    *,
    tokens_in: int | None,
    tokens_out: int | None,
    tokens_cached: int | None = None,
) -> float | None:
    """US dollars for the tokens at ``config.price_table[model]``; None when the model is not priced.

    ``tokens_in`` includes ``tokens_cached`` (see the module's token convention).
    """
    if model is None or tokens_in is None or tokens_out is None:
        return None
    price = config.price_table.get(model)
    if price is None:
        return None
    cached = min(tokens_cached or 0, tokens_in)
    return (
        (tokens_in - cached) * price.input_per_mtok
        + cached * price.cached_input_per_mtok
        + tokens_out * price.output_per_mtok
    ) / 1_000_000


async def check_health(
    executable: str,
    *,
    install_hint: str,
    env: Mapping[str, str] | None = None,
    timeout_s: float = HEALTHCHECK_TIMEOUT_S,
) -> tuple[bool, str]:
    """Run ``<executable> --version`` under a deadline: ``(True, version line)`` or ``(False, reason)``."""
    lines: list[str] = []

    def keep(line: bytes) -> None:
        text = line.decode("utf-8", errors="replace").strip()
        if text and not lines:
            lines.append(text[:200])

    full_env = {**os.environ, **env} if env is not None else None
    spec = ProcessSpec(argv=[executable, "--version"], cwd=Path(os.sep), timeout_s=timeout_s, env=full_env)
    try:
        outcome = await run_process(spec, keep)
    except ProcessStartError as exc:
        if exc.missing:
            return False, f"{executable} not found on PATH; {install_hint}"
        return False, f"cannot start {executable}: {exc}"
    if outcome.timed_out:
        return False, f"`{executable} --version` did not finish within {timeout_s:g}s"
    if outcome.exit_code != 0:
        excerpt = outcome.stderr_excerpt
        return False, f"`{executable} --version` exited {outcome.exit_code}" + (
            f": {excerpt}" if excerpt else ""
        )
    version = lines[0] if lines else outcome.stderr_excerpt[:200]
    if not version:
        return False, f"`{executable} --version` printed nothing"
    return True, f"{executable}: {version}"


def prepare_workspace(repo_root: Path, cwd: Path) -> None:
    """Check that ``cwd`` is an existing directory and create the transcripts directory.

    Raises ``AutodevError`` with a one-line message when either is not possible.
    """
    if not cwd.is_dir():
        raise AutodevError(f"agent working directory {cwd} does not exist or is not a directory")
    transcripts = AutodevPaths(repo_root).transcripts_dir
    try:
        transcripts.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AutodevError(f"cannot create {transcripts}: {exc.strerror or exc}") from exc


def start_failure(exc: ProcessStartError, *, install_hint: str, **fields: Any) -> AgentResult:
    """The result of a CLI that could not be started: ``cli_missing`` (with the hint) or ``spawn_failed``."""
    if exc.missing:
        return AgentResult.failure("cli_missing", f"{exc.argv0} not found on PATH; {install_hint}", **fields)
    return AgentResult.failure("spawn_failed", f"cannot start {exc}", **fields)


def outcome_failure(
    outcome: ProcessOutcome,
    *,
    cli: str,
    timeout_s: float,
    result_seen: bool,
    skipped_lines: int = 0,
) -> AgentError | None:
    """The failure the way the process ended proves, before the CLI's own result is read.

    ``result_seen`` says whether the parser found the CLI's final result event(s). Returns None when the
    process exited by itself and printed a result: whether that result is a success (``is_error``, exit
    code) is for the adapter to judge.
    """
    if outcome.timed_out:
        return AgentError(
            kind="timeout",
            message=f"{cli} did not finish within {timeout_s:g}s; its process group was killed",
        )
    if outcome.output_limited:
        return AgentError(
            kind="output_limit",
            message=f"{cli} printed more than the output bound ({outcome.stdout_bytes} bytes); it was killed",
        )
    if result_seen:
        return None
    excerpt = outcome.stderr_excerpt
    if outcome.exit_code not in (0, None):
        return AgentError(
            kind="nonzero_exit",
            message=f"{cli} exited {outcome.exit_code} without a result"
            + (f": {excerpt}" if excerpt else " and printed nothing on stderr"),
        )
    skipped = f", {skipped_lines} non-JSON line(s) skipped" if skipped_lines else ""
    if outcome.long_lines:
        skipped += f", {outcome.long_lines} line(s) over the per-line limit dropped unread"
    return AgentError(
        kind="malformed_output",
        message=f"{cli} exited without a result event ({outcome.stdout_bytes} bytes of output{skipped})"
        + (f"; stderr: {excerpt}" if excerpt else ""),
    )


class StreamParser(Protocol):
    """What a CLI adapter's parser offers: lines in, one result out."""

    def feed_line(self, line: bytes) -> None: ...

    def to_result(self, outcome: ProcessOutcome, *, timeout_s: float, transcript: Path) -> AgentResult: ...


class CliAdapter(PlatformAdapter):
    """The plumbing the subprocess adapters share: configuration, running one call, workspace, health.

    A subclass names its executable and install hint, builds its argv and parser, and calls ``_run``.
    ``executable`` defaults to ``default_executable`` looked up on the child's PATH; ``env`` overrides the
    inherited environment for every call (the call's own ``env`` overrides both). Transcripts go to
    ``<repo_root>/.autodev/transcripts/``. ``last_pid`` is a diagnostic: the pid (and process group id) of
    the most recent call that ran, or None before any (with concurrent calls, the last to finish).
    """

    default_executable: ClassVar[str] = ""
    install_hint: ClassVar[str] = ""

    def __init__(
        self,
        *,
        repo_root: Path,
        config: AutodevConfig,
        executable: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.repo_root = repo_root
        self.config = config
        self.executable = executable or self.default_executable
        self.env = dict(env) if env is not None else None
        self.last_pid: int | None = None

    async def _run(
        self,
        argv: Sequence[str],
        inv: AgentInvocation,
        parser: StreamParser,
        *,
        call: AgentInvocation | None = None,
    ) -> AgentResult:
        """Run ``argv`` for ``inv`` (as ``call`` when the adapter adjusted it) and let ``parser`` judge."""
        transcript = transcript_path(self.repo_root, inv)
        try:
            outcome = await run_cli(
                argv,
                call or inv,
                adapter_env=self.env,
                transcript=transcript,
                on_line=parser.feed_line,
                children_dir=AutodevPaths(self.repo_root).children_dir,
            )
        except ProcessStartError as exc:
            return start_failure(exc, install_hint=self.install_hint)
        self.last_pid = outcome.pid
        for failure in getattr(parser, "tool_errors", ()):
            _log.warning(
                "agent tool call failed",
                platform=self.name,
                role=inv.role,
                task_id=inv.task_id,
                detail=failure,
            )
        return parser.to_result(outcome, timeout_s=inv.timeout_s, transcript=transcript)

    async def init_workspace(self, cwd: Path, agents: Sequence[Any]) -> None:
        """Check ``cwd`` and create the transcripts directory (these CLIs need no instruction files)."""
        prepare_workspace(self.repo_root, cwd)

    async def healthcheck(self) -> tuple[bool, str]:
        """Whether ``<executable> --version`` answers within 10 s, with the version it prints."""
        return await check_health(self.executable, install_hint=self.install_hint, env=self.env)
