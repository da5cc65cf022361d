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

from typing import Any

from autodev.adapters._cli import CliAdapter, StreamParser, json_object, one_line
from autodev.adapters.base import AgentInvocation, AgentResult
from autodev.process_runner import ProcessOutcome

__all__ = ["INSTALL_HINT", "CursorAdapter", "CursorStreamParser", "build_argv"]

INSTALL_HINT = "install it with `curl https://cursor.com/install -fsS | bash` (https://cursor.com/docs/cli)"


def build_argv(executable: str, inv: AgentInvocation) -> list[str]:
    """The command line for ``inv``; the prompt is not in it (it goes on stdin)."""
    argv = [executable, "-p", "--output-format", "stream-json"]
    argv += ["--force"] if inv.can_write else ["--mode", "ask"]
    if inv.model is not None:
        argv += ["--model", inv.model]
    return argv


class CursorStreamParser(StreamParser):
    """Reads ``cursor-agent`` ``stream-json`` events; feed it stdout lines, then ask for the result."""

    cli = "cursor-agent"

    def __init__(self, *, model: str | None = None) -> None:
        super().__init__(model=model)
        self._segment: list[str] = []
        self._last_segment: list[str] = []
        self.result_event: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """The answer: the assistant messages after the last tool call (see the module docstring)."""
        messages = self._segment or self._last_segment
        if messages:
            return "".join(messages)
        result = (self.result_event or {}).get("result")
        return result if isinstance(result, str) else ""

    def on_event(self, event: dict[str, Any]) -> None:
        if isinstance(event.get("session_id"), str):
            self.session_id = event["session_id"]
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init" and isinstance(event.get("model"), str):
            self.reported_model = event["model"]
        if kind == "assistant":
            content = json_object(event.get("message")).get("content")
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
        subtype = event.get("subtype")
        self._count_tool_call(event.get("call_id"), count_without_id=subtype == "started")
        if subtype != "completed":
            return
        for kind, call in json_object(event.get("tool_call")).items():
            result = json_object(json_object(call).get("result"))
            if result and "success" not in result:
                self.tool_errors.append(f"{_tool_name(kind)}: {_describe_failure(result)}")

    @property
    def result_seen(self) -> bool:
        return self.result_event is not None

    def _reported_fields(self) -> dict[str, Any]:
        # The stream reports no tokens and no cost: what a Cursor call cost is unknown.
        return {"text": self.text}

    def _reported_error(self, outcome: ProcessOutcome) -> str | None:
        result = self.result_event or {}
        if result.get("is_error") is not False or result.get("subtype") != "success":
            return _error_message(result)
        return None


class CursorAdapter(CliAdapter):
    """Runs each ``AgentInvocation`` through ``cursor-agent -p`` (configured as ``CliAdapter`` describes).

    Authentication is the user's (``cursor-agent login`` or ``CURSOR_API_KEY``).
    """

    name = "cursor"
    default_executable = "cursor-agent"
    install_hint = INSTALL_HINT

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        """Run ``inv`` with ``cursor-agent -p`` and report what its result event affirms."""
        return await self._run(build_argv(self.executable, inv), inv, CursorStreamParser(model=inv.model))


def _error_message(result: dict[str, Any]) -> str:
    subtype = result.get("subtype")
    text = result.get("result")
    detail = one_line(text) if isinstance(text, str) and text.strip() else "no details given"
    context = f"subtype {subtype}" if isinstance(subtype, str) else "no subtype"
    return f"cursor-agent reported an error ({context}): {detail}"


def _tool_name(kind: str) -> str:
    """``writeToolCall`` -> ``write``."""
    return kind.removesuffix("ToolCall") or kind


def _describe_failure(result: dict[str, Any]) -> str:
    for value in result.values():
        detail = json_object(value).get("message") or json_object(value).get("error")
        if isinstance(detail, str) and detail.strip():
            return one_line(detail, 500)
    return ", ".join(sorted(result)) or "failed"
