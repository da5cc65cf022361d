"""A fake ``cursor-agent`` speaking the documented ``stream-json`` format (the real CLI cannot be installed).

It is a small Python script: it reads the prompt from stdin, appends its argv and the prompt's size to
``$FAKE_CURSOR_LOG`` (one JSON line per call), and plays the scenario in ``$FAKE_CURSOR_SCENARIO``: the
fields of a model server ``Scenario`` as JSON, so the fake answers the contract's scenarios the way the
scripted model server does, emitting the events of https://cursor.com/docs/cli/reference/output-format
(or failing the documented way: non-zero exit, message on stderr, no result).

- ``hang``: never answers, with a child in the same process group (the deadline must take both down);
- ``error_status``: a ``result`` with ``is_error`` true carrying ``error_message``, exit 1;
- ``refusal``: the provider's refusal (Anthropic's words) on stderr and exit 1, without a ``result``;
- ``crash`` (a key of its own): that message on stderr and exit 3, without a ``result``;
- ``write_path``: a ``writeToolCall`` writing ``write_content`` there, which lands only with ``--force``
  (or with no ``--mode``), then ``text``;
- otherwise ``text``.

A scenario with a ``marker`` plays only for a prompt holding it; any other prompt gets a plain answer.

As with the model server, a prompt holding the ``BIG_START``/``BIG_END`` sentinels gets the size and sha256
of what is between them appended to ``text``. The terminal ``result`` carries all assistant text
concatenated, as Cursor documents it; the adapter's answer is the text after the last tool call.
"""

from __future__ import annotations

import json
import stat
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from support.model_server import BIG_END, BIG_START, REFUSALS, Scenario

__all__ = ["SESSION_ID", "fake_cursor_env", "install_fake_cursor", "logged_calls"]

SESSION_ID = "c6b62c6f-7ead-4fd6-9922-e952131177ff"

_SCRIPT = r"""
import hashlib, json, os, subprocess, sys, time

argv = sys.argv[1:]
if argv == ["--version"]:
    print("2025.11.25-fake")
    sys.exit(0)
prompt = sys.stdin.read()
scenario = json.loads(os.environ.get("FAKE_CURSOR_SCENARIO") or "{}")
if scenario.get("marker") and scenario["marker"] not in prompt:
    # Like the model server: a scenario with a marker answers only the prompts holding it.
    scenario = {"text": "OK."}
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

text = scenario.get("text", "All done.")
if BIG_START in prompt and BIG_END in prompt:
    inner = prompt[prompt.index(BIG_START) + len(BIG_START):prompt.index(BIG_END)].encode()
    text += " BIG_BYTES=%d BIG_SHA256=%s" % (len(inner), hashlib.sha256(inner).hexdigest())

if scenario.get("refusal_error"):
    # What Cursor documents for a failure: a non-zero exit, the message on stderr, no result.
    sys.stderr.write("Error: " + scenario["refusal_error"] + "\n")
    sys.exit(1)
elif scenario.get("crash"):
    sys.stderr.write(scenario["crash"] + "\n")
    sys.exit(3)
elif scenario.get("hang"):
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    time.sleep(3600)
elif scenario.get("error_status") is not None:
    say("Trying.")
    result(scenario.get("error_message", "scripted model failure"), is_error=True, subtype="error")
    sys.exit(1)
elif scenario.get("write_path"):
    path = scenario["write_path"]
    args = {"path": path, "fileText": scenario.get("write_content", ""), "toolCallId": "toolu_1"}
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
    say(text)
    result("I'll create the file" + text)
else:
    say(text)
    result(text)
"""


def install_fake_cursor(bin_dir: Path) -> Path:
    """Write the fake as ``bin_dir/cursor-agent`` (run by this interpreter) and return its path."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "cursor-agent"
    constants = f"BIG_START, BIG_END, SESSION = {BIG_START!r}, {BIG_END!r}, {SESSION_ID!r}\n"
    script.write_text(f"#!{sys.executable}\n{constants}{_SCRIPT}")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def fake_cursor_env(log_file: Path, scenario: Scenario | dict[str, Any]) -> dict[str, str]:
    """The environment that makes the fake log to ``log_file`` and play ``scenario``."""
    fields = asdict(scenario) if isinstance(scenario, Scenario) else dict(scenario)
    if fields.get("refusal"):
        # Cursor's default models are Anthropic's: the refusal reads as Anthropic words it.
        status, body = REFUSALS[fields["refusal"]]["anthropic"]
        fields["refusal_error"] = f"{status} {json.dumps(body)}"
    return {"FAKE_CURSOR_LOG": str(log_file), "FAKE_CURSOR_SCENARIO": json.dumps(fields)}


def logged_calls(log_file: Path) -> list[dict[str, Any]]:
    """What the fake logged: ``{"argv": [...], "prompt_bytes": N}`` per call."""
    return [json.loads(line) for line in log_file.read_text().splitlines()]
