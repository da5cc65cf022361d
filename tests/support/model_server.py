"""A scripted model server on 127.0.0.1 that the real agent CLIs talk to in tests.

It speaks four wire formats over SSE: Anthropic Messages (Claude Code), OpenAI Responses (Codex), OpenAI
Chat Completions (OpenCode) and Gemini ``streamGenerateContent`` (Gemini CLI). Which answer it gives is
chosen from the request's content, never from request order (some CLIs send side requests, e.g. a title
with no tools):

- a ``Scenario`` is selected by the first ``marker`` found anywhere in the request body;
- a request that already carries a tool result gets the scenario's final text;
- a request that offers tools gets the scenario's tool call (a file write) when it has one;
- any other request (no tools offered) gets the final text.

Scenarios can also answer with an HTTP error or never answer (``hang``). Every request is recorded.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = [
    "BIG_END",
    "BIG_START",
    "REFUSALS",
    "ModelServer",
    "RecordedRequest",
    "Refusal",
    "Scenario",
]

# A prompt sent between these sentinels is hashed by the server (delivery-intact checks for huge prompts).
BIG_START = "<<BIG-PROMPT-START>>"
BIG_END = "<<BIG-PROMPT-END>>"


@dataclass(frozen=True, slots=True)
class Scenario:
    """How to answer requests whose body contains ``marker`` (an empty marker matches everything)."""

    marker: str = ""
    text: str = "All done."
    write_path: str | None = None
    write_content: str = ""
    error_status: int | None = None
    error_message: str = "scripted model failure"
    # A provider's own refusal, answered with that provider's real status, body and headers (``REFUSALS``).
    refusal: Refusal | None = None
    # With ``refusal``: refuse only the first ``refusals`` requests this scenario answers, then answer as
    # if there were no refusal (a provider that recovers). None refuses every one.
    refusals: int | None = None
    hang: bool = False
    input_tokens: int = 120
    output_tokens: int = 30


Refusal = Literal["rate_limited", "unavailable", "auth_failed", "usage_limit", "context_overflow"]

# (status, body) per API of each refusal, as the providers send them.
REFUSALS: dict[Refusal, dict[str, tuple[int, Any]]] = {
    "rate_limited": {
        "anthropic": (
            429,
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "Number of request tokens has exceeded your per-minute rate limit",
                },
            },
        ),
        "openai": (
            429,
            {
                "error": {
                    "message": "Rate limit reached for requests per min (RPM): Limit 3, Used 3.",
                    "type": "requests",
                    "param": None,
                    "code": "rate_limit_exceeded",
                }
            },
        ),
        "gemini": (
            429,
            {
                "error": {
                    "code": 429,
                    "message": "Resource has been exhausted (e.g. check quota).",
                    "status": "RESOURCE_EXHAUSTED",
                }
            },
        ),
    },
    "unavailable": {
        "anthropic": (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        "openai": (
            503,
            {
                "error": {
                    "message": "The server is overloaded or not ready yet.",
                    "type": "server_error",
                    "param": None,
                    "code": None,
                }
            },
        ),
        "gemini": (
            503,
            {
                "error": {
                    "code": 503,
                    "message": "The model is overloaded. Please try again later.",
                    "status": "UNAVAILABLE",
                }
            },
        ),
    },
    "auth_failed": {
        "anthropic": (
            401,
            {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
        ),
        "openai": (
            401,
            {
                "error": {
                    "message": "Incorrect API key provided: test-key. You can find your API key at "
                    "https://platform.openai.com/account/api-keys.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            },
        ),
        "gemini": (
            400,
            {
                "error": {
                    "code": 400,
                    "message": "API key not valid. Please pass a valid API key.",
                    "status": "INVALID_ARGUMENT",
                }
            },
        ),
    },
    # The account's money or quota is used up (not a per-minute rate).
    "usage_limit": {
        "anthropic": (
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "Your credit balance is too low to access the Anthropic API. Please go to "
                    "Plans & Billing to upgrade or purchase credits.",
                },
            },
        ),
        "openai": (
            429,
            {
                "error": {
                    "message": "You exceeded your current quota, please check your plan and billing details.",
                    "type": "insufficient_quota",
                    "param": None,
                    "code": "insufficient_quota",
                }
            },
        ),
        "gemini": (
            429,
            {
                "error": {
                    "code": 429,
                    "message": "You exceeded your current quota, please check your plan and billing details. "
                    "Quota exceeded for metric: generativelanguage.googleapis.com/"
                    "generate_content_free_tier_requests, limit: 250, model: gemini-2.5-flash",
                    "status": "RESOURCE_EXHAUSTED",
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                            "violations": [
                                {
                                    "quotaMetric": "generativelanguage.googleapis.com/"
                                    "generate_content_free_tier_requests",
                                    "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                                }
                            ],
                        }
                    ],
                }
            },
        ),
    },
    "context_overflow": {
        "anthropic": (
            400,
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 215000 tokens > 200000 maximum",
                },
            },
        ),
        "openai": (
            400,
            {
                "error": {
                    "message": "Your input exceeds the context window of this model. Please adjust your "
                    "input and try again.",
                    "type": "invalid_request_error",
                    "param": "input",
                    "code": "context_length_exceeded",
                }
            },
        ),
        "gemini": (
            400,
            {
                "error": {
                    "code": 400,
                    "message": "The input token count (1500000) exceeds the maximum number of tokens allowed "
                    "(1048576).",
                    "status": "INVALID_ARGUMENT",
                }
            },
        ),
    },
}


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    path: str
    body: dict[str, Any]
    api: str
    tool_names: tuple[str, ...]
    has_tool_result: bool


@dataclass(slots=True)
class _State:
    scenarios: list[Scenario] = field(default_factory=list)
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stop: threading.Event = field(default_factory=threading.Event)
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))
    # Requests refused so far per scenario (by identity: the scenarios in ``scenarios`` now).
    refused: dict[int, int] = field(default_factory=dict)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def big_prompt_digest(body: dict[str, Any]) -> str | None:
    """sha256 of the text between the sentinels in the first string carrying them, if any."""
    for text in _strings(body):
        start = text.find(BIG_START)
        end = text.find(BIG_END)
        if start >= 0 and end > start:
            inner = text[start + len(BIG_START) : end]
            return f"BIG_BYTES={len(inner.encode())} BIG_SHA256={hashlib.sha256(inner.encode()).hexdigest()}"
    return None


def _api_of(path: str) -> str:
    if path.startswith("/v1/messages"):
        return "anthropic"
    if path.startswith("/v1/responses"):
        return "responses"
    if path.startswith("/v1/chat/completions"):
        return "chat"
    if ":streamGenerateContent" in path or ":generateContent" in path:
        return "gemini"
    return "unknown"


def _tool_names(api: str, body: dict[str, Any]) -> tuple[str, ...]:
    names: list[str] = []
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        if api == "gemini":
            for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
                names.append(str(decl.get("name")))
        elif api == "chat":
            names.append(str((tool.get("function") or {}).get("name")))
        else:
            names.append(str(tool.get("name")))
    return tuple(names)


def _has_tool_result(api: str, body: dict[str, Any]) -> bool:
    if api == "anthropic":
        return any(
            isinstance(block, dict) and block.get("type") == "tool_result"
            for message in body.get("messages") or []
            if isinstance(message.get("content"), list)
            for block in message["content"]
        )
    if api == "responses":
        raw_items = body.get("input")
        items: list[Any] = raw_items if isinstance(raw_items, list) else []
        return any(
            isinstance(item, dict) and str(item.get("type", "")).endswith("_call_output") for item in items
        )
    if api == "chat":
        return any(message.get("role") == "tool" for message in body.get("messages") or [])
    if api == "gemini":
        return any(
            "functionResponse" in part or "function_response" in part
            for content in body.get("contents") or []
            for part in content.get("parts") or []
        )
    return False


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the default stderr access log."""

    # --- plumbing -------------------------------------------------------------------------------

    def _read_body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(raw or b"{}")
        except ValueError:
            return {}
        return parsed if isinstance(parsed, dict) else {}

    def _send_json(self, status: int, payload: Any, *, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _event(self, data: Any, event: str | None = None) -> None:
        chunk = ""
        if event:
            chunk += f"event: {event}\n"
        chunk += f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
        self.wfile.write(chunk.encode())
        self.wfile.flush()

    def _refuses(self, scenario: Scenario) -> bool:
        """Whether ``scenario`` refuses this request (``Scenario.refusals``), counting it when it does."""
        state = self.server.state
        with state.lock:
            refused = state.refused.get(id(scenario), 0)
            if scenario.refusals is not None and refused >= scenario.refusals:
                return False
            state.refused[id(scenario)] = refused + 1
            return True

    def _next_id(self) -> int:
        with self.server.state.lock:
            return next(self.server.state.ids)

    # --- routing --------------------------------------------------------------------------------

    def do_GET(self) -> None:
        if self.path.startswith("/v1/models") or self.path.startswith("/v1beta/models"):
            self._send_json(200, {"object": "list", "data": [], "models": []})
        else:
            self._send_json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        body = self._read_body()
        api = _api_of(self.path)
        if self.path.startswith("/v1/messages/count_tokens"):
            self._send_json(200, {"input_tokens": 100})
            return
        names = _tool_names(api, body)
        tool_result = _has_tool_result(api, body)
        state = self.server.state
        with state.lock:
            state.requests.append(RecordedRequest(self.path, body, api, names, tool_result))
            scenarios = list(state.scenarios)
        text_body = json.dumps(body)
        scenario = next((s for s in scenarios if s.marker and s.marker in text_body), None)
        if scenario is None:
            scenario = next((s for s in scenarios if not s.marker), Scenario())
        if scenario.hang:
            state.stop.wait(3600)
            return
        if scenario.refusal is not None and self._refuses(scenario):
            status, payload = REFUSALS[scenario.refusal]["openai" if api in ("responses", "chat") else api]
            # Providers say when to come back on a 429 or a 5xx (OpenAI's API also in milliseconds, which
            # OpenCode prefers); short waits keep the CLIs' own retries short.
            after = {"retry-after": "1", "retry-after-ms": "50"} if scenario.refusal != "auth_failed" else {}
            self._send_json(status, payload, headers=after)
            return
        if scenario.error_status is not None:
            self._send_error(api, scenario)
            return
        final_text = scenario.text
        digest = big_prompt_digest(body)
        if digest:
            final_text = f"{final_text} {digest}"
        wants_tool = scenario.write_path is not None and bool(names) and not tool_result
        if api == "anthropic":
            self._anthropic(body, scenario, final_text, wants_tool)
        elif api == "responses":
            self._responses(scenario, final_text, wants_tool)
        elif api == "chat":
            self._chat(body, scenario, final_text, wants_tool)
        elif api == "gemini":
            self._gemini(scenario, final_text, wants_tool)
        else:
            self._send_json(404, {"error": {"message": f"unknown endpoint {self.path}"}})

    def _send_error(self, api: str, scenario: Scenario) -> None:
        status = scenario.error_status or 500
        message = scenario.error_message
        if api == "anthropic":
            payload: Any = {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        elif api == "gemini":
            payload = {"error": {"code": status, "message": message, "status": "INVALID_ARGUMENT"}}
        else:
            payload = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
        self._send_json(status, payload)

    # --- Anthropic Messages ---------------------------------------------------------------------

    def _anthropic(self, body: dict[str, Any], scenario: Scenario, text: str, wants_tool: bool) -> None:
        n = self._next_id()
        model = body.get("model", "claude")
        self._start_sse()
        self._event(
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_{n:08d}",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": scenario.input_tokens, "output_tokens": 1},
                },
            },
            "message_start",
        )
        if wants_tool and "Write" in _tool_names("anthropic", body):
            tool_input = json.dumps({"file_path": scenario.write_path, "content": scenario.write_content})
            block = {"type": "tool_use", "id": f"toolu_{n:08d}", "name": "Write", "input": {}}
            self._event(
                {"type": "content_block_start", "index": 0, "content_block": block}, "content_block_start"
            )
            delta = {"type": "input_json_delta", "partial_json": tool_input}
            self._event({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            self._event(
                {"type": "content_block_start", "index": 0, "content_block": block}, "content_block_start"
            )
            delta = {"type": "text_delta", "text": text}
            self._event({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
            stop = "end_turn"
        self._event({"type": "content_block_stop", "index": 0}, "content_block_stop")
        self._event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": scenario.output_tokens},
            },
            "message_delta",
        )
        self._event({"type": "message_stop"}, "message_stop")

    # --- OpenAI Responses -----------------------------------------------------------------------

    def _responses(self, scenario: Scenario, text: str, wants_tool: bool) -> None:
        n = self._next_id()
        response_id = f"resp_{n:08d}"
        seq = itertools.count()
        usage = {
            "input_tokens": scenario.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": scenario.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": scenario.input_tokens + scenario.output_tokens,
        }
        base = {"id": response_id, "object": "response", "created_at": 0, "model": "gpt-5.5"}
        self._start_sse()
        self._event(
            {
                "type": "response.created",
                "sequence_number": next(seq),
                "response": {**base, "status": "in_progress", "output": []},
            },
            "response.created",
        )
        self._event(
            {
                "type": "response.in_progress",
                "sequence_number": next(seq),
                "response": {**base, "status": "in_progress", "output": []},
            },
            "response.in_progress",
        )
        if wants_tool:
            patch = "*** Begin Patch\n*** Add File: {}\n{}\n*** End Patch\n".format(
                scenario.write_path, "\n".join("+" + line for line in scenario.write_content.splitlines())
            )
            item_id = f"ctc_{n:08d}"
            item = {
                "type": "custom_tool_call",
                "id": item_id,
                "call_id": f"call_{n:08d}",
                "name": "apply_patch",
            }
            self._event(
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(seq),
                    "output_index": 0,
                    "item": {**item, "input": "", "status": "in_progress"},
                },
                "response.output_item.added",
            )
            self._event(
                {
                    "type": "response.custom_tool_call_input.delta",
                    "sequence_number": next(seq),
                    "output_index": 0,
                    "item_id": item_id,
                    "delta": patch,
                },
                "response.custom_tool_call_input.delta",
            )
            self._event(
                {
                    "type": "response.custom_tool_call_input.done",
                    "sequence_number": next(seq),
                    "output_index": 0,
                    "item_id": item_id,
                    "input": patch,
                },
                "response.custom_tool_call_input.done",
            )
            done_item: dict[str, Any] = {**item, "input": patch, "status": "completed"}
        else:
            item_id = f"msg_{n:08d}"
            message = {"type": "message", "id": item_id, "role": "assistant"}
            self._event(
                {
                    "type": "response.output_item.added",
                    "sequence_number": next(seq),
                    "output_index": 0,
                    "item": {**message, "status": "in_progress", "content": []},
                },
                "response.output_item.added",
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            self._event(
                {
                    "type": "response.content_part.added",
                    "sequence_number": next(seq),
                    "output_index": 0,
                    "item_id": item_id,
                    "content_index": 0,
                    "part": part,
                },
                "response.content_part.added",
            )
            self._event(
                {
                    "type": "response.output_text.delta",
                    "sequence_number": next(seq),
                    "output_index": 0,
                    "item_id": item_id,
                    "content_index": 0,
                    "delta": text,
                },
                "response.output_text.delta",
            )
            self._event(
                {
                    "type": "response.output_text.done",
                    "sequence_number": next(seq),
                    "output_index": 0,
                    "item_id": item_id,
                    "content_index": 0,
                    "text": text,
                },
                "response.output_text.done",
            )
            full_part = {"type": "output_text", "text": text, "annotations": []}
            self._event(
                {
                    "type": "response.content_part.done",
                    "sequence_number": next(seq),
                    "output_index": 0,
                    "item_id": item_id,
                    "content_index": 0,
                    "part": full_part,
                },
                "response.content_part.done",
            )
            done_item = {**message, "status": "completed", "content": [full_part]}
        self._event(
            {
                "type": "response.output_item.done",
                "sequence_number": next(seq),
                "output_index": 0,
                "item": done_item,
            },
            "response.output_item.done",
        )
        self._event(
            {
                "type": "response.completed",
                "sequence_number": next(seq),
                "response": {**base, "status": "completed", "output": [done_item], "usage": usage},
            },
            "response.completed",
        )

    # --- OpenAI Chat Completions ----------------------------------------------------------------

    def _chat(self, body: dict[str, Any], scenario: Scenario, text: str, wants_tool: bool) -> None:
        n = self._next_id()
        model = body.get("model", "mock-model")
        base = {"id": f"chatcmpl-{n}", "object": "chat.completion.chunk", "created": 0, "model": model}
        usage = {
            "prompt_tokens": scenario.input_tokens,
            "completion_tokens": scenario.output_tokens,
            "total_tokens": scenario.input_tokens + scenario.output_tokens,
        }
        names = _tool_names("chat", body)
        self._start_sse()
        self._event(
            {
                **base,
                "choices": [
                    {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
                ],
            }
        )
        if wants_tool and "write" in names:
            args = json.dumps({"filePath": scenario.write_path, "content": scenario.write_content})
            call = {
                "index": 0,
                "id": f"call_{n:08d}",
                "type": "function",
                "function": {"name": "write", "arguments": args},
            }
            self._event(
                {**base, "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}
            )
            finish = "tool_calls"
        else:
            self._event(
                {**base, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
            )
            finish = "stop"
        self._event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage})
        self._event("[DONE]")

    # --- Gemini ---------------------------------------------------------------------------------

    def _gemini(self, scenario: Scenario, text: str, wants_tool: bool) -> None:
        if int(self.headers.get("Content-Length") or 0) > 64 * 1024:
            # Gemini CLI echoes the prompt on stdout and drops whatever it has not flushed when it exits;
            # an instant answer to a big prompt can beat the reader draining that echo. A real API takes
            # longer than this to read such a prompt.
            self.server.state.stop.wait(1.0)
        usage = {
            "promptTokenCount": scenario.input_tokens,
            "candidatesTokenCount": scenario.output_tokens,
            "totalTokenCount": scenario.input_tokens + scenario.output_tokens,
        }
        if wants_tool:
            args = {"file_path": scenario.write_path, "content": scenario.write_content}
            part: dict[str, Any] = {"functionCall": {"name": "write_file", "args": args}}
        else:
            part = {"text": text}
        candidate = {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        self._start_sse()
        self._event({"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-2.5-flash"})


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: _State) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


class ModelServer:
    """Start with ``with ModelServer([...]) as server:``; ``server.url`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, scenarios: list[Scenario] | None = None) -> None:
        self._state = _State(scenarios=list(scenarios or [Scenario()]))
        self._server = _Server(self._state)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._state.lock:
            return list(self._state.requests)

    def set_scenarios(self, scenarios: list[Scenario]) -> None:
        with self._state.lock:
            self._state.scenarios = list(scenarios)
            self._state.refused = {}

    def start(self) -> ModelServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self._state.stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
