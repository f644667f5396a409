"""`validate` and `lengths` show a bar on a terminal, none with --no-progress or in a pipe."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

from tests.cli.conftest import REPO


def on_terminal(*args: str) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal; (exit code, what the terminal showed)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # 120 columns
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "streaming.cli", *map(str, args)],
                            stdout=subprocess.DEVNULL, stderr=slave, env=env)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    return proc.wait(timeout=120), shown.decode(errors="replace")


def converted(cli, tmp_path: Path) -> Path:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(f'{{"id": {i}, "tokens": [{i}, 1, 2]}}\n' for i in range(400)))
    out = tmp_path / "out"
    assert cli("convert", source, out, "--size-limit", "2kb", "-q").code == 0
    return out


def test_validate_shows_shards_checked_on_a_terminal(cli, tmp_path: Path):
    out = converted(cli, tmp_path)
    code, shown = on_terminal("validate", out)
    assert code == 0 and "validate" in shown and "shard" in shown and "100%" in shown
    code, shown = on_terminal("validate", out, "--no-progress")
    assert code == 0 and "100%" not in shown
    piped = cli("validate", out)
    assert piped.code == 0 and "100%" not in piped.err


def test_lengths_shows_samples_read_on_a_terminal(cli, tmp_path: Path):
    out = converted(cli, tmp_path)
    code, shown = on_terminal("lengths", out, "--column", "tokens")
    assert code == 0 and "lengths" in shown and "400/400" in shown
    piped = cli("lengths", out, "--column", "tokens", "--force")
    assert piped.code == 0 and "400/400" not in piped.err
