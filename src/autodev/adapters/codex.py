"""Codex (``codex exec --json``) as a platform adapter, verified against Codex 0.169.0.

The prompt goes on stdin (the ``-`` argument); stdout is JSONL. Codex offers its own tool set (shell commands
and ``apply_patch``) whatever the call's capabilities, so what the agent may do is enforced by the sandbox:
``workspace-write`` when the call may write (``write``, ``edit`` or ``bash``), ``read-only`` otherwise.
``max_turns`` has no Codex equivalent; the deadline bounds the call instead.

Which provider and base URL Codex talks to comes from the user's Codex config (``CODEX_HOME``, left alone
unless the adapter's env sets it) or from ``extra_config``: ``key=value`` strings passed as ``-c`` options.
Codex reports tokens but no cost; the cost comes from ``price_table`` for the model as invoked.

Success needs a ``turn.completed`` event, no ``turn.failed`` and exit 0.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autodev.adapters._cli import CliAdapter, StreamParser, json_int
from autodev.adapters.base import AgentInvocation, AgentResult
from autodev.config.schema import AutodevConfig
from autodev.errors import ConfigError
from autodev.process_runner import ProcessOutcome

__all__ = ["INSTALL_HINT", "CodexAdapter", "CodexStreamParser", "build_argv"]

INSTALL_HINT = "install it with `npm install -g @openai/codex`"

# Items that are the agent acting on the world; agent messages and reasoning are not tool calls.
_TOOL_ITEM_TYPES = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})

# With these Codex makes no lookups off the machine besides the model provider itself.
_QUIET_OPTIONS = ("-c", "analytics.enabled=false", "-c", "check_for_update_on_startup=false")
_DISABLED_FEATURES = ("--disable", "plugins", "--disable", "apps")


def build_argv(executable: str, inv: AgentInvocation, extra_config: Sequence[str] = ()) -> list[str]:
    """The command line for ``inv``; ``extra_config`` entries follow the fixed ``-c`` options."""
    sandbox = "workspace-write" if inv.can_write else "read-only"
    if inv.resume_session is not None:
        # `codex exec resume` takes neither --sandbox nor -C: the sandbox as config, the cwd is the process's.
        argv = [
            executable,
            "exec",
            "resume",
            "--json",
            "--skip-git-repo-check",
            "-c",
            f'sandbox_mode="{sandbox}"',
        ]
    else:
        argv = [executable, "exec", "--json", "--skip-git-repo-check", "--sandbox", sandbox]
        argv += ["-C", os.path.abspath(inv.cwd)]
    if inv.model is not None:
        argv += ["-m", inv.model]
    argv += _QUIET_OPTIONS
    for option in extra_config:
        argv += ["-c", option]
    argv += list(_DISABLED_FEATURES)
    if inv.resume_session is not None:
        argv.append(inv.resume_session)
    argv.append("-")
    return argv


class CodexStreamParser(StreamParser):
    """Reads ``codex exec --json`` events; feed it stdout lines, then ask for the result.

    Keeps the thread id, the last agent message, tool items (each item id once, however many of its
    started/updated/completed events arrive), token usage summed over ``turn.completed`` events, the last
    ``turn.failed`` error and the last top-level ``error`` (a warning unless no turn completes).
    Codex names no model in its events: ``config`` prices the tokens at ``model``, the one asked for.
    """

    cli = "codex"
    success_claim = "although its turn completed"

    def __init__(self, *, config: AutodevConfig | None = None, model: str | None = None) -> None:
        super().__init__(config=config, model=model)
        self.text = ""
        self.turns_completed = 0
        self.turn_error: str | None = None
        self.last_error: str | None = None
        self.tokens_in: int | None = None
        self.tokens_cached: int | None = None
        self.tokens_cache_write: int | None = None
        self.tokens_out: int | None = None

    def on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            self.session_id = event["thread_id"]
        elif kind in ("item.started", "item.updated", "item.completed"):
            item = event.get("item")
            if isinstance(item, dict):
                self._on_item(item, completed=kind == "item.completed")
        elif kind == "turn.completed":
            self.turns_completed += 1
            usage = event.get("usage")
            if isinstance(usage, dict):
                self.tokens_in = _add(self.tokens_in, usage.get("input_tokens"))
                self.tokens_cached = _add(self.tokens_cached, usage.get("cached_input_tokens"))
                self.tokens_cache_write = _add(self.tokens_cache_write, usage.get("cache_write_input_tokens"))
                self.tokens_out = _add(self.tokens_out, usage.get("output_tokens"))
        elif kind == "turn.failed":
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            self.turn_error = _readable(message) or "turn failed without a message"
        elif kind == "error":
            self.last_error = _readable(event.get("message")) or "error event without a message"

    def _on_item(self, item: dict[str, Any], *, completed: bool) -> None:
        item_type = item.get("type")
        if isinstance(item_type, str) and item_type in _TOOL_ITEM_TYPES:
            # Without an id only the completion can be counted without counting a call twice.
            self._count_tool_call(item.get("id"), count_without_id=completed)
        elif item_type == "agent_message" and completed and isinstance(item.get("text"), str):
            self.text = item["text"]

    @property
    def result_seen(self) -> bool:
        return bool(self.turns_completed) or self.turn_error is not None or self.last_error is not None

    def _reported_fields(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "tokens_cached": self.tokens_cached,
            "tokens_cache_write": self.tokens_cache_write,
            "num_turns": self.turns_completed or None,
        }

    def _reported_error(self, outcome: ProcessOutcome) -> str | None:
        if self.turn_error is not None:
            return f"codex turn failed: {self.turn_error}"
        if not self.turns_completed:
            return f"codex completed no turn; last error: {self.last_error}"
        return None


class CodexAdapter(CliAdapter):
    """Runs each ``AgentInvocation`` through ``codex exec`` (configured as ``CliAdapter`` describes).

    ``extra_config`` holds ``key=value`` Codex config overrides passed as ``-c`` (a provider, a base URL,
    ...).
    """

    name = "codex"
    resumes_sessions = True
    default_executable = "codex"
    install_hint = INSTALL_HINT

    def __init__(
        self,
        *,
        repo_root: Path,
        config: AutodevConfig,
        executable: str | None = None,
        env: Mapping[str, str] | None = None,
        extra_config: Sequence[str] = (),
    ) -> None:
        for option in extra_config:
            key, sep, _ = option.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"{option!r} is not a key=value Codex config override", key="extra_config")
        super().__init__(repo_root=repo_root, config=config, executable=executable, env=env)
        self.extra_config = tuple(extra_config)

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        """Run ``inv`` with ``codex exec`` and report what its turn events affirm."""
        parser = CodexStreamParser(config=self.config, model=inv.model)
        return await self._run(build_argv(self.executable, inv, self.extra_config), inv, parser)


def _add(total: int | None, value: Any) -> int | None:
    count = json_int(value)
    return total if count is None else (total or 0) + count


def _readable(message: Any) -> str | None:
    """The provider's own message when Codex wraps the raw error body (JSON) in its message."""
    if not isinstance(message, str) or not message.strip():
        return None
    try:
        body = json.loads(message)
    except ValueError:
        return message.strip()
    error = body.get("error") if isinstance(body, dict) else None
    inner = error.get("message") if isinstance(error, dict) else None
    return inner.strip() if isinstance(inner, str) and inner.strip() else message.strip()
