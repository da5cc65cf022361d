"""The structured log a user greps: every failed attempt is its own event, with the fields that say why,
and the tournaments, the plan phase and the provider's refusals are in the same log."""

from __future__ import annotations

import logging
from collections.abc import MutableMapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog
from structlog.testing import capture_logs
from support.parallel import (
    Spec,
    WatchedAdapter,
    entries_for,
    git_repo,
    orchestrator,
    plan_of,
    save_plan,
    script_of,
)

from autodev.logging import configure_quiet_logging
from autodev.orchestrator.provider_guard import ProviderRefusedError


@pytest.fixture(autouse=True)
def _every_level() -> Any:
    """The suite drops every event (``configure_quiet_logging``); these tests read them, then drop again."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    yield
    configure_quiet_logging()


def _events(logs: Sequence[MutableMapping[str, Any]], name: str) -> list[MutableMapping[str, Any]]:
    return [entry for entry in logs if entry["event"] == name]


def _developer(task_id: str, *responses: dict[str, Any]) -> dict[str, Any]:
    done = {"text": "done", "edits": [{"path": "src/t_{task_id}.py", "content": "VALUE = '{task_id}'\n"}]}
    return {"role": "developer", "task_id": task_id, "responses": [*responses, done]}


def test_each_kind_of_failed_attempt_is_its_own_event_with_its_fields(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1"), Spec("1.2"), Spec("1.3")]))
    entries = [
        *entries_for(),
        _developer("1.1", {"fail": {"kind": "is_error", "message": "the model gave up 51c2"}}),
        {
            "role": "reviewer",
            "task_id": "1.2",
            "responses": [
                {"text": "VERDICT: NEEDS_CHANGES\nISSUES:\n- name it better"},
                {"text": "VERDICT: APPROVED"},
            ],
        },
        {
            "role": "test_engineer",
            "task_id": "1.3",
            "responses": [
                {"text": "no results line"},
                {"text": "still none"},
                {"text": "RESULTS: passed=0 failed=0 total=0"},
            ],
        },
    ]
    with capture_logs() as logs:
        anyio.run(orchestrator(root, WatchedAdapter(script=script_of(entries)), 1, qa_retry_limit=3).execute)

    (developer,) = _events(logs, "execute_phase.developer_failed")
    assert developer["task_id"] == "1.1" and "the model gave up 51c2" in developer["err"]
    (review,) = _events(logs, "execute_phase.review_needs_changes")
    assert (review["task_id"], review["verdict"]) == ("1.2", "NEEDS_CHANGES")
    assert any("name it better" in issue for issue in review["issues"])
    (tests,) = _events(logs, "execute_phase.tests_failed")
    assert tests["task_id"] == "1.3" and tests["role"] == "test_engineer"
    assert not _events(logs, "execute_phase.retry")
    assert {entry["task_id"] for entry in _events(logs, "execute_phase.task_complete")} == {
        "1.1",
        "1.2",
        "1.3",
    }


def test_a_refusal_its_back_off_and_the_breaker_are_in_the_log(tmp_path: Path) -> None:
    root = git_repo(tmp_path / "repo")
    save_plan(root, plan_of([Spec("1.1")]))
    outage = {"fail": {"kind": "provider_unavailable", "message": "529 overloaded_error"}}
    entries = [*entries_for(), _developer("1.1", outage, outage, outage)]
    fast = {"provider.retry_base_delay_s": 0.01, "provider.retry_max_delay_s": 0.02}
    with capture_logs() as logs, pytest.raises(ProviderRefusedError):
        anyio.run(orchestrator(root, WatchedAdapter(script=script_of(entries)), 1, **fast).execute)

    assert [entry["kind"] for entry in _events(logs, "delegate.provider_backoff")] == [
        "provider_unavailable"
    ] * 2
    (breaker,) = _events(logs, "delegate.circuit_open")
    assert (breaker["failures"], breaker["window_s"]) == (3, 60.0)
    assert [entry["kind"] for entry in _events(logs, "delegate.provider_paused")] == ["provider_unavailable"]
