"""How long ``--wait`` waits after the provider paused the run, and when the circuit breaker opens."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from autodev.config.schema import ProviderSettings
from autodev.orchestrator.provider_guard import (
    RESET_MARGIN_S,
    ProviderGuard,
    ProviderRefusedError,
    wait_before_resuming,
)

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def test_a_named_reset_time_is_waited_for_with_a_margin() -> None:
    refused = ProviderRefusedError("limit", kind="usage_limit", resets_at=NOW + timedelta(minutes=30))

    assert wait_before_resuming(refused, ProviderSettings(), now=NOW) == pytest.approx(1800 + RESET_MARGIN_S)


def test_a_reset_time_already_past_waits_only_the_margin() -> None:
    refused = ProviderRefusedError("limit", kind="rate_limited", resets_at=NOW - timedelta(minutes=5))

    assert wait_before_resuming(refused, ProviderSettings(), now=NOW) == pytest.approx(RESET_MARGIN_S)


def test_without_a_reset_time_the_configured_wait_is_used() -> None:
    refused = ProviderRefusedError("overloaded", kind="provider_unavailable")

    assert wait_before_resuming(refused, ProviderSettings(wait_without_reset_s=42), now=NOW) == 42


def test_a_refused_login_is_not_waited_for() -> None:
    refused = ProviderRefusedError("401", kind="auth_failed", resets_at=NOW + timedelta(minutes=1))

    assert wait_before_resuming(refused, ProviderSettings(), now=NOW) is None


def test_the_breaker_trips_once_and_then_reads_open() -> None:
    clock = iter(float(n) for n in range(100))
    guard = ProviderGuard(
        ProviderSettings(breaker_failures=3, breaker_window_s=60), clock=lambda: next(clock)
    )

    assert [guard.note_refusal() for _ in range(5)] == ["closed", "closed", "tripped", "open", "open"]


def test_refusals_outside_the_window_do_not_trip_the_breaker() -> None:
    times = iter([0.0, 100.0, 200.0, 300.0])
    guard = ProviderGuard(
        ProviderSettings(breaker_failures=2, breaker_window_s=60), clock=lambda: next(times)
    )

    assert [guard.note_refusal() for _ in range(4)] == ["closed"] * 4
