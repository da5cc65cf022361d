"""The Cursor adapter driving a fake ``cursor-agent`` that speaks the documented ``stream-json`` format.

The real CLI cannot be installed here. The fake is a small Python script: it reads the prompt from stdin,
records its argv, and plays the scenario the prompt names, emitting the events of
https://cursor.com/docs/cli/reference/output-format (or failing the documented way: non-zero exit, message
on stderr, no result).
"""

from __future__ import annotations

import hashlib
import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from support.model_server import BIG_END, BIG_START
from support.processes import survivors

from autodev.adapters.base import AgentInvocation, ToolName
from autodev.adapters.cursor import CursorAdapter
from autodev.config.schema import AutodevConfig
from autodev.state.paths import AutodevPaths

pytestmark = pytest.mark.slow

WRITE_TOOLS: tuple[ToolName, ...] = ("read", "search", "write", "edit", "bash")

FAKE_CURSOR_AGENT = r"""
import hashlib, json, os, subprocess, sys, time

BIG_START, BIG_END = "<<BIG-PROMPT-START>>", "<<BIG-PROMPT-END>>"
SESSION = "c6b62c6f-7ead-4fd6-9922-e952131177ff"
argv = sys.argv[1:]
prompt = sys.stdin.read()
with open(os.environ["FAKE_CURSOR_LOG"], "a") as log:
    log.write(json.dumps({"argv": argv, "prompt_bytes": len(prompt.encode())}) + "\n")


def emit(event):
    event.setdefault("session_id", SESSION)
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def say(text):
    emit({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}})


def result(text, *, is_error=False, subtype="success"):
    emit({"type": "result", "subtype": subtype, "duration_ms": 1234, "duration_api_ms": 1234,
          "is_error": is_error, "result": text, "request_id": "10e11780"})


emit({"type": "system", "subtype": "init", "apiKeySource": "env", "cwd": os.getcwd(),
      "model": "Claude 4 Sonnet", "permissionMode": "default"})
emit({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": prompt}]}})
print("not json: a banner the parser must skip")

if "SCENARIO:write" in prompt:
    path = prompt.split("SCENARIO:write", 1)[1].split()[0]
    args = {"path": path, "fileText": "hello from cursor\n", "toolCallId": "toolu_1"}
    say("I'll create the file")
    started = {"writeToolCall": {"args": args}}
    emit({"type": "tool_call", "subtype": "started", "call_id": "toolu_1", "tool_call": started})
    if "--force" in argv or "--mode" not in argv:
        with open(path, "w") as handle:
            handle.write(args["fileText"])
        outcome = {"success": {"path": os.path.abspath(path), "linesCreated": 1, "fileSize": 18}}
    else:
        outcome = {"error": {"message": "writes are not allowed in ask mode"}}
    emit({"type": "tool_call", "subtype": "completed", "call_id": "toolu_1",
          "tool_call": {"writeToolCall": {"args": args, "result": outcome}}})
    say("Created " + path + ".")
    result("I'll create the fileCreated " + path + ".")
elif "SCENARIO:is_error" in prompt:
    say("Trying.")
    result("scripted model failure 7f3a", is_error=True, subtype="error")
    sys.exit(1)
elif "SCENARIO:crash" in prompt:
    sys.stderr.write("Error: scripted crash 9c1e: model unavailable\n")
    sys.exit(3)
elif "SCENARIO:hang" in prompt:
    # A child in the same process group: the adapter's deadline must take both down.
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    time.sleep(3600)
elif BIG_START in prompt:
    inner = prompt[prompt.index(BIG_START) + len(BIG_START):prompt.index(BIG_END)].encode()
    digest = "BIG_BYTES=%d BIG_SHA256=%s" % (len(inner), hashlib.sha256(inner).hexdigest())
    say("Read it. " + digest)
    result("Read it. " + digest)
else:
    say("All done.")
    result("All done.")
"""


@pytest.fixture
def fake_cli(tmp_path: Path) -> Path:
    script = tmp_path / "bin" / "cursor-agent"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\n{FAKE_CURSOR_AGENT}")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    return tmp_path / "fake-cursor.log"


