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
from typing import Any

from autodev.adapters._cli import CliAdapter, StreamParser, json_int, json_number, json_object, one_line
from autodev.adapters.base import AgentInvocation, AgentResult, ToolName
from autodev.config.schema import AutodevConfig
from autodev.process_runner import ProcessOutcome

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
    if inv.resume_session is not None:
        # The same conversation, continued: the agent sees what it did in the attempt before.
        argv += ["--resume", inv.resume_session]
    return argv


class ClaudeStreamParser(StreamParser):
    """Reads Claude Code's ``stream-json`` events; feed it stdout lines, then ask for the result.

    Counts ``tool_use`` blocks of ``assistant`` messages (each block id once) and keeps the last ``result``
    event; the ``system``/``init`` event names the model. The cost is the result's ``total_cost_usd``.
    """

    cli = "claude"

    def __init__(self, *, config: AutodevConfig | None = None, model: str | None = None) -> None:
        super().__init__(config=config, model=model)
        self.result_event: dict[str, Any] | None = None

    def on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if isinstance(event.get("session_id"), str):
            self.session_id = event["session_id"]
        if kind == "system" and event.get("subtype") == "init" and isinstance(event.get("model"), str):
            # The full name behind an alias (--model sonnet), which is what a price list names.
            self.reported_model = event["model"]
        if kind == "assistant":
            content = json_object(event.get("message")).get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self._count_tool_call(block.get("id"))
        elif kind == "result":
            self.result_event = event
            self.provider_status = json_int(event.get("api_error_status"))

    @property
    def result_seen(self) -> bool:
        return self.result_event is not None

    def _reported_fields(self) -> dict[str, Any]:
        result = self.result_event or {}
        usage = json_object(result.get("usage"))
        cache_read = json_int(usage.get("cache_read_input_tokens"))
        cache_write = json_int(usage.get("cache_creation_input_tokens"))
        uncached = json_int(usage.get("input_tokens"))
        tokens_in = None if uncached is None else uncached + (cache_read or 0) + (cache_write or 0)
        tokens_out = json_int(usage.get("output_tokens"))
        text = result.get("result")
        return {
            "text": text if isinstance(text, str) else "",
            "cost_usd": json_number(result.get("total_cost_usd")),
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "tokens_cached": cache_read,
            "tokens_cache_write": cache_write,
            "num_turns": json_int(result.get("num_turns")),
        }

    def _may_relay_the_provider(self) -> bool:
        return (self.result_event or {}).get("subtype") != "error_max_turns"

    def _reported_error(self, outcome: ProcessOutcome) -> str | None:
        result = self.result_event or {}
        if result.get("is_error") is not False or result.get("subtype") != "success":
            return _error_message(result)
        return None


class ClaudeCodeAdapter(CliAdapter):
    """Runs each ``AgentInvocation`` through the ``claude`` CLI (configured as ``CliAdapter`` describes)."""

    name = "claude_code"
    resumes_sessions = True
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
    return f"claude reported an error ({context}): {one_line(detail)}"
