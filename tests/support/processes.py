"""What the test servers (moto, the GCS emulator, Azurite) share: a free loopback port, a child
that dies with its parent, stopping their process and waiting until they answer."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

# Loopback servers are never reached through a proxy the environment may name.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def die_with_parent() -> None:
    """Child-side (a Popen preexec_fn): get SIGTERM if the test runner dies, so no server
    outlives it (Linux)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def stop_process(process: subprocess.Popen, log: Path | None = None) -> None:
    """Terminate `process` (kill it if it does not exit in 5 s) and remove its `log`."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    if log is not None:
        with contextlib.suppress(OSError):
            log.unlink()


def answers_http(process: subprocess.Popen, url: str, deadline: float) -> bool:
    """Poll `url` until it answers, `process` exits, or the monotonic `deadline` passes."""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            OPENER.open(url, timeout=1).close()
            return True
        except (urllib.error.URLError, OSError):
            time.sleep(0.05)
    return False
