"""A loopback HTTP file server that honours Range, for the read-only http(s):// backend.

Serves the files under a root folder (GET and HEAD, single `bytes=a-b` / `bytes=a-` ranges,
keep-alive, a strong ETag per file version as nginx sends one, If-Match answered 412 when it
names another); a path holding `forbidden` answers 403. Use from any test folder:
    from tests.support.httpserver import http_server  # noqa: F401
"""

from __future__ import annotations

import contextlib
import re
import shutil
import ssl
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")


class HTTPFileServer:
    """Serves `root` on 127.0.0.1; `.endpoint` is its base URL, `.connections` how many
    connections it accepted.

    Args:
        root: the folder served (an S3 client with this endpoint reads `root/bucket/key`).
        port: the port (0: any free one).
        tls: (certificate file, key file) to serve HTTPS.
        drop_idle: close each connection after its response while announcing keep-alive, as
            a store does with a connection left idle past its timeout.
        etags: send each file's ETag (its modification time and size).
        if_match: answer 412 to an If-Match naming another ETag (False: ignore If-Match, as
            some servers do).
        redirect_to: answer every request with a 302 to this base URL plus the path asked (a
            hub sending its files to a CDN).
    """

    def __init__(self, root: Path, port: int = 0, *, tls: tuple[Path, Path] | None = None,
                 drop_idle: bool = False, nagle: bool = False, etags: bool = True,
                 if_match: bool = True, redirect_to: str | None = None) -> None:
        self.root = root
        self.etags, self.if_match, self.redirect_to = etags, if_match, redirect_to
        self.authorizations: list[str | None] = []  # each request's Authorization header
        self.connections = 0
        handler = _handler_for(root, self)
        handler.disable_nagle_algorithm = not nagle  # nagle=True: as Python's http.server does
        self._server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._server.daemon_threads = True
        self.drop_idle = drop_idle
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            scheme = "https"
        self.endpoint = f"{scheme}://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def wait(self) -> None:
        self._thread.join()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler_for(root: Path, server: HTTPFileServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_FileHandler):
        pass

    Handler.root, Handler.server_state = root, server
    return Handler


class _FileHandler(BaseHTTPRequestHandler):
    root: Path
    server_state: HTTPFileServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no delayed-ACK wait

    def log_message(self, format: str, *args: object) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        self.server_state.connections += 1

    def _send(self, status: int, headers: dict[str, str], body: bytes = b"",
              length: int | None = None) -> None:
        self.send_response(status)
        size = len(body) if length is None else length  # a HEAD announces what a GET would send
        for key, value in {**headers, "Content-Length": str(size)}.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the client needed no more
                self.close_connection = True
        if self.server_state.drop_idle:
            self.close_connection = True

    def do_GET(self) -> None:
        self.server_state.authorizations.append(self.headers.get("Authorization"))
        if self.server_state.redirect_to is not None:
            return self._send(302, {"Location": self.server_state.redirect_to + self.path},
                              b"moved")
        relative = unquote(urlsplit(self.path).path).lstrip("/")
        path = (self.root / relative).resolve()
        if "forbidden" in relative:
            return self._send(403, {}, b"forbidden")
        if not path.is_file() or self.root.resolve() not in path.parents:
            return self._send(404, {}, b"not found")
        info = path.stat()
        size = info.st_size
        tag = {"ETag": f'"{info.st_mtime_ns:x}-{size:x}"'} if self.server_state.etags else {}
        asked = self.headers.get("If-Match")
        if asked is not None and self.server_state.if_match and asked != tag.get("ETag"):
            return self._send(412, {}, b"precondition failed")
        wanted = _RANGE.match(self.headers.get("Range") or "")
        start, end = 0, size
        if wanted is not None:
            start = int(wanted.group(1))
            end = min(int(wanted.group(2)) + 1 if wanted.group(2) else size, size)
            if start >= size:
                return self._send(416, {"Content-Range": f"bytes */{size}"})
        with open(path, "rb") as source:  # only the asked-for bytes are read
            source.seek(start)
            body = source.read(end - start) if self.command != "HEAD" else b""
        if wanted is None:
            return self._send(200, {"Accept-Ranges": "bytes", **tag}, body, length=size)
        return self._send(206, {"Content-Range": f"bytes {start}-{end - 1}/{size}", **tag}, body,
                          length=end - start)

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


def main() -> None:
    """`python -m tests.support.httpserver ROOT PORT [CERT KEY]`: serve ROOT (over HTTPS with
    a certificate) until killed (benchmarks)."""
    import sys

    tls = (Path(sys.argv[3]), Path(sys.argv[4])) if len(sys.argv) > 4 else None
    server = HTTPFileServer(Path(sys.argv[1]), port=int(sys.argv[2]), tls=tls)
    try:
        server.wait()
    finally:
        server.close()


if __name__ == "__main__":
    main()
