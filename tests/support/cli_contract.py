"""The contract every agent CLI adapter keeps, as data: one ``CliSpec`` per CLI and the scenarios they play.

``tests/e2e/adapters/test_cli_contract.py`` asserts the contract for every CLI; each CLI's own test file
asserts what only that CLI does, on the same runs. A real CLI takes seconds per call, so each scenario
(``Case``) runs once per CLI per session: ``ContractRuns.get`` plays it the first time a test asks for it,
against a fresh scripted model server, home, working directory and repository, and keeps what came out
(the result, the requests the model server saw, the processes left behind).

The real CLIs (Claude Code, Codex, OpenCode, Gemini CLI) are the pinned npm installs of ``agent_clis``
talking to ``ModelServer``; Cursor's CLI cannot be installed here, so its spec drives the fake of
``fake_cursor``, which plays the same scenarios without a model server.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from autodev.adapters._cli import CliAdapter
from autodev.adapters.base import AgentInvocation, AgentResult, ToolName
from autodev.adapters.claude_code import ClaudeCodeAdapter
from autodev.adapters.codex import CodexAdapter
from autodev.adapters.cursor import CursorAdapter
from autodev.adapters.gemini import GeminiAdapter
from autodev.adapters.opencode import OpenCodeAdapter
from autodev.config.schema import AutodevConfig, ModelPrice
from support.agent_clis import isolated_env
from support.fake_cursor import fake_cursor_env, install_fake_cursor
from support.model_server import BIG_END, BIG_START, ModelServer, RecordedRequest, Refusal, Scenario
from support.processes import survivors

__all__ = [
    "BIG_PAYLOAD",
    "BIG_PAYLOAD_DIGEST",
    "CLAUDE_CODE",
    "CLI_SPECS",
    "CODEX",
    "CURSOR",
    "GEMINI",
    "OFFERING_SPECS",
    "OPENCODE",
    "OPENCODE_MODEL",
    "OPENCODE_PRICES",
    "READ_TOOLS",
    "REFUSAL_CASES",
    "SERVED_SPECS",
    "WRITE_TOOLS",
    "Case",
    "CliSpec",
    "ContractRuns",
    "Health",
    "HealthCase",
    "HealthOf",
    "Run",
    "RunOf",
    "Setup",
    "claude_env",
    "cursor_log",
    "gemini_adapter",
    "invocation",
    "opencode_env",
    "opencode_user_config",
]

# The scenarios every CLI plays: a role that may write, one that may only read and one with no capabilities
# (whose scripted models all try to write), a model that answers HTTP 400, one that never answers, and a
# prompt over 200 kB.
Case = Literal[
    "write",
    "read_only",
    "no_tools",
    "api_error",
    "hang",
    "big_prompt",
    "rate_limited",
    "unavailable",
    "auth_failed",
    "usage_limit",
    "context_overflow",
]
# The provider refuses in these cases, with its real status and body (``model_server.REFUSALS``).
REFUSAL_CASES: tuple[Refusal, ...] = (
    "rate_limited",
    "unavailable",
    "auth_failed",
    "usage_limit",
    "context_overflow",
)

WRITE_TOOLS: tuple[ToolName, ...] = ("read", "search", "write", "edit", "bash")
READ_TOOLS: tuple[ToolName, ...] = ("read", "search")

# Over 200 kB, multi-byte characters included: what arrives is checked by size and sha256.
BIG_PAYLOAD = "".join(f"line {i:05d} {hashlib.sha256(str(i).encode()).hexdigest()} ü\n" for i in range(3000))
BIG_PAYLOAD_DIGEST = (
    f"BIG_BYTES={len(BIG_PAYLOAD.encode())} BIG_SHA256={hashlib.sha256(BIG_PAYLOAD.encode()).hexdigest()}"
)

# What a scripted call that writes carries; the file name is relative to the call's cwd.
WRITTEN_FILE = "hello.txt"


@dataclass(frozen=True, slots=True)
class Setup:
    """What one run is built from: the installed CLIs, its own model server, home, cwd and repository."""

    clis: Mapping[str, Path]
    server: ModelServer
    home: Path
    workdir: Path
    repo: Path
    case: Case
    scenario: Scenario


@dataclass(frozen=True, slots=True)
class CliSpec:
    """One CLI: how to build its adapter and call it, and what the contract expects of it.

    The tool names are the CLI's own, as it offers them to the model (``ModelServer`` records them).
    """

    platform: str  # the adapter's name, and the test id
    adapter_class: type[CliAdapter]
    build: Callable[[Setup], CliAdapter]
    model: str
    # Which model server API the CLI speaks; None for a fake CLI that never calls the model server.
    api: str | None
    install_hint_mentions: str
    timeout_s: float
    # The deadline of the call whose model never answers, and how long after it the call may return.
    hang_timeout_s: float
    hang_grace_s: float = 10.0
    max_turns: int | None = None
    # The CLI's write tool wants an absolute path (the scripted model then sends one).
    absolute_write_path: bool = False
    # The write run's figures: (tokens_in, tokens_cached, tokens_out), the cost, the turns.
    tokens: tuple[int | None, int | None, int | None] = (240, 0, 60)
    cost_usd: float | None = None
    # The CLI prices the call itself (with its own, unpublished prices): the cost is asserted positive.
    prices_itself: bool = False
    # The model the write run reports it ran on starts with this (the CLI's own name for it, where its
    # output names one: Claude Code resolves its aliases).
    reported_model: str = ""
    num_turns: int | None = None
    session_prefix: str = ""
    transcript_marker: str = '"type":"result"'
    # A read-only role whose model calls a write tool anyway: the tool calls reported (Gemini and Cursor
    # count the call they refused; the others never let it reach a tool).
    read_only_tool_calls: int = 0
    # The same with no capabilities at all.
    no_tools_tool_calls: int = 0
    # The exit code of a CLI whose model answered an HTTP 400.
    error_exit_code: int = 1
    # What the model is offered follows the call's capabilities (else a sandbox or a mode enforces them).
    offer_follows_capabilities: bool = True
    writer_offer: frozenset[str] = frozenset()  # offered to a role that may write
    reader_offer: frozenset[str] = frozenset()  # offered to a read-only role
    reader_offer_within: frozenset[str] = frozenset()  # all a read-only role may be offered
    writing_tools: frozenset[str] = frozenset()  # never offered to a read-only role
    never_offered: frozenset[str] = frozenset()  # offered to none of these roles (web, sub-agents, skills)
    # The CLI also sends requests that offer no tools (a session title): left out of the offer checks.
    side_requests_without_tools: bool = False

    @property
    def needs_npm(self) -> bool:
        return self.api is not None


@dataclass(frozen=True, slots=True)
class Run:
    """One scenario played by one CLI, as it came out."""

    spec: CliSpec
    case: Case
    setup: Setup
    invocation: AgentInvocation
    result: AgentResult
    requests: tuple[RecordedRequest, ...]
    last_pid: int | None
    # Members of the CLI's process group still alive after the call returned (and up to 3 s more).
    survivors: tuple[int, ...]

    @property
    def written(self) -> Path:
        return self.setup.workdir / WRITTEN_FILE

    def offered(self) -> list[frozenset[str]]:
        """The tool names offered by each request the CLI sent to the model (in its API)."""
        return [frozenset(request.tool_names) for request in self.requests if request.api == self.spec.api]

    def offered_with_tools(self) -> list[frozenset[str]]:
        """``offered``, without the side requests that offer nothing when the CLI sends such requests."""
        offered = self.offered()
        return [names for names in offered if names] if self.spec.side_requests_without_tools else offered


@dataclass(frozen=True, slots=True)
class Health:
    """A CLI's health check with its paid probe: the verdict, its line, and what the model server saw."""

    healthy: bool
    line: str
    requests: tuple[RecordedRequest, ...]


