"""Cursor's agent CLI (``cursor-agent -p``) as a platform adapter, built from Cursor's documentation.

The real CLI cannot be installed where AutoDev is tested (the npm package of that name is unrelated), so
this adapter follows the documented contract and is tested against a fake executable that emits it.
Sources relied on:

- Output format, https://cursor.com/docs/cli/reference/output-format: ``--output-format`` is valid with
  ``--print`` or when print mode is inferred from a non-TTY stdout or *piped stdin*; ``stream-json`` is
  NDJSON with one line per complete assistant message: ``system``/``init`` (``session_id``, ``model``,
  ``cwd``, ``permissionMode``), ``user`` (the prompt echoed), ``assistant`` (``message.content[]`` text
  blocks), ``tool_call`` with ``subtype`` ``started``/``completed``, ``call_id`` and
  ``tool_call.<kind>ToolCall{args, result}`` (``result.success`` on success), and a terminal ``result``
  (``subtype``, ``is_error``, ``result`` = all assistant text concatenated, ``session_id``,
  ``duration_ms``, ``request_id``). "On failure, the process exits with a non-zero code and the stream may
  end early without a terminal event; an error message is written to stderr."
- Parameters and modes, https://cursor.com/docs/cli/using and the parameters reference: ``-p/--print``,
  ``--model``, ``-f/--force`` ("force allow commands unless explicitly denied"), ``--mode ask`` ("explore
  code without making changes"); "Cursor has full write access in non-interactive mode"
  (https://docs.cursor.com/en/cli/using), which is why read-only roles need ask mode, not just no
  ``--force``.
- The prompt on stdin: print mode reads piped stdin (output-format page above); Goose's Cursor provider
  (aaif-goose/goose PR #10547, ``crates/goose/src/providers/cursor_agent.rs``) runs
  ``cursor-agent --model M --print --output-format json --force`` with the prompt written to stdin.

Invocation: ``cursor-agent -p --output-format stream-json (--force | --mode ask) [--model M]`` with the
prompt on stdin. ``--force`` only for roles that may write or run commands; every other role runs in ask
mode, where the agent can still read and search (Cursor has no switch that offers no tools at all).
``max_turns`` has no documented equivalent. The stream reports no tokens and no cost.

Final text: the assistant messages after the last tool call (earlier ones narrate between tool calls),
else the ``result`` text. Success needs a ``result`` event with ``is_error`` false and subtype
``success``, and exit 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autodev.adapters._cli import (
    CliAdapter,
    JsonLines,
    outcome_failure,
)
from autodev.adapters.base import AgentInvocation, AgentResult
from autodev.adapters.process import ProcessOutcome

__all__ = ["INSTALL_HINT", "CursorAdapter", "CursorStreamParser", "build_argv"]

INSTALL_HINT = "install it with `curl https://cursor.com/install -fsS | bash` (https://cursor.com/docs/cli)"


def build_argv(executable: str, inv: AgentInvocation) -> list[str]:
    """The command line for ``inv``; the prompt is not in it (it goes on stdin)."""
    argv = [executable, "-p", "--output-format", "stream-json"]
    argv += ["--force"] if inv.can_write else ["--mode", "ask"]
    if inv.model is not None:
        argv += ["--model", inv.model]
    return argv


class CursorStreamParser:
    """Reads ``cursor-agent`` ``stream-json`` events; feed it stdout lines, then ask for the result."""

    def __init__(self) -> None:
        self._lines = JsonLines(self.on_event)
        self._segment: list[str] = []
        self._last_segment: list[str] = []
        self._call_ids: set[str] = set()
        self._anonymous_tool_calls = 0
        self.session_id: str | None = None
        self.tool_errors: list[str] = []
        self.result_event: dict[str, Any] | None = None

    @property
    def skipped_lines(self) -> int:
        return self._lines.skipped

    @property
    def tool_calls(self) -> int:
        return len(self._call_ids) + self._anonymous_tool_calls

    @property
    def text(self) -> str:
        """The answer: the assistant messages after the last tool call (see the module docstring)."""
        messages = self._segment or self._last_segment
        if messages:
            return "".join(messages)
        result = (self.result_event or {}).get("result")
        return result if isinstance(result, str) else ""

    def feed_line(self, line: bytes) -> None:
        """One stdout line, as ``run_process`` hands it over."""
        self._lines.feed(line)

    def on_event(self, event: dict[str, Any]) -> None:
        """One decoded event; unknown types and fields are ignored."""
        if isinstance(event.get("session_id"), str):
            self.session_id = event["session_id"]
        kind = event.get("type")
        if kind == "assistant":
            message = _dict(event.get("message"))
            content = message.get("content")
            texts = [
                block["text"]
                for block in (content if isinstance(content, list) else [])
                if isinstance(block, dict)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            ]
            if texts:
                self._segment.append("".join(texts))
        elif kind == "tool_call":
            self._on_tool_call(event)
        elif kind == "result":
            self.result_event = event

    def _on_tool_call(self, event: dict[str, Any]) -> None:
        if self._segment:
            self._last_segment = self._segment
            self._segment = []
        call_id = event.get("call_id")
        subtype = event.get("subtype")
        if isinstance(call_id, str):
            self._call_ids.add(call_id)
        elif subtype == "started":
            self._anonymous_tool_calls += 1
        if subtype != "completed":
            return
        for kind, call in _dict(event.get("tool_call")).items():
            result = _dict(_dict(call).get("result"))
            if result and "success" not in result:
                self.tool_errors.append(f"{_tool_name(kind)}: {_describe_failure(result)}")

    def to_result(
        self, outcome: ProcessOutcome, *, timeout_s: float, transcript: Path | None = None
    ) -> AgentResult:
        """The ``AgentResult`` the stream and the way the process ended prove."""
        result = self.result_event or {}
        fields: dict[str, Any] = {
            "text": self.text,
            "tool_calls": self.tool_calls,
            "duration_s": outcome.duration_s,
            "session_id": self.session_id,
            "exit_code": outcome.exit_code,
            "transcript_path": transcript,
        }
        error = outcome_failure(
            outcome,
            cli="cursor-agent",
            timeout_s=timeout_s,
            result_seen=self.result_event is not None,
            skipped_lines=self.skipped_lines,
        )
        if error is not None:
            return AgentResult.failure(error.kind, self._with_tool_errors(error.message), **fields)
        if result.get("is_error") is not False or result.get("subtype") != "success":
            return AgentResult.failure("is_error", self._with_tool_errors(_error_message(result)), **fields)
        if outcome.exit_code != 0:
            excerpt = outcome.stderr_excerpt
            return AgentResult.failure(
                "nonzero_exit",
                f"cursor-agent exited {outcome.exit_code} although its result reported success"
                + (f": {excerpt}" if excerpt else ""),
                **fields,
            )
        return AgentResult(success=True, **fields)

    def _with_tool_errors(self, message: str) -> str:
        if not self.tool_errors:
            return message
        return f"{message} (failed tool calls: {'; '.join(self.tool_errors)})"


class CursorAdapter(CliAdapter):
    """Runs each ``AgentInvocation`` through ``cursor-agent -p``.

    ``executable`` defaults to ``cursor-agent`` looked up on the child's PATH; ``env`` overrides the
    inherited environment for every call (the call's own ``env`` overrides both); authentication is the
    user's (``cursor-agent login`` or ``CURSOR_API_KEY``). Transcripts go to
    ``<repo_root>/.autodev/transcripts/``. ``last_pid`` is a diagnostic: the pid (and process group id) of
    the most recent call that ran, or None before any (with concurrent calls, the last to finish).
    """

    name = "cursor"
    default_executable = "cursor-agent"
    install_hint = INSTALL_HINT

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        """Run ``inv`` with ``cursor-agent -p`` and report what its result event affirms."""
        return await self._run(build_argv(self.executable, inv), inv, CursorStreamParser())


def _error_message(result: dict[str, Any]) -> str:
    subtype = result.get("subtype")
    text = result.get("result")
    detail = " ".join(text.split())[:2000] if isinstance(text, str) and text.strip() else "no details given"
    context = f"subtype {subtype}" if isinstance(subtype, str) else "no subtype"
    return f"cursor-agent reported an error ({context}): {detail}"


def _tool_name(kind: str) -> str:
    """``writeToolCall`` -> ``write``."""
    return kind.removesuffix("ToolCall") or kind


def _describe_failure(result: dict[str, Any]) -> str:
    for value in result.values():
        detail = _dict(value).get("message") or _dict(value).get("error")
        if isinstance(detail, str) and detail.strip():
            return " ".join(detail.split())[:500]
    return ", ".join(sorted(result)) or "failed"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
