"""What every subprocess adapter repeats: environment, transcript path, JSON lines, judging, cost, health.

An adapter subclasses ``CliAdapter``: it names its executable and install hint, builds its argv and its
parser, and calls ``_run``, which runs the CLI and hands the way the process ended to the parser. The parser
subclasses ``StreamParser``: it reads the CLI's events in ``on_event`` and says what they proved (the
result seen, the fields reported, the CLI's own error); ``StreamParser.to_result`` judges that against the
way the process ended the same way for every CLI.

The pieces underneath: ``run_cli`` runs the CLI (prompt on stdin, environment from ``child_env``, ``PWD``
and cwd pinned, the call's deadline, stdout kept at ``transcript_path``); ``JsonLines`` turns stdout lines
into events; ``outcome_failure`` and ``start_failure`` name the failures every CLI shares;
``cost_from_tokens`` prices tokens from ``price_table``; ``check_health`` and ``prepare_workspace``
implement ``healthcheck`` and ``init_workspace``; ``json_object``, ``json_int``, ``json_number`` and
``one_line`` read untrusted event fields.

Token convention shared by all adapters: ``tokens_in`` counts every input token of the call, including
those served from the provider's cache and those written to it; ``tokens_cached`` and
``tokens_cache_write`` are those parts of ``tokens_in``; ``tokens_out`` counts output tokens (reasoning
included). ``cost_from_tokens`` prices them that way.

Cost: the CLI's own figure when it reports one. Otherwise ``StreamParser.to_result`` prices the tokens at
``price_table`` for the model the CLI's output names (``reported_model``), else the model asked for, and
marks the cost ``cost_estimated``; a model nobody priced leaves the cost None: unknown, never $0.
"""

from __future__ import annotations

import json
import os
import secrets
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import anyio

from autodev.adapters.base import AgentError, AgentErrorKind, AgentInvocation, AgentResult, PlatformAdapter
from autodev.adapters.provider_errors import classify
from autodev.config.schema import AutodevConfig
from autodev.errors import AutodevError
from autodev.logging import get_logger
from autodev.process_runner import ProcessOutcome, ProcessSpec, ProcessStartError, run_process
from autodev.state.paths import AutodevPaths, transcript_name_part

__all__ = [
    "HEALTHCHECK_TIMEOUT_S",
    "HEALTH_PROBE_PROMPT",
    "HEALTH_PROBE_TIMEOUT_S",
    "CliAdapter",
    "JsonLines",
    "StreamParser",
    "check_health",
    "child_env",
    "cost_from_tokens",
    "exit_meaning",
    "json_int",
    "json_number",
    "json_object",
    "one_line",
    "outcome_failure",
    "prepare_workspace",
    "run_cli",
    "start_failure",
    "transcript_path",
]

HEALTHCHECK_TIMEOUT_S = 10.0
# The paid part of a health check: the cheapest real call, bounded well below any task's time.
HEALTH_PROBE_PROMPT = "This is a connectivity check. Reply with the single word OK and nothing else."
HEALTH_PROBE_TIMEOUT_S = 120.0

_log = get_logger("autodev.adapters")

# The failures in which a CLI may be relaying the provider's refusal (a deadline or the output bound is ours).
_PROVIDER_RELAYED: frozenset[AgentErrorKind] = frozenset({"is_error", "nonzero_exit", "malformed_output"})

# Task ids and roles come from plans and config; keep only characters that are safe in a file name.


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
        stall_timeout_s=inv.stall_timeout_s,
    )
    if not await anyio.Path(spec.cwd).is_dir():
        raise ProcessStartError(argv[0], False, f"working directory {spec.cwd} does not exist")
    return await run_process(spec, on_line)


