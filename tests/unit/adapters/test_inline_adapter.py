"""The inline adapter: delegation files out, response files in, suspend in between."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from autodev.adapters import (
    AgentInvocation,
    DelegationPendingSignal,
    InlineAdapter,
    InlineResponse,
    InvalidResponseError,
    create_adapter,
)
from autodev.config.schema import AutodevConfig
from autodev.errors import PathEscapeError
from autodev.state.paths import AutodevPaths

PROMPT = "Implement the parser.\n---\nKeep `parse()` pure; see src/parser.py."


@pytest.fixture
def adapter(repo: Path) -> InlineAdapter:
    return InlineAdapter(repo_root=repo)


@pytest.fixture
def paths(repo: Path) -> AutodevPaths:
    return AutodevPaths(repo.resolve())


def _inv(repo: Path, *, task_id: str = "1.1", role: str = "developer", attempt: int = 1) -> AgentInvocation:
    return AgentInvocation(
        role=role, prompt=PROMPT, cwd=repo, task_id=task_id, attempt=attempt, tools=("read", "edit")
    )


async def _delegate(adapter: InlineAdapter, inv: AgentInvocation) -> DelegationPendingSignal:
    with pytest.raises(DelegationPendingSignal) as info:
        await adapter.execute(inv)
    return info.value


def _respond(paths: AutodevPaths, body: Any, *, task_id: str = "1.1", role: str = "developer") -> Path:
    """Write a response that is newer than the delegation, whatever the filesystem's time resolution."""
    path = paths.response_file(task_id, role)
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    delegation = paths.delegation_file(task_id, role)
    if delegation.exists():
        later = delegation.stat().st_mtime_ns + 1_000_000_000
        os.utime(path, ns=(later, later))
    return path


def _front_matter(text: str) -> dict[str, Any]:
    block = text.split("---\n")[1]
    return {key: json.loads(value) for key, _, value in (line.partition(": ") for line in block.splitlines())}


@pytest.mark.asyncio
async def test_a_delegation_round_trip(adapter: InlineAdapter, paths: AutodevPaths, repo: Path) -> None:
    signal = await _delegate(adapter, _inv(repo))

    assert signal.delegation_path == paths.delegation_file("1.1", "developer")
    assert signal.response_path == paths.response_file("1.1", "developer")
    assert (signal.task_id, signal.role) == ("1.1", "developer")
    assert signal.response_path.parent.is_dir()
    assert not paths.response_file("1.1", "developer").is_file()

    response = _respond(paths, {"text": "Parser implemented.", "cost_usd": 0.5, "tool_calls": 4})
    assert paths.response_file("1.1", "developer").is_file()

    result = adapter.collect_response("1.1", "developer", 1)

    assert result.success
    assert (result.text, result.cost_usd, result.tool_calls) == ("Parser implemented.", 0.5, 4)
    archive = paths.evidence_dir / "inline" / "1.1-developer-1.json"
    assert result.transcript_path == archive
    assert json.loads(archive.read_text())["text"] == "Parser implemented."
    assert not response.exists()
    assert not paths.response_file("1.1", "developer").is_file()


@pytest.mark.asyncio
async def test_the_delegation_holds_front_matter_the_full_prompt_and_the_response_schema(
    adapter: InlineAdapter, paths: AutodevPaths, repo: Path
) -> None:
    signal = await _delegate(adapter, _inv(repo, attempt=2))
    text = signal.delegation_path.read_text()

    front = _front_matter(text)
    assert front["task_id"] == "1.1"
    assert front["role"] == "developer"
    assert front["attempt"] == 2
    assert front["cwd"] == str(paths.repo_root)
    assert front["response_path"] == str(signal.response_path)
    assert Path(front["response_path"]).is_absolute()
    assert front["created_at"]
    assert PROMPT in text
    for field in InlineResponse.model_fields:
        assert f"`{field}`" in text
    examples = re.findall(r"```json\n(.*?)\n```", text, flags=re.DOTALL)
    assert examples
    for example in examples:
        InlineResponse.model_validate_json(example)


@pytest.mark.asyncio
async def test_plan_phase_calls_delegate_under_the_plan_task_id(adapter: InlineAdapter, repo: Path) -> None:
    inv = AgentInvocation(role="architect", prompt="Write the plan.", cwd=repo)

    signal = await _delegate(adapter, inv)

    assert signal.delegation_path.name == "plan-architect.md"
    assert signal.response_path.name == "plan-architect.json"


@pytest.mark.asyncio
async def test_execute_returns_a_response_written_after_its_delegation(
    adapter: InlineAdapter, paths: AutodevPaths, repo: Path
) -> None:
    await _delegate(adapter, _inv(repo))
    _respond(paths, {"text": "done"})

    result = await adapter.execute(_inv(repo))

    assert result.success
    assert result.text == "done"
    assert not paths.response_file("1.1", "developer").is_file()


@pytest.mark.asyncio
async def test_a_response_older_than_the_delegation_is_archived_as_stale_and_not_used(
    adapter: InlineAdapter, paths: AutodevPaths, repo: Path
) -> None:
    signal = await _delegate(adapter, _inv(repo))
    response = _respond(paths, {"text": "an answer to some earlier question"})
    earlier = signal.delegation_path.stat().st_mtime_ns - 1_000_000_000
    os.utime(response, ns=(earlier, earlier))

    await _delegate(adapter, _inv(repo))

    assert not response.exists()
    stale = paths.evidence_dir / "inline" / "1.1-developer-1-stale.json"
    assert json.loads(stale.read_text())["text"] == "an answer to some earlier question"


