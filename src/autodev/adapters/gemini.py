"""Gemini CLI (``gemini``, headless) as a platform adapter, verified against Gemini CLI 0.61.0.

Invocation: ``gemini --output-format stream-json --approval-mode MODE --policy FILE [--policy USERDIR]
[-m MODEL]`` with the prompt on stdin and no ``-p``. Gemini runs headless whenever stdin or stdout is not a
terminal and then takes piped stdin as the prompt, unchanged; ``-p TEXT`` would be appended to it after a
blank line (so ``-p -`` sends ``<stdin>\\n\\n-``). Gemini reads at most 8 MiB from stdin and silently cuts
the rest, so a longer prompt is refused before the CLI starts.

Tools: the policy engine decides. A ``deny`` rule without an argument pattern removes the tool from what
the model is offered (checked in the recorded requests). Each call passes a policy file, written once per
capability set under ``.autodev/gemini/``, that denies by name every Gemini 0.61 tool the capabilities do
not map to, plus every MCP tool (``mcp_*``) and discovered tool, at the top priority of the user tier. The
deny list is explicit rather than ``*`` because a ``*`` deny would also outrank ``yolo``'s allow-all rule for
the granted tools. ``--policy`` replaces the user's ``~/.gemini/policies`` directory, so that directory is
passed again when it exists: the user's own rules still apply, and can only narrow further. Roles that may
write run with ``--approval-mode yolo``; the others with ``default``, where headless runs deny anything that
would ask for approval (writes, shell) on top of the policy. ``max_turns`` has no per-call equivalent (only
the ``model.maxSessionTurns`` setting); the call's deadline still bounds the run.

Output (``stream-json``): ``init`` (``session_id``, ``model``); ``message`` (the user's prompt echoed, then
assistant text as ``delta`` chunks); ``tool_use`` (``tool_name``, ``tool_id``, ``parameters``);
``tool_result`` (``tool_id``, ``status``, ``output``/``error``); ``error`` (warnings); and a final ``result``
with ``status`` (``success``/``error``), ``error{type, message}`` and ``stats{total_tokens, input_tokens,
output_tokens, cached, input, tool_calls, models{<name>: same counts}}``. No cost: ``price_table`` prices the
tokens per model. ``input_tokens`` includes the cached part; thinking tokens appear only in
``total_tokens``, so ``tokens_out`` = ``total_tokens - input_tokens`` when that exceeds ``output_tokens``.

Exit codes: 0 ok, 1 error, 41 auth, 42 input, 44 sandbox, 52 config, 53 turn limit, 54 fatal tool error,
55 untrusted folder, 130 cancelled. An API error exits with the HTTP status itself, truncated to 8 bits by
the OS (400 arrives as 144); its ``result`` event carries the message.

Final text: the assistant text after the last tool call (earlier text is narration between tool calls), or
the last text there was when the final turn produced none.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio

from autodev.adapters._cli import (
    CliAdapter,
    StreamParser,
    child_env,
    cost_from_tokens,
    exit_meaning,
    json_int,
    json_object,
    one_line,
)
from autodev.adapters.base import AgentInvocation, AgentResult, ToolName
from autodev.config.schema import AutodevConfig
from autodev.errors import AutodevError
from autodev.process_runner import ProcessOutcome
from autodev.state.atomic import atomic_write_text
from autodev.state.paths import AutodevPaths, ensure_state_dir

__all__ = [
    "EXIT_CODES",
    "GEMINI_TOOLS",
    "INSTALL_HINT",
    "KNOWN_TOOLS",
    "MAX_STDIN_BYTES",
    "GeminiAdapter",
    "GeminiStreamParser",
    "build_argv",
    "denied_tools",
    "policy_toml",
    "user_policies_dir",
    "write_policy",
]

INSTALL_HINT = "install it with `npm install -g @google/gemini-cli`"
MAX_STDIN_BYTES = 8 * 1024 * 1024

GEMINI_TOOLS: Mapping[ToolName, tuple[str, ...]] = {
    "read": ("read_file", "read_many_files", "list_directory"),
    "search": ("grep_search", "glob", "list_directory"),
    "write": ("write_file",),
    "edit": ("replace",),
    "bash": ("run_shell_command", "list_background_processes", "read_background_output"),
    "web": ("web_fetch", "google_web_search"),
}
"""AutoDev capability -> the Gemini CLI tools that provide it."""

KNOWN_TOOLS: tuple[str, ...] = (
    "activate_skill",
    "ask_user",
    "complete_task",
    "enter_plan_mode",
    "exit_plan_mode",
    "get_internal_docs",
    "glob",
    "google_web_search",
    "grep_search",
    "invoke_agent",
    "list_background_processes",
    "list_directory",
    "list_mcp_resources",
    "read_background_output",
    "read_file",
    "read_many_files",
    "read_mcp_resource",
    "replace",
    "run_shell_command",
    "take_snapshot",
    "tracker_add_dependency",
    "tracker_create_task",
    "tracker_get_task",
    "tracker_list_tasks",
    "tracker_update_task",
    "tracker_visualize",
    "update_topic",
    "web_fetch",
    "write_file",
    "write_todos",
)
"""Every built-in tool of Gemini CLI 0.61 (sub-agents, skills and planning tools included)."""

# Tools no capability grants and no name can list in advance: every MCP server's and discovered tools.
_ALWAYS_DENIED_PATTERNS = ("mcp_*", "discovered_tool_*")

EXIT_CODES: Mapping[int, str] = {
    1: "general error",
    41: "authentication failed: check GEMINI_API_KEY and security.auth.selectedType in settings.json",
    42: "input error: no prompt arrived or an argument was invalid",
    44: "sandbox error",
    52: "configuration error in settings.json or a policy file",
    53: "the session turn limit (model.maxSessionTurns) was reached",
    54: "a tool failed fatally",
    55: "the working directory is not trusted (security.folderTrust)",
    130: "cancelled",
}
"""Gemini CLI exit codes and what they mean."""


def denied_tools(tools: Sequence[ToolName]) -> list[str]:
    """The tool names (and patterns) a call with ``tools`` must not be offered."""
    granted = {name for capability in tools for name in GEMINI_TOOLS[capability]}
    return [name for name in KNOWN_TOOLS if name not in granted] + list(_ALWAYS_DENIED_PATTERNS)


def policy_toml(tools: Sequence[ToolName]) -> str:
    """A policy file denying everything ``tools`` do not grant, at the top priority of its tier."""
    names = ",\n".join(f'  "{name}"' for name in denied_tools(tools))
    granted = ", ".join(tools) if tools else "none"
    return (
        f"# Written by AutoDev for agent calls with capabilities: {granted}.\n"
        "[[rule]]\n"
        f"toolName = [\n{names},\n]\n"
        'decision = "deny"\n'
        "priority = 999\n"
        'denyMessage = "AutoDev did not give this role that tool."\n'
    )


def write_policy(repo_root: Path, tools: Sequence[ToolName]) -> Path:
    """The policy file for ``tools`` under ``.autodev/gemini/``, written if it is not there yet.

    Raises ``AutodevError`` when it cannot be written.
    """
    content = policy_toml(tools)
    digest = hashlib.sha256(content.encode()).hexdigest()[:16]
    paths = AutodevPaths(repo_root)
    path = paths.state_dir / "gemini" / f"policy-{digest}.toml"
    try:
        if path.is_file() and path.read_text(encoding="utf-8") == content:
            return path
        ensure_state_dir(paths)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, content, durable=False)
    except OSError as exc:
        raise AutodevError(f"cannot write the Gemini policy file {path}: {exc.strerror or exc}") from exc
    return path


def user_policies_dir(env: Mapping[str, str]) -> Path:
    """Where Gemini CLI looks for the user's policies in ``env``: ``$GEMINI_CLI_HOME`` or ``$HOME``."""
    home = env.get("GEMINI_CLI_HOME") or env.get("HOME") or str(Path.home())
    return Path(home) / ".gemini" / "policies"


