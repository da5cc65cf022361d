"""What a run does when the provider behind the agent CLI refuses a call: wait, retry, or pause.

A refusal is nobody's mistake in the work, so it never costs a task attempt:

- ``rate_limited`` and ``provider_unavailable``: the same call is asked again in place, after an exponential
  back-off with jitter (``provider.retry_*``), or at the reset time the CLI named when that is sooner than
  ``retry_max_delay_s``; each wait is an audit op in the ledger. When the retries are used up, or the reset
  is further off, the run pauses resumably.
- ``usage_limit`` and ``auth_failed``: waiting in place does not help; the run pauses at once, saying when
  the limit resets or how to log in.
- the **circuit breaker**: ``breaker_failures`` refusals within ``breaker_window_s`` across all tasks of
  the run pause the whole run, instead of every task retrying (and failing) on its own.

A pause is a ``ProviderRefusedError`` (exit 3): the task stays at its step and ``autodev resume`` asks the
same call again. ``context_overflow`` is not handled here: it is the step's own failure.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal

from autodev.adapters.base import AgentError, AgentErrorKind
from autodev.config.schema import ProviderSettings
from autodev.errors import EnvironmentFaultError

__all__ = [
    "RESET_MARGIN_S",
    "RETRIED_REFUSALS",
    "STOPPING_REFUSALS",
    "BreakerState",
    "ProviderGuard",
    "ProviderRefusedError",
    "pause_message",
    "wait_before_resuming",
]

BreakerState = Literal["closed", "tripped", "open"]

RETRIED_REFUSALS: frozenset[AgentErrorKind] = frozenset({"rate_limited", "provider_unavailable"})
STOPPING_REFUSALS: frozenset[AgentErrorKind] = frozenset({"usage_limit", "auth_failed"})


class ProviderRefusedError(EnvironmentFaultError):
    """The provider refused and waiting in place will not do: the run pauses resumably (exit 3).

    ``kind`` is the refusal's ``AgentErrorKind``; ``resets_at`` when it ends, when the CLI said so.
    """

    def __init__(self, message: str, *, kind: AgentErrorKind, resets_at: datetime | None = None) -> None:
        self.kind = kind
        self.resets_at = resets_at
        super().__init__(message)


class ProviderGuard:
    """One per run, shared by all its tasks: the back-off delays and the breaker's recent refusals.

    Thread-safe (tasks may report from worker threads); ``clock`` is monotonic seconds, ``jitter`` a number
    in [0, 1) (both replaceable for tests).
    """

    def __init__(
        self,
        settings: ProviderSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.settings = settings
        self._clock = clock
        self._jitter = jitter
        self._recent: deque[float] = deque()
        self._lock = threading.Lock()
        self.tripped = False
        # When each platform's provider last refused a call of this run, and those that stopped it.
        self._refused_at: dict[str, float] = {}
        self._stopped: set[str] = set()

    def note_refusal(self) -> BreakerState:
        """Count one refusal: ``closed`` (retry it), ``tripped`` (this refusal opened the breaker: the run
        must pause) or ``open`` (it opened before: the run is pausing already, for another task)."""
        now = self._clock()
        with self._lock:
            if self.tripped:
                return "open"
            self._recent.append(now)
            while self._recent and self._recent[0] < now - self.settings.breaker_window_s:
                self._recent.popleft()
            if len(self._recent) >= self.settings.breaker_failures:
                self.tripped = True
                return "tripped"
            return "closed"

    def refused_by(self, platform: str, kind: AgentErrorKind) -> None:
        """Note that ``platform``'s provider refused a call of this run with ``kind``."""
        with self._lock:
            self._refused_at[platform] = self._clock()
            if kind in STOPPING_REFUSALS:
                self._stopped.add(platform)

    def refusing(self, platform: str) -> bool:
        """Whether ``platform``'s provider is refusing this run's calls: a usage limit or refused login
        since the run started, or any refusal within the breaker's window. Only this run's refusals count."""
        with self._lock:
            if platform in self._stopped:
                return True
            at = self._refused_at.get(platform)
            return at is not None and self._clock() - at < self.settings.breaker_window_s

    def delay_s(self, retry: int, error: AgentError, *, now: datetime | None = None) -> float | None:
        """Seconds to wait before retry number ``retry`` (1-based) of a call refused with ``error``, or None
        when the call must not be retried in place (retries used up, or a reset beyond the longest wait)."""
        settings = self.settings
        if retry > settings.retry_attempts:
            return None
        if error.resets_at is not None:
            wait = (error.resets_at - (now or datetime.now(UTC))).total_seconds()
            return max(wait, 0.0) if wait <= settings.retry_max_delay_s else None
        backoff = settings.retry_base_delay_s * 2.0 ** (retry - 1)
        # Jitter over the upper half of the back-off: parallel tasks refused together do not return together.
        return min(settings.retry_max_delay_s, backoff * (0.5 + self._jitter() / 2))


# A reset time is the provider's clock, read to the second or the minute: a little after it, it has passed.
RESET_MARGIN_S = 5.0


def wait_before_resuming(
    refused: ProviderRefusedError, settings: ProviderSettings, *, now: datetime | None = None
) -> float | None:
    """Seconds ``--wait`` sleeps before resuming after ``refused``; None when waiting cannot help (a refused
    login needs a person). Until the reset time when the provider named one, else
    ``settings.wait_without_reset_s``."""
    if refused.kind == "auth_failed":
        return None
    if refused.resets_at is None:
        return settings.wait_without_reset_s
    left = (refused.resets_at - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, left) + RESET_MARGIN_S


def pause_message(error: AgentError, role: str, task_id: str, *, why: str = "") -> str:
    """The one line a pause prints: what was refused, when it ends or what to do, and how to continue."""
    when = ""
    if error.resets_at is not None:
        when = f"; it resets at {error.resets_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    advice = {
        "auth_failed": "log the agent CLI in again (or set its API key)",
        "usage_limit": "wait for the limit to reset or raise it",
    }.get(error.kind, "wait for the provider to recover")
    what = error.kind.replace("_", " ")
    return (
        f"the provider refused the {role.replace('_', ' ')} of {task_id} ({what}{why}: {error.message})"
        f"{when}; {advice}, then run `autodev resume` (no attempt was counted)"
    )
