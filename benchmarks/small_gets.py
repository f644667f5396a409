"""Many small GETs over HTTPS, as a packed dataset's start-up makes them (one side file per
shard, every stream's index): our boto3-free S3 path, which keeps connections alive and shares
one TLS context, against a new connection and a new TLS context for every GET (how that path
worked before, and what a client without a pool pays), in the same run.

    .venv/bin/python benchmarks/small_gets.py [--objects 200] [--size 4096] [--rounds 5]

The store is a loopback HTTPS server in its own process (HTTP/1.1, keep-alive) with a
certificate made for the run by `openssl`, trusted through a bundle that also holds the
system's certificates (as a client of a real store loads them). A round trip costs
microseconds here: what remains is the CPU of the TLS handshakes and of loading the
certificates, to which a distant store adds its round trips.
Each round fetches every object one at a time and then 16 at once, both ways alternated; the
table prints medians and the median of the per-round ratios with a 95% bootstrap interval.
Prints only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from _stats import median_interval  # noqa: E402


def certificate(folder: Path) -> tuple[Path, Path, Path]:
    """(certificate, key, bundle): a self-signed certificate for 127.0.0.1 made by openssl,
    and the system's certificate bundle with it added, so that loading the bundle costs what
    loading the system's certificates costs a client of a real store."""
    cert, key, bundle = folder / "cert.pem", folder / "key.pem", folder / "bundle.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    system = ssl.get_default_verify_paths().cafile
    trusted = Path(system).read_bytes() if system and Path(system).is_file() else b""
    bundle.write_bytes(trusted + b"\n" + cert.read_bytes())
    return cert, key, bundle


def serve(root: Path, cert: Path, key: Path) -> tuple[subprocess.Popen, str]:
    """The HTTPS file server in its own process (its CPU is not the client's), and its URL."""
    from tests.support.processes import free_port

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tests.support.httpserver", str(root),
                               str(port), str(cert), str(key)], cwd=REPO)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server, f"https://127.0.0.1:{port}"
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise SystemExit("the HTTPS server did not start") from None
            time.sleep(0.05)


def ours(name: str) -> bytes:
    from streaming.storage.schemes import backend_for

    backend, path = backend_for(f"s3://bkt/{name}")
    return backend.get(path)


def fresh(name: str) -> bytes:
    """One GET on a new connection with a new TLS context, signed as ours are."""
    from streaming.storage.s3_quick import env_credentials, signed_headers, target_for

    creds = env_credentials()
    target = target_for("bkt", name, os.environ["S3_ENDPOINT_URL"], None)
    assert creds is not None and target is not None
    context = ssl.create_default_context(cafile=os.environ["AWS_CA_BUNDLE"])
    conn = http.client.HTTPSConnection(target.host, target.port, timeout=30, context=context)
    try:
        conn.request("GET", target.path, headers=signed_headers(target, creds, time.time()))
        return conn.getresponse().read()
    finally:
        conn.close()


def timed(get: Callable[[str], bytes], names: list[str], at_once: int) -> tuple[float, float]:
    """(wall, CPU) seconds per GET of every name, `at_once` in flight."""
    from streaming.util.at_once import map_at_once

    wall, cpu = time.perf_counter(), time.process_time()
    map_at_once(get, names, at_once, name="bench-get")
    return ((time.perf_counter() - wall) / len(names), (time.process_time() - cpu) / len(names))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=200)
    p.add_argument("--size", type=int, default=4096, help="bytes per object")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "root"
        (root / "bkt").mkdir(parents=True)
        names = [f"shard.{i:05}.mds.lengths" for i in range(args.objects)]
        for name in names:
            (root / "bkt" / name).write_bytes(os.urandom(args.size))
        cert, key, bundle = certificate(Path(tmp))
        server, endpoint = serve(root, cert, key)
        os.environ.update(S3_ENDPOINT_URL=endpoint, AWS_CA_BUNDLE=str(bundle),
                          AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                          AWS_REGION="us-east-1")
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "HTTPS_PROXY", "https_proxy"):
            os.environ.pop(name, None)
        assert ours(names[0]) == fresh(names[0])
        print(f"{args.objects} GETs of {args.size} bytes over loopback HTTPS, {args.rounds} "
              "rounds; ms per GET (median), ours / fresh (median of the rounds' ratios, [95%])")
        print(f"{'in flight':>9}  {'ours wall':>9}  {'fresh wall':>10}  {'ratio':>24}  "
              f"{'ours CPU':>8}  {'fresh CPU':>9}  {'ratio':>24}")
        for at_once in (1, 16):
            rows = []
            for r in range(args.rounds):
                order = (ours, fresh) if r % 2 == 0 else (fresh, ours)
                got = {get: timed(get, names, at_once) for get in order}
                rows.append((got[ours], got[fresh]))
            line = f"{at_once:>9}"
            for k in (0, 1):
                a = statistics.median(row[0][k] for row in rows) * 1e3
                b = statistics.median(row[1][k] for row in rows) * 1e3
                mid, low, high = median_interval([row[0][k] / row[1][k] for row in rows])
                line += f"  {a:>9.3f}  {b:>10.3f}  x{mid:.3f} [{low:.3f}, {high:.3f}]"
            print(line, flush=True)
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
