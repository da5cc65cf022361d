"""``RunRouter``: the learning router of a run (``autodev.policy.router``), asked with every decision.

For each agent call ``RunPolicy`` asks for a route record, which goes into the call's
``delegation_decided`` entry (no ledger op of its own). The facts come from the run: the platforms it
can call and the models each tier resolves to there, whether each platform's CLI is present (looked up
once), whether the live run's provider guard is refusing it (never from an earlier session: a limit
reached then says nothing about now), the budgets and workers of the decision's own inputs, and what a
person pinned (a task's Model, a role's model, the platform). Predictions learn from the outcomes the
ledger already holds, read once, at the run's first routed call, from its newest
``router.history_entries`` entries.

``router.mode = autonomous`` runs the recommendation, through the delegation policy as every call; it is
refused before a run starts (``check_autonomy``) until this repository has enough completed shadow
outcomes with few manual selections. ``router_replay`` and ``router_status`` read the ledger read-only,
without its lock.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

from pydantic import ValidationError

from autodev.adapters.base import PlatformAdapter
from autodev.adapters.sandbox import SandboxMode
from autodev.agents.spec import AgentSpec, shifted_tier
from autodev.config import AutodevConfig, load_config
from autodev.config.schema import CAPABILITY_TIERS, CapabilityTier, RoleName
from autodev.errors import ConfigError
from autodev.files import MAX_INPUT_FILE_BYTES, led_by, read_bounded_text
from autodev.orchestrator.harnesses import VERIFYING_ROLES, platform_of
from autodev.policy.decisions import PolicyInputs
from autodev.policy.replay import LoggedDecision
from autodev.policy.router import (
    History,
    OutcomeStats,
    PinKind,
    Platform,
    Preferences,
    RouteInputs,
    RouteRecord,
    route,
)
from autodev.policy.router_replay import (
    ROUTER_OPS,
    Autonomy,
    RoutedCall,
    RouterReport,
    autonomy,
    derive,
    report,
)
from autodev.state.ledger import Ledger, LedgerEntry
from autodev.state.paths import AutodevPaths
from autodev.state.plan_manager import PlanManager
from autodev.state.schemas import Task

if TYPE_CHECKING:
    from autodev.orchestrator.delegation_policy import DelegationRequest

__all__ = [
    "PLATFORM_BOUND_ROLES",
    "RunRouter",
    "check_autonomy",
    "history_of",
    "load_preferences",
    "router_replay",
    "router_status",
]

PLATFORM_BOUND_ROLES = frozenset({"developer", "test_engineer", "critic_sounding_board"}) | VERIFYING_ROLES
"""The roles whose platform a task's evidence and completion contract name (the implementer's family, the
verifier's): the router keeps them on it."""


def history_of(calls: Sequence[RoutedCall]) -> History:
    """The outcomes of ``calls`` by family, platform and tier of the route each call was given."""
    stats: dict[tuple[str, str, str], OutcomeStats] = {}
    for call in calls:
        if not call.ran or call.outcome is None:
            continue
        given = call.record.candidates[call.record.executed]
        key = (call.family, given.platform, given.tier)
        found = stats.get(key, OutcomeStats())
        timed = call.call_s is not None
        stats[key] = OutcomeStats(
            n=found.n + 1,
            passed=found.passed + (call.outcome == "passed"),
            retried=found.retried + (call.outcome == "retried"),
            latency_total_s=found.latency_total_s + (call.call_s or 0.0),
            latency_n=found.latency_n + timed,
        )
    return stats


def _logged(entries: Iterator[LedgerEntry]) -> Iterator[LoggedDecision]:
    for entry in entries:
        if entry.op in ROUTER_OPS:
            yield LoggedDecision(seq=entry.seq, op=entry.op, payload=entry.payload)