def build_argv(
    executable: str, inv: AgentInvocation, policy: Path, user_policies: Path | None = None
) -> list[str]:
    """The command line for ``inv``; the prompt is not in it (it goes on stdin)."""
    argv = [executable, "--output-format", "stream-json"]
    argv += ["--approval-mode", "yolo" if inv.can_write else "default"]
    argv += ["--policy", str(policy)]
    if user_policies is not None:
        argv += ["--policy", str(user_policies)]
    if inv.model is not None:
        argv += ["-m", inv.model]
    return argv


# (tokens_in, tokens_out, tokens_cached) of a stats block.
_Tokens = tuple[int | None, int | None, int | None]


class GeminiStreamParser(StreamParser):
    """Reads Gemini CLI's ``stream-json`` events; feed it stdout lines, then ask for the result.

    ``config`` prices the tokens per model named in the result's stats; the ``init`` event's model, else
    ``model`` (the one asked for), is the name for stats that name none.
    """

    cli = "gemini"
    exit_meanings = EXIT_CODES

    def __init__(self, *, config: AutodevConfig | None = None, model: str | None = None) -> None:
        super().__init__(config=config, model=model)
        self._segment: list[str] = []
        self._last_text = ""
        self._tool_names: dict[str, str] = {}
        self.warnings: list[str] = []
        self.result_event: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """The answer: the assistant text after the last tool call (see the module docstring)."""
        current = "".join(self._segment)
        return current if current.strip() else self._last_text

    def on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "init":
            if isinstance(event.get("session_id"), str):
                self.session_id = event["session_id"]
            if isinstance(event.get("model"), str):
                self.reported_model = event["model"]
        elif kind == "message" and event.get("role") == "assistant":
            content = event.get("content")
            if isinstance(content, str):
                self._segment.append(content)
        elif kind == "tool_use":
            self._on_tool_use(event)
        elif kind == "tool_result":
            self._on_tool_result(event)
        elif kind == "error":
            message = event.get("message")
            if isinstance(message, str) and message.strip():
                self.warnings.append(one_line(message))
        elif kind == "result":
            self.result_event = event

    def _on_tool_use(self, event: dict[str, Any]) -> None:
        segment = "".join(self._segment)
        if segment.strip():
            self._last_text = segment
        self._segment = []
        tool_id = event.get("tool_id")
        name = event.get("tool_name")
        if isinstance(tool_id, str) and isinstance(name, str):
            self._tool_names[tool_id] = name
        self._count_tool_call(tool_id)

    def _on_tool_result(self, event: dict[str, Any]) -> None:
        if event.get("status") == "success":
            return
        tool_id = event.get("tool_id")
        name = self._tool_names.get(tool_id, "tool") if isinstance(tool_id, str) else "tool"
        error = json_object(event.get("error"))
        detail = error.get("message") or event.get("output")
        self.tool_errors.append(f"{name}: {one_line(detail) if isinstance(detail, str) else 'failed'}")

    def _models(self) -> list[tuple[str, _Tokens]]:
        """Each model the result's stats name, with its tokens; the stats' totals under the reported (or
        asked-for) model when they name none."""
        stats = json_object((self.result_event or {}).get("stats"))
        models = json_object(stats.get("models"))
        per_model = [(name, _tokens(json_object(counts))) for name, counts in models.items()]
        fallback = self.reported_model or self._model
        if not per_model and fallback is not None:
            per_model = [(fallback, _tokens(stats))]
        return per_model

    def _cost_usd(
        self, per_model: list[tuple[str, tuple[int | None, int | None, int | None]]]
    ) -> float | None:
        if self._config is None or not per_model:
            return None
        total = 0.0
        for name, (tokens_in, tokens_out, tokens_cached) in per_model:
            cost = cost_from_tokens(
                self._config, name, tokens_in=tokens_in, tokens_out=tokens_out, tokens_cached=tokens_cached
            )
            if cost is None:
                # A partial sum would understate what the call cost.
                return None
            total += cost
        return total

    @property
    def result_seen(self) -> bool:
        return self.result_event is not None

    def _reported_fields(self) -> dict[str, Any]:
        tokens_in, tokens_out, tokens_cached = _tokens(json_object((self.result_event or {}).get("stats")))
        per_model = self._models()
        cost = self._cost_usd(per_model)
        # One model in the stats is the one the call ran on; with several (a router's helper model besides
        # the main one), the main one is the model the session started with.
        model = per_model[0][0] if len(per_model) == 1 else self.reported_model
        return {
            "text": self.text,
            "cost_usd": cost,
            "cost_estimated": cost is not None,
            "model": model,
            "tokens_in": tokens_in,
            "tokens_out": tokens_out,
            "tokens_cached": tokens_cached,
        }

    def _reported_error(self, outcome: ProcessOutcome) -> str | None:
        result = self.result_event or {}
        return None if result.get("status") == "success" else _result_error(result, outcome.exit_code)

    def _warnings_note(self) -> str:
        return f" (gemini warnings: {'; '.join(self.warnings)})" if self.warnings else ""