# ``await run_of(spec, case)`` (a fixture of ``tests/e2e/adapters/conftest.py``): that CLI's run of that case.
# ``await health_of(spec, case)``: that CLI's health check against that model.
RunOf = Callable[[CliSpec, Case], Awaitable[Run]]
HealthCase = Literal["write", "auth_failed"]
HealthOf = Callable[[CliSpec, HealthCase], Awaitable["Health"]]


def _scenario_for(spec: CliSpec, case: Case, workdir: Path) -> Scenario:
    """What the scripted model answers in ``case``: a write where the case has the model try one."""
    path = str(workdir / WRITTEN_FILE) if spec.absolute_write_path else WRITTEN_FILE
    if case == "write":
        content = f"hello from {spec.platform}\n"
        return Scenario(text="Wrote hello.txt.", write_path=path, write_content=content)
    if case == "read_only":
        return Scenario(text="Looked around.", write_path=path, write_content="should not exist\n")
    if case == "no_tools":
        return Scenario(text="Judged.", write_path=path, write_content="no\n")
    if case == "api_error":
        return Scenario(error_status=400, error_message="scripted bad request 7f3a")
    if case == "hang":
        return Scenario(hang=True)
    if case in REFUSAL_CASES:
        return Scenario(refusal=case)
    return Scenario(text="Read it.")


