"""The learning router: for one agent call, every route it could take, what each would likely yield, and
the one to recommend.

``route(inputs, ...)`` is a pure function of a ``RouteInputs`` snapshot, the run's settings and the
repository's outcome ``History``; it reads no clock, no file and no process. Its ``RouteRecord`` goes into
the call's ``delegation_decided`` entry, so ``autodev router replay`` can re-recommend every call offline.

- **Candidates**: every platform the run can call (its own, its read-only platform, its verifier) at every
  capability tier, with the model the tier resolves to there.
- **Exclusions**, each with a reason code ``<category>:<detail>`` and only from facts AutoDev has:
  ``availability`` (the platform's CLI is missing; in replay, a platform the run did not have),
  ``permissions`` (its sandbox cannot start the mode the role needs), ``quota`` (the live run's provider
  guard is refusing that platform), ``budget`` (the policy's capability-unit and strong-worker limits),
  ``risk`` (a retry never goes down a tier; the roles whose platform a completion contract names stay on
  it; a verifier never runs on the developer's family). Tools and context windows are not claimed: AutoDev
  has no facts about them.
- **Predictions**, conservative: a tier prior (``TIER_PRIORS``) counted as ``k`` pseudo-observations,
  moved by the ``n`` recorded outcomes of the call's family (role and area) on that platform and tier; the
  prior's weight ``k/(k+n)`` is part of the prediction. Cost is normalized: the tier's capability units
  (``[policy]``) per expected pass, since AutoDev has no price list of its own.
- **Recommendation**: among the candidates not excluded, those predicted to pass at least as often as the
  baseline (the route AutoDev runs today; a preference's quality floor instead, when it names one), the
  cheapest, then the likelier to pass, the faster, the baseline; when none is that good, the likeliest to
  pass. A preference's pin wins when its candidate is not excluded; pins and exclusions never revive a
  candidate excluded for availability, permissions, quota, budget or risk.

Failed outcomes only lower predictions: nothing here changes what the delegation policy allows.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from autodev.adapters.sandbox import SandboxDescriptor, SandboxMode, needed_mode
from autodev.config.schema import CAPABILITY_TIERS, CapabilityTier, PolicySettings, RouterMode
from autodev.policy.decisions import ActiveWorker

__all__ = [
    "AUTONOMY_MANUAL_SHARE",
    "AUTONOMY_OUTCOMES",
    "ROUTER_VERSION",
    "TIER_PRIORS",
    "Candidate",
    "History",
    "OutcomeStats",
    "PinKind",
    "Platform",
    "Preferences",
    "RouteInputs",
    "RouteRecord",
    "TierPrior",
    "predict",
    "recommend",
    "route",
]

# Bumped whenever ``RouteRecord`` changes meaning; replay lists records of another version as invalid.
ROUTER_VERSION = 1

# Autonomous routing needs this many completed shadow outcomes, of which fewer than this share manual.
AUTONOMY_OUTCOMES = 20
AUTONOMY_MANUAL_SHARE = 0.05

PinKind = Literal["task_model", "role_model", "platform"]
Tier = CapabilityTier


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TierPrior(_Frozen):
    """What a tier is assumed to do before this repository has shown anything: deliberately modest."""

    pass_p: float
    retry_p: float
    latency_s: float


TIER_PRIORS: Mapping[Tier, TierPrior] = {
    "fast": TierPrior(pass_p=0.6, retry_p=0.4, latency_s=60.0),
    "standard": TierPrior(pass_p=0.75, retry_p=0.25, latency_s=120.0),
    "strong": TierPrior(pass_p=0.85, retry_p=0.15, latency_s=240.0),
}


class OutcomeStats(_Frozen):
    """The recorded outcomes of one family on one platform and tier: attempts that ended, how many passed
    and how many were retried, and the calls' seconds where the ledger has them."""

    n: int = 0
    passed: int = 0
    retried: int = 0
    latency_total_s: float = 0.0
    latency_n: int = 0


