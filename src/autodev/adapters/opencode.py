"""OpenCode (``opencode run``) as a platform adapter, verified against OpenCode 1.18.33.

Invocation: ``opencode run --pure --format json --agent autodev [-m provider/model]`` with the prompt on
stdin. With no message argument ``opencode run`` takes piped stdin as the whole message, unchanged (a
274 KB prompt arrived byte for byte), so no prompt ever travels in argv. ``--pure`` leaves out third-party
plugins, which could hook tool execution outside the permissions set here.

Permissions: each call defines its own primary agent, ``autodev``, through ``OPENCODE_CONFIG_CONTENT``,
which OpenCode merges over every config file as the last layer; a JSON object already in that variable
is kept and only ``agent.autodev`` is replaced. The agent's permission table starts with ``"*": "deny"``
and names every permission OpenCode 1.18 knows, allowing only those the call's capabilities need (``read``
keeps OpenCode's own refusal of ``.env`` files); a denied tool is not even offered to the model (checked
in the recorded requests: read-only roles are offered ``glob``, ``grep`` and ``read``; no capabilities, no
tools). A dedicated agent matters: a user's ``agent.build.permission`` outranks the global ``permission``
key and re-enabled ``edit`` and ``bash`` in the same test. The agent's rules come last, so for a granted
permission they also supersede a user's finer rules (a headless run cannot stop to ask). ``max_turns``
becomes the agent's ``steps`` (OpenCode then tells the model on the last step to stop using tools; it is
a prompt, not a hard stop).

Output (``--format json``): ``step_start``; ``tool_use`` once a tool call completed or failed
(``part.tool``, ``part.state.status``, ``part.state.error``); ``text`` once a text part is complete;
``step_finish`` with ``part.reason`` (``tool-calls`` while the model keeps working), ``part.tokens``
and ``part.cost``; ``error`` with ``error.name`` and ``error.data.message`` (then exit 1). There is no
final result event: the run succeeded when the last ``step_finish`` ended the turn (reason ``stop``), no
``error`` event came and the exit code is 0.

Final text: the text parts of the last step that produced text, joined by blank lines. Earlier steps'
texts are narration between tool calls ("let me look at ..."); the last one is the answer.

Tokens and cost are summed over steps. OpenCode reports input without the cached part and reasoning
apart from output, so ``tokens_in`` = input + cache read + cache write and ``tokens_out`` = output +
reasoning. The reported cost is used when it is positive; OpenCode reports 0 for models it has no price
for, so then ``price_table`` prices the tokens when it knows the model, and otherwise the cost is unknown.
The events name no model: with no ``-m`` (OpenCode's default model) the adapter asks ``opencode export
<session>`` which model the session ran on, so that its tokens can still be priced.

OpenCode hangs forever on some provider failures (a server that never answers) and retries 5xx answers
for over a minute: the call's deadline is what ends those, as a ``timeout``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autodev.adapters._cli import (
    CliAdapter,
    StreamParser,
    child_env,
    cost_from_tokens,
    json_int,
    json_number,
    json_object,
    one_line,
)
from autodev.adapters.base import AgentInvocation, AgentResult, ToolName
from autodev.config.schema import AutodevConfig
from autodev.process_runner import ProcessOutcome, ProcessSpec, ProcessStartError, run_process

__all__ = [
    "AGENT_NAME",
    "CONFIG_CONTENT_ENV",
    "INSTALL_HINT",
    "KNOWN_PERMISSIONS",
    "OPENCODE_PERMISSIONS",
    "OpenCodeAdapter",
    "OpenCodeStreamParser",
    "agent_config",
    "build_argv",
    "config_content",
    "permission_table",
]

INSTALL_HINT = "install it with `npm install -g opencode-ai`"
AGENT_NAME = "autodev"
CONFIG_CONTENT_ENV = "OPENCODE_CONFIG_CONTENT"

OPENCODE_PERMISSIONS: Mapping[ToolName, tuple[str, ...]] = {
    "read": ("read", "list"),
    "search": ("glob", "grep", "list"),
    # OpenCode's ``edit`` permission covers its write, edit and patch tools.
    "write": ("edit",),
    "edit": ("edit",),
    "bash": ("bash",),
    "web": ("webfetch", "websearch", "codesearch"),
}
"""AutoDev capability -> the OpenCode permissions that provide it."""

KNOWN_PERMISSIONS: tuple[str, ...] = (
    "bash",
    "codesearch",
    "doom_loop",
    "edit",
    "external_directory",
    "glob",
    "grep",
    "list",
    "lsp",
    "question",
    "read",
    "skill",
    "task",
    "todoread",
    "todowrite",
    "webfetch",
    "websearch",
)
"""Every permission key of OpenCode 1.18: each one not granted is denied by name (``permission_table``)."""

# How much of a tool's or the provider's error message a failure message keeps.
_DETAIL_CHARS = 1000

# Finish reasons of a last step that do not end the turn with an answer (AI SDK finish reasons).
_FAILED_FINISH = {
    "length": "the model's answer was cut off at its output token limit",
    "content-filter": "the provider's content filter stopped the answer",
    "error": "the model call ended with an error",
}


# OpenCode's own default keeps secrets files out of ``read``; a plain "allow" would replace that guard.
_READ_RULES: Mapping[str, str] = {"*": "allow", "*.env": "deny", "*.env.*": "deny", "*.env.example": "allow"}


def permission_table(tools: Sequence[ToolName]) -> dict[str, str | dict[str, str]]:
    """The ``autodev`` agent's permissions for ``tools``: ``"*"`` denied first, then every known key.

    The last matching rule wins, so the keys after ``"*"`` decide. Naming every known key (not only the
    granted ones) means a user's own agent entry of the same name cannot leave one of them allowed.
    """
    granted = {name for capability in tools for name in OPENCODE_PERMISSIONS[capability]}
    table: dict[str, str | dict[str, str]] = {"*": "deny"}
    for name in KNOWN_PERMISSIONS:
        if name not in granted:
            table[name] = "deny"
        else:
            table[name] = dict(_READ_RULES) if name == "read" else "allow"
    return table


def agent_config(inv: AgentInvocation) -> dict[str, Any]:
    """The definition of the ``autodev`` agent for ``inv``."""
    agent: dict[str, Any] = {
        "mode": "primary",
        "description": f"AutoDev {inv.role}",
        "permission": permission_table(inv.tools),
    }
    if inv.max_turns is not None:
        agent["steps"] = inv.max_turns
    return agent


def config_content(inv: AgentInvocation, existing: str | None) -> str:
    """``OPENCODE_CONFIG_CONTENT`` for ``inv``: ``existing`` (a JSON object) with ``agent.autodev`` set.

    Raises ``ValueError`` when ``existing`` is set but is not a JSON object.
    """
    base: dict[str, Any] = {}
    if existing is not None and existing.strip():
        try:
            parsed = json.loads(existing)
        except ValueError as exc:
            raise ValueError(f"{CONFIG_CONTENT_ENV} is not valid JSON: {exc}") from exc
        if not isinstance(parsed, dict):
            raise ValueError(f"{CONFIG_CONTENT_ENV} must hold a JSON object")
        base = parsed
    agents = base.get("agent")
    merged_agents = dict(agents) if isinstance(agents, dict) else {}
    merged_agents[AGENT_NAME] = agent_config(inv)
    return json.dumps({**base, "agent": merged_agents})


def build_argv(executable: str, inv: AgentInvocation) -> list[str]:
    """The command line for ``inv``; the prompt goes on stdin and the permissions in the environment."""
    argv = [executable, "run", "--pure", "--format", "json", "--agent", AGENT_NAME]
    if inv.model is not None:
        argv += ["-m", inv.model]
    return argv


class OpenCodeStreamParser(StreamParser):
    """Reads ``opencode run --format json`` events; feed it stdout lines, then ask for the result.

    ``config`` prices the tokens at ``model`` when OpenCode reports no cost for them; OpenCode names no
    model in these events (``OpenCodeAdapter`` asks the session when no model was given).
    """

    cli = "opencode"
    success_claim = "after finishing its turn"

    def __init__(self, *, config: AutodevConfig | None = None, model: str | None = None) -> None:
        super().__init__(config=config, model=model)
        self._step_texts: list[str] = []
        self._answer: list[str] = []
        self.steps = 0
        self.last_finish_reason: str | None = None
        self.errors: list[str] = []
        self._tokens_in = 0
        self._tokens_out = 0
        self._tokens_cached = 0
        self._tokens_cache_write = 0
        self._tokens_seen = False
        self._cost = 0.0
        self._cost_seen = False

    @property
    def text(self) -> str:
        """The answer: the text parts of the last step that produced any (see the module docstring)."""
        return "\n\n".join(self._step_texts or self._answer)

    def on_event(self, event: dict[str, Any]) -> None:
        if isinstance(event.get("sessionID"), str):
            self.session_id = event["sessionID"]
        kind = event.get("type")
        part = json_object(event.get("part"))
        if kind == "step_start":
            if self._step_texts:
                self._answer = self._step_texts
            self._step_texts = []
        elif kind == "text":
            text = part.get("text")
            if isinstance(text, str) and text.strip():
                self._step_texts.append(text)
        elif kind == "tool_use":
            self._on_tool(part)
        elif kind == "step_finish":
            self._on_step_finish(part)
        elif kind == "error":
            self.errors.append(_error_message(event.get("error")))
            status = json_int(json_object(json_object(event.get("error")).get("data")).get("statusCode"))
            self.provider_status = status if status is not None else self.provider_status

    def _on_tool(self, part: dict[str, Any]) -> None:
        # OpenCode sends one ``tool_use`` event per call, once it completed or failed.
        self._count_tool_call()
        state = json_object(part.get("state"))
        if state.get("status") == "error":
            tool = part.get("tool") if isinstance(part.get("tool"), str) else "tool"
            detail = state.get("error")
            self.tool_errors.append(
                f"{tool}: {one_line(detail, _DETAIL_CHARS) if isinstance(detail, str) else 'failed'}"
            )

    def _on_step_finish(self, part: dict[str, Any]) -> None:
        self.steps += 1
        reason = part.get("reason")
        self.last_finish_reason = reason if isinstance(reason, str) else None
        cost = json_number(part.get("cost"))
        if cost is not None:
            self._cost += cost
            self._cost_seen = True
        if not isinstance(part.get("tokens"), dict):
            return
        tokens = json_object(part.get("tokens"))
        cache = json_object(tokens.get("cache"))
        cache_read = _count(cache.get("read"))
        cache_write = _count(cache.get("write"))
        self._tokens_in += _count(tokens.get("input")) + cache_read + cache_write
        self._tokens_out += _count(tokens.get("output")) + _count(tokens.get("reasoning"))
        self._tokens_cached += cache_read
        self._tokens_cache_write += cache_write
        self._tokens_seen = True

    @property
    def turn_ended(self) -> bool:
        """Whether the last step finished the turn (any reason but ``tool-calls``)."""
        return self.steps > 0 and self.last_finish_reason != "tool-calls"

    def _cost_usd(self) -> float | None:
        """OpenCode's own cost when it priced the call. It reports 0 for a model it has no price for, so a
        0 for tokens spent is no price at all (``to_result`` then prices the tokens at ``price_table``)."""
        if not self._cost_seen:
            return None
        spent = self._tokens_in + self._tokens_out
        return self._cost if self._cost > 0 or spent == 0 else None

    @property
    def result_seen(self) -> bool:
        return self.turn_ended or bool(self.errors)

    def _reported_fields(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "cost_usd": self._cost_usd(),
            "tokens_in": self._tokens_in if self._tokens_seen else None,
            "tokens_out": self._tokens_out if self._tokens_seen else None,
            "tokens_cached": self._tokens_cached if self._tokens_seen else None,
            "tokens_cache_write": self._tokens_cache_write if self._tokens_seen else None,
            "num_turns": self.steps or None,
        }

    def _reported_error(self, outcome: ProcessOutcome) -> str | None:
        if self.errors:
            return f"opencode reported: {'; '.join(self.errors)}"
        failed_finish = _FAILED_FINISH.get(self.last_finish_reason or "")
        return None if failed_finish is None else f"opencode: {failed_finish}"


class OpenCodeAdapter(CliAdapter):
    """Runs each ``AgentInvocation`` through ``opencode run`` (configured as ``CliAdapter`` describes).

    The provider and model setup is the user's OpenCode configuration.
    """

    name = "opencode"
    default_executable = "opencode"
    install_hint = INSTALL_HINT

    async def execute(self, inv: AgentInvocation) -> AgentResult:
        """Run ``inv`` with ``opencode run`` and report what its event stream proves."""
        existing = child_env(self.env, inv).get(CONFIG_CONTENT_ENV)
        try:
            content = config_content(inv, existing)
        except ValueError as exc:
            return AgentResult.failure("spawn_failed", f"opencode was not started: {exc}")
        call = inv.model_copy(update={"env": {**inv.env, CONFIG_CONTENT_ENV: content}})
        parser = OpenCodeStreamParser(config=self.config, model=inv.model)
        result = await self._run(build_argv(self.executable, inv), inv, parser, call=call)
        if inv.model is None and result.session_id is not None and result.tokens_in:
            result = await self._with_session_model(result, call)
        return result

    async def _with_session_model(self, result: AgentResult, call: AgentInvocation) -> AgentResult:
        """``result`` with the model OpenCode chose (none was asked for), read back from the session, and
        its tokens priced at that model when OpenCode did not price them. Without a model name a call on
        OpenCode's default model could not be priced at all."""
        assert result.session_id is not None
        model = await session_model(self.executable, result.session_id, child_env(self.env, call), call.cwd)
        if model is None:
            return result
        update: dict[str, Any] = {"model": model}
        if result.cost_usd is None:
            cost = cost_from_tokens(
                self.config,
                model,
                tokens_in=result.tokens_in,
                tokens_out=result.tokens_out,
                tokens_cached=result.tokens_cached,
                tokens_cache_write=result.tokens_cache_write,
            )
            if cost is not None:
                update |= {"cost_usd": cost, "cost_estimated": True}
        return result.model_copy(update=update)


