"""What the test servers (moto, the GCS emulator, Azurite) share: stopping their process and
waiting until they answer."""

from __future__ import annotations

import contextlib
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

# Loopback servers are never reached through a proxy the environment may name.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


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