# (family, platform, tier) -> what was recorded there.
History = Mapping[tuple[str, str, str], OutcomeStats]


class Candidate(_Frozen):
    """One route of the call, with its exclusion (None: eligible) and its prediction."""

    platform: str
    tier: Tier
    model: str | None = None
    excluded: str | None = None
    pass_p: float
    retry_p: float
    latency_s: float
    cost: float = Field(description="Capability units per expected pass.")
    n: int = Field(description="Recorded outcomes the prediction learned from.")
    prior_w: float = Field(description="The prior's weight in the prediction, k/(k+n).")

    @property
    def key(self) -> str:
        return f"{self.platform}/{self.tier}"


class RouteRecord(_Frozen):
    """What the router recorded for one call (``route`` in its ``delegation_decided`` entry): candidates by
    index, the baseline (today's route), the recommendation (None: no candidate left), the route the call was
    given, what a person pinned, and which of those pins kept the call off the recommendation (``manual``)."""

    version: int = ROUTER_VERSION
    mode: RouterMode
    k: float
    candidates: tuple[Candidate, ...]
    baseline: int
    recommended: int | None
    executed: int
    # The model the baseline runs on when a person named a model rather than a tier (roles.<role>.model).
    baseline_model: str | None = None
    pinned: tuple[PinKind, ...] = ()
    manual: tuple[PinKind, ...] = ()

    def candidate(self, index: int | None) -> Candidate | None:
        return None if index is None else self.candidates[index]


class Platform(_Frozen):
    """A platform the run can call, as far as routing needs it."""

    name: str
    modes: tuple[SandboxMode, ...]
    cli_present: bool = True
    refusing: bool = False
    models: tuple[str | None, str | None, str | None] = (None, None, None)


class RouteInputs(_Frozen):
    """Everything one routing decision looks at (recorded in the route's own terms by its result)."""

    family: str
    role: str
    writes: bool
    platforms: tuple[Platform, ...]
    baseline_platform: str
    baseline_tier: Tier
    baseline_model: str | None = None
    pinned: tuple[PinKind, ...] = ()
    # A later attempt of a task that failed: no candidate below the baseline's tier.
    retry: bool = False
    # The roles whose platform a completion contract names (implementer, verifier) stay on theirs.
    platform_bound: bool = False
    # A verifying role never runs on the developer's family while the run has another.
    avoid_platform: str | None = None
    holds_grant: bool = False
    task_id: str = ""
    active_workers: tuple[ActiveWorker, ...] = ()


def _share(value: float) -> float:
    return round(value, 3)


def predict(
    tier: Tier, stats: OutcomeStats | None, units: int, k: float
) -> tuple[float, float, float, float, int, float]:
    """``(pass_p, retry_p, latency_s, cost, n, prior_w)`` for ``tier`` given what was recorded: the prior
    counts as ``k`` observations, so ``n`` outcomes weigh ``n/(k+n)``."""
    prior = TIER_PRIORS[tier]
    found = stats or OutcomeStats()
    n = found.n
    pass_p = (k * prior.pass_p + found.passed) / (k + n)
    retry_p = (k * prior.retry_p + found.retried) / (k + n)
    latency = (k * prior.latency_s + found.latency_total_s) / (k + found.latency_n)
    cost = units / pass_p if pass_p > 0 else float(units)
    return _share(pass_p), _share(retry_p), round(latency, 1), _share(cost), n, _share(k / (k + n))


