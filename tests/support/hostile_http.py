"""A loopback HTTP server that serves a folder honestly except for the paths it is told to
attack: `trickle` (one byte every `pace` seconds, forever), `flood` (a body of `flood_bytes`
bytes of zeros whatever the file holds, announced or not). For the hostile-data tests and
benchmarks/fuzz_readers.py:
    with HostileHTTPServer(root) as server: server.attacks["x/index.json"] = "trickle"
"""

from __future__ import annotations

import contextlib
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


class HostileHTTPServer:
    """Serves `root` on 127.0.0.1 (`.endpoint`); `.attacks` maps a relative path to an attack.

    Args:
        root: the folder served.
        pace: seconds between two trickled bytes.
        flood_bytes: bytes a flood sends.
    """

    def __init__(self, root: Path, *, pace: float = 0.2, flood_bytes: int = 64 << 20) -> None:
        self.root = root
        self.pace = pace
        self.flood_bytes = flood_bytes
        self.attacks: dict[str, str] = {}
        self.stopped = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.stopped.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> HostileHTTPServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _handler(server: HostileHTTPServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            relative = unquote(urlsplit(self.path).path).lstrip("/")
            attack = server.attacks.get(relative)
            with contextlib.suppress(OSError):
                if attack == "trickle":
                    return self._trickle()
                if attack == "flood":
                    return self._flood()
                path = (server.root / relative).resolve()
                if not path.is_file() or server.root.resolve() not in path.parents:
                    return self._send(404, b"not found")
                self._send(200, path.read_bytes())

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _trickle(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(1 << 30))
            self.end_headers()
            self.wfile.flush()
            while not server.stopped.is_set():
                self.wfile.write(b"{")
                self.wfile.flush()
                time.sleep(server.pace)

        def _flood(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(server.flood_bytes))
            self.end_headers()
            block = bytes(1 << 20)
            left = server.flood_bytes
            while left > 0 and not server.stopped.is_set():
                self.wfile.write(block[:left])
                left -= len(block)

    return Handler
