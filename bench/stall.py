#!/usr/bin/env python3
"""bench/stall.py: how long hostile connections keep `trainyard serve` from answering /healthz.

Starts `BIN serve --port 0 --workers 0` on a fresh data directory (its open-file limit set to
--nofile, 1,024 by default as on many hosts), then runs two attacks from loopback addresses
127.0.0.2 and up, never any other address:

  half      for --half-seconds, clients send a POST /train's headers and half its body and
            hang up, in rounds of 100 between probes (issue 9, part 5; any user token would
            do). Printed: how many, /healthz probes answered meanwhile, the server's sockets
            in CLOSE-WAIT when the attack stops, and how long after that /healthz answers.
  slowloris N connections from 11 addresses send a header line every 5 s for --seconds,
            reopening any the server closes (part 6). Printed: how many were opened in all
            and the most the server held at once (its established sockets), /healthz during
            the attack (answered probes, their median and worst time) and how long after the
            attack stops it answers.

/healthz is probed from 127.0.0.1 with a fresh connection and a 1 s timeout each time.

    python3 bench/stall.py [--bin build/trainyard] [--half-seconds 10] [--connections 1100]
                           [--seconds 30] [--max-wait 300] [--nofile 1024]
                           [--only half|slowloris]
"""
import argparse
import json
import os
import pathlib
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "e2e"))
from hostile import connect_from, half_post, healthz_seconds, send_and_leave, server_sockets  # noqa: E402


def start(binary, nofile):
    folder = tempfile.mkdtemp(prefix="stall-bench-")
    log = open(os.path.join(folder, "serve.log"), "w")

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen([binary, "serve", "--data-dir", os.path.join(folder, "data"),
                             "--port", "0", "--workers", "0"], stdout=log,
                            stderr=subprocess.STDOUT, preexec_fn=limit)
    deadline = time.time() + 30
    while time.time() < deadline:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)",
                      open(os.path.join(folder, "serve.log")).read())
        if m:
            token = open(os.path.join(folder, "data", "admin.token")).read().strip()
            return proc, int(m.group(1)), token
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("serve did not start: " + open(os.path.join(folder, "serve.log")).read())


def until_answered(port, t0, max_wait):
    while time.monotonic() - t0 < max_wait:
        if healthz_seconds(port, 1.0) is not None:
            return time.monotonic() - t0
        time.sleep(0.5)
    return None


def half(port, token, seconds, max_wait):
    data, sent, probes, i = half_post(token), 0, [], 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        for _ in range(100):  # a round, until a connection is not taken
            went = send_and_leave(f"127.0.0.{2 + i % 11}", port, data, timeout=0.2)
            i += 1
            if not went:
                break
            sent += 1
        probes.append(healthz_seconds(port, 1.0))
        time.sleep(0.25)
    held = server_sockets(port, "08")
    after = until_answered(port, time.monotonic(), max_wait)
    return {"attack": "half", "seconds": seconds, "connections": sent,
            "close_wait_at_stop": held, "healthz_probes": len(probes),
            "healthz_answered": sum(1 for p in probes if p is not None),
            "healthz_after_stop_s": None if after is None else round(after, 1)}


def slowloris(port, n, seconds, max_wait):
    sources = [f"127.0.0.{3 + i % 11}" for i in range(n)]
    socks = [None] * n
    probes, opened, last_line, server_open = [], 0, 0.0, []
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        line = time.monotonic() - last_line >= 5
        for i, s in enumerate(socks):
            if s is None:
                s = socks[i] = connect_from(sources[i], port, 1.0)
                if s is None:
                    continue
                opened += 1
                data = b"GET /healthz HTTP/1.1\r\n"
            elif line:
                data = b"X-Slow: 1\r\n"
            else:
                continue
            try:
                s.sendall(data)
            except OSError:
                s.close()
                socks[i] = None
        if line:
            last_line = time.monotonic()
        probes.append(healthz_seconds(port, 1.0))
        server_open.append(server_sockets(port, "01"))
        time.sleep(0.5)
    for s in socks:
        if s is not None:
            s.close()
    answered = [p for p in probes if p is not None]
    after = until_answered(port, time.monotonic(), max_wait)
    return {"attack": "slowloris", "connections": n, "opened_in_all": opened,
            "server_held_max": max(server_open), "seconds": seconds,
            "healthz_probes": len(probes), "healthz_answered": len(answered),
            "healthz_median_ms": round(statistics.median(answered) * 1e3, 1) if answered else None,
            "healthz_worst_ms": round(max(answered) * 1e3, 1) if answered else None,
            "healthz_after_stop_s": None if after is None else round(after, 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/trainyard")
    ap.add_argument("--connections", type=int, default=1100)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--half-seconds", type=float, default=10)
    ap.add_argument("--max-wait", type=float, default=300)
    ap.add_argument("--nofile", type=int, default=1024)
    ap.add_argument("--only", choices=("half", "slowloris"))
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    for attack in ("half", "slowloris"):
        if a.only and attack != a.only:
            continue
        proc, port, token = start(a.bin, a.nofile)
        try:
            if attack == "half":
                out = half(port, token, a.half_seconds, a.max_wait)
            else:
                out = slowloris(port, a.connections, a.seconds, a.max_wait)
        finally:
            proc.terminate()
            proc.wait()
        print(json.dumps({"bin": a.bin, "nofile": a.nofile, **out}), flush=True)


if __name__ == "__main__":
    main()