_PROMPTS: dict[Case, tuple[str, tuple[ToolName, ...]]] = {
    "write": ("Create hello.txt.", WRITE_TOOLS),
    "read_only": ("Review the code.", READ_TOOLS),
    "no_tools": ("Pick the better plan.", ()),
    "api_error": ("Do something.", WRITE_TOOLS),
    "hang": ("Do something.", WRITE_TOOLS),
    "big_prompt": (f"Summarise:\n{BIG_START}{BIG_PAYLOAD}{BIG_END}\n", ()),
    "rate_limited": ("Do something.", WRITE_TOOLS),
    "unavailable": ("Do something.", WRITE_TOOLS),
    "auth_failed": ("Do something.", WRITE_TOOLS),
    "usage_limit": ("Do something.", WRITE_TOOLS),
    "context_overflow": ("Do something.", WRITE_TOOLS),
}


def invocation(
    spec: CliSpec,
    workdir: Path,
    prompt: str,
    tools: tuple[ToolName, ...],
    *,
    timeout_s: float | None = None,
) -> AgentInvocation:
    """A developer call of ``spec``'s CLI in ``workdir``."""
    return AgentInvocation(
        role="developer",
        prompt=prompt,
        cwd=workdir,
        model=spec.model,
        tools=tools,
        max_turns=spec.max_turns,
        timeout_s=timeout_s or spec.timeout_s,
        task_id="1.1",
    )


def _case_invocation(spec: CliSpec, case: Case, workdir: Path) -> AgentInvocation:
    prompt, tools = _PROMPTS[case]
    return invocation(spec, workdir, prompt, tools, timeout_s=spec.hang_timeout_s if case == "hang" else None)


@dataclass(slots=True)
class ContractRuns:
    """Each (CLI, case) played once, on first request; a run that raised raises again for every test."""

    root: Path
    _runs: dict[tuple[str, Case], Run | Exception] = field(default_factory=dict)
    _health: dict[tuple[str, str], Health] = field(default_factory=dict)

    async def get(self, spec: CliSpec, case: Case, clis: Mapping[str, Path]) -> Run:
        key = (spec.platform, case)
        if key not in self._runs:
            try:
                self._runs[key] = await self._play(spec, case, clis)
            except Exception as exc:
                self._runs[key] = exc
        run = self._runs[key]
        if isinstance(run, Exception):
            raise RuntimeError(f"the {case!r} run of {spec.platform} failed") from run
        return run

    async def health(self, spec: CliSpec, case: HealthCase, clis: Mapping[str, Path]) -> Health:
        """``spec``'s health check with its paid probe, against a model that answers (``write``) or that
        refuses the key (``auth_failed``); played once per CLI and case, like the runs."""
        key = (spec.platform, case)
        if key not in self._health:
            home, workdir, repo = self._directories(f"{spec.platform}-health-{case}")
            scenario = _scenario_for(spec, case, workdir)
            with ModelServer([scenario]) as server:
                adapter = spec.build(Setup(clis, server, home, workdir, repo, case, scenario))
                healthy, line = await adapter.healthcheck(probe=True, model=spec.model)
                self._health[key] = Health(healthy, line, tuple(server.requests))
        return self._health[key]

    def _directories(self, name: str) -> tuple[Path, Path, Path]:
        """A fresh home, working directory and repository for one run."""
        base = self.root / name
        home, workdir, repo = base / "home", base / "work", base / "repo"
        for directory in (home, workdir, repo):
            directory.mkdir(parents=True)
        return home, workdir, repo

    async def _play(self, spec: CliSpec, case: Case, clis: Mapping[str, Path]) -> Run:
        home, workdir, repo = self._directories(f"{spec.platform}-{case}")
        scenario = _scenario_for(spec, case, workdir)
        with ModelServer([scenario]) as server:
            setup = Setup(clis, server, home, workdir, repo, case, scenario)
            adapter = spec.build(setup)
            if case == "write":
                await adapter.init_workspace(workdir, [])
            call = _case_invocation(spec, case, workdir)
            result = await adapter.execute(call)
            left = await survivors(adapter.last_pid) if adapter.last_pid is not None else []
            requests = tuple(server.requests)
        return Run(spec, case, setup, call, result, requests, adapter.last_pid, tuple(left))