def _exclusion(inputs: RouteInputs, platform: Platform, tier: Tier, policy: PolicySettings) -> str | None:
    needed = needed_mode(inputs.writes)
    if not platform.cli_present:
        return "availability:cli_missing"
    if not SandboxDescriptor(frozenset(platform.modes), "", "").can_start(needed):
        return f"permissions:{needed}"
    if platform.refusing:
        return "quota:provider_refusing"
    if inputs.writes:
        budget = _budget(inputs, tier, policy)
        if budget is not None:
            return budget
    rank = CAPABILITY_TIERS.index
    if inputs.retry and rank(tier) < rank(inputs.baseline_tier):
        return "risk:tier_downgrade"
    if inputs.platform_bound and platform.name != inputs.baseline_platform:
        return "risk:platform_bound"
    if inputs.avoid_platform is not None and platform.name == inputs.avoid_platform:
        return "risk:same_family"
    return None


def _budget(inputs: RouteInputs, tier: Tier, policy: PolicySettings) -> str | None:
    """Whether a writer at ``tier`` is outside the policy's limits: one that could never fit, or (a new
    worker) one that does not fit beside the workers under way."""
    units = policy.units(tier)
    if units > policy.capability_units:
        return "budget:capability_units"
    if tier == "strong" and policy.max_strong_workers == 0:
        return "budget:strong_workers"
    if inputs.holds_grant:
        return None
    others = [worker for worker in inputs.active_workers if worker.task_id != inputs.task_id]
    if tier == "strong" and sum(worker.tier == "strong" for worker in others) >= policy.max_strong_workers:
        return "budget:strong_workers"
    if sum(policy.units(worker.tier) for worker in others) + units > policy.capability_units:
        return "budget:capability_units"
    return None


def route(
    inputs: RouteInputs,
    *,
    mode: RouterMode,
    policy: PolicySettings,
    history: History,
    k: float,
) -> RouteRecord:
    """The route record of one call: candidates, exclusions, predictions, baseline, recommendation, and
    the route it is given (the baseline in shadow mode; autonomous: the recommendation, with what a
    person pinned kept)."""
    candidates: list[Candidate] = []
    for platform in inputs.platforms:
        for index, tier in enumerate(CAPABILITY_TIERS):
            stats = history.get((inputs.family, platform.name, tier))
            pass_p, retry_p, latency, cost, n, prior_w = predict(tier, stats, policy.units(tier), k)
            candidates.append(
                Candidate(
                    platform=platform.name,
                    tier=tier,
                    model=platform.models[index],
                    excluded=_exclusion(inputs, platform, tier, policy),
                    pass_p=pass_p,
                    retry_p=retry_p,
                    latency_s=latency,
                    cost=cost,
                    n=n,
                    prior_w=prior_w,
                )
            )
    keys = [candidate.key for candidate in candidates]
    baseline = keys.index(f"{inputs.baseline_platform}/{inputs.baseline_tier}")
    recommended, _ = recommend(candidates, baseline, inputs.family)
    executed = baseline
    if mode == "autonomous" and recommended is not None:
        executed = _autonomous(candidates, baseline, recommended, inputs.pinned)
    manual: tuple[PinKind, ...] = ()
    if recommended is not None and executed != recommended:
        manual = _held_by_pins(candidates[executed], candidates[recommended], inputs.pinned)
    return RouteRecord(
        mode=mode,
        k=k,
        candidates=tuple(candidates),
        baseline=baseline,
        recommended=recommended,
        executed=executed,
        baseline_model=inputs.baseline_model,
        pinned=inputs.pinned,
        manual=manual,
    )


def _autonomous(
    candidates: Sequence[Candidate], baseline: int, recommended: int, pinned: Sequence[PinKind]
) -> int:
    """The recommendation, with the dimensions a person pinned kept at the baseline's; the baseline when
    that mix is excluded."""
    chosen = candidates[recommended]
    platform = candidates[baseline].platform if "platform" in pinned else chosen.platform
    tier_pinned = "task_model" in pinned or "role_model" in pinned
    tier = candidates[baseline].tier if tier_pinned else chosen.tier
    for index, candidate in enumerate(candidates):
        if (candidate.platform, candidate.tier) == (platform, tier):
            return index if candidate.excluded is None else baseline
    return baseline


