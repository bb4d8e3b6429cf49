"""A local webhook receiver (http.server on 127.0.0.1) that answers from a script of status codes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Receiver:
    url: str
    failures_first: int = 0  # answer 500 to this many requests, then 200
    requests: list[tuple[str, dict, int]] = field(default_factory=list)  # (idempotency key, body, status)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def delivered(self) -> list[tuple[str, dict]]:
        with self.lock:
            return [(key, body) for key, body, status in self.requests if status == 200]


def _handler(receiver: Receiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            with receiver.lock:
                status = 500 if len(receiver.requests) < receiver.failures_first else 200
                receiver.requests.append((self.headers.get("X-Idempotency-Key", ""), body, status))
            self.send_response(status)
            self.end_headers()
            self.wfile.write(b"ok" if status == 200 else b"try again")

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextmanager
def receiver_running(*, failures_first: int = 0) -> Iterator[Receiver]:
    receiver = Receiver(url="", failures_first=failures_first)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(receiver))
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