# --- the CLIs ---------------------------------------------------------------------------------------------


def claude_env(server_url: str, *, api_key: str = "test-key") -> dict[str, str]:
    """What points Claude Code at the model server, with its telemetry and updates off."""
    return {
        "ANTHROPIC_BASE_URL": server_url,
        "ANTHROPIC_API_KEY": api_key,
        "DISABLE_TELEMETRY": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }


def _claude_code(setup: Setup) -> CliAdapter:
    env = isolated_env(setup.home, setup.workdir, **claude_env(setup.server.url))
    if setup.case in REFUSAL_CASES:
        # Claude Code retries 429s and 5xx up to ten times over minutes; it reports the same at the end.
        env["CLAUDE_CODE_MAX_RETRIES"] = "0"
    return ClaudeCodeAdapter(
        repo_root=setup.repo, config=AutodevConfig(), executable=str(setup.clis["claude"]), env=env
    )


CODEX_MODEL = "gpt-5.5"
CODEX_PRICE = ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5)


def _codex(setup: Setup) -> CliAdapter:
    codex_home = setup.home / ".codex"
    codex_home.mkdir()
    env = isolated_env(setup.home, setup.workdir, CODEX_HOME=str(codex_home), MOCK_API_KEY="test-key")
    # Codex retries a refused request and a dropped stream on its own; the refusal it reports at the end is
    # the same, sooner.
    retries = ",request_max_retries=0,stream_max_retries=0" if setup.case in REFUSAL_CASES else ""
    provider = (
        f'{{name="mock",base_url="{setup.server.url}/v1",wire_api="responses",'
        f'env_key="MOCK_API_KEY"{retries}}}'
    )
    return CodexAdapter(
        repo_root=setup.repo,
        config=AutodevConfig(price_table={CODEX_MODEL: CODEX_PRICE}),
        executable=str(setup.clis["codex"]),
        env=env,
        extra_config=["model_provider=mock", f"model_providers.mock={provider}"],
    )


GEMINI_MODEL = "gemini-2.5-flash"
GEMINI_PRICES = {GEMINI_MODEL: ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0)}


def gemini_adapter(
    setup: Setup, *, relaunch: bool = False, config: AutodevConfig | None = None
) -> GeminiAdapter:
    """Gemini CLI with an API key pointed at the model server, folder trust off.

    Without ``relaunch`` the CLI runs in one process (``GEMINI_CLI_NO_RELAUNCH``); with it, it re-executes
    itself as a child node process, as it does for users.
    """
    settings = setup.home / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    values: dict[str, object] = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}}
    }
    if setup.case in REFUSAL_CASES:
        # Gemini CLI retries a 429 or a 5xx up to ten times, 5 to 30 s apart; it reports the same at the end.
        values["general"] = {"maxAttempts": 1}
    settings.write_text(json.dumps(values))
    extra = {"GEMINI_API_KEY": "test-key", "GOOGLE_GEMINI_BASE_URL": setup.server.url}
    if not relaunch:
        extra["GEMINI_CLI_NO_RELAUNCH"] = "1"
    env = isolated_env(setup.home, setup.workdir, **extra)
    return GeminiAdapter(
        repo_root=setup.repo, config=config or AutodevConfig(), executable=str(setup.clis["gemini"]), env=env
    )