class GeminiAdapter(CliAdapter):
    """Runs each ``AgentInvocation`` through the ``gemini`` CLI, headless.

    Configured as ``CliAdapter`` describes; authentication is the user's Gemini CLI setup. The
    per-capability policy files go to ``<repo_root>/.autodev/gemini/``.
    """

    name = "gemini"
    default_executable = "gemini"
    install_hint = INSTALL_HINT

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        """Run ``inv`` with ``gemini`` and report what its result event affirms."""
        size = len(inv.prompt.encode("utf-8"))
        if size > MAX_STDIN_BYTES:
            return AgentResult.failure(
                "spawn_failed",
                f"gemini was not started: the prompt is {size} bytes and Gemini CLI reads at most "
                f"{MAX_STDIN_BYTES} bytes from stdin (it would cut the rest silently)",
            )
        try:
            policy = await anyio.to_thread.run_sync(write_policy, self.repo_root, inv.tools)
        except AutodevError as exc:
            return AgentResult.failure("spawn_failed", f"gemini was not started: {exc}")
        user_policies = user_policies_dir(child_env(self.env, inv))
        has_user_policies = await anyio.Path(user_policies).is_dir()
        parser = GeminiStreamParser(config=self.config, model=inv.model)
        argv = build_argv(self.executable, inv, policy, user_policies if has_user_policies else None)
        return await self._run(argv, inv, parser)


def _tokens(counts: dict[str, Any]) -> _Tokens:
    """``(tokens_in, tokens_out, tokens_cached)`` from a stats block (see the module docstring)."""
    prompt = json_int(counts.get("input_tokens"))
    output = json_int(counts.get("output_tokens"))
    total = json_int(counts.get("total_tokens"))
    if output is not None and total is not None and prompt is not None:
        output = max(output, total - prompt)
    return prompt, output, json_int(counts.get("cached"))


def _result_error(result: dict[str, Any], exit_code: int | None) -> str:
    error = json_object(result.get("error"))
    message = error.get("message")
    detail = one_line(message) if isinstance(message, str) and message.strip() else "no details given"
    if exit_code == 53:
        return f"gemini reached its session turn limit: {detail}"
    status = result.get("status")
    context = f"status {status}" if isinstance(status, str) else "no status"
    if exit_code is not None:
        context += f", exit {exit_code}{exit_meaning(exit_code, EXIT_CODES)}"
    return f"gemini reported an error ({context}): {detail}"
