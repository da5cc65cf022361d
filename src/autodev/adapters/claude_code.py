"""Claude Code (``claude -p``) as a platform adapter, verified against Claude Code 2.1.328.

The prompt goes on stdin; stdout is ``stream-json`` (one JSON event a line; ``--verbose`` is required for
it). The capabilities of the call become Claude tool names passed twice: ``--tools`` decides what the model
is offered (an empty value offers nothing) and ``--allowedTools`` pre-approves the same names, so
``acceptEdits`` never stops to ask. ``--dangerously-skip-permissions`` is never used: Claude Code refuses
it when running as root, which is how containers run it.

Success is what the final ``result`` event affirms: ``is_error`` false, subtype ``success`` and exit 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autodev.adapters._cli import (
    CliAdapter,
    JsonLines,
    cost_from_tokens,
    outcome_failure,
)
from autodev.adapters.base import AgentInvocation, AgentResult, ToolName
from autodev.adapters.process import ProcessOutcome
from autodev.config.schema import AutodevConfig

__all__ = [
    "CLAUDE_TOOLS",
    "INSTALL_HINT",
    "ClaudeCodeAdapter",
    "ClaudeStreamParser",
    "build_argv",
    "claude_tool_names",
]

INSTALL_HINT = "install it with `npm install -g @anthropic-ai/claude-code`"

# Only names Claude Code 2.1.328 knows: it silently drops unknown ones (MultiEdit and LS no longer exist).
CLAUDE_TOOLS: Mapping[ToolName, tuple[str, ...]] = {
    "read": ("Read",),
    "search": ("Grep", "Glob"),
    "write": ("Write",),
    "edit": ("Edit", "NotebookEdit"),
    "bash": ("Bash",),
    "web": ("WebFetch", "WebSearch"),
}
"""AutoDev capability -> the Claude Code tools that provide it."""


def claude_tool_names(tools: Sequence[ToolName]) -> list[str]:
    """The Claude tool names for ``tools``, in capability order, each once."""
    names: list[str] = []
    for capability in tools:
        names.extend(name for name in CLAUDE_TOOLS[capability] if name not in names)
    return names


def build_argv(executable: str, inv: AgentInvocation) -> list[str]:
    """The command line for ``inv``; the prompt is not in it (it goes on stdin)."""
    argv = [executable, "-p", "--output-format", "stream-json", "--verbose"]
    if inv.model is not None:
        argv += ["--model", inv.model]
    if inv.max_turns is not None:
        argv += ["--max-turns", str(inv.max_turns)]
    tools = ",".join(claude_tool_names(inv.tools))
    argv += ["--permission-mode", "acceptEdits", "--tools", tools, "--allowedTools", tools]
    return argv


class ClaudeStreamParser:
    """Reads Claude Code's ``stream-json`` events; feed it stdout lines, then ask for the result.

    Counts ``tool_use`` blocks of ``assistant`` messages (each block id once) and keeps the last ``result``
    event. ``config`` and ``model`` price the tokens when a result carries no ``total_cost_usd``.
    """

    def __init__(self, *, config: AutodevConfig | None = None, model: str | None = None) -> None:
        self._config = config
        self._model = model
        self._lines = JsonLines(self.on_event)
        self._tool_ids: set[str] = set()
        self._anonymous_tool_calls = 0
        self.session_id: str | None = None
        self.result_event: dict[str, Any] | None = None

    @property
    def tool_calls(self) -> int:
        return len(self._tool_ids) + self._anonymous_tool_calls

    @property
    def skipped_lines(self) -> int:
        return self._lines.skipped

    def feed_line(self, line: bytes) -> None:
        """One stdout line, as ``run_process`` hands it over."""
        self._lines.feed(line)

    def on_event(self, event: dict[str, Any]) -> None:
        """One decoded event; unknown types and fields are ignored."""
        kind = event.get("type")
        if isinstance(event.get("session_id"), str):
            self.session_id = event["session_id"]
        if kind == "assistant":
            message = event.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    block_id = block.get("id")
                    if isinstance(block_id, str):
                        self._tool_ids.add(block_id)
                    else:
                        self._anonymous_tool_calls += 1
        elif kind == "result":
            self.result_event = event

    def to_result(
        self, outcome: ProcessOutcome, *, timeout_s: float, transcript: Path | None = None
    ) -> AgentResult:
        """The ``AgentResult`` the stream and the way the process ended prove."""
        result = self.result_event or {}
        raw_usage = result.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        cache_read = _int(usage.get("cache_read_input_tokens"))
        cache_write = _int(usage.get("cache_creation_input_tokens"))
        uncached = _int(usage.get("input_tokens"))
        tokens_in = None if uncached is None else uncached + (cache_read or 0) + (cache_write or 0)
        tokens_out = _int(usage.get("output_tokens"))
        reported = result.get("total_cost_usd")
        cost: float | None = None
        if isinstance(reported, int | float) and not isinstance(reported, bool):
            cost = float(reported)
        elif self._config is not None:
            cost = cost_from_tokens(
                self._config,
                self._model,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                tokens_cached=cache_read,
            )
        text = result.get("result")
        fields: dict[str, Any] = {
            "text": text if isinstance(text, str) else "",
            "cost_usd": cost,
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "tokens_cached": cache_read,
            "tool_calls": self.tool_calls,
            "num_turns": _int(result.get("num_turns")),
            "duration_s": outcome.duration_s,
            "session_id": self.session_id,
            "exit_code": outcome.exit_code,
            "transcript_path": transcript,
        }
        error = outcome_failure(
            outcome,
            cli="claude",
            timeout_s=timeout_s,
            result_seen=self.result_event is not None,
            skipped_lines=self.skipped_lines,
        )
        if error is not None:
            return AgentResult.failure(error.kind, error.message, **fields)
        subtype = result.get("subtype")
        if result.get("is_error") is not False or subtype != "success":
            return AgentResult.failure("is_error", _error_message(result), **fields)
        if outcome.exit_code != 0:
            excerpt = outcome.stderr_excerpt
            return AgentResult.failure(
                "nonzero_exit",
                f"claude exited {outcome.exit_code} although its result reported success"
                + (f": {excerpt}" if excerpt else ""),
                **fields,
            )
        return AgentResult(success=True, **fields)


class ClaudeCodeAdapter(CliAdapter):
    """Runs each ``AgentInvocation`` through the ``claude`` CLI.

    ``executable`` defaults to ``claude`` looked up on the child's PATH; ``env`` overrides the inherited
    environment for every call (the call's own ``env`` overrides both). Transcripts go to
    ``<repo_root>/.autodev/transcripts/``. ``last_pid`` is a diagnostic: the pid (and process group id)
    of the most recent call that ran, or None before any (with concurrent calls, the last to finish).
    """

    name = "claude_code"
    default_executable = "claude"
    install_hint = INSTALL_HINT

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        """Run ``inv`` with ``claude -p`` and report what its result event affirms."""
        parser = ClaudeStreamParser(config=self.config, model=inv.model)
        return await self._run(build_argv(self.executable, inv), inv, parser)


def _error_message(result: dict[str, Any]) -> str:
    subtype = result.get("subtype")
    errors = result.get("errors")
    details = "; ".join(str(item) for item in errors) if isinstance(errors, list) else ""
    text = result.get("result")
    detail = text if isinstance(text, str) and text.strip() else details or "no details given"
    if subtype == "error_max_turns":
        return f"claude reached its turn limit: {detail}"
    status = result.get("api_error_status")
    context = f"subtype {subtype}" + (f", API status {status}" if status is not None else "")
    return f"claude reported an error ({context}): {' '.join(detail.split())[:2000]}"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
