"""The configuration model: every setting AutoDev reads, its default and meaning.

``AutodevConfig`` is the root. Every model forbids unknown keys, so a typo in a config file is an
error rather than a setting that silently does nothing. The ``description`` of each field is what
``autodev init`` writes above the setting in ``.autodev/config.toml``; ``examples`` supplies the
sample value shown for settings that are unset by default.

No text setting may hold a control character other than a tab (a NUL byte in a gate command would only
show up later, as every task blocked): the fields listed in a model's ``_multiline`` (argv items, such as
the program of ``python -c``) may also hold newlines.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from autodev.errors import quote
from autodev.files import DEFAULT_MAX_ANSWER_BYTES
from autodev.state.schemas import EFFORTS, Effort

__all__ = [
    "AGENT_CLIS",
    "CAPABILITY_TIERS",
    "PLATFORMS",
    "ROLE_NAMES",
    "AgentCLI",
    "AutodevConfig",
    "CapabilityTier",
    "EnvironmentSettings",
    "GateSettings",
    "GuardrailSettings",
    "InlineSettings",
    "ModelPrice",
    "Platform",
    "PolicySettings",
    "ProviderSettings",
    "QAGatesSettings",
    "RayExecutorSettings",
    "RoleName",
    "RoleSettings",
    "RouterMode",
    "RouterSettings",
    "TierModels",
    "TournamentSettings",
    "TournamentsSettings",
    "WorktreeSetupSettings",
]

Platform = Literal["auto", "claude_code", "codex", "cursor", "opencode", "gemini", "inline", "scripted"]
AgentCLI = Literal["claude_code", "codex", "cursor", "opencode", "gemini"]
CapabilityTier = Literal["fast", "standard", "strong"]
UnknownCostPolicy = Literal["refuse", "warn", "estimate"]
CrossFamilyPolicy = Literal["off", "warn", "require_approval"]
RouterMode = Literal["off", "shadow", "autonomous"]
RoleName = Literal[
    "explorer",
    "domain_expert",
    "architect",
    "developer",
    "reviewer",
    "test_engineer",
    "critic_sounding_board",
    "critic_t",
    "architect_b",
    "synthesizer",
    "judge",
]

PLATFORMS: tuple[Platform, ...] = get_args(Platform)
AGENT_CLIS: tuple[AgentCLI, ...] = get_args(AgentCLI)
CAPABILITY_TIERS: tuple[CapabilityTier, ...] = get_args(CapabilityTier)
ROLE_NAMES: tuple[RoleName, ...] = get_args(RoleName)


def _require_text(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or blank")
    return value


NonBlankStr = Annotated[str, AfterValidator(_require_text)]


def _inside_repository(value: str) -> str:
    path = PurePosixPath(value.replace("\\", "/"))
    if path.is_absolute() or re.match(r"[A-Za-z]:", value) or ".." in path.parts:
        raise ValueError(
            "must be a path relative to the repository root, inside it (no leading '/', no '..')"
        )
    return _require_text(value)


# A file of the repository, named relative to its root.
RepoPath = Annotated[str, AfterValidator(_inside_repository)]

# C0 controls, DEL and C1 controls; the first allows a tab, the second a tab and a newline.
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_CONTROL_MULTILINE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _control_problem(value: Any, pattern: re.Pattern[str]) -> str | None:
    """What is wrong with the first control character in ``value`` (a str, or a list or dict of them)."""
    if isinstance(value, str):
        found = pattern.search(value)
        if found is None:
            return None
        char = found.group()
        escaped = repr(char)[1:-1]
        name = (
            f"a NUL byte ({escaped})"
            if char == "\x00"
            else f"the control character {escaped} (U+{ord(char):04X})"
        )
        return f"contains {name}; remove it"
    if isinstance(value, list | tuple):
        for index, item in enumerate(value, start=1):
            problem = _control_problem(item, pattern)
            if problem is not None:
                return f"item {index} {problem}"
    if isinstance(value, dict):
        for key, item in value.items():
            problem = _control_problem(key, pattern)
            if problem is not None:
                return f"key {quote(key)} {problem}"
            problem = _control_problem(item, pattern)
            if problem is not None:
                return f"the value of {quote(key)} {problem}"
    return None


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    _multiline: ClassVar[frozenset[str]] = frozenset()

    @field_validator("*")
    @classmethod
    def _no_control_characters(cls, value: Any, info: ValidationInfo) -> Any:
        pattern = _CONTROL_MULTILINE if info.field_name in cls._multiline else _CONTROL
        problem = _control_problem(value, pattern)
        if problem is not None:
            raise ValueError(problem)
        return value


class TournamentSettings(_Settings):
    """One tournament (plan or implementation): rounds of critique, rewrite, synthesis, judging."""

    enabled: bool = Field(
        default=True,
        description="Run this tournament. Each round adds at least one critic_t, one "
        "architect_b, one synthesizer and num_judges judge calls.",
    )
    num_judges: int = Field(default=3, ge=1, description="Judges that vote in each round.")
    convergence_k: int = Field(
        default=2,
        ge=1,
        description="Decided rounds in a row the incumbent must keep its place for the tournament to "
        "stop as converged; a challenger that wins becomes the incumbent and starts the count again, an "
        "inconclusive round neither counts nor resets it. As many inconclusive rounds in a row also end "
        "it, keeping the incumbent.",
    )
    max_rounds: int = Field(
        default=5, ge=1, description="Upper bound on rounds, whether or not the vote converged."
    )
    min_margin: int = Field(
        default=0,
        ge=0,
        description="Borda points by which the best challenger must lead the incumbent to replace it; "
        "a smaller lead keeps the incumbent (and counts toward its streak). 0 or 1: any lead replaces "
        "it; a tie always keeps the incumbent.",
    )
    quorum: int | None = Field(
        default=None,
        ge=1,
        description="Judge votes a round needs to be decided; unset means a simple majority of "
        "num_judges. Must not exceed num_judges.",
        examples=[2],
    )
    model: str | None = Field(
        default=None,
        description="Model for the tournament roles (critic_t, architect_b, synthesizer, judge): "
        "a capability tier (fast, standard, strong) or a model name; unset keeps each role's own "
        "model.",
        examples=["standard"],
    )

    @field_validator("model")
    @classmethod
    def _model_not_blank(cls, value: str | None) -> str | None:
        return None if value is None else _require_text(value)

    @model_validator(mode="after")
    def _quorum_within_judges(self) -> TournamentSettings:
        if self.quorum is not None and self.quorum > self.num_judges:
            raise ValueError(
                f"quorum ({self.quorum}) cannot exceed num_judges ({self.num_judges}); lower "
                "quorum or add judges"
            )
        return self

    @property
    def effective_quorum(self) -> int:
        """``quorum`` when set, else a simple majority of ``num_judges``."""
        return self.quorum if self.quorum is not None else self.num_judges // 2 + 1


class TournamentsSettings(_Settings):
    """Plan and implementation tournaments, and the parallelism knobs of the execute phase."""

    max_parallel_subprocesses: int = Field(
        default=3,
        ge=1,
        description="Agent subprocesses a tournament runs at once (judges vote in parallel).",
    )
    auto_disable_for_models: list[NonBlankStr] = Field(
        default_factory=lambda: ["opus"],
        description="Tournaments are skipped when the model in use contains one of these "
        "substrings, so expensive models are not multiplied by a tournament.",
    )
    execute_max_parallel_tasks: int | None = Field(
        default=None,
        ge=1,
        description="Tasks the execute phase runs at once; unset derives it from the machine's resources.",
        examples=[4],
    )
    seed: int = Field(
        default=0,
        description="Seed for the tournament's random choices (such as the order candidates are "
        "shown to judges), so a rerun makes the same choices.",
    )
    plan: TournamentSettings = Field(
        default_factory=lambda: TournamentSettings(enabled=False),
        description="Plan tournament: competing rewrites of the architect's plan, judged in rounds "
        "(opt in: each round costs several agent calls).",
    )
    impl: TournamentSettings = Field(
        default_factory=lambda: TournamentSettings(enabled=False),
        description="Implementation tournament: competing implementations of a completed task, "
        "judged in rounds.",
    )


class ModelPrice(_Settings):
    """What one model costs, in US dollars per million tokens."""

    input_per_mtok: float = Field(ge=0, description="Dollars per million input tokens.", examples=[3.0])
    output_per_mtok: float = Field(ge=0, description="Dollars per million output tokens.", examples=[15.0])
    cached_input_per_mtok: float = Field(
        default=0.0,
        ge=0,
        description="Dollars per million input tokens served from the provider's cache.",
        examples=[0.3],
    )
    cache_write_per_mtok: float | None = Field(
        default=None,
        ge=0,
        description="Dollars per million input tokens written to the provider's cache; unset means the "
        "input price.",
        examples=[3.75],
    )

    def dollars(
        self, *, tokens_in: int, tokens_out: int, tokens_cached: int = 0, tokens_cache_write: int = 0
    ) -> float:
        """What the tokens cost; ``tokens_in`` includes the cached reads and the cache writes."""
        cached = min(tokens_cached, tokens_in)
        written = min(tokens_cache_write, tokens_in - cached)
        write_price = self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        return (
            (tokens_in - cached - written) * self.input_per_mtok
            + cached * self.cached_input_per_mtok
            + written * write_price
            + tokens_out * self.output_per_mtok
        ) / 1_000_000


class CompletionSettings(_Settings):
    """The completion contract: the checks AutoDev itself runs before a task is complete."""

    allowed_programs: list[str] = Field(
        default_factory=lambda: ["pytest", "python", "python3", "ruff", "mypy", "npm", "cargo", "go", "make"],
        description="Programs an acceptance criterion's command may run (a criterion that is a command in "
        "backticks, alone or followed by 'passes', such as `pytest tests/test_cli.py` passes). Anything "
        "else, or a command with shell syntax (; | & $ < > backquotes), is refused and the check recorded "
        "blocked.",
    )
    check_timeout_s: float = Field(default=600.0, gt=0, description="Deadline of one command check.")
    verify_timeout_s: float = Field(
        default=2700.0,
        gt=0,
        description="Deadline of a task's whole completion contract: past it, the checks not finished are "
        "recorded blocked and the attempt fails as timed out.",
    )
    cross_family: CrossFamilyPolicy = Field(
        default="warn",
        description="Whether the reviewer, who settles a contract's semantic checks, must run on another "
        "agent CLI family than the developer's. warn: another family when one can be had "
        "(completion.verify_platform, the read-only platform, or with platform = auto the first other "
        "agent CLI on PATH), else the developer's, and the contract records that check waived; "
        "require_approval: without one the check is blocked until you waive it for that revision "
        "(autodev waive TASK verifier:family); off: no such check and no rerouting.",
    )
    verify_platform: AgentCLI | None = Field(
        default=None,
        description="The agent CLI the reviewer runs on while cross_family is warn or require_approval. "
        "Unset: the read-only platform when it is another family than the developer's, else with "
        "platform = auto the first other agent CLI on PATH that can start read-only.",
    )


class GuardrailSettings(_Settings):
    """Limits that stop a runaway agent or plan."""

    max_tool_calls_per_task: int = Field(
        default=60, ge=1, description="Tool calls one task may make before it is stopped."
    )
    max_duration_s_per_task: float = Field(
        default=900.0,
        gt=0,
        description="Seconds one task may run before it is stopped (900 is 15 minutes).",
    )
    max_diff_bytes: int = Field(
        default=5_242_880,
        ge=1,
        description="Largest change in bytes a task may have: the bytes its files add (binary ones "
        "included) and the size of its diff; a bigger change fails the attempt (5 MiB).",
    )
    max_file_bytes: int = Field(
        default=2_097_152,
        ge=1,
        description="Most bytes a task's change may add to any one file; a bigger file fails the attempt "
        "before it is staged or committed (2 MiB).",
    )
    cost_budget_usd_per_plan: float | None = Field(
        default=None,
        gt=0,
        description="US dollars all agent calls of one plan may cost before the run stops; unset "
        "means no cost cap.",
        examples=[5.0],
    )
    unknown_cost: UnknownCostPolicy = Field(
        default="refuse",
        description="What the cost budget does with a call whose cost nobody knows (the CLI reported "
        "none and price_table has no price for its model): refuse (stop the run resumably until the "
        "model is priced), warn (count it as unknown and go on), or estimate (price its tokens at "
        "unknown_model_price).",
        examples=["warn"],
    )
    unknown_model_price: ModelPrice = Field(
        default_factory=lambda: ModelPrice(
            input_per_mtok=15.0, output_per_mtok=75.0, cached_input_per_mtok=1.5, cache_write_per_mtok=18.75
        ),
        description="The price unknown_cost = estimate gives the tokens of a model price_table does not "
        "list; the default is a top-tier model's, so that an estimate errs high.",
    )
    loop_detection_threshold: int = Field(
        default=3,
        ge=2,
        description=(
            "Times in a row the same role may return the same output for a task before the task is blocked "
            "as a loop."
        ),
    )


class GateSettings(_Settings):
    """One QA gate: whether it runs, which command it runs, and for how long."""

    _multiline = frozenset({"command"})

    enabled: bool = Field(default=True, description="Run this gate on every task's change.")
    command: list[NonBlankStr] | None = Field(
        default=None,
        description="Command to run instead of the detected tool, as an argv list (program, then "
        "arguments); it is never passed to a shell. Unset uses the tool detected for the "
        "repository's language.",
        examples=[["pytest", "-q"]],
    )
    timeout_s: float = Field(
        default=300.0, gt=0, description="Seconds the gate may run before it counts as failed."
    )

    @field_validator("command", mode="before")
    @classmethod
    def _command_is_argv(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError('must be an argv list such as ["ruff", "check", "."], not a shell string')
        if isinstance(value, list) and not value:
            raise ValueError('must name a program, e.g. ["pytest", "-q"]; an empty list runs nothing')
        return value


class QAGatesSettings(_Settings):
    """The automatic checks a task's change must pass before review."""

    on_missing_tool: Literal["error", "skip"] = Field(
        default="error",
        description='What a gate does when its tool is not installed: "error" fails the gate, '
        '"skip" records it as skipped. A gate that could not run never counts as passed.',
    )
    syntax: GateSettings = Field(
        default_factory=GateSettings, description="Syntax gate: every changed file must parse."
    )
    lint: GateSettings = Field(
        default_factory=GateSettings, description="Lint gate: the linter must report no errors."
    )
    build: GateSettings = Field(
        default_factory=GateSettings, description="Build gate: the project must build."
    )
    test: GateSettings = Field(
        default_factory=GateSettings, description="Test gate: the test suite must pass."
    )
    secretscan: GateSettings = Field(
        default_factory=GateSettings,
        description="Secret-scan gate: the change must not add credentials or keys.",
    )