def transcript_path(repo_root: Path, inv: AgentInvocation, *, now: datetime | None = None) -> Path:
    """Where the call's stdout is kept: ``.autodev/transcripts/<task>-<role>-<attempt>-<UTC>-<rand>.jsonl``.

    The random suffix keeps parallel calls of the same task, role and attempt (judges) apart.
    """
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    task, role = transcript_name_part(inv.task_id), transcript_name_part(inv.role)
    name = f"{task}-{role}-{inv.attempt}-{stamp}-{secrets.token_hex(3)}.jsonl"
    return AutodevPaths(repo_root).transcripts_dir / name


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
    tokens_cache_write: int | None = None,
) -> float | None:
    """US dollars for the tokens at ``config.price_for(model)``; None when the model is not priced.

    ``tokens_in`` includes ``tokens_cached`` and ``tokens_cache_write`` (the module's token convention).
    """
    if tokens_in is None or tokens_out is None:
        return None
    price = config.price_for(model)
    if price is None:
        return None
    return price.dollars(
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        tokens_cached=tokens_cached or 0,
        tokens_cache_write=tokens_cache_write or 0,
    )


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
    stall_timeout_s: float | None = None,
    result_seen: bool,
    skipped_lines: int = 0,
    exit_meanings: Mapping[int, str] | None = None,
) -> AgentError | None:
    """The failure the way the process ended proves, before the CLI's own result is read.

    ``result_seen`` says whether the parser found the CLI's final result event(s); ``exit_meanings`` names
    the exit codes the CLI documents. Returns None when the process exited by itself and printed a result:
    whether that result is a success (``is_error``, exit code) is for the adapter to judge.
    """
    if outcome.timed_out:
        return AgentError(
            kind="timeout",
            message=f"{cli} did not finish within {timeout_s:g}s; its process group was killed",
        )
    if outcome.stalled:
        # Silent from the start: it never came up (a hung login, an update check, a lock). Silent later:
        # a stalled session, which the call's deadline would only have caught much later.
        started = outcome.stdout_bytes > 0
        silence = f"{stall_timeout_s:g}s" if stall_timeout_s is not None else "too long"
        return AgentError(
            kind="timeout" if started else "cli_start_failed",
            message=f"{cli} printed nothing for {silence} "
            + ("after its first output" if started else "after it started")
            + "; its process group was killed (agent_stall_timeout_s)",
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
        meaning = exit_meaning(outcome.exit_code, exit_meanings)
        return AgentError(
            kind="nonzero_exit",
            message=f"{cli} exited {outcome.exit_code}{meaning} without a result"
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


def exit_meaning(code: int | None, meanings: Mapping[int, str] | None) -> str:
    """``" (meaning)"`` to follow exit code ``code`` in a message when ``meanings`` names it, else ``""``."""
    meaning = meanings.get(code) if meanings is not None and code is not None else None
    return f" ({meaning})" if meaning else ""


def json_object(value: Any) -> dict[str, Any]:
    """``value`` when an event field holds a JSON object, else an empty one (fields may be anything)."""
    return value if isinstance(value, dict) else {}


def json_int(value: Any) -> int | None:
    """``value`` when an event field holds an integer; JSON ``true`` is not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def json_number(value: Any) -> float | None:
    """``value`` as a float when an event field holds a number; JSON ``true`` is not one."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def one_line(text: str, limit: int = 2000) -> str:
    """``text`` with its whitespace runs folded into single spaces, cut at ``limit`` characters."""
    return " ".join(text.split())[:limit]


class StreamParser(ABC):
    """Reads one CLI's JSON event stream; feed it stdout lines, then ask for the result.

    A subclass reads its events in ``on_event`` and reports through ``result_seen``, ``_reported_fields``
    and ``_reported_error``; ``to_result`` judges those against the way the process ended. It counts tool
    calls with ``_count_tool_call``, keeps the session id in ``session_id`` and failed tool calls in
    ``tool_errors`` (added to every failure message but a late non-zero exit's), and the model its output
    names in ``reported_model``. ``config`` prices the tokens of a call whose CLI reported no cost, at the
    reported model or else ``model`` (the one asked for); without ``config`` nothing is priced.
    """

    cli: ClassVar[str]
    """The executable's name as failure messages give it."""
    success_claim: ClassVar[str] = "although its result reported success"
    """How a non-zero exit after a successful result reads: ``<cli> exited <code> <success_claim>``."""
    exit_meanings: ClassVar[Mapping[int, str] | None] = None
    """What the CLI's documented exit codes mean, for the messages that name an exit code."""

    def __init__(self, *, config: AutodevConfig | None = None, model: str | None = None) -> None:
        self._config = config
        self._model = model
        self._lines = JsonLines(self.on_event)
        self._tool_ids: set[str] = set()
        self._anonymous_tool_calls = 0
        self.session_id: str | None = None
        self.tool_errors: list[str] = []
        # The HTTP status of the provider's refusal, where the CLI reports one in its events.
        self.provider_status: int | None = None
        # The model the CLI says the call ran on.
        self.reported_model: str | None = None

    @property
    def skipped_lines(self) -> int:
        return self._lines.skipped

    @property
    def tool_calls(self) -> int:
        return len(self._tool_ids) + self._anonymous_tool_calls

    def feed_line(self, line: bytes) -> None:
        """One stdout line, as ``run_process`` hands it over."""
        self._lines.feed(line)

    @abstractmethod
    def on_event(self, event: dict[str, Any]) -> None:
        """One decoded event; unknown types and fields are ignored."""

    @property
    @abstractmethod
    def result_seen(self) -> bool:
        """Whether the stream carried the CLI's final result (an error reported in the stream counts)."""

    @abstractmethod
    def _reported_fields(self) -> dict[str, Any]:
        """The ``AgentResult`` fields the CLI reports its own way: ``text``, cost, tokens, turns."""

    @abstractmethod
    def _reported_error(self, outcome: ProcessOutcome) -> str | None:
        """The CLI's own account of a failed run once a result was seen; None when it reported success."""

    def _may_relay_the_provider(self) -> bool:
        """Whether the failure can be the provider's refusal: not when the CLI says it ended for its own
        reasons (a turn limit), whose message quotes the agent's last words, which may mention anything."""
        return True

    def _warnings_note(self) -> str:
        """What the CLI warned about, appended to a failure the way the process ended proves."""
        return ""

    def _count_tool_call(self, call_id: Any = None, *, count_without_id: bool = True) -> None:
        """Count the tool call an event belongs to: an id counts once, however many events carry it.

        An event without an id counts only when ``count_without_id`` (the one event the CLI sends per call).
        """
        if isinstance(call_id, str):
            self._tool_ids.add(call_id)
        elif count_without_id:
            self._anonymous_tool_calls += 1

    def to_result(
        self,
        outcome: ProcessOutcome,
        *,
        timeout_s: float,
        stall_timeout_s: float | None = None,
        transcript: Path | None = None,
    ) -> AgentResult:
        """The ``AgentResult`` the stream and the way the process ended prove."""
        fields: dict[str, Any] = {
            **self._priced(self._reported_fields()),
            "tool_calls": self.tool_calls,
            "duration_s": outcome.duration_s,
            "session_id": self.session_id,
            "exit_code": outcome.exit_code,
            "transcript_path": transcript,
        }
        error = outcome_failure(
            outcome,
            cli=self.cli,
            timeout_s=timeout_s,
            stall_timeout_s=stall_timeout_s,
            result_seen=self.result_seen,
            skipped_lines=self.skipped_lines,
            exit_meanings=self.exit_meanings,
        )
        if error is not None:
            message = error.message + self._warnings_note()
            return self._failure(error.kind, message, fields)
        reported = self._reported_error(outcome)
        if reported is not None:
            return self._failure("is_error", reported, fields)
        if outcome.exit_code != 0:
            excerpt = outcome.stderr_excerpt
            return self._failure(
                "nonzero_exit",
                f"{self.cli} exited {outcome.exit_code} {self.success_claim}"
                + exit_meaning(outcome.exit_code, self.exit_meanings)
                + (f": {excerpt}" if excerpt else ""),
                fields,
            )
        return AgentResult(success=True, **fields)

    def _priced(self, fields: dict[str, Any]) -> dict[str, Any]:
        """``fields`` with the model the call ran on and, where the CLI reported no cost, the tokens priced
        at ``price_table`` (marked ``cost_estimated``)."""
        model = fields.get("model") or self.reported_model or self._model
        fields["model"] = model
        if fields.get("cost_usd") is not None or self._config is None:
            return fields
        # The price table may name the model as the CLI reports it or as AutoDev asked for it (an alias).
        for name in dict.fromkeys((model, self._model)):
            cost = cost_from_tokens(
                self._config,
                name,
                tokens_in=fields.get("tokens_in"),
                tokens_out=fields.get("tokens_out"),
                tokens_cached=fields.get("tokens_cached"),
                tokens_cache_write=fields.get("tokens_cache_write"),
            )
            if cost is not None:
                fields["cost_usd"] = cost
                fields["cost_estimated"] = True
                break
        return fields

    def _failure(self, kind: AgentErrorKind, message: str, fields: dict[str, Any]) -> AgentResult:
        """The failure, named after the provider's refusal when the CLI's own words (or status) show one.

        Only the CLI's account of the failure is read: its reported error, or (with no result) the stderr
        the message quotes. Its other stderr lines (warnings about side requests) and a failed tool call's
        output (a file "permission denied") say nothing about this call's provider. A run cut short by its
        deadline or output bound stays so.
        """
        refusal = None
        if kind in _PROVIDER_RELAYED and self._may_relay_the_provider():
            refusal = classify(message, status=self.provider_status)
        error = AgentError(
            kind=refusal.kind if refusal else kind,
            message=self._with_tool_errors(message),
            resets_at=refusal.resets_at if refusal else None,
        )
        return AgentResult(success=False, error=error, **fields)

    def _with_tool_errors(self, message: str) -> str:
        if not self.tool_errors:
            return message
        return f"{message} (failed tool calls: {'; '.join(self.tool_errors)})"


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
        for failure in parser.tool_errors:
            _log.warning(
                "agent tool call failed",
                platform=self.name,
                role=inv.role,
                task_id=inv.task_id,
                detail=failure,
            )
        return parser.to_result(
            outcome, timeout_s=inv.timeout_s, stall_timeout_s=inv.stall_timeout_s, transcript=transcript
        )

    async def init_workspace(self, cwd: Path, agents: Sequence[Any]) -> None:
        """Check ``cwd`` and create the transcripts directory (these CLIs need no instruction files)."""
        prepare_workspace(self.repo_root, cwd)

    async def healthcheck(self, *, probe: bool = False, model: str | None = None) -> tuple[bool, str]:
        """Whether ``<executable> --version`` answers within 10 s, with the version it prints; with
        ``probe`` also whether ``model`` answers a one-word prompt (no tools, one turn), which is where a
        refused key, a used-up plan or an unreachable provider shows, in the CLI's own words."""
        healthy, line = await check_health(self.executable, install_hint=self.install_hint, env=self.env)
        if not healthy or not probe:
            return healthy, line
        prepare_workspace(self.repo_root, self.repo_root)
        call = AgentInvocation(
            role="healthcheck",
            prompt=HEALTH_PROBE_PROMPT,
            cwd=self.repo_root,
            model=model,
            tools=(),
            max_turns=1,
            timeout_s=HEALTH_PROBE_TIMEOUT_S,
            task_id="healthcheck",
        )
        result = await self.execute(call)
        which = model or "its default model"
        if result.error is not None:
            return False, f"{line}; {which} did not answer ({result.error.kind}: {result.error.message})"
        return True, f"{line}; {which} answered"