@pytest.mark.asyncio
async def test_a_response_to_an_earlier_attempt_is_never_reused(
    adapter: InlineAdapter, paths: AutodevPaths, repo: Path
) -> None:
    await _delegate(adapter, _inv(repo, attempt=1))
    _respond(paths, {"text": "attempt 1 answer"})

    signal = await _delegate(adapter, _inv(repo, attempt=2))

    assert _front_matter(signal.delegation_path.read_text())["attempt"] == 2
    assert not paths.response_file("1.1", "developer").is_file()
    assert (paths.evidence_dir / "inline" / "1.1-developer-2-stale.json").exists()


@pytest.mark.asyncio
async def test_a_response_without_any_delegation_is_stale(
    adapter: InlineAdapter, paths: AutodevPaths, repo: Path
) -> None:
    await adapter.init_workspace(repo, [])
    _respond(paths, {"text": "left over from another run"})

    signal = await _delegate(adapter, _inv(repo))

    assert signal.delegation_path.exists()
    assert not paths.response_file("1.1", "developer").is_file()


@pytest.mark.parametrize(
    ("body", "field", "expected"),
    [
        ("Done, all good!", None, "not valid JSON"),
        ('["done"]', None, "must be a JSON object"),
        ('{"text": 42}', "text", "valid string"),
        ('{"text": "ok", "success": "yes"}', "success", "valid boolean"),
        ('{"text": "ok", "verdict": "APPROVED"}', "verdict", "allowed fields: text, success, error"),
        ('{"success": true}', "text", "is required"),
        ('{"text": "ok", "error": "tests fail"}', "error", "set success to false"),
    ],
)
@pytest.mark.asyncio
async def test_a_malformed_response_names_file_and_field_and_stays_in_place(
    adapter: InlineAdapter, paths: AutodevPaths, repo: Path, body: str, field: str | None, expected: str
) -> None:
    await _delegate(adapter, _inv(repo))
    response = _respond(paths, body)

    with pytest.raises(InvalidResponseError) as info:
        adapter.collect_response("1.1", "developer", 1)

    message = info.value.message
    assert message.startswith(f"{response}: ")
    assert expected in message
    assert "autodev resume" in message
    assert info.value.field == field
    if field is not None:
        assert f"field {field!r}" in message
    assert response.read_text() == body
    assert paths.response_file("1.1", "developer").is_file()
    assert not (paths.evidence_dir / "inline").exists()


@pytest.mark.asyncio
async def test_execute_with_a_malformed_response_raises_and_keeps_the_delegation_pending(
    adapter: InlineAdapter, paths: AutodevPaths, repo: Path
) -> None:
    signal = await _delegate(adapter, _inv(repo))
    before = signal.delegation_path.read_text()
    _respond(paths, '{"txt": "typo"}')

    with pytest.raises(InvalidResponseError, match="field 'txt': is not allowed"):
        await adapter.execute(_inv(repo))

    assert signal.delegation_path.read_text() == before
    assert paths.response_file("1.1", "developer").is_file()


def test_collecting_before_anyone_answered_is_a_typed_error(adapter: InlineAdapter) -> None:
    with pytest.raises(InvalidResponseError, match="no response has been written"):
        adapter.collect_response("1.1", "developer", 1)


@pytest.mark.asyncio
async def test_success_false_is_an_is_error_failure(
    adapter: InlineAdapter, paths: AutodevPaths, repo: Path
) -> None:
    await _delegate(adapter, _inv(repo))
    _respond(paths, {"text": "Tried two approaches.", "success": False, "error": "the API is not documented"})

    result = adapter.collect_response("1.1", "developer", 1)

    assert not result.success
    assert result.error is not None
    assert (result.error.kind, result.error.message) == ("is_error", "the API is not documented")
    assert result.text == "Tried two approaches."


@pytest.mark.asyncio
async def test_archives_are_never_overwritten(
    adapter: InlineAdapter, paths: AutodevPaths, repo: Path
) -> None:
    for attempt, text in ((1, "first"), (1, "first again"), (2, "second")):
        await _delegate(adapter, _inv(repo, attempt=attempt))
        _respond(paths, {"text": text})
        adapter.collect_response("1.1", "developer", attempt)

    archive = paths.evidence_dir / "inline"
    assert sorted(p.name for p in archive.iterdir()) == [
        "1.1-developer-1.json",
        "1.1-developer-1_2.json",
        "1.1-developer-2.json",
    ]
    assert json.loads((archive / "1.1-developer-1.json").read_text())["text"] == "first"
    assert json.loads((archive / "1.1-developer-1_2.json").read_text())["text"] == "first again"


@pytest.mark.asyncio
async def test_a_task_id_cannot_place_a_delegation_outside_the_delegations_dir(
    adapter: InlineAdapter, repo: Path
) -> None:
    with pytest.raises(PathEscapeError):
        await adapter.execute(_inv(repo, task_id="../../escape"))


@pytest.mark.asyncio
async def test_workspace_and_healthcheck(adapter: InlineAdapter, paths: AutodevPaths, repo: Path) -> None:
    await adapter.init_workspace(repo, [])

    assert paths.delegations_dir.is_dir()
    assert paths.responses_dir.is_dir()
    assert (paths.state_dir / ".gitignore").exists()
    assert await adapter.healthcheck() == (True, f"inline: delegations in {paths.delegations_dir}")


def test_the_registry_builds_an_inline_adapter(repo: Path) -> None:
    adapter = create_adapter("inline", repo_root=repo, config=AutodevConfig())

    assert isinstance(adapter, InlineAdapter)
    assert adapter.paths.repo_root == repo.resolve()