class EnvironmentSettings(_Settings):
    """The project's own environment: the Python that runs its tests and import checks."""

    python: NonBlankStr | None = Field(
        default=None,
        description="Interpreter that runs the project's Python code (tests, syntax and import "
        'checks): a path, a command on PATH, or "autodev" for AutoDev\'s own interpreter (with '
        "pytest's plugin autoloading off). Unset finds it: the repository's .venv or venv, the "
        "VIRTUAL_ENV or CONDA_PREFIX of the shell that started AutoDev, a uv, Poetry, PDM or Hatch "
        "project's environment, a python3 on PATH, and AutoDev's own interpreter only when there "
        "is nothing else.",
        examples=[".venv/bin/python"],
    )
    resolve_timeout_s: float = Field(
        default=180.0,
        gt=0,
        description="Seconds a project tool (uv, poetry, pdm, hatch) may take to name its "
        "environment's interpreter; the first `uv run` of a project may create the environment.",
    )


class RayExecutorSettings(_Settings):
    """Where ``executor = "ray"`` runs each task's flow, and what one task asks of a node."""

    address: str = Field(
        default="local",
        description="The Ray cluster: local (a cluster of this machine, started for the run), auto (the "
        "cluster this machine belongs to, as `ray start` left it), or ray://host:port (Ray Client).",
    )
    num_cpus: float = Field(default=1.0, ge=0, description="CPUs one task's flow reserves on its node.")
    memory_mb: int | None = Field(
        default=None, ge=1, description="Memory one task's flow reserves on its node, in MiB; unset: none."
    )
    resources: dict[str, float] = Field(
        default_factory=dict,
        examples=[{"claude": 1}],
        description='Custom resources one task reserves, such as {"claude" = 1}: a node started with '
        "`ray start --resources '{\"claude\": 4}'` then runs at most four tasks at once.",
    )
    max_retries: int = Field(
        default=3,
        ge=0,
        description="Times Ray runs a task's flow again after its worker process or node died; the ledger "
        "decides where the flow continues.",
    )
    clone_cache_dir: str | None = Field(
        default=None,
        description="A directory on each node where the tasks' clones keep the repository's objects, so "
        "a node fetches only the commits it lacks, and where the clones themselves live while their task "
        "runs (scratch/); unset: autodev-clone-cache in the node's temp directory.",
    )


