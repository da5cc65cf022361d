"""The provider's refusals, named from what the agent CLIs print: real error bodies of each provider."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from autodev.adapters.provider_errors import ProviderFailure, classify

NOW = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("status", "text", "kind"),
    [
        # Anthropic Messages API bodies, as Claude Code relays them ("API Error: <status> <body>").
        (
            401,
            '{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}',
            "auth_failed",
        ),
        (None, "Invalid API key · Please run /login", "auth_failed"),
        (
            429,
            (
                '{"type":"error","error":{"type":"rate_limit_error","message":"Number'
                ' of request tokens has exceeded your per-minute rate limit"}}'
            ),
            "rate_limited",
        ),
        (
            529,
            '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}',
            "provider_unavailable",
        ),
        (
            None,
            'API Error: 500 {"type":"error","error":{"type":"api_error","message":"Internal server error"}}',
            "provider_unavailable",
        ),
        (
            400,
            (
                '{"type":"error","error":{"type":"invalid_request_error","message":"pro'
                'mpt is too long: 215000 tokens > 200000 maximum"}}'
            ),
            "context_overflow",
        ),
        (None, "Claude AI usage limit reached|1767225600", "usage_limit"),
        (400, "Your credit balance is too low to access the Anthropic API.", "usage_limit"),
        # Gemini CLI's own account of a per-day quota.
        (
            None,
            "[API Error: You have exhausted your daily quota on this model.] Please wait and try again.",
            "usage_limit",
        ),
        # OpenAI-style bodies (Codex, OpenCode).
        (
            401,
            (
                '{"error":{"message":"Incorrect API key provided:'
                ' sk-...","type":"invalid_request_error","code":"invalid_api_key"}}'
            ),
            "auth_failed",
        ),
        (
            429,
            (
                '{"error":{"message":"Rate limit reached for gpt-5.5 in organization'
                " org-x on tokens per min (TPM). Please try again in"
                ' 1.5s.","type":"tokens","code":"rate_limit_exceeded"}}'
            ),
            "rate_limited",
        ),
        (
            429,
            (
                '{"error":{"message":"You exceeded your current quota, please check'
                " your plan and billing"
                ' details.","type":"insufficient_quota","code":"insufficient_quota"}}'
            ),
            "usage_limit",
        ),
        (
            500,
            (
                '{"error":{"message":"The server had an error while processing your'
                ' request.","type":"server_error"}}'
            ),
            "provider_unavailable",
        ),
        (None, "exceeded retry limit, last status: 429 Too Many Requests", "rate_limited"),
        (
            400,
            (
                '{"error":{"message":"This model\'s maximum context length is 128000'
                ' tokens.","code":"context_length_exceeded"}}'
            ),
            "context_overflow",
        ),
        # Gemini API bodies.
        (
            400,
            (
                '{"error":{"code":400,"message":"API key not valid. Please pass a'
                ' valid API key.","status":"INVALID_ARGUMENT"}}'
            ),
            "auth_failed",
        ),
        (
            403,
            (
                '{"error":{"code":403,"message":"The caller does not have'
                ' permission","status":"PERMISSION_DENIED"}}'
            ),
            "auth_failed",
        ),
        (
            429,
            (
                '{"error":{"code":429,"message":"Resource has been exhausted (e.g.'
                ' check quota).","status":"RESOURCE_EXHAUSTED"}}'
            ),
            "rate_limited",
        ),
        (
            429,
            (
                '{"error":{"code":429,"message":"Quota exceeded for metric:'
                " generate_content_free_tier_requests, limit: 250 per"
                ' day","status":"RESOURCE_EXHAUSTED"}}'
            ),
            "usage_limit",
        ),
        (
            503,
            (
                '{"error":{"code":503,"message":"The model is overloaded. Please try'
                ' again later.","status":"UNAVAILABLE"}}'
            ),
            "provider_unavailable",
        ),
        # What the CLIs themselves print after their own retries (Gemini CLI 0.61, OpenCode 1.18).
        (
            None,
            "[API Error: Resource has been exhausted (e.g. check quota).] Please wait and try again later.",
            "rate_limited",
        ),
        (None, "[API Error: The model is overloaded. Please try again later.]", "provider_unavailable"),
        (
            429,
            "APIError: Rate limit reached for requests per min (RPM): Limit 3, Used 3. (HTTP 429)",
            "rate_limited",
        ),
        # A status alone still says enough.
        (502, "upstream connect error", "provider_unavailable"),
    ],
)
def test_each_providers_refusal_is_named(status: int | None, text: str, kind: str) -> None:
    failure = classify(text, status=status, now=NOW)
    assert failure is not None and failure.kind == kind


@pytest.mark.parametrize(
    "text",
    [
        "claude reached its turn limit: stopped after 30 turns",
        "the tests failed: 3 failed, 2 passed",
        "codex exited 1 without a result: thread panicked",
        "",
    ],
)
def test_a_failure_that_names_no_refusal_is_left_alone(text: str) -> None:
    assert classify(text, now=NOW) is None


@pytest.mark.parametrize(
    ("text", "resets_at"),
    [
        ("Claude AI usage limit reached|1767225600", datetime(2026, 1, 1, tzinfo=UTC)),
        ("Rate limit reached ... Please try again in 1.5s.", NOW + timedelta(seconds=1.5)),
        ("rate_limit_exceeded: Please try again in 1m30s", NOW + timedelta(seconds=90)),
        ('RESOURCE_EXHAUSTED quota exceeded "retryDelay": "12s"', NOW + timedelta(seconds=12)),
        ("429 Too Many Requests, retry after 30 seconds", NOW + timedelta(seconds=30)),
    ],
)
def test_the_reset_time_is_read_where_the_text_gives_one(text: str, resets_at: datetime) -> None:
    failure = classify(text, now=NOW)
    assert failure is not None and failure.resets_at == resets_at


def test_a_clock_time_resets_at_its_next_occurrence() -> None:
    local = NOW.astimezone()
    hour = (local.hour + 2) % 24
    failure = classify(f"5-hour limit reached ∙ resets {hour}:00", now=NOW)
    assert failure is not None and failure.kind == "usage_limit"
    assert failure.resets_at is not None
    assert timedelta(hours=1) < failure.resets_at - NOW <= timedelta(hours=2)


def test_an_outage_has_no_reset_time() -> None:
    assert classify("529 overloaded_error, try again in 5s", now=NOW) == ProviderFailure(
        "provider_unavailable"
    )