@pytest.fixture
def adapter(fake_cli: Path, log_file: Path, repo: Path) -> CursorAdapter:
    return CursorAdapter(
        repo_root=repo,
        config=AutodevConfig(),
        executable=str(fake_cli),
        env={"FAKE_CURSOR_LOG": str(log_file)},
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def _invocation(
    workdir: Path, prompt: str, tools: tuple[ToolName, ...], timeout_s: float = 30.0
) -> AgentInvocation:
    return AgentInvocation(
        role="developer",
        prompt=prompt,
        cwd=workdir,
        model="sonnet-4",
        tools=tools,
        timeout_s=timeout_s,
        task_id="1.1",
    )


def _calls(log_file: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log_file.read_text().splitlines()]


@pytest.mark.asyncio
async def test_a_tool_call_that_writes_lands_and_the_result_is_parsed(
    adapter: CursorAdapter, log_file: Path, workdir: Path, repo: Path
) -> None:
    await adapter.init_workspace(workdir, [])

    result = await adapter.execute(_invocation(workdir, "Do it. SCENARIO:write hello.txt", WRITE_TOOLS))

    assert result.success, result.error
    assert (workdir / "hello.txt").read_text() == "hello from cursor\n"
    assert result.text == "Created hello.txt."
    assert result.tool_calls == 1
    assert result.session_id == "c6b62c6f-7ead-4fd6-9922-e952131177ff"
    assert (result.tokens_in, result.tokens_out, result.cost_usd) == (None, None, None)
    assert result.exit_code == 0
    assert result.transcript_path is not None
    assert result.transcript_path.parent == AutodevPaths(repo).transcripts_dir
    (call,) = _calls(log_file)
    assert call["argv"] == ["-p", "--output-format", "stream-json", "--force", "--model", "sonnet-4"]


@pytest.mark.asyncio
async def test_a_read_only_role_runs_in_ask_mode_without_force(
    adapter: CursorAdapter, log_file: Path, workdir: Path
) -> None:
    result = await adapter.execute(
        _invocation(workdir, "Review. SCENARIO:write hello.txt", ("read", "search"))
    )

    assert result.success, result.error
    assert not (workdir / "hello.txt").exists()
    assert result.tool_calls == 1
    (call,) = _calls(log_file)
    assert call["argv"] == ["-p", "--output-format", "stream-json", "--mode", "ask", "--model", "sonnet-4"]


@pytest.mark.asyncio
async def test_an_is_error_result_is_a_failure_with_its_message(
    adapter: CursorAdapter, workdir: Path
) -> None:
    result = await adapter.execute(_invocation(workdir, "SCENARIO:is_error", WRITE_TOOLS))

    assert not result.success
    assert result.error is not None
    assert result.error.kind == "is_error"
    assert "scripted model failure 7f3a" in result.error.message
    assert result.exit_code == 1


@pytest.mark.asyncio
async def test_a_crash_without_a_result_reports_the_exit_code_and_stderr(
    adapter: CursorAdapter, workdir: Path
) -> None:
    result = await adapter.execute(_invocation(workdir, "SCENARIO:crash", WRITE_TOOLS))

    assert not result.success
    assert result.error is not None
    assert result.error.kind == "nonzero_exit"
    assert "exited 3" in result.error.message
    assert "scripted crash 9c1e" in result.error.message
    assert result.exit_code == 3


@pytest.mark.asyncio
async def test_a_hang_times_out_and_leaves_no_process(adapter: CursorAdapter, workdir: Path) -> None:
    result = await adapter.execute(_invocation(workdir, "SCENARIO:hang", WRITE_TOOLS, timeout_s=2.0))

    assert result.error is not None
    assert result.error.kind == "timeout"
    assert result.exit_code is None
    assert 2.0 <= result.duration_s < 10.0
    assert adapter.last_pid is not None
    assert await survivors(adapter.last_pid) == []


@pytest.mark.asyncio
async def test_a_prompt_over_200_kb_arrives_intact_on_stdin(
    adapter: CursorAdapter, log_file: Path, workdir: Path
) -> None:
    payload = "".join(f"line {i:05d} {hashlib.sha256(str(i).encode()).hexdigest()} ü\n" for i in range(3000))
    assert len(payload.encode()) > 200_000
    expected = f"BIG_BYTES={len(payload.encode())} BIG_SHA256={hashlib.sha256(payload.encode()).hexdigest()}"
    prompt = f"Summarise:\n{BIG_START}{payload}{BIG_END}\n"

    result = await adapter.execute(_invocation(workdir, prompt, ()))

    assert result.success, result.error
    assert result.text == f"Read it. {expected}"
    (call,) = _calls(log_file)
    assert call["prompt_bytes"] == len(prompt.encode())
    assert all(len(arg) < 100 for arg in call["argv"])


@pytest.mark.asyncio
async def test_a_missing_executable_is_cli_missing(repo: Path, workdir: Path, tmp_path: Path) -> None:
    adapter = CursorAdapter(repo_root=repo, config=AutodevConfig(), executable=str(tmp_path / "no-such-cli"))

    result = await adapter.execute(_invocation(workdir, "Hello.", ()))

    assert result.error is not None
    assert result.error.kind == "cli_missing"
    assert "cursor.com/install" in result.error.message