class WorktreeSetupSettings(_Settings):
    """How a new git worktree is made into a working copy the project's tests accept."""

    _multiline = frozenset({"command"})

    copy_ignored: list[NonBlankStr] = Field(
        default_factory=list,
        description="Git-ignored files the project needs (generated version files, compiled "
        "translations, build outputs), as paths or glob patterns relative to the repository root "
        "(`**` matches any depth); each is copied from the main checkout into every task worktree.",
        examples=[["src/pkg/_version.py", "src/pkg/locale/**/*.mo"]],
    )
    command: list[NonBlankStr] | None = Field(
        default=None,
        description="Command run once in each new worktree, from its root, as an argv list (never a "
        "shell string), after the copies: e.g. a build step that generates what the tests import.",
        examples=[["make", "build"]],
    )
    timeout_s: float = Field(default=600.0, gt=0, description="Seconds the setup command may run.")

    @field_validator("command", mode="before")
    @classmethod
    def _command_is_argv(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError('must be an argv list such as ["make", "build"], not a shell string')
        if isinstance(value, list) and not value:
            raise ValueError('must name a program, e.g. ["make", "build"]; an empty list runs nothing')
        return value

    @property
    def configured(self) -> bool:
        return bool(self.copy_ignored) or self.command is not None


class InlineSettings(_Settings):
    """The inline platform: answers a person or a host agent writes to files."""

    max_answer_bytes: int = Field(
        default=DEFAULT_MAX_ANSWER_BYTES,
        ge=1,
        description="Largest answer file, in bytes, the inline platform reads (4 MiB); a bigger one is "
        "refused and left in place to be shortened.",
    )


class ProviderSettings(_Settings):
    """How the run answers refusals by the provider behind the agent CLI (none of them costs an attempt)."""

    retry_attempts: int = Field(
        default=4,
        ge=0,
        description="Times one call is asked again after a rate limit (429) or an unavailable provider "
        "(5xx, overloaded), waiting longer each time; when they are used up the run pauses resumably.",
    )
    retry_base_delay_s: float = Field(
        default=2.0,
        gt=0,
        description="Seconds before the first retry; each retry waits twice as long, with jitter.",
    )
    retry_max_delay_s: float = Field(
        default=60.0,
        gt=0,
        description="Longest wait before one retry; a reset time the CLI names further off pauses the run "
        "instead.",
    )
    breaker_failures: int = Field(
        default=3,
        ge=1,
        description="Refusals (rate limits and unavailable providers) across all tasks within "
        "breaker_window_s that pause the whole run instead of being retried.",
    )
    breaker_window_s: float = Field(
        default=60.0, gt=0, description="The window, in seconds, over which breaker_failures counts."
    )
    wait_without_reset_s: float = Field(
        default=300.0,
        gt=0,
        description="With --wait: seconds to wait before continuing after a pause whose provider named no "
        "reset time (an outage, the circuit breaker, a limit without a time).",
    )
    max_waits: int = Field(
        default=24,
        ge=1,
        description="With --wait: pauses one command waits out before it stops and exits 3 after all.",
    )


class RoleSettings(_Settings):
    """Overrides for one agent role; unset fields keep the role's built-in defaults."""

    model: str | None = Field(
        default=None,
        description="Capability tier (fast, standard, strong), mapped through model_tiers, or a "
        "model name passed to the agent CLI as is.",
        examples=["strong"],
    )
    max_turns: int | None = Field(
        default=None, ge=1, description="Agent turns the role may take per call.", examples=[40]
    )
    tier_offset: int = Field(
        default=0,
        ge=-2,
        le=2,
        description="Tiers above (positive) or below (negative) the task's Model this role of a task "
        "runs on, kept within fast..strong (e.g. 1 for a reviewer one level above the developer); a "
        "model set for the role wins over both.",
        examples=[1],
    )

    @field_validator("model")
    @classmethod
    def _model_not_blank(cls, value: str | None) -> str | None:
        return None if value is None else _require_text(value)


class TierModels(_Settings):
    """The model names one agent CLI uses for each capability tier; unset lets the CLI choose."""

    fast: str | None = Field(
        default=None, description="Model for quick, cheap work.", examples=["model-name"]
    )
    standard: str | None = Field(
        default=None, description="Model for everyday work.", examples=["model-name"]
    )
    strong: str | None = Field(
        default=None, description="Model for the hardest work.", examples=["model-name"]
    )

    @field_validator("fast", "standard", "strong")
    @classmethod
    def _name_not_blank(cls, value: str | None) -> str | None:
        return None if value is None else _require_text(value)

    def for_tier(self, tier: CapabilityTier) -> str | None:
        """The model name configured for ``tier``."""
        return {"fast": self.fast, "standard": self.standard, "strong": self.strong}[tier]


def _default_model_tiers() -> dict[AgentCLI, TierModels]:
    # Only names verified against each CLI are defaults; cursor and opencode have no name that works
    # without the user's own provider setup, so they keep the CLI's default model.
    return {
        "claude_code": TierModels(fast="haiku", standard="sonnet", strong="opus"),
        "codex": TierModels(fast="gpt-5.5", standard="gpt-5.5", strong="gpt-5.5"),
        "cursor": TierModels(),
        "opencode": TierModels(),
        "gemini": TierModels(fast="gemini-2.5-flash", standard="gemini-2.5-flash", strong="gemini-2.5-pro"),
    }


_LANE_NAME = re.compile(r"[a-z][a-z0-9-]*")


class LaneSettings(_Settings):
    """One lane of work: the task efforts it takes, how it picks among them, and where it looks when it
    has nothing to pick."""

    efforts: list[Effort] = Field(
        min_length=1,
        description="The task efforts this lane implements (<1h, 1h, 5h, 1d, 1w), none above slice_above.",
        examples=[["<1h"]],
    )
    order: Literal["unblock", "priority"] = Field(
        default="unblock",
        description="Pick policy: unblock (tasks others wait on first) or priority (effective priority "
        "first).",
    )
    fallback: str | None = Field(
        default=None,
        description="Another lane to pick from when this one has nothing pickable (no cycles).",
    )
    slices: bool = Field(
        default=False,
        description="This lane also takes slice jobs (tasks bigger than slice_above); exactly one lane "
        "does (default: the lane holding <1h).",
    )
    concurrency: int = Field(
        default=1,
        ge=1,
        description="Tasks of this lane in flight at once when lanes_enabled (within "
        "tournaments.execute_max_parallel_tasks for the whole run).",
    )


def check_lanes(lanes: dict[str, LaneSettings], slice_above: Effort) -> None:
    """Raise ``ValueError`` naming what to fix when ``lanes`` break a lane rule (``AutodevConfig``); a
    configuration that names no lane taking slice jobs gives that job to the lane holding ``<1h``."""
    if not lanes:
        raise ValueError("lanes: define at least one lane, or leave the table out for the default set")
    limit = EFFORTS.index(slice_above)
    owner: dict[str, str] = {}
    for name, lane in lanes.items():
        if not _LANE_NAME.fullmatch(name) or name == "all":
            raise ValueError(
                f"lanes.{name}: a lane name is a lower-case letter, then letters, digits or '-' ('all' is "
                "reserved)"
            )
        for effort in lane.efforts:
            if EFFORTS.index(effort) > limit:
                raise ValueError(
                    f"lanes.{name}: effort {effort} is above slice_above ({slice_above}); tasks that big are "
                    "slice jobs, or raise slice_above"
                )
            if effort in owner:
                raise ValueError(
                    f"lanes.{name}: effort {effort} is already lane {owner[effort]}'s; lanes' efforts "
                    "are disjoint"
                )
            owner[effort] = name
        if lane.fallback is not None and lane.fallback not in lanes:
            raise ValueError(
                f"lanes.{name}: fallback {lane.fallback!r} is not a lane; known: {', '.join(lanes)}"
            )
    missing = [effort for effort in EFFORTS[: limit + 1] if effort not in owner]
    if missing:
        raise ValueError(
            f"lanes: no lane takes effort {', '.join(missing)}; add it to a lane's efforts (every effort up "
            f"to slice_above = {slice_above} needs one)"
        )
    for name in lanes:
        seen = [name]
        current = lanes[name].fallback
        while current is not None:
            if current in seen:
                raise ValueError(f"lanes: the fallbacks {' -> '.join([*seen, current])} go round in a cycle")
            seen.append(current)
            current = lanes[current].fallback
    slicing = [name for name, lane in lanes.items() if lane.slices]
    if len(slicing) > 1:
        raise ValueError(
            f"lanes: only one lane may take slice jobs (slices = true), not {', '.join(slicing)}"
        )
    if not slicing:
        lanes[owner["<1h"]].slices = True


def _default_lanes() -> dict[str, LaneSettings]:
    return {
        "fast": LaneSettings(efforts=["<1h"], order="unblock", slices=True),
        "slow": LaneSettings(efforts=["1h"], order="priority", fallback="fast"),
    }


class PolicySettings(_Settings):
    """The delegation policy's limits for one run: write workers under way and the capability units they
    hold (a worker holds its tier's units from its start until its task finishes)."""

    max_workers: int = Field(default=3, ge=1, description="Write workers (tasks) under way at once.")
    max_strong_workers: int = Field(
        default=1, ge=0, description="Of those, how many may work at the strong tier at once."
    )
    capability_units: int = Field(
        default=24, ge=1, description="Capability units the workers under way may hold together."
    )
    fast_units: int = Field(default=1, ge=0, description="Capability units a fast-tier worker holds.")
    standard_units: int = Field(default=2, ge=0, description="Capability units a standard-tier worker holds.")
    strong_units: int = Field(default=4, ge=0, description="Capability units a strong-tier worker holds.")
    automatic_retries: int = Field(
        default=1,
        ge=0,
        description="Tasks per run that, having used up qa_retry_limit, get one more attempt at the next "
        "higher tier (never above strong) before they are blocked.",
    )
    queue_ttl_s: float | None = Field(
        default=None,
        gt=0,
        description="How long a task's writer may wait in the policy's queue (for a worker, a strong slot, "
        "capability units or a lease) before its task is blocked (queue_expired); time spent held for an "
        "approval does not count. Unset: it waits as long as the run.",
    )
    worker_approval_timeout_s: float = Field(
        default=1800.0,
        gt=0,
        description="With --wait, how long a run that has nothing left but tasks waiting for your approval "
        "waits for the answer (autodev approve --scope / decline, from another terminal) before those tasks "
        "are blocked naming the unanswered request.",
    )

    def units(self, tier: CapabilityTier) -> int:
        """The capability units one worker of ``tier`` holds."""
        return {"fast": self.fast_units, "standard": self.standard_units, "strong": self.strong_units}[tier]


class RouterSettings(_Settings):
    """The learning router: for every agent call, the platforms and tiers it could run on, what each would
    likely yield and cost (tier priors moved by this repository's recorded outcomes), and the one it
    recommends. Shadow records the recommendation and runs what AutoDev runs today."""

    mode: RouterMode = Field(
        default="shadow",
        description="shadow (record a recommendation with every agent call, run the usual route), off "
        "(record none), or autonomous (run the recommendation, still through the delegation policy); "
        "autonomous is refused until this repository has 20 completed shadow outcomes with under 5% manual "
        "selections (`autodev router status`).",
    )
    prior_weight: float = Field(
        default=4.0,
        gt=0,
        description="Pseudo-observations the tier priors count for in a prediction: with n recorded "
        "outcomes of a family on a platform and tier, the prior weighs k/(k+n).",
    )
    history_entries: int = Field(
        default=20_000,
        ge=0,
        description="How many of the newest ledger entries a run reads, once at its first agent call, for "
        "the outcomes its predictions learn from (0: the priors alone).",
    )


class AutodevConfig(_Settings):
    """Every setting of one AutoDev run, as ``autodev.config.load_config`` builds it."""

    platform: Platform = Field(
        default="auto",
        description="Agent platform to drive: claude_code, codex, cursor, opencode or gemini "
        "(agent CLIs); inline (write delegation files for a person or a host agent, then suspend); "
        "scripted (deterministic answers, for tests); auto (the first agent CLI found on PATH, "
        "else inline).",
    )
    read_only_platform: Platform | None = Field(
        default=None,
        description="Agent platform for the roles that only read (explorer, domain expert, architect, "
        "reviewer, critic, judges). Unset: the same as platform, or, when that one cannot start read-only "
        "(OpenCode has no read-only sandbox) and platform is auto, the first agent CLI on PATH that can; "
        "auto: always that first CLI.",
    )
    sibling_results: int = Field(
        default=16,
        ge=0,
        le=64,
        description="How many of the run's most recently accepted task results (AutoDev's records: commit, "
        "files, verdict) every role of a later task is given; 0 gives none. autodev execute --evidence "
        "picks records by id instead.",
    )
    qa_retry_limit: int = Field(
        default=3,
        ge=1,
        description="Attempts a task gets (developer, QA gates, review, tests) before it is "
        "escalated and blocked.",
    )
    auto_commit: bool = Field(
        default=True, description="Commit each task's change to git as soon as the task completes."
    )
    require_plan_approval: bool = Field(
        default=False, description="Stop after planning until the plan is approved."
    )
    lock_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Seconds to wait for another AutoDev process to release the .autodev lock.",
    )
    write_mode: Literal["shared", "isolated"] = Field(
        default="shared",
        description="Where a task's writers work when one task runs at a time. shared: in your checkout, "
        "committed there; isolated: in a worktree of their own like parallel tasks, the verified change "
        "then fast-forwarded onto your branch, so your checkout never holds a half-done task (a change "
        "that cannot land waits for `autodev adopt`). Several tasks at once always work isolated. Needs "
        "auto_commit.",
    )
    worktree_pool_enabled: bool = Field(
        default=True,
        description="Recycle the parallel execute phase's git worktrees between tasks (reset to each "
        "task's base) instead of checking out a fresh one per task. The pool holds one worktree more than "
        "the tasks at once: a landing that makes a task ready resets it to the new commit meanwhile.",
    )
    worktree_split_index_min_files: int = Field(
        default=10_000,
        ge=0,
        description="Give AutoDev's worktrees of a repository with at least this many files in its index a "
        "split git index (core.splitIndex), so that staging and resets write what changed instead of the "
        "whole index (25-30 ms a write at 50,000 files). Tools built on libgit2 (cargo fix, some editors "
        "and prompts) cannot read a split index; your own checkout's index is never split. 0: never.",
    )
    change_tracking_enabled: bool = Field(
        default=True,
        description="Follow the working copies' changes with the kernel's file notifications (Linux "
        "inotify), so git is asked about the changed paths only instead of scanning every file; off (or "
        "on a file system other machines write to) every check scans the whole tree.",
    )
    cross_phase_parallelism_enabled: bool = Field(
        default=False,
        description="Let tasks of the next phase start while the current phase is finishing, when "
        "their dependencies are done and their files do not overlap.",
    )
    speculative_execution_enabled: bool = Field(
        default=False,
        description="Start one child task per phase before its parent finishes; it is rolled back "
        "and requeued if the parent's first attempt fails. Needs parallel, isolated tasks "
        "(execute parallelism above 1 and auto_commit).",
    )
    phase_review_enabled: bool = Field(
        default=False,
        description="When every task of a phase has finished, have the reviewer read the phase's "
        "whole change (one agent call per phase). The phase's commit range is recorded either way.",
    )
    agent_stall_timeout_s: float | None = Field(
        default=600.0,
        gt=0,
        description="Seconds an agent CLI may print nothing while it runs before it is killed "
        "(cli_start_failed before its first output, timeout after); keep it above the longest tool run "
        "(a test suite) an agent waits on silently. Unset for no limit but the task's duration.",
    )
    max_concurrent_agents: int = Field(
        default=8,
        ge=1,
        description="Agent calls running at once across all tasks (rate limits, machine load); also "
        "caps the execute parallelism derived from the machine's resources.",
    )
    skipped_dependency_satisfies: bool = Field(
        default=True,
        description="Whether a task whose dependency was skipped (`autodev skip`) may still run; "
        "false blocks the tasks that depend on a skipped task.",
    )
    environment: EnvironmentSettings = Field(
        default_factory=EnvironmentSettings,
        description="The project's environment, where its tests and import checks run.",
    )
    worktree_setup: WorktreeSetupSettings = Field(
        default_factory=WorktreeSetupSettings,
        description="What every new task worktree gets before a task works in it.",
    )
    executor: Literal["local", "ray"] = Field(
        default="local",
        description="Where each task's flow runs: local (this process, in worktrees of this checkout) or "
        "ray (Ray tasks on a cluster's nodes, each in a clone of its base commit; this machine keeps the "
        "ledger and lands every change). Ray comes with `pip install 'autodev[ray]'`.",
    )
    ray: RayExecutorSettings = Field(
        default_factory=RayExecutorSettings, description="The Ray cluster of executor = ray."
    )
    tournaments: TournamentsSettings = Field(
        default_factory=TournamentsSettings,
        description="Tournaments and execute-phase parallelism.",
    )
    guardrails: GuardrailSettings = Field(
        default_factory=GuardrailSettings, description="Per-task and per-plan limits."
    )
    inline: InlineSettings = Field(
        default_factory=InlineSettings,
        description="The inline platform, which hands each agent call to whoever answers its file.",
    )
    qa_gates: QAGatesSettings = Field(
        default_factory=QAGatesSettings,
        description="QA gates: the checks a change must pass before review.",
    )
    provider: ProviderSettings = Field(
        default_factory=ProviderSettings,
        description="Retries, back-off and the circuit breaker for refusals by the agent's provider.",
    )
    roles: dict[RoleName, RoleSettings] = Field(
        default_factory=dict,
        description="Per-role overrides, one table per role: explorer, domain_expert, architect, "
        "developer, reviewer, test_engineer, critic_sounding_board, critic_t, architect_b, "
        "synthesizer, judge. Roles not listed keep their built-in model and turn limit.",
        examples=["developer"],
    )
    model_tiers: dict[AgentCLI, TierModels] = Field(
        default_factory=_default_model_tiers,
        description="Model names behind the capability tiers, one table per agent CLI "
        "(claude_code, codex, cursor, opencode, gemini).",
    )
    lanes_enabled: bool = Field(
        default=False,
        description="Start the execute phase's tasks by lanes: each lane's pick order and concurrency "
        "(lanes.<name>), instead of the longest chain of dependents first.",
    )
    slice_above: Effort = Field(
        default="1h",
        description="A task whose effort is above this is a slice job: it is split into tasks of at most "
        "this effort before it is implemented.",
    )
    lanes: dict[str, LaneSettings] = Field(
        default_factory=_default_lanes,
        description="Lanes of work by task effort, each with its pick policy (fast: <1h, unblock first, "
        "takes slice jobs; slow: 1h, priority first, falling back to fast). Defining any lane replaces "
        "this default set.",
    )
    areas: RepoPath | None = Field(
        default=None,
        description="The notes file whose '## Areas' section holds the area maps (code map, test recipe, "
        "paths, checked commit), relative to the repository; unset: AGENTS.md, else CLAUDE.md.",
        examples=["docs/AREAS.md"],
    )
    base_behind_threshold: int = Field(
        default=20,
        ge=0,
        description="A run whose checkout is this many commits behind its base (the branch's upstream, else "
        "origin/HEAD, origin/main, or a local main) stops before any agent works and asks: `autodev "
        "refresh-base`, or --stale-base-ok to build on it as it is. 0: never.",
    )
    base_fetch_timeout_s: float = Field(
        default=15.0,
        gt=0,
        description="How long `autodev run` waits for the fetch of its base ref before it compares with the "
        "ref it has (and says it could not fetch it). --no-fetch skips the fetch.",
    )
    area_stale_commits: int = Field(
        default=20,
        ge=1,
        description="An area map is stale once this many commits touched its paths since its Checked commit "
        "(or when one of its anchors is no longer in the code).",
    )
    peek_max_entries: int = Field(
        default=20,
        ge=1,
        le=500,
        description="Most recent tool calls and messages `autodev peek` shows per agent call.",
    )
    completion: CompletionSettings = Field(
        default_factory=CompletionSettings,
        description="The completion contract's command checks: allowed programs and deadlines.",
    )
    policy: PolicySettings = Field(
        default_factory=PolicySettings,
        description="The delegation policy's per-run limits on write workers and capability units.",
    )
    router: RouterSettings = Field(
        default_factory=RouterSettings,
        description="The learning router: shadow recommendations per agent call, or autonomous routing.",
    )
    price_table: dict[NonBlankStr, ModelPrice] = Field(
        default_factory=dict,
        description="Prices per model name, used to compute the cost of agent CLIs that report "
        "token counts but no cost.",
        examples=["my-model"],
    )

    @model_validator(mode="after")
    def _lanes_cover_the_efforts(self) -> AutodevConfig:
        """The lane rules: valid names, efforts within ``slice_above``, disjoint and covering every effort up
        to it, a fallback that names another lane without a cycle, and exactly one lane for slice jobs."""
        check_lanes(self.lanes, self.slice_above)
        return self

    def lane_of(self, effort: Effort | None, *, slice_job: bool = False) -> str:
        """The lane that takes a task of ``effort`` (no effort: the lane holding ``<1h``); a slice job's
        lane is the one that takes slice jobs."""
        if slice_job:
            return next(name for name, lane in self.lanes.items() if lane.slices)
        wanted = effort or "<1h"
        return next(name for name, lane in self.lanes.items() if wanted in lane.efforts)

    def price_for(self, model: str | None) -> ModelPrice | None:
        """``price_table``'s price for ``model``: by its full name, else by the name after its provider
        (``provider/model``, as OpenCode names models); None when the table does not list it."""
        if model is None:
            return None
        price = self.price_table.get(model)
        if price is None and "/" in model:
            price = self.price_table.get(model.rpartition("/")[2])
        return price

    def resolve_model(self, platform: Platform, requested: str | None) -> str | None:
        """The model name to hand to ``platform`` for ``requested``.

        A capability tier (``fast``, ``standard``, ``strong``) is looked up in ``model_tiers``; a
        platform without a tier table (inline, scripted, auto) or an unset tier gives ``None``,
        which means "let the platform use its default model". Any other name is returned unchanged.
        """
        tier = next((tier for tier in CAPABILITY_TIERS if tier == requested), None)
        if tier is None:
            return requested
        tiers = next((t for name, t in self.model_tiers.items() if name == platform), None)
        return None if tiers is None else tiers.for_tier(tier)
