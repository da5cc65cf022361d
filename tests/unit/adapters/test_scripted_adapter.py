"""The scripted adapter: a deterministic agent whose answers, edits, delays and failures are scripted."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from autodev.adapters import AgentInvocation, ScriptedAdapter, create_adapter
from autodev.config.schema import AutodevConfig
from autodev.errors import ConfigError, PathEscapeError


def _inv(cwd: Path, role: str, *, task_id: str = "plan", attempt: int = 1, **fields: Any) -> AgentInvocation:
    return AgentInvocation(
        role=role, prompt=f"prompt for {role}", cwd=cwd, task_id=task_id, attempt=attempt, **fields
    )


def _adapter(*entries: dict[str, Any]) -> ScriptedAdapter:
    return ScriptedAdapter(script={"entries": list(entries)})


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("task_id", "attempt", "expected"),
    [
        ("1.1", 2, "role+task+attempt"),
        ("1.1", 1, "role+task"),
        ("1.2", 2, "role+attempt"),
        ("1.2", 1, "role"),
    ],
)
async def test_the_most_specific_entry_answers(
    tmp_path: Path, task_id: str, attempt: int, expected: str
) -> None:
    adapter = _adapter(
        {"role": "developer", "text": "role"},
        {"role": "developer", "attempt": 2, "text": "role+attempt"},
        {"role": "developer", "task_id": "1.1", "text": "role+task"},
        {"role": "developer", "task_id": "1.1", "attempt": 2, "text": "role+task+attempt"},
    )

    result = await adapter.execute(_inv(tmp_path, "developer", task_id=task_id, attempt=attempt))

    assert result.success
    assert result.text == expected


@pytest.mark.asyncio
async def test_an_unscripted_role_fails_naming_the_role_and_the_known_roles(tmp_path: Path) -> None:
    adapter = _adapter({"role": "reviewer", "text": "APPROVED"}, {"role": "architect", "text": "# Plan: x"})

    result = await adapter.execute(_inv(tmp_path, "judge"))

    assert not result.success
    assert result.error is not None
    assert result.error.kind == "scripted_failure"
    assert "'judge'" in result.error.message
    assert "architect, reviewer" in result.error.message


@pytest.mark.asyncio
async def test_a_sequence_is_consumed_in_order_and_its_last_answer_repeats(tmp_path: Path) -> None:
    adapter = _adapter(
        {"role": "reviewer", "responses": [{"text": "NEEDS_CHANGES: add a test"}, {"text": "APPROVED"}]}
    )

    texts = [(await adapter.execute(_inv(tmp_path, "reviewer", attempt=n))).text for n in (1, 2, 3)]

    assert texts == ["NEEDS_CHANGES: add a test", "APPROVED", "APPROVED"]


@pytest.mark.asyncio
async def test_each_entry_keeps_its_own_place_in_its_sequence(tmp_path: Path) -> None:
    adapter = _adapter(
        {"role": "reviewer", "responses": [{"text": "reject"}, {"text": "approve"}]},
        {
            "role": "reviewer",
            "task_id": "1.2",
            "responses": [{"text": "1.2 reject"}, {"text": "1.2 approve"}],
        },
    )

    texts = [
        (await adapter.execute(_inv(tmp_path, "reviewer", task_id=task))).text
        for task in ("1.1", "1.2", "1.1")
    ]

    assert texts == ["reject", "1.2 reject", "approve"]


@pytest.mark.asyncio
async def test_placeholders_are_filled_and_other_braces_are_left_alone(tmp_path: Path) -> None:
    adapter = _adapter(
        {
            "role": "developer",
            "text": "{role} did task {task_id}, attempt {attempt}",
            "edits": [{"path": "notes/{task_id}.py", "content": 'DONE = {"task": "{task_id}"}\n'}],
        }
    )

    result = await adapter.execute(_inv(tmp_path, "developer", task_id="2.3", attempt=2))

    assert result.text == "developer did task 2.3, attempt 2"
    assert (tmp_path / "notes" / "2.3.py").read_text() == 'DONE = {"task": "2.3"}\n'


@pytest.mark.asyncio
async def test_edits_write_and_delete_files_in_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("obsolete\n")
    adapter = _adapter(
        {
            "role": "developer",
            "text": "done",
            "edits": [
                {"path": "src/pkg/mod.py", "content": "VALUE = 1\n"},
                {"path": "old.txt", "delete": True},
                {"path": "never-existed.txt", "delete": True},
            ],
        }
    )

    result = await adapter.execute(_inv(tmp_path, "developer"))

    assert result.success
    assert (tmp_path / "src" / "pkg" / "mod.py").read_text() == "VALUE = 1\n"
    assert not (tmp_path / "old.txt").exists()
    assert result.tool_calls == 3


@pytest.mark.asyncio
async def test_reported_figures_come_from_the_script(tmp_path: Path) -> None:
    adapter = _adapter(
        {
            "role": "explorer",
            "text": "map",
            "cost_usd": 0.25,
            "tokens_in": 1200,
            "tokens_out": 80,
            "tool_calls": 7,
        }
    )

    result = await adapter.execute(_inv(tmp_path, "explorer"))

    assert (result.cost_usd, result.tokens_in, result.tokens_out, result.tool_calls) == (0.25, 1200, 80, 7)


def test_an_edit_path_that_climbs_out_is_rejected_when_the_script_loads(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        json.dumps({"entries": [{"role": "developer", "edits": [{"path": "../x", "content": ""}]}]})
    )

    with pytest.raises(ConfigError) as info:
        ScriptedAdapter.from_file(script)

    assert str(script) in info.value.message
    assert "entries[0].edits[0].path" in info.value.message


@pytest.mark.asyncio
async def test_an_edit_through_a_symlink_out_of_cwd_is_refused_before_any_file_is_written(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    outside = tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (work / "link").symlink_to(outside, target_is_directory=True)
    adapter = _adapter(
        {
            "role": "developer",
            "edits": [{"path": "first.txt", "content": "1"}, {"path": "link/evil.txt", "content": "x"}],
        }
    )

    with pytest.raises(PathEscapeError, match=r"link/evil\.txt"):
        await adapter.execute(_inv(work, "developer"))

    assert not (outside / "evil.txt").exists()
    assert not (work / "first.txt").exists()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "script",
    [
        {"entries": [{"role": "judge", "text": "A", "latency_s": 0.05}]},
        {"latency_s": 0.05, "entries": [{"role": "judge", "text": "A"}]},
    ],
    ids=["entry latency", "script-wide latency"],
)
async def test_latency_within_the_deadline_delays_the_answer_and_is_its_duration(
    tmp_path: Path, script: dict[str, object]
) -> None:
    adapter = ScriptedAdapter(script=script)

    started = time.monotonic()
    result = await adapter.execute(_inv(tmp_path, "judge", timeout_s=5))

    assert result.success
    assert time.monotonic() - started >= 0.05
    assert result.duration_s == 0.05


@pytest.mark.asyncio
async def test_latency_beyond_the_deadline_is_a_timeout_without_edits(tmp_path: Path) -> None:
    adapter = _adapter(
        {"role": "developer", "latency_s": 30, "edits": [{"path": "late.txt", "content": "too late"}]}
    )

    started = time.monotonic()
    result = await adapter.execute(_inv(tmp_path, "developer", timeout_s=0.05))

    assert time.monotonic() - started < 5
    assert result.error is not None
    assert result.error.kind == "timeout"
    assert "0.05s deadline" in result.error.message
    assert not (tmp_path / "late.txt").exists()


@pytest.mark.asyncio
async def test_a_response_latency_replaces_the_script_latency_even_when_it_is_zero(tmp_path: Path) -> None:
    adapter = ScriptedAdapter(
        script={
            "latency_s": 0.05,
            "entries": [
                {"role": "reviewer", "responses": [{"text": "now", "latency_s": 0}, {"text": "default"}]},
                {"role": "judge", "text": "own", "latency_s": 0.02},
            ],
        }
    )

    started = time.monotonic()
    results = [await adapter.execute(_inv(tmp_path, role)) for role in ("reviewer", "reviewer", "judge")]

    assert [(r.text, r.duration_s) for r in results] == [("now", 0.0), ("default", 0.05), ("own", 0.02)]
    assert time.monotonic() - started >= 0.07


@pytest.mark.asyncio
async def test_a_script_latency_beyond_the_deadline_is_a_timeout(tmp_path: Path) -> None:
    adapter = ScriptedAdapter(script={"latency_s": 30, "entries": [{"role": "judge", "text": "A"}]})

    result = await adapter.execute(_inv(tmp_path, "judge", timeout_s=0.05))

    assert result.error is not None
    assert result.error.kind == "timeout"
    assert "takes 30s, over the 0.05s deadline" in result.error.message


@pytest.mark.asyncio
async def test_cancelling_the_caller_interrupts_the_latency_before_any_edit(tmp_path: Path) -> None:
    adapter = ScriptedAdapter(
        script={
            "latency_s": 60,
            "entries": [{"role": "developer", "edits": [{"path": "late.txt", "content": "too late"}]}],
        }
    )

    with anyio.move_on_after(0.05) as scope:
        await adapter.execute(_inv(tmp_path, "developer", timeout_s=120))

    assert scope.cancelled_caught
    assert not (tmp_path / "late.txt").exists()
    assert [call.role for call in adapter.calls] == ["developer"]


@pytest.mark.parametrize("value", [-0.5, float("nan"), float("inf")])
@pytest.mark.parametrize(
    ("where", "key"),
    [
        ("script", "latency_s"),
        ("entry", "entries[0].latency_s"),
        ("response", "entries[0].responses[0].latency_s"),
    ],
)
def test_a_negative_or_non_finite_latency_is_a_config_error_naming_the_field(
    where: str, key: str, value: float
) -> None:
    scripts: dict[str, dict[str, Any]] = {
        "script": {"latency_s": value, "entries": [{"role": "judge"}]},
        "entry": {"entries": [{"role": "judge", "latency_s": value}]},
        "response": {"entries": [{"role": "judge", "responses": [{"latency_s": value}]}]},
    }
    script = scripts[where]

    with pytest.raises(ConfigError) as info:
        ScriptedAdapter(script=script)

    assert info.value.key == key
    assert f"{key}: must be a finite number of seconds, 0 or more, not {value!r}" in info.value.message


def test_a_nan_latency_in_a_toml_script_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "script.toml"
    path.write_text('latency_s = nan\n\n[[entries]]\nrole = "judge"\n')

    with pytest.raises(ConfigError, match=r"script\.toml: latency_s: must be a finite number of seconds"):
        ScriptedAdapter.from_file(path)


@pytest.mark.asyncio
async def test_an_injected_failure_reports_its_kind_and_message_after_its_edits(tmp_path: Path) -> None:
    adapter = _adapter(
        {
            "role": "developer",
            "text": "partial work",
            "edits": [{"path": "half.py", "content": "x = (\n"}],
            "fail": {"kind": "is_error", "message": "turn limit reached on {task_id}"},
        }
    )

    result = await adapter.execute(_inv(tmp_path, "developer", task_id="1.4"))

    assert not result.success
    assert result.error is not None
    assert (result.error.kind, result.error.message) == ("is_error", "turn limit reached on 1.4")
    assert result.text == "partial work"
    assert (tmp_path / "half.py").exists()


@pytest.mark.asyncio
async def test_every_call_is_recorded_with_its_prompt(tmp_path: Path) -> None:
    adapter = _adapter({"role": "explorer", "text": "ok"})

    await adapter.execute(_inv(tmp_path, "explorer"))
    await adapter.execute(_inv(tmp_path, "nobody"))

    assert [(call.role, call.prompt) for call in adapter.calls] == [
        ("explorer", "prompt for explorer"),
        ("nobody", "prompt for nobody"),
    ]


@pytest.mark.asyncio
async def test_toml_and_json_files_give_the_same_script(tmp_path: Path) -> None:
    toml_file = tmp_path / "script.toml"
    toml_file.write_text(
        '[[entries]]\nrole = "reviewer"\nresponses = [{ text = "NEEDS_CHANGES" }, { text = "APPROVED" }]\n\n'
        '[[entries]]\nrole = "developer"\ntext = "done"\nedits = [{ path = "a.py", content = "A = 1\\n" }]\n'
    )
    json_file = tmp_path / "script.json"
    json_file.write_text(
        json.dumps(
            {
                "entries": [
                    {"role": "reviewer", "responses": [{"text": "NEEDS_CHANGES"}, {"text": "APPROVED"}]},
                    {"role": "developer", "text": "done", "edits": [{"path": "a.py", "content": "A = 1\n"}]},
                ]
            }
        )
    )

    from_toml = ScriptedAdapter.from_file(toml_file)
    from_json = ScriptedAdapter.from_file(json_file)

    assert from_toml.script == from_json.script
    assert await from_toml.healthcheck() == (True, "scripted: 2 entries")


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("bad.toml", "[[entries]\nrole = 'x'\n", "not valid TOML"),
        ("bad.json", '{"entries": [', "not valid JSON"),
        (
            "typo.toml",
            '[[entries]]\nrole = "developer"\ntxt = "hi"\n',
            "entries[0].txt: unknown key; allowed here: text, edits,",
        ),
        ("type.json", '{"entries": [{"role": "judge", "latency_s": "soon"}]}', "entries[0].latency_s:"),
        (
            "fail.json",
            '{"entries": [{"role": "a", "fail": {"kind": "is_error", "msg": "m"}}]}',
            "entries[0].fail.msg: unknown key; allowed here: kind, message",
        ),
        ("kind.json", '{"entries": [{"role": "a", "fail": {"kind": "oops", "message": "m"}}]}', "fail.kind:"),
        (
            "both.json",
            '{"entries": [{"role": "reviewer", "text": "x", "responses": [{"text": "y"}]}]}',
            "entries[0]: has both responses and text",
        ),
        (
            "dupe.json",
            '{"entries": [{"role": "reviewer"}, {"role": "reviewer", "text": "again"}]}',
            "entries[1] has the same role, task_id and attempt as entries[0]",
        ),
        (
            "edit.json",
            '{"entries": [{"role": "d", "edits": [{"path": "a.py"}]}]}',
            "entries[0].edits[0]: give either content",
        ),
        ("script.yaml", "entries: []\n", "must be a .toml or .json file"),
    ],
)
def test_a_malformed_script_is_a_config_error_naming_the_file_and_field(
    tmp_path: Path, name: str, content: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(content)

    with pytest.raises(ConfigError) as info:
        ScriptedAdapter.from_file(path)

    assert info.value.message.startswith(f"{path}: ")
    assert expected in info.value.message


def test_a_missing_script_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the script"):
        ScriptedAdapter.from_file(tmp_path / "absent.toml")


def test_an_invalid_in_memory_script_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"<in-memory script>: entries\[0\]\.role"):
        ScriptedAdapter(script={"entries": [{"text": "no role"}]})


@pytest.mark.asyncio
async def test_the_registry_builds_a_scripted_adapter_from_a_script_path(tmp_path: Path) -> None:
    script = tmp_path / "script.toml"
    script.write_text('[[entries]]\nrole = "architect"\ntext = "# Plan: demo"\n')

    adapter = create_adapter("scripted", repo_root=tmp_path, config=AutodevConfig(), script=script)

    assert isinstance(adapter, ScriptedAdapter)
    assert (await adapter.execute(_inv(tmp_path, "architect"))).text == "# Plan: demo"


def test_the_registry_asks_for_a_script_when_none_is_given(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a script"):
        create_adapter("scripted", repo_root=tmp_path, config=AutodevConfig())