class RunRouter:
    """The router of one run over its platforms (see the module docstring)."""

    def __init__(
        self,
        config: AutodevConfig,
        registry: Mapping[str, AgentSpec],
        plan_manager: PlanManager,
        harnesses: Sequence[PlatformAdapter],
        harness_for: Callable[[str], PlatformAdapter],
        *,
        refusing: Callable[[str], bool] = lambda platform: False,
        which: Callable[[str], str | None] = shutil.which,
    ) -> None:
        self.config = config
        self.settings = config.router
        self.registry = registry
        self.pm = plan_manager
        self._harness_for = harness_for
        self._refusing = refusing
        self._adapters = {adapter.name: adapter for adapter in harnesses}
        default = platform_of(harnesses[0], "scripted")
        # Per platform: its models by tier, its sandbox modes, whether its CLI is there (asked once).
        self._static: dict[
            str, tuple[tuple[str | None, str | None, str | None], tuple[SandboxMode, ...], bool]
        ] = {}
        for name, adapter in self._adapters.items():
            platform = platform_of(adapter, default)
            fast, standard, strong = (config.resolve_model(platform, tier) for tier in CAPABILITY_TIERS)
            executable = getattr(adapter, "executable", None)
            present = not isinstance(executable, str) or bool(executable and which(executable))
            self._static[name] = ((fast, standard, strong), tuple(sorted(adapter.sandbox.modes)), present)
        self._history: History | None = None

    def adapter(self, name: str) -> PlatformAdapter:
        """The run's adapter of platform ``name``."""
        return self._adapters[name]

    def history(self) -> History:
        """The recorded outcomes the predictions learn from, read once per run."""
        if self._history is None:
            limit = self.settings.history_entries
            ledger = self.pm.ledger
            after = max(0, ledger.head.seq - limit)
            calls = derive(_logged(ledger.entries(after_seq=after))).calls if limit else []
            self._history = history_of(calls)
        return self._history

    def route(self, request: DelegationRequest, inputs: PolicyInputs, task: Task | None) -> RouteRecord:
        """The route record of ``request``, whose policy inputs are ``inputs`` (``task``: its plan task)."""
        baseline = self._harness_for(request.role).name
        platforms = tuple(
            Platform(
                name=name, modes=modes, cli_present=present, refusing=self._refusing(name), models=models
            )
            for name, (models, modes, present) in self._static.items()
        )
        tier, model, pinned = self._baseline(request, task)
        return route(
            RouteInputs(
                family=inputs.family,
                role=request.role,
                writes=inputs.write_mode != "read_only",
                platforms=platforms,
                baseline_platform=baseline,
                baseline_tier=tier,
                baseline_model=model,
                pinned=pinned,
                retry=task is not None and request.retry_count > 0,
                platform_bound=request.role in PLATFORM_BOUND_ROLES,
                holds_grant=inputs.holds_grant,
                task_id=inputs.task_id,
                active_workers=inputs.active_workers,
            ),
            mode=self.settings.mode,
            policy=self.config.policy,
            history=self.history(),
            k=self.settings.prior_weight,
        )

    def _baseline(
        self, request: DelegationRequest, task: Task | None
    ) -> tuple[CapabilityTier, str | None, tuple[PinKind, ...]]:
        """The tier and (when a person named one) the model the call runs on today, and what was pinned."""
        spec = self.registry.get(request.role)
        override = self.config.roles.get(cast("RoleName", request.role))
        pinned: list[PinKind] = []
        tier: CapabilityTier = spec.model_tier if spec is not None else "standard"
        if task is not None:
            tier = shifted_tier(self.pm.task_tier(task.id), override.tier_offset if override else 0)
            # A Model line, or a level a person or the developer set since: the router does not lower it.
            if task.model is not None and task.automatic_retries == 0:
                pinned.append("task_model")
        named = request.model or (override.model if override is not None else None)
        model: str | None = None
        if named is not None:
            pinned.append("role_model")
            if named in CAPABILITY_TIERS:
                tier = next(level for level in CAPABILITY_TIERS if level == named)
            else:
                model = named
        if self._platform_pinned(request.role):
            pinned.append("platform")
        return tier, model, tuple(pinned)

    def _platform_pinned(self, role: str) -> bool:
        """Whether a person chose the platform ``role`` runs on."""
        config = self.config
        adapter = self._harness_for(role)
        if role in VERIFYING_ROLES and config.completion.verify_platform == adapter.name:
            return True
        if config.read_only_platform not in (None, "auto") and config.read_only_platform == adapter.name:
            return True
        return config.platform != "auto" and config.platform == adapter.name


# --- before a run starts, and offline -------------------------------------------------------------------


def _read_calls(repo_root: Path) -> list[LoggedDecision]:
    """The ledger's entries ``derive`` reads, opened read-only (no lock; none without a ledger)."""
    paths = AutodevPaths(repo_root)
    if not paths.ledger.exists():
        return []
    ledger = Ledger(paths.ledger, readonly=True)
    ledger.open(repair=False)
    try:
        return list(_logged(ledger.entries()))
    finally:
        ledger.close()


def router_status(repo_root: Path) -> Autonomy:
    """The counts the autonomous gate looks at (``autodev router status``)."""
    return autonomy(derive(_read_calls(repo_root)))


def check_autonomy(config: AutodevConfig, repo_root: Path) -> None:
    """``ConfigError`` (before anything is started or recorded) when ``router.mode = autonomous`` and this
    repository has not yet earned it."""
    if config.router.mode != "autonomous":
        return
    found = router_status(repo_root)
    if not found.allowed:
        raise ConfigError(
            f"router.mode = autonomous is not allowed yet: {found.summary()}; run with router.mode = shadow "
            "until it has (`autodev router status`)",
            key="router.mode",
        )


def load_preferences(path: Path) -> Preferences:
    """A preferences file (TOML when it ends in .toml, else JSON); ``ConfigError`` naming what is wrong."""
    text = read_bounded_text(
        path,
        limit=MAX_INPUT_FILE_BYTES,
        what="the preferences file",
        follow_symlinks=True,
        error=led_by(path, ConfigError),
    )
    try:
        data = tomllib.loads(text) if path.suffix.lower() == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as exc:
        raise ConfigError(
            f"{path}: not valid {'TOML' if path.suffix.lower() == '.toml' else 'JSON'}: {exc}"
        ) from exc
    try:
        return Preferences.model_validate(data)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "the file"
        raise ConfigError(
            f"{path}: {where}: {problem['msg']}; give pins, exclude and floors (docs/delegation-policy.md)"
        ) from exc


def router_replay(repo_root: Path, preferences: Path | None = None) -> RouterReport:
    """``autodev router replay``: the recorded routes, their outcomes, and the recommendations under
    ``preferences``. Starts nothing and writes nothing."""
    wanted = load_preferences(preferences) if preferences is not None else None
    settings = load_config(repo_root).policy
    return report(derive(_read_calls(repo_root)), settings, wanted)
