"""A meta-schema server on loopback that counts its requests: what a hostile schema names."""

from __future__ import annotations

import http.server
import json
import threading
from typing import Any

CORE_ONLY = {"https://json-schema.org/draft/2020-12/vocab/core": True}
"""A vocabulary declaration under which a validator asserts nothing (only `$ref` and friends)."""


class MetaSchemaServer:
    """A loopback HTTP server (a thread) that answers every GET with a meta-schema declaring only
    the core vocabulary: a validator that follows it accepts everything. It counts the requests."""

    def __init__(self) -> None:
        served = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's name
                served.requests.append(self.path)
                body = json.dumps(
                    {
                        "$schema": "https://json-schema.org/draft/2020-12/schema",
                        "$id": f"{served.url}{self.path}",
                        "$vocabulary": CORE_ONLY,
                        "$dynamicAnchor": "meta",
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/schema+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

        self.requests: list[str] = []
        """The path of every request, in order."""
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.meta = f"{self.url}/meta"
        """The meta-schema's URL, for a `$schema`."""
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
