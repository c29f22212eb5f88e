"""A loopback HTTP server that speaks the OpenAI Chat Completions and Anthropic Messages
protocols, answering from recorded exchanges kept in `tests/data/llm/`, so the official SDKs'
real HTTP code runs in the tests. It keeps every request it receives (and when it arrived), for
checks.

By default each model's recorded answers are served in order, one per request. `by_turn=True`
answers by where the conversation stands instead (the n-th answer to a request carrying n-1
assistant messages), like a deterministic model: a run killed and resumed, or run many times, gets
the same answer to the same conversation.

It can also play a hostile endpoint: `serve()` queues canned exchanges for a model, each with a
status, headers, and either a JSON `body` or a `raw` text sent verbatim (NaN, Infinity, huge
numbers, anything a provider might send), optionally after `delay_s` of real time.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.paths import DATA

RECORDINGS = DATA / "llm"
PATHS = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}


def load_recordings() -> dict[tuple[str, str], list[dict[str, Any]]]:
    """(protocol, model) -> the recorded responses, in order."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for path in sorted(RECORDINGS.glob("*/*.json")):
        data = json.loads(path.read_text())
        found[(data["protocol"], data["model"])] = data["exchanges"]
    return found


class RecordedLLMServer:
    def __init__(
        self, recordings: dict[tuple[str, str], list[dict[str, Any]]], *, by_turn: bool = False
    ) -> None:
        self.recordings = recordings
        self.by_turn = by_turn
        self.queues: dict[tuple[str, str], deque[dict[str, Any]]] = {
            key: deque(exchanges) for key, exchanges in recordings.items()
        }
        self.requests: defaultdict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        self.arrivals: defaultdict[tuple[str, str], list[float]] = defaultdict(list)
        """`time.monotonic()` at each request's arrival, per (protocol, model)."""
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # the http.server hook's name
                protocol = PATHS.get(self.path.split("?")[0])
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                key = (protocol or "?", str(body.get("model")))
                with server.lock:
                    server.requests[key].append(body)
                    server.arrivals[key].append(time.monotonic())
                    exchange = server.answer(key, body)
                if exchange is None:
                    self._send(599, {}, {"error": {"message": f"no recorded answer for {key}"}})
                    return
                if exchange.get("delay_s"):
                    time.sleep(exchange["delay_s"])
                body = exchange["raw"] if "raw" in exchange else exchange["body"]
                self._send(exchange["status"], exchange.get("headers", {}), body)

            def _send(self, status: int, headers: dict[str, str], body: Any) -> None:
                payload = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                # The client may have given up waiting (a deadline): what the test wants.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def answer(self, key: tuple[str, str], body: dict[str, Any]) -> dict[str, Any] | None:
        if self.by_turn:
            exchanges = self.recordings.get(key, [])
            turn = sum(1 for m in body.get("messages", ()) if m.get("role") == "assistant")
            return exchanges[turn] if turn < len(exchanges) else None
        queue = self.queues.get(key)
        return queue.popleft() if queue else None

    def serve(self, protocol: str, model: str, *exchanges: dict[str, Any]) -> None:
        """Queue canned exchanges for `model` (after any recorded ones)."""
        with self.lock:
            self.queues.setdefault((protocol, model), deque()).extend(exchanges)

    def __enter__(self) -> RecordedLLMServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"
