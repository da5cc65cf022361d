"""Offline replay of the decision log: every recorded decision re-decided from its own recorded inputs.

``replay`` starts no agent and writes nothing. It compares, decision by decision, what was decided then
with what ``decide`` says now under the current (or a candidate) ``PolicySettings``: exact matches,
route/reason transitions, route totals and the capability units the spawns would hold. Each decision is
re-decided alone, with the workers that were under way *then*: a structural regression and sensitivity
check of the rules, not a simulation of a different run, and no claim about quality or cost.

Agent calls recorded before the run logged any decision (a ledger older than the log) are counted as
``legacy_skipped``; a record whose snapshot cannot be read, or whose version this AutoDev does not know,
is listed as invalid and never counted as a match or a transition.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autodev.config.schema import PolicySettings
from autodev.policy.decisions import POLICY_VERSION, Decision, PolicyInputs, decide

__all__ = ["InvalidRecord", "LoggedDecision", "ReplayReport", "replay"]


class LoggedDecision(BaseModel):
    """One ``delegation_decided`` ledger entry, or an agent call made before decisions were logged."""

    model_config = ConfigDict(extra="forbid")

    seq: int
    op: str
    payload: dict[str, Any]


class InvalidRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seq: int
    problem: str


class ReplayReport(BaseModel):
    """What ``autodev policy replay`` prints (``--json``: this object)."""

    model_config = ConfigDict(extra="forbid")

    decisions: int = 0
    exact_matches: int = 0
    transitions: dict[str, int] = Field(default_factory=dict)
    recorded_routes: dict[str, int] = Field(default_factory=dict)
    replayed_routes: dict[str, int] = Field(default_factory=dict)
    recorded_units: int = 0
    replayed_units: int = 0
    legacy_skipped: int = 0
    invalid: list[InvalidRecord] = Field(default_factory=list)
    note: str = (
        "each decision re-decided from its recorded inputs; a structural check of the policy's rules, "
        "not a measure of quality or cost"
    )

    @property
    def match_ratio(self) -> float:
        return self.exact_matches / self.decisions if self.decisions else 1.0


def _key(route: str, reason: str) -> str:
    return f"{route}:{reason}"


def replay(records: Iterable[LoggedDecision], settings: PolicySettings) -> ReplayReport:
    """Re-decide every logged decision of ``records`` (ledger order) under ``settings``."""
    report = ReplayReport()
    recorded_routes: Counter[str] = Counter()
    replayed_routes: Counter[str] = Counter()
    transitions: Counter[str] = Counter()
    logging_started = False
    for record in records:
        if record.op != "delegation_decided":
            # An agent call before the first logged decision was made without one.
            report.legacy_skipped += 0 if logging_started else 1
            continue
        logging_started = True
        try:
            snapshot = record.payload["inputs"]
            version = snapshot.get("version") if isinstance(snapshot, dict) else None
            if version != POLICY_VERSION:
                raise ValueError(f"snapshot version {version!r} is not {POLICY_VERSION}")
            inputs = PolicyInputs.model_validate(snapshot)
            then = Decision.model_validate(record.payload["decision"])
        except (KeyError, TypeError, ValueError, ValidationError) as exc:
            problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            report.invalid.append(InvalidRecord(seq=record.seq, problem=problem))
            continue
        now = decide(inputs, settings)
        report.decisions += 1
        recorded_routes[then.route] += 1
        replayed_routes[now.route] += 1
        report.recorded_units += then.units if then.route == "spawn" else 0
        report.replayed_units += now.units if now.route == "spawn" else 0
        if (then.route, then.reason) == (now.route, now.reason):
            report.exact_matches += 1
        else:
            transitions[f"{_key(then.route, then.reason)} -> {_key(now.route, now.reason)}"] += 1
    report.recorded_routes = dict(sorted(recorded_routes.items()))
    report.replayed_routes = dict(sorted(replayed_routes.items()))
    report.transitions = dict(sorted(transitions.items()))
    return report
