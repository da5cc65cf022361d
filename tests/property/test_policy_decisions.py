"""The delegation decision as a pure function: deterministic, never past a budget, escalation only upward."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from autodev.config.schema import CapabilityTier, PolicySettings
from autodev.policy.decisions import ActiveWorker, PolicyInputs, decide

_TIERS: tuple[CapabilityTier, ...] = ("fast", "standard", "strong")
_ORDER = {tier: n for n, tier in enumerate(_TIERS)}

_settings = st.builds(
    PolicySettings,
    max_workers=st.integers(1, 6),
    max_strong_workers=st.integers(0, 3),
    capability_units=st.integers(1, 30),
    fast_units=st.integers(0, 3),
    standard_units=st.integers(0, 5),
    strong_units=st.integers(0, 8),
)
_paths = st.lists(
    st.sampled_from(["src/**", "src/a.py", "tests/**", "docs/x.md", "**"]), min_size=1, max_size=3
)
_steps = st.lists(
    st.tuples(
        st.sampled_from(["request", "request", "release"]),
        st.sampled_from(_TIERS),
        st.sampled_from(["shared", "isolated", "read_only"]),
        _paths,
    ),
    max_size=40,
)


def _inputs(task_id: str, tier: str, mode: str, owned: list[str], active: list[ActiveWorker]) -> PolicyInputs:
    return PolicyInputs(
        role="developer" if mode != "read_only" else "reviewer",
        task_id=task_id,
        family="developer:repository",
        write_mode=mode,
        tier=tier,
        owned_paths=tuple(owned),
        authorized_scope=("**",),
        active_workers=tuple(active),
    )


@settings(max_examples=200)
@given(config=_settings, steps=_steps)
def test_the_workers_granted_never_exceed_any_budget(
    config: PolicySettings, steps: list[tuple[str, str, str, list[str]]]
) -> None:
    active: list[ActiveWorker] = []
    for n, (action, tier, mode, owned) in enumerate(steps):
        if action == "release":
            if active:
                active.pop(0)
            continue
        inputs = _inputs(f"t{n}", tier, mode, owned, active)
        decision = decide(inputs, config)
        assert decision == decide(inputs, config)  # the same inputs, the same decision
        if mode == "read_only":
            assert decision.route == "execute"
            continue
        assert decision.route in ("spawn", "queue", "reject")
        if decision.route == "spawn":
            active.append(ActiveWorker(task_id=f"t{n}", tier=tier, write_mode=mode, owned_paths=tuple(owned)))
        assert len(active) <= config.max_workers
        assert sum(worker.tier == "strong" for worker in active) <= config.max_strong_workers
        assert sum(config.units(worker.tier) for worker in active) <= config.capability_units
        shared = [worker for worker in active if worker.write_mode == "shared"]
        for i, first in enumerate(shared):
            for second in shared[i + 1 :]:
                assert not set(first.owned_paths) & set(second.owned_paths)


@given(config=_settings, tier=st.sampled_from(_TIERS), previous=st.sampled_from(_TIERS))
def test_a_task_never_goes_down_a_tier(
    config: PolicySettings, tier: CapabilityTier, previous: CapabilityTier
) -> None:
    inputs = _inputs("t", tier, "isolated", ["src/**"], []).model_copy(update={"previous_tier": previous})
    decision = decide(inputs, config)
    if _ORDER[tier] < _ORDER[previous]:
        assert (decision.route, decision.reason) == ("reject", "tier_downgrade")
    else:
        assert decision.reason != "tier_downgrade"


@given(owned=_paths, scope=st.lists(st.sampled_from(["src/**", "tests/**", "docs/x.md"]), max_size=3))
def test_a_writer_outside_the_authorized_scope_needs_approval_and_a_reader_never_does(
    owned: list[str], scope: list[str]
) -> None:
    writer = _inputs("t", "standard", "isolated", owned, []).model_copy(
        update={"authorized_scope": tuple(scope)}
    )
    decision = decide(writer, PolicySettings())
    from autodev.policy.scope import WriteScope

    uncovered = WriteScope(tuple(scope)).uncovered(owned)
    if uncovered:
        assert (decision.route, decision.reason) == ("require_approval", "owned_path_provenance_required")
        assert list(decision.uncovered) == uncovered
        assert "autodev approve --scope" in decision.remediation
    else:
        assert decision.route == "spawn"
    reader = writer.model_copy(update={"write_mode": "read_only"})
    assert decide(reader, PolicySettings()).route == "execute"


def test_a_declined_scope_is_rejected_rather_than_asked_again() -> None:
    inputs = _inputs("t", "standard", "isolated", ["tests/**"], []).model_copy(
        update={"authorized_scope": ("src/**",), "declined_scopes": (("tests/**",),)}
    )
    decision = decide(inputs, PolicySettings())
    assert (decision.route, decision.reason) == ("reject", "approval_declined")


def test_the_defaults_are_three_workers_one_strong_and_twenty_four_units() -> None:
    defaults = PolicySettings()
    assert (defaults.max_workers, defaults.max_strong_workers, defaults.capability_units) == (3, 1, 24)
    assert [defaults.units(tier) for tier in _TIERS] == [1, 2, 4]
    one_strong = [ActiveWorker(task_id="a", tier="strong", write_mode="isolated")]
    second = decide(_inputs("b", "strong", "isolated", ["src/**"], one_strong), defaults)
    assert (second.route, second.reason) == ("queue", "strong_worker_limit")
    standard = decide(_inputs("b", "standard", "isolated", ["src/**"], one_strong), defaults)
    assert standard.route == "spawn"


def test_a_worker_holding_its_grant_continues_its_warm_session_when_there_is_one() -> None:
    held = _inputs("t", "strong", "isolated", ["src/**"], []).model_copy(update={"holds_grant": True})
    assert decide(held, PolicySettings()).route == "execute"
    warm = held.model_copy(update={"warm_session": "sess-1"})
    decision = decide(warm, PolicySettings())
    assert (decision.route, decision.reason, decision.resume_session) == (
        "resume_worker",
        "compatible_warm_worker",
        "sess-1",
    )
    # A warm session never lets a worker past its budget or scope: it needs the grant first.
    fresh = warm.model_copy(update={"holds_grant": False})
    assert decide(fresh, PolicySettings()).route == "spawn"
    unscoped = warm.model_copy(update={"authorized_scope": ()})
    assert decide(unscoped, PolicySettings()).route == "require_approval"


@settings(max_examples=200)
@given(
    config=_settings.map(lambda c: c.model_copy(update={"automatic_retries": 1})),
    tier=st.sampled_from(_TIERS),
    used=st.integers(0, 3),
    active=st.lists(st.sampled_from(_TIERS), max_size=4),
)
def test_an_automatic_retry_only_goes_strictly_up_within_the_runs_retry_budget(
    config: PolicySettings, tier: CapabilityTier, used: int, active: list[CapabilityTier]
) -> None:
    workers = [
        ActiveWorker(task_id=f"w{n}", tier=t, write_mode="isolated", owned_paths=("src/**",))
        for n, t in enumerate(active)
    ]
    inputs = _inputs("t", tier, "isolated", ["src/a.py"], workers).model_copy(
        update={"retries_exhausted": True, "automatic_retries_used": used, "holds_grant": True}
    )
    decision = decide(inputs, config)
    assert decision == decide(inputs, config)
    if tier == "strong":
        assert (decision.route, decision.reason) == ("reject", "escalation_terminal")
        return
    if used >= config.automatic_retries:
        assert (decision.route, decision.reason) == ("reject", "retry_budget_exhausted")
        return
    assert decision.escalate_to is not None
    assert _ORDER[decision.escalate_to] == _ORDER[tier] + 1
    assert decision.route in ("spawn", "queue", "reject")
    if decision.route == "spawn":
        assert decision.reason == "automatic_retry"
        assert decision.units == config.units(decision.escalate_to)
        others = [*workers, ActiveWorker(task_id="t", tier=decision.escalate_to, write_mode="isolated")]
        assert len(others) <= config.max_workers
        assert sum(config.units(w.tier) for w in others) <= config.capability_units
        if decision.escalate_to == "strong":
            # (Strong workers already past the limit are not this grant's: only a strong grant counts them.)
            assert sum(w.tier == "strong" for w in others) <= config.max_strong_workers


_MODES = st.sets(st.sampled_from(["read_only", "workspace_write", "full"])).map(lambda s: tuple(sorted(s)))


@settings(max_examples=200)
@given(
    config=_settings,
    modes=_MODES,
    write_mode=st.sampled_from(["shared", "isolated", "read_only"]),
    exhausted=st.booleans(),
    active=st.lists(st.sampled_from(_TIERS), max_size=4),
)
def test_a_harness_that_cannot_start_the_needed_sandbox_is_rejected_before_anything_else(
    config: PolicySettings,
    modes: tuple[str, ...],
    write_mode: str,
    exhausted: bool,
    active: list[CapabilityTier],
) -> None:
    workers = [ActiveWorker(task_id=f"w{n}", tier=t, write_mode="isolated") for n, t in enumerate(active)]
    base = _inputs("t", "standard", write_mode, ["src/a.py"], workers).model_copy(
        update={"retries_exhausted": exhausted, "authorized_scope": ()}
    )
    checked = base.model_copy(
        update={
            "harness": "opencode",
            "harness_modes": modes,
            "compatible_harnesses": ("claude_code", "opencode", "gemini"),
        }
    )
    decision = decide(checked, config)

    can_start = (
        "read_only" in modes if write_mode == "read_only" else bool({"workspace_write", "full"} & set(modes))
    )
    if can_start:
        # A harness that can start the call changes nothing: the same decision as without the check.
        assert decision == decide(base, config)
        return
    assert (decision.route, decision.reason) == ("reject", "permission_ceiling")
    assert decision.units == 0 and decision.escalate_to is None
    sandbox = "read-only" if write_mode == "read_only" else "workspace-write"
    assert f"opencode cannot start the {checked.role} in a {sandbox} sandbox" in decision.remediation
    assert "run it on claude_code, gemini" in decision.remediation


def test_a_snapshot_without_harness_modes_is_not_checked() -> None:
    inputs = _inputs("t", "standard", "read_only", ["src/a.py"], []).model_copy(
        update={"harness": "opencode"}
    )
    assert decide(inputs, PolicySettings()).reason != "permission_ceiling"


@settings(max_examples=200)
@given(
    config=_settings,
    ttl=st.one_of(st.none(), st.floats(1, 100)),
    queued=st.floats(0, 200),
    active=st.lists(st.sampled_from(_TIERS), min_size=1, max_size=6),
    tier=st.sampled_from(_TIERS),
)
def test_a_queued_request_past_its_time_to_live_is_rejected_and_nothing_else_changes(
    config: PolicySettings,
    ttl: float | None,
    queued: float,
    active: list[CapabilityTier],
    tier: CapabilityTier,
) -> None:
    workers = [ActiveWorker(task_id=f"w{n}", tier=t, write_mode="isolated") for n, t in enumerate(active)]
    inputs = _inputs("t", tier, "isolated", ["src/a.py"], workers).model_copy(update={"queued_s": queued})
    limited = config.model_copy(update={"queue_ttl_s": ttl})
    without = decide(inputs, config.model_copy(update={"queue_ttl_s": None}))
    decision = decide(inputs, limited)

    if without.route == "queue" and ttl is not None and queued >= ttl:
        assert (decision.route, decision.reason) == ("reject", "queue_expired")
        assert without.reason in decision.remediation and "autodev retry t" in decision.remediation
    else:
        assert decision == without