# ``opencode export`` starts the whole CLI (about 3 s here); a minute means it is stuck.
_EXPORT_TIMEOUT_S = 60.0


async def session_model(executable: str, session_id: str, env: Mapping[str, str], cwd: Path) -> str | None:
    """``provider/model`` of session ``session_id`` as ``opencode export`` reports it; None when the export
    fails or names no model (the lookup is best effort: the call itself already succeeded or failed)."""
    chunks: list[bytes] = []
    spec = ProcessSpec(
        argv=[executable, "export", session_id], cwd=cwd, timeout_s=_EXPORT_TIMEOUT_S, env=dict(env)
    )
    try:
        outcome = await run_process(spec, chunks.append)
    except ProcessStartError:
        return None
    if outcome.exit_code != 0:
        return None
    text = b"\n".join(chunks).decode("utf-8", errors="replace")
    # The JSON document follows a line saying which session is exported.
    start = text.find("{")
    try:
        exported = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        return None
    info = json_object(json_object(exported).get("info"))
    model = json_object(info.get("model"))
    provider, name = model.get("providerID"), model.get("id")
    if isinstance(provider, str) and isinstance(name, str) and provider and name:
        return f"{provider}/{name}"
    return None


def _error_message(error: Any) -> str:
    """``Name: message (HTTP status)`` from an ``error`` event's payload."""
    if not isinstance(error, dict):
        return "error event without details"
    raw_name = error.get("name")
    name = raw_name if isinstance(raw_name, str) else "error"
    data = json_object(error.get("data"))
    message = data.get("message")
    text = (
        f"{name}: {one_line(message, _DETAIL_CHARS)}"
        if isinstance(message, str) and message.strip()
        else name
    )
    status = json_int(data.get("statusCode"))
    return f"{text} (HTTP {status})" if status is not None else text


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
