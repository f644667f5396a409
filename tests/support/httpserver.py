"""A loopback HTTP file server that honours Range, for the read-only http(s):// backend.

Serves the files under a root folder (GET and HEAD, single `bytes=a-b` / `bytes=a-` ranges,
keep-alive); a path holding `forbidden` answers 403. Use from any test folder:
    from tests.support.httpserver import http_server  # noqa: F401
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class HTTPFileServer:
    """Serves `root` on 127.0.0.1; `.endpoint` is its base URL."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(root))
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler_for(root: Path) -> type[BaseHTTPRequestHandler]:
    class Handler(_FileHandler):
        pass

    Handler.root = root
    return Handler


class _FileHandler(BaseHTTPRequestHandler):
    root: Path
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.send_response(status)
        for key, value in {**headers, "Content-Length": str(len(body))}.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        relative = unquote(urlsplit(self.path).path).lstrip("/")
        path = (self.root / relative).resolve()
        if "forbidden" in relative:
            return self._send(403, {}, b"forbidden")
        if not path.is_file() or self.root.resolve() not in path.parents:
            return self._send(404, {}, b"not found")
        data = path.read_bytes()
        wanted = _RANGE.match(self.headers.get("Range") or "")
        if wanted is None:
            return self._send(200, {"Accept-Ranges": "bytes"}, data)
        start = int(wanted.group(1))
        end = min(int(wanted.group(2)) + 1 if wanted.group(2) else len(data), len(data))
        if start >= len(data):
            return self._send(416, {"Content-Range": f"bytes */{len(data)}"})
        return self._send(206, {"Content-Range": f"bytes {start}-{end - 1}/{len(data)}"},
                          data[start:end])

    do_HEAD = do_GET

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()


@pytest.fixture(scope="session")
def http_server() -> Iterator[HTTPFileServer]:
    """One file server for the session over a fresh temporary root folder."""
    root = Path(tempfile.mkdtemp(prefix="http-root-"))
    server = HTTPFileServer(root)
    try:
        yield server
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)