def _gemini(setup: Setup) -> CliAdapter:
    # The hang runs the relaunching CLI: two node processes the deadline must take down.
    priced = AutodevConfig(price_table=GEMINI_PRICES) if setup.case == "write" else None
    return gemini_adapter(setup, relaunch=setup.case == "hang", config=priced)


OPENCODE_MODEL = "mock/mock-model"
OPENCODE_PRICES = {"mock-model": ModelPrice(input_per_mtok=1.0, output_per_mtok=2.0)}


def opencode_user_config(server: ModelServer, *, permissive: bool) -> dict[str, object]:
    """The user's own OpenCode config: the mock provider, and (``permissive``) everything allowed."""
    config: dict[str, object] = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "mock": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Mock",
                "options": {"baseURL": f"{server.url}/v1", "apiKey": "test-key"},
                "models": {"mock-model": {"name": "Mock", "tool_call": True}},
            }
        },
        "autoupdate": False,
        "share": "disabled",
    }
    if permissive:
        # A user who allows everything, globally and for the default agent: AutoDev's restrictions must hold.
        config["permission"] = {"*": "allow", "edit": "allow", "bash": "allow"}
        config["agent"] = {"build": {"permission": {"edit": "allow", "bash": "allow"}}}
    return config


def opencode_env(home: Path, workdir: Path, config_file: Path) -> dict[str, str]:
    """An isolated environment for OpenCode with the user config ``config_file`` and nothing fetched."""
    return isolated_env(
        home,
        workdir,
        OPENCODE_CONFIG=str(config_file),
        OPENCODE_DISABLE_MODELS_FETCH="1",
        OPENCODE_DISABLE_AUTOUPDATE="1",
        OPENCODE_DISABLE_SHARE="1",
        OPENCODE_DISABLE_LSP_DOWNLOAD="1",
        OPENCODE_DISABLE_DEFAULT_PLUGINS="1",
    )


def _opencode(setup: Setup) -> CliAdapter:
    # The roles that must not write run under a user config that allows everything; only the write run has
    # a price table (OpenCode's own cost, 0 for a model it has no price for, shows through elsewhere).
    permissive = setup.case in ("read_only", "no_tools")
    config_file = setup.home / "opencode.json"
    config_file.write_text(json.dumps(opencode_user_config(setup.server, permissive=permissive)))
    env = opencode_env(setup.home, setup.workdir, config_file)
    config = AutodevConfig(price_table=OPENCODE_PRICES) if setup.case == "write" else AutodevConfig()
    return OpenCodeAdapter(
        repo_root=setup.repo, config=config, executable=str(setup.clis["opencode"]), env=env
    )


def cursor_log(setup: Setup) -> Path:
    """Where the fake ``cursor-agent`` of ``setup`` logs its calls (see ``fake_cursor.logged_calls``)."""
    return setup.home / "fake-cursor.log"


def _cursor(setup: Setup) -> CliAdapter:
    fake = install_fake_cursor(setup.home / "bin")
    return CursorAdapter(
        repo_root=setup.repo,
        config=AutodevConfig(),
        executable=str(fake),
        env=fake_cursor_env(cursor_log(setup), setup.scenario),
    )


CLAUDE_CODE = CliSpec(
    platform="claude_code",
    reported_model="claude-",
    adapter_class=ClaudeCodeAdapter,
    build=_claude_code,
    model="sonnet",
    api="anthropic",
    install_hint_mentions="@anthropic-ai/claude-code",
    timeout_s=30.0,
    hang_timeout_s=5.0,
    max_turns=4,
    absolute_write_path=True,
    prices_itself=True,
    num_turns=2,
    writer_offer=frozenset({"Read", "Grep", "Glob", "Write", "Edit", "NotebookEdit", "Bash"}),
    reader_offer=frozenset({"Read", "Grep", "Glob"}),
    # DeferredToolPlaceholder is Claude Code's own stand-in for tools loaded on demand; it does nothing.
    reader_offer_within=frozenset({"Read", "Grep", "Glob", "DeferredToolPlaceholder"}),
    writing_tools=frozenset({"Write", "Edit", "NotebookEdit", "Bash"}),
    never_offered=frozenset({"WebFetch", "WebSearch", "Task", "Agent"}),
)

