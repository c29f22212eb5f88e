"""A loopback HTTP server that speaks the OpenAI Chat Completions and Anthropic Messages
protocols, answering from recorded exchanges kept in `tests/data/llm/`, so the official SDKs'
real HTTP code runs in the tests. It keeps every request it receives, for checks.

By default each model's recorded answers are served in order, one per request. `by_turn=True`
answers by where the conversation stands instead (the n-th answer to a request carrying n-1
assistant messages), like a deterministic model: a run killed and resumed, or run many times, gets
the same answer to the same conversation."""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RECORDINGS = Path(__file__).resolve().parent / "data" / "llm"
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
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # the http.server hook's name
                protocol = PATHS.get(self.path.split("?")[0])
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                key = (protocol or "?", str(body.get("model")))
                with server.lock:
                    server.requests[key].append(body)
                    exchange = server.answer(key, body)
                if exchange is None:
                    self._send(599, {}, {"error": {"message": f"no recorded answer for {key}"}})
                    return
                self._send(exchange["status"], exchange.get("headers", {}), exchange["body"])

            def _send(self, status: int, headers: dict[str, str], body: Any) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
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