def _held_by_pins(
    executed: Candidate, recommended: Candidate, pinned: Sequence[PinKind]
) -> tuple[PinKind, ...]:
    """The pins that kept ``executed`` off ``recommended``: a manual selection."""
    held: list[PinKind] = []
    if "platform" in pinned and executed.platform != recommended.platform:
        held.append("platform")
    tier_pins: tuple[PinKind, ...] = ("task_model", "role_model")
    held.extend(kind for kind in tier_pins if kind in pinned and executed.tier != recommended.tier)
    return tuple(held)


# --- preferences (``autodev router replay --preferences``) ----------------------------------------------


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    family: str = Field(default="*", description="Task families it applies to (role:area, * wildcards).")

    def applies(self, family: str) -> bool:
        return fnmatch.fnmatchcase(family, self.family)


class Pin(_Rule):
    """Recommend this platform (and tier) for the family, unless that candidate is excluded."""

    platform: str
    tier: Tier | None = None


class Exclusion(_Rule):
    """Never recommend this platform (any tier, or this tier) for the family."""

    platform: str | None = None
    tier: Tier | None = None

    def matches(self, candidate: Candidate) -> bool:
        return (self.platform is None or self.platform == candidate.platform) and (
            self.tier is None or self.tier == candidate.tier
        )


class QualityFloor(_Rule):
    """Recommend only candidates predicted to pass at least this often (instead of the baseline's rate)."""

    min_pass: float = Field(ge=0, le=1)


class Preferences(BaseModel):
    """A replay's what-if: pins, exclusions and quality floors per family (first matching rule wins)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pins: tuple[Pin, ...] = ()
    exclude: tuple[Exclusion, ...] = ()
    floors: tuple[QualityFloor, ...] = ()


def recommend(
    candidates: Sequence[Candidate],
    baseline: int,
    family: str,
    preferences: Preferences | None = None,
) -> tuple[int | None, str | None]:
    """The index of the recommended candidate (None: none left) and, when a pin could not be followed,
    why (the exclusion that holds, or ``availability:not_in_run`` for a route the call never had)."""
    prefs = preferences or Preferences()
    refused: str | None = None

    def eligible(candidate: Candidate) -> bool:
        return candidate.excluded is None and not any(
            rule.applies(family) and rule.matches(candidate) for rule in prefs.exclude
        )

    for pin in prefs.pins:
        if not pin.applies(family):
            continue
        matching = [
            index
            for index, candidate in enumerate(candidates)
            if candidate.platform == pin.platform and (pin.tier is None or candidate.tier == pin.tier)
        ]
        if not matching:
            refused = "availability:not_in_run"
            break
        usable = [index for index in matching if eligible(candidates[index])]
        if usable:
            return min(usable, key=lambda index: _order(candidates, index, baseline)), None
        refused = candidates[matching[0]].excluded or "preference:excluded"
        break
    pool = [index for index, candidate in enumerate(candidates) if eligible(candidate)]
    if not pool:
        return None, refused
    floor_rule = next((rule for rule in prefs.floors if rule.applies(family)), None)
    floor = floor_rule.min_pass if floor_rule is not None else candidates[baseline].pass_p
    good = [index for index in pool if candidates[index].pass_p >= floor]
    if good:
        return min(good, key=lambda index: _order(candidates, index, baseline)), refused
    if floor_rule is not None:
        return None, refused
    best = max(candidates[index].pass_p for index in pool)
    likeliest = [index for index in pool if candidates[index].pass_p == best]
    return min(likeliest, key=lambda index: _order(candidates, index, baseline)), refused


def _order(
    candidates: Sequence[Candidate], index: int, baseline: int
) -> tuple[float, float, float, bool, int]:
    candidate = candidates[index]
    return (candidate.cost, -candidate.pass_p, candidate.latency_s, index != baseline, index)
