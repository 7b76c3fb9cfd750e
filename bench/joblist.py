"""Job listings at 1,000,000 jobs: builds a data directory whose database holds N jobs (a
realistic mix of statuses, names and owners, documents as serve stores them), starts the real
`trainyard serve` on it, and times the pages the dashboard and clients read.

usage: joblist.py TRAINYARD_BIN DATA_DIR [--jobs N] [--requests R] [--keep]
  DATA_DIR is made (or reused when it already holds N jobs: building takes a minute or two).
Prints one JSON line per page: {"page", "n", "p50_ms", "p99_ms", "max_ms", "rows"} and a last
line with the load average. Times are client-side, one keep-alive connection, requests one
after another (the latency a dashboard or script sees), Python's own overhead included.

The mix: 90% succeeded, 5% failed, 3% cancelled, 2% queued; 200 names (a name is one
experiment's series of runs); an admin and 20 user tokens owning them round-robin-ish; the
newest 10,000 jobs have 20 epochs of metrics and their history (submitted, leased, finished)."""
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
import time

import requests

DAY_MS = 24 * 3600 * 1000


def percentile(sorted_ms, p):
    return sorted_ms[min(len(sorted_ms) - 1, (len(sorted_ms) * p) // 100)]


def make_tokens(binary, data_dir, users):
    """The admin token (serve made it) and `users` user tokens: {name: (id, secret)}."""
    out = {}
    for i in range(users):
        p = subprocess.run([binary, "token", "create", "--data-dir", data_dir, "--name",
                            f"user{i}", "--role", "user", "--json"], capture_output=True,
                           text=True, check=True)
        t = json.loads(p.stdout)
        out[f"user{i}"] = (t["id"], t["token"])
    return out


def document(name, lr, epochs, seed):
    return json.dumps({
        "name": name, "dataset_url": f"https://data.example.com/sets/{name.split('-')[0]}.csv",
        "dataset_format": "csv", "label_column": "label", "task": "classification",
        "model": {"layers": [{"type": "dense", "units": 128, "activation": "relu"},
                             {"type": "dropout", "rate": 0.2},
                             {"type": "dense", "units": 64, "activation": "relu"}]},
        "hyperparameters": {"epochs": epochs, "batch_size": 64, "learning_rate": lr,
                            "optimizer": "adam", "loss": "auto", "validation_split": 0.2,
                            "shuffle": True, "seed": seed, "weight_decay": 0.0},
        "resources": {"device": "any"}, "max_attempts": 3, "max_runtime_seconds": 86400,
        "priority": 0, "delete_checkpoint": True}, separators=(",", ":"))


def build(binary, data_dir, n):
    os.makedirs(data_dir, exist_ok=True)
    db_path = os.path.join(data_dir, "trainyard.db")
    if os.path.exists(db_path):
        with sqlite3.connect(db_path) as db:
            if db.execute("SELECT count(*) FROM jobs").fetchone()[0] >= n:
                return json.load(open(os.path.join(data_dir, "bench-tokens.json")))
    # one serve start migrates the database and makes the admin token
    p = subprocess.Popen([binary, "serve", "--data-dir", data_dir, "--port", "0", "--workers",
                          "0", "--predict-device", "none"], stdout=subprocess.PIPE, text=True)
    for line in p.stdout:
        if "listening on" in line:
            break
    p.terminate()
    p.wait()
    tokens = make_tokens(binary, data_dir, 20)
    with sqlite3.connect(db_path) as db:
        admin = db.execute("SELECT id FROM tokens WHERE role = 'admin'").fetchone()[0]
    tokens["admin"] = (admin, open(os.path.join(data_dir, "admin.token")).read().strip())
    owners = [tokens[f"user{i}"][0] for i in range(20)] + [admin] * 5
    rng = random.Random(7)
    names = [f"{base}-{k}" for base in ("mnist", "cifar", "churn", "fraud", "iris", "wine",
                                        "shapes", "digits") for k in range(25)]
    now = int(time.time() * 1000)
    t0 = time.time()
    db = sqlite3.connect(db_path)
    db.execute("PRAGMA synchronous = OFF")
    db.execute("BEGIN")
    rows = []
    for seq in range(1, n + 1):
        created = now - (n - seq) * 500  # one job every 0.5 s: 1M jobs span ~6 days
        r = rng.random()
        status = ("succeeded" if r < 0.90 else "failed" if r < 0.95 else "cancelled"
                  if r < 0.98 else "queued")
        if seq > n - 200:
            status = "queued"  # the newest few wait
        name = names[rng.randrange(len(names))]
        started = created + 200 if status != "queued" else None
        finished = started + rng.randrange(10_000, 600_000) if started else None
        error = "dataset: HTTP 404 from https://data.example.com/sets/x.csv" \
            if status == "failed" else None
        rows.append((seq, "%032x" % rng.getrandbits(128), name, status,
                     1 if started else 0, 3, 0, "any", 86400,
                     document(name, rng.choice([1e-3, 3e-3, 1e-2]), 20, seq), created, started,
                     finished, (finished - started) if finished else 0, error,
                     "cpu:0" if started else None, owners[rng.randrange(len(owners))],
                     40 if started else 0))
        if len(rows) == 10000:
            db.executemany(
                "INSERT INTO jobs (seq, id, name, status, attempt, max_attempts, priority,"
                " device_kind, max_runtime_seconds, document, created_at, started_at,"
                " finished_at, runtime_ms, error, device, owner, log_lines)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
            rows = []
    if rows:
        db.executemany(
            "INSERT INTO jobs (seq, id, name, status, attempt, max_attempts, priority,"
            " device_kind, max_runtime_seconds, document, created_at, started_at,"
            " finished_at, runtime_ms, error, device, owner, log_lines)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    # the newest 10,000 finished jobs: metrics and history
    recent = db.execute("SELECT seq, created_at, started_at, finished_at, status FROM jobs"
                        " WHERE finished_at IS NOT NULL ORDER BY seq DESC LIMIT 10000").fetchall()
    for seq, created, started, finished, status in recent:
        db.execute("INSERT INTO job_events (job_seq, at, from_status, to_status, attempt, reason)"
                   " VALUES (?, ?, NULL, 'queued', 0, 'submitted'),"
                   " (?, ?, 'queued', 'running', 1, 'leased by worker w'),"
                   " (?, ?, 'running', ?, 1, 'reported by the worker')",
                   (seq, created, seq, started, seq, finished, status))
        db.executemany("INSERT INTO metrics (job_seq, attempt, epoch, loss, val_loss, accuracy,"
                       " val_accuracy, seconds, samples_per_second, at)"
                       " VALUES (?, 1, ?, ?, ?, ?, ?, 1.5, 40000, ?)",
                       [(seq, e, 1 / e, 1.1 / e, 1 - 0.5 / e, 1 - 0.6 / e, started + e * 1500)
                        for e in range(1, 21)])
    db.execute("COMMIT")  # no ANALYZE: serve never runs one, so the plans are a real server's
    db.close()
    json.dump(tokens, open(os.path.join(data_dir, "bench-tokens.json"), "w"))
    print(json.dumps({"built_jobs": n, "seconds": round(time.time() - t0, 1),
                      "db_bytes": os.path.getsize(db_path)}), flush=True)
    return tokens


def main():
    binary, data_dir = sys.argv[1], sys.argv[2]
    n = int(sys.argv[sys.argv.index("--jobs") + 1]) if "--jobs" in sys.argv else 1_000_000
    reqs = int(sys.argv[sys.argv.index("--requests") + 1]) if "--requests" in sys.argv else 1000
    tokens = build(binary, data_dir, n)
    # its output (a line per request) goes to a file: a pipe nobody reads would fill and stall it
    log_path = os.path.join(data_dir, "bench-serve.log")
    log = open(log_path, "w")
    p = subprocess.Popen([binary, "serve", "--data-dir", data_dir, "--port", "0", "--workers",
                          "0", "--predict-device", "none"], stdout=log, stderr=subprocess.STDOUT)
    url = None
    while not url and p.poll() is None:
        m = re.search(r"listening on (http://[\d.:]+)", open(log_path).read())
        url = m.group(1) if m else time.sleep(0.05)
    try:
        admin = requests.Session()
        admin.headers["Authorization"] = f"Bearer {tokens['admin'][1]}"
        user = requests.Session()
        user.headers["Authorization"] = f"Bearer {tokens['user3'][1]}"
        with sqlite3.connect(os.path.join(data_dir, "trainyard.db")) as db:
            recent = [r[0] for r in db.execute(
                "SELECT id FROM jobs WHERE seq IN (SELECT job_seq FROM metrics WHERE epoch = 20)"
                " LIMIT 1000")]
            deep = db.execute("SELECT seq FROM jobs ORDER BY seq LIMIT 1 OFFSET 5000").fetchone()[0]
        pages = [
            ("GET /jobs?limit=100", admin, lambda i: "/jobs?limit=100"),
            ("GET /jobs?limit=100&status=succeeded", admin,
             lambda i: "/jobs?limit=100&status=succeeded"),
            ("GET /jobs?limit=100&status=failed", admin, lambda i: "/jobs?limit=100&status=failed"),
            ("GET /jobs?limit=100&name=N", admin, lambda i: f"/jobs?limit=100&name=cifar-{i % 25}"),
            ("GET /jobs?limit=100&name=N&status=queued", admin,
             lambda i: f"/jobs?limit=100&name=cifar-{i % 25}&status=queued"),
            ("GET /jobs?limit=100 (user token: owner filter)", user, lambda i: "/jobs?limit=100"),
            ("GET /jobs?limit=100&status=failed (user token)", user,
             lambda i: "/jobs?limit=100&status=failed"),
            ("GET /jobs?limit=100&name=N (user token)", user,
             lambda i: f"/jobs?limit=100&name=mnist-{i % 25}"),
            ("GET /jobs?limit=100&cursor=<5,000 jobs from the oldest>", admin,
             lambda i: f"/jobs?limit=100&cursor={deep:016x}"),
            ("GET /jobs?limit=100&status=cancelled&cursor=<deep>", admin,
             lambda i: f"/jobs?limit=100&status=cancelled&cursor={deep + 20000:016x}"),
            ("GET /jobs?limit=100&status=queued (no worker)", admin,
             lambda i: "/jobs?limit=100&status=queued"),
            ("GET /jobs?limit=100&status=queued (a worker: each job's place in line)", admin,
             lambda i: "/jobs?limit=100&status=queued"),
            ("GET /jobs/{id}/metrics (20 epochs)", admin,
             lambda i: f"/jobs/{recent[i % len(recent)]}/metrics"),
            ("GET /jobs/{id}", admin, lambda i: f"/jobs/{recent[i % len(recent)]}"),
            ("GET / (the dashboard page)", admin, lambda i: "/"),
            ("GET /metrics (Prometheus: counts by status)", admin, lambda i: "/metrics"),
        ]
        for title, s, path in pages:
            if "(a worker" in title:
                # a connected CPU worker that could take every queued job: each job's `waiting`
                # then counts the jobs ahead of it (up to 100 on a page). Registered now, it is
                # live for the page's time; it never leases.
                r = admin.post(url + "/workers", json={
                    "name": "bench", "devices": [{"index": 0, "name": "cpu", "type": "cpu"}]})
                assert r.status_code == 201, r.text
            for i in range(20):  # warm: connection, statement cache, page cache
                s.get(url + path(i))
            lat = []
            rows = 0
            for i in range(reqs):
                t = time.perf_counter()
                r = s.get(url + path(i))
                lat.append((time.perf_counter() - t) * 1000)
                assert r.status_code == 200, (title, r.status_code, r.text[:300])
                if i == 0 and r.headers.get("Content-Type", "").startswith("application/json"):
                    body = r.json()
                    rows = len(body.get("jobs", body.get("epochs", [None])))
            lat.sort()
            print(json.dumps({"page": title, "n": reqs, "p50_ms": round(percentile(lat, 50), 2),
                              "p99_ms": round(percentile(lat, 99), 2),
                              "max_ms": round(lat[-1], 2), "rows": rows}), flush=True)
    finally:
        p.terminate()
        p.wait()
    print(json.dumps({"loadavg": os.getloadavg()}))


if __name__ == "__main__":
    main()