CODEX = CliSpec(
    platform="codex",
    reported_model=CODEX_MODEL,
    adapter_class=CodexAdapter,
    build=_codex,
    model=CODEX_MODEL,
    api="responses",
    install_hint_mentions="@openai/codex",
    timeout_s=30.0,
    hang_timeout_s=5.0,
    cost_usd=(240 * 2.0 + 60 * 8.0) / 1_000_000,
    num_turns=1,
    transcript_marker='"type":"turn.completed"',
    # Codex offers its own tools whatever the capabilities; its sandbox refuses what they do not allow.
    offer_follows_capabilities=False,
    writer_offer=frozenset({"apply_patch", "exec_command"}),
)

OPENCODE = CliSpec(
    platform="opencode",
    reported_model=OPENCODE_MODEL,
    adapter_class=OpenCodeAdapter,
    build=_opencode,
    model=OPENCODE_MODEL,
    api="chat",
    install_hint_mentions="opencode-ai",
    timeout_s=60.0,
    hang_timeout_s=6.0,
    max_turns=6,
    # OpenCode reports cost 0 for a model it has no price for; the price table fills it in.
    cost_usd=(240 * 1.0 + 60 * 2.0) / 1_000_000,
    num_turns=2,
    session_prefix="ses_",
    transcript_marker='"type":"step_finish"',
    writer_offer=frozenset({"write", "edit", "bash", "read", "glob", "grep"}),
    reader_offer=frozenset({"read", "glob", "grep"}),
    reader_offer_within=frozenset({"read", "glob", "grep"}),
    writing_tools=frozenset({"write", "edit", "bash"}),
    never_offered=frozenset({"task", "webfetch"}),
    side_requests_without_tools=True,
)

GEMINI = CliSpec(
    platform="gemini",
    reported_model=GEMINI_MODEL,
    adapter_class=GeminiAdapter,
    build=_gemini,
    model=GEMINI_MODEL,
    api="gemini",
    install_hint_mentions="@google/gemini-cli",
    timeout_s=60.0,
    hang_timeout_s=8.0,
    cost_usd=(240 * 1.0 + 60 * 2.0) / 1_000_000,
    # Gemini refuses the write_file call of a read-only role (it was never offered), and counts it.
    read_only_tool_calls=1,
    # Gemini exits with the HTTP status; the OS keeps its low 8 bits (400 -> 144).
    error_exit_code=400 % 256,
    writer_offer=frozenset({"write_file", "replace", "run_shell_command", "read_file"}),
    reader_offer=frozenset({"read_file", "grep_search", "glob"}),
    reader_offer_within=frozenset({"read_file", "read_many_files", "list_directory", "grep_search", "glob"}),
    writing_tools=frozenset({"write_file", "replace", "run_shell_command"}),
    never_offered=frozenset({"web_fetch", "google_web_search", "invoke_agent", "activate_skill"}),
)

CURSOR = CliSpec(
    platform="cursor",
    reported_model="Claude 4 Sonnet",
    adapter_class=CursorAdapter,
    build=_cursor,
    model="sonnet-4",
    api=None,
    install_hint_mentions="cursor.com/install",
    timeout_s=30.0,
    hang_timeout_s=2.0,
    hang_grace_s=8.0,
    # The stream reports no tokens, no cost and no turns.
    tokens=(None, None, None),
    # The fake writes its events with ``json.dumps`` (a space after each colon).
    transcript_marker='"type": "result"',
    # Roles that may not write run in ask mode, which still offers the write tool and refuses the call
    # (Cursor has no switch that offers no tools at all).
    read_only_tool_calls=1,
    no_tools_tool_calls=1,
    offer_follows_capabilities=False,
)

CLI_SPECS: tuple[CliSpec, ...] = (CLAUDE_CODE, CODEX, OPENCODE, GEMINI, CURSOR)
# The CLIs that talk to the model server, which records the tools they offer.
SERVED_SPECS: tuple[CliSpec, ...] = tuple(spec for spec in CLI_SPECS if spec.api is not None)
# Those whose offer follows the call's capabilities.
OFFERING_SPECS: tuple[CliSpec, ...] = tuple(spec for spec in SERVED_SPECS if spec.offer_follows_capabilities)
