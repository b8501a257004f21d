"""A local OpenAI-compatible chat-completions server with scripted replies (the only fake in the suite).

It stands for an outside service (a hosted API or a vLLM/SGLang server) and
speaks the wire format on ``127.0.0.1`` with the standard library only:

- ``POST /v1/chat/completions`` (non-streaming) -> ``chat.completion`` JSON,
  native ``tool_calls`` included when the scripted reply has them;
- ``GET /v1/models`` -> the configured model ids;
- OpenAI-shaped error bodies for injected failures (429, 500, 503...), a wrong
  API key (401) and an unknown model (404, code ``model_not_found``);
- latency per reply (``delay_s``): a delay longer than the client's timeout
  is how a timeout is injected. Delays end early when the server stops.

Every request is recorded (:attr:`FakeChatServer.requests`), so tests count
what the server saw (e.g. one 429 then one success = 2 requests).

Usage (from any test folder)::

    import sys; from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests/ folder
    from fakes.chat_server import FakeChatServer, Reply

    with FakeChatServer([Reply(status=429), Reply("hello")], models=["m"]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        ...
        assert server.request_count == 2

Replies are consumed in order; when the script runs out, ``responder(request)``
(if given) or ``default`` answers -- ``responder`` suits concurrency tests that
compute a reply from each request body. Thread-safe: the server handles
requests concurrently (one thread each).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "model_not_found"),
    408: ("timeout", None),
    429: ("rate_limit_exceeded", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", None),
    503: ("server_error", None),
}


@dataclass
class Reply:
    """One scripted answer.

    :param content: assistant text.
    :param tool_calls: native tool calls as ``{"name": str, "arguments": dict | str}``
        (``id`` optional; a str ``arguments`` is sent verbatim, e.g. to inject invalid JSON).
    :param status: HTTP status; anything but 200 returns an OpenAI-shaped error.
    :param delay_s: seconds to wait before answering (latency / timeout injection).
    :param error_message: message of the error body (non-200 only).
    :param retry_after: value of a ``Retry-After`` header (seconds), if any.
    :param finish_reason: defaults to ``tool_calls`` when there are tool calls, else ``stop``.
    :param usage: overrides the computed token counts.
    """

    content: str = ""
    tool_calls: list[dict[str, Any]] | None = None
    status: int = 200
    delay_s: float = 0.0
    error_message: str | None = None
    retry_after: float | None = None
    finish_reason: str | None = None
    usage: dict[str, int] | None = None


@dataclass
class RecordedRequest:
    """A request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    received_at: float = field(default_factory=time.monotonic)


class FakeChatServer:
    """The server; start with ``with FakeChatServer(...) as s`` or :meth:`start`/:meth:`stop`.

    :param replies: scripted replies (a ``str`` is shorthand for ``Reply(content=str)``).
    :param models: model ids the server serves; other ids get 404 ``model_not_found``.
    :param api_key: when set, requests without ``Authorization: Bearer <api_key>`` get 401.
    :param default: reply used when the script is exhausted and no ``responder`` is given.
    :param responder: ``f(request_body) -> Reply`` used when the script is exhausted.
    """

    def __init__(
        self,
        replies: Iterable[Reply | str] = (),
        *,
        models: Iterable[str] = ("fake-model",),
        api_key: str | None = None,
        default: Reply | None = None,
        responder: Callable[[dict[str, Any]], Reply] | None = None,
    ) -> None:
        self._script: deque[Reply] = deque(Reply(r) if isinstance(r, str) else r for r in replies)
        self.models = list(models)
        self.api_key = api_key
        self.default = default or Reply("ok")
        self.responder = responder
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._counter = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FakeChatServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                server._handle(self)

            def do_POST(self) -> None:  # noqa: N802
                server._handle(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-chat-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; pending delays end at once."""
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeChatServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ inspection
    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the OpenAI SDK's ``base_url``."""
        if self._httpd is None:
            raise RuntimeError("FakeChatServer is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def request_count(self) -> int:
        """Chat-completion requests received so far (``/models`` calls not counted)."""
        with self._lock:
            return sum(1 for r in self.requests if r.path.endswith("/chat/completions"))

    def add(self, *replies: Reply | str) -> None:
        """Append replies to the script."""
        with self._lock:
            self._script.extend(Reply(r) if isinstance(r, str) else r for r in replies)

    # ------------------------------------------------------------------ handling
    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        body: dict[str, Any] | None = None
        length = int(h.headers.get("Content-Length") or 0)
        if length:
            try:
                body = json.loads(h.rfile.read(length))
            except json.JSONDecodeError:
                body = None
        path = h.path.split("?")[0].rstrip("/")
        with self._lock:
            self.requests.append(RecordedRequest(h.command, path, dict(h.headers.items()), body))
        if self.api_key is not None and h.headers.get("Authorization") != f"Bearer {self.api_key}":
            return self._error(h, 401, "Incorrect API key provided. You can find your API key in your account settings.")
        if h.command == "GET" and path.endswith("/models"):
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.models]
            return self._send(h, 200, {"object": "list", "data": data})
        if h.command != "POST" or not path.endswith("/chat/completions"):
            return self._error(h, 404, f"no route {h.command} {path}")
        if body is None or not isinstance(body.get("messages"), list):
            return self._error(h, 400, "request body must be JSON with a 'messages' list")
        if body.get("stream"):
            return self._error(h, 400, "the fake server does not stream; send stream=false")
        model = body.get("model")
        if model not in self.models:
            return self._error(h, 404, f"The model `{model}` does not exist or you do not have access to it.")
        reply = self._next_reply(body)
        if reply.delay_s and self._stopping.wait(reply.delay_s):
            return  # server stopping: drop the request
        if reply.status != 200:
            headers = {"Retry-After": f"{reply.retry_after:g}"} if reply.retry_after is not None else {}
            return self._error(h, reply.status, reply.error_message or f"injected failure {reply.status}", headers)
        return self._send(h, 200, self._completion(body, reply))

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self._counter += 1
            if self._script:
                return self._script.popleft()
        return self.responder(body) if self.responder is not None else self.default

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        with self._lock:
            n = self._counter
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.get("id", f"call_{n}_{i}"),
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": call["arguments"] if isinstance(call.get("arguments"), str)
                        else json.dumps(call.get("arguments", {})),
                    },
                }
                for i, call in enumerate(reply.tool_calls)
            ]
        prompt_chars = sum(len(str(m.get("content") or "")) for m in body["messages"])
        usage = reply.usage or {
            "prompt_tokens": max(1, prompt_chars // 4),
            "completion_tokens": max(1, len(reply.content) // 4) if reply.content or reply.tool_calls else 0,
        }
        usage = {**usage, "total_tokens": usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)}
        return {
            "id": f"chatcmpl-fake-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [{
                "index": 0,
                "message": message,
                "finish_reason": reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop"),
                "logprobs": None,
            }],
            "usage": usage,
        }

    def _error(self, h: BaseHTTPRequestHandler, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        kind, code = _ERROR_TYPES.get(status, ("server_error" if status >= 500 else "invalid_request_error", None))
        self._send(h, status, {"error": {"message": message, "type": kind, "param": None, "code": code}}, headers)

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout injection): nothing to answer
