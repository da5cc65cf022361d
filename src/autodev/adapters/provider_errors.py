"""Why the provider refused a call, read from what an agent CLI printed: status codes and error bodies.

Every CLI relays the provider's refusal its own way (a field of its result event, a line on stderr, an error
event), but the words come from the provider and its SDK: Anthropic's ``authentication_error``,
``rate_limit_error`` and ``overloaded_error`` (HTTP 401, 429, 529), OpenAI's ``invalid_api_key``,
``rate_limit_exceeded`` and ``insufficient_quota`` (401, 429), Gemini's ``UNAUTHENTICATED``,
``RESOURCE_EXHAUSTED`` and ``UNAVAILABLE`` (401/403, 429, 503), and the CLIs' own words for a plan's usage
limit. ``classify`` turns a status (when the CLI reports one) and that text into one of the kinds the
orchestrator answers differently: a refusal that is nobody's mistake must not cost a task attempt.

A failure none of the patterns names is left alone (the caller keeps ``is_error`` or whatever the process
proved): guessing "rate limited" for an unknown failure would retry it forever.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

__all__ = ["ProviderFailure", "ProviderFailureKind", "classify"]

ProviderFailureKind = Literal[
    "auth_failed", "rate_limited", "usage_limit", "provider_unavailable", "context_overflow"
]


@dataclass(frozen=True, slots=True)
class ProviderFailure:
    """A refusal by the provider: its kind, and when it ends when the text says so (UTC)."""

    kind: ProviderFailureKind
    resets_at: datetime | None = None


def _any(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{pattern})" for pattern in patterns), re.IGNORECASE)


# Checked in this order: a too-long prompt is refused with 400 (or 413) whatever else the body says; a bad key
# may come with 400 (Gemini) or 403; a plan's limit comes with 429 like a rate limit and must not be retried.
_CONTEXT_OVERFLOW = _any(
    r"prompt is too long",
    r"context[_ ]length[_ ]exceeded",
    r"maximum context length",
    r"context window",
    r"input token count .{0,40}exceeds",
    r"too many tokens",
    r"request too large",
)
_AUTH = _any(
    r"authentication[_ ]error",
    r"invalid[ _-]?(?:x-)?api[ _-]?key",
    r"incorrect api key",
    r"api key not valid",
    r"unauthenticated",
    r"unauthori[sz]ed",
    r"permission_denied",
    r"oauth token (?:has )?(?:expired|revoked)",
    r"please run /login",
    r"not logged in",
    r"log ?in again",
)
_USAGE_LIMIT = _any(
    r"usage[ _]limit",
    r"insufficient[_ ]quota",
    r"exceeded your current quota",
    r"credit balance (?:is )?too low",
    # Gemini CLI's own words for a daily quota (RESOURCE_EXHAUSTED with a per-day QuotaFailure).
    r"exhausted your (?:daily |monthly )?quota",
    r"billing",
    r"quota exceeded.{0,200}per ?day",
    r"(?:hour|day|week)(?:ly)? limit reached",
    r"limit reached.{0,40}resets?",
)
_RATE_LIMITED = _any(
    r"rate[_ ]limit",
    r"too many requests",
    r"resource[_ ]exhausted",
    r"resource has been exhausted",
    r"quota exceeded",
)
_UNAVAILABLE = _any(
    r"overloaded",
    r"internal server error",
    r"server[_ ]error",
    r"service unavailable",
    r"bad gateway",
    r"gateway time-?out",
    r"api_error",
)
_STATUS_KIND: dict[int, ProviderFailureKind] = {
    401: "auth_failed",
    403: "auth_failed",
    413: "context_overflow",
    429: "rate_limited",
    500: "provider_unavailable",
    502: "provider_unavailable",
    503: "provider_unavailable",
    504: "provider_unavailable",
    529: "provider_unavailable",
}
# A status in the text ("API Error: 529 {...}", "status 429", "429 Too Many Requests").
_STATUS_IN_TEXT = re.compile(
    r"(?:\berror:?|\bstatus(?: code)?:?|\bhttp)\s*\(?(\d{3})\b|\b(\d{3}) too many requests\b", re.IGNORECASE
)

# When the refusal ends: an epoch after a bar (Claude's "usage limit reached|1767225600"), a delay ("try again
# in 1m30s", "retry in 12.5s", "retryDelay": "12s", "retry after 30 seconds"), or a clock time ("resets 3pm",
# "resets at 15:00").
_EPOCH = re.compile(r"\|(\d{10})\b")
_DELAY = re.compile(
    r"(?:try again in|retry in|retry after|retrydelay\W+|reset(?:s)? in)\s*"
    r"(?:(\d+(?:\.\d+)?)\s*h(?:ours?)?)?\s*(?:(\d+(?:\.\d+)?)\s*m(?:in(?:utes?)?)?(?!s))?\s*"
    r"(?:(\d+(?:\.\d+)?)\s*(?:s|sec|seconds?)\b)?",
    re.IGNORECASE,
)
_CLOCK = re.compile(r"resets?(?: at)?\s+(\d{1,2})(?::(\d{2}))?\s*(am|pm)?\b", re.IGNORECASE)


def classify(text: str, *, status: int | None = None, now: datetime | None = None) -> ProviderFailure | None:
    """The provider refusal ``text`` (and ``status``, the HTTP status the CLI reported) describes, or None."""
    if status is None:
        status = _status_in(text)
    kind = _kind(text, status)
    if kind is None:
        return None
    resets_at = (
        _resets_at(text, now or datetime.now(UTC)) if kind in ("rate_limited", "usage_limit") else None
    )
    return ProviderFailure(kind, resets_at)


def _status_in(text: str) -> int | None:
    for match in _STATUS_IN_TEXT.finditer(text):
        code = int(match.group(1) or match.group(2))
        if code in _STATUS_KIND:
            return code
    return None


def _kind(text: str, status: int | None) -> ProviderFailureKind | None:
    if _CONTEXT_OVERFLOW.search(text):
        return "context_overflow"
    if _AUTH.search(text) or status in (401, 403):
        return "auth_failed"
    if _USAGE_LIMIT.search(text):
        return "usage_limit"
    if _RATE_LIMITED.search(text):
        return "rate_limited"
    if _UNAVAILABLE.search(text):
        return "provider_unavailable"
    return _STATUS_KIND.get(status) if status is not None else None


def _resets_at(text: str, now: datetime) -> datetime | None:
    epoch = _EPOCH.search(text)
    if epoch:
        return datetime.fromtimestamp(int(epoch.group(1)), UTC)
    for delay in _DELAY.finditer(text):
        hours, minutes, seconds = (float(part) if part else 0.0 for part in delay.groups())
        if hours or minutes or seconds:
            return now + timedelta(hours=hours, minutes=minutes, seconds=seconds)
    clock = _CLOCK.search(text)
    if clock:
        hour, minute, half = int(clock.group(1)), int(clock.group(2) or 0), (clock.group(3) or "").lower()
        if half:
            hour = hour % 12 + (12 if half == "pm" else 0)
        if hour < 24 and minute < 60:
            # The CLI names the hour in the user's local time; the next such moment is when it resets.
            local_now = now.astimezone()
            reset = local_now.replace(hour=hour, minute=minute, second=0, microsecond=0)
            if reset <= local_now:
                reset += timedelta(days=1)
            return reset.astimezone(UTC)
    return None
