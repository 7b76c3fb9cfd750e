#!/usr/bin/env bash
# Cold start (issue 11, item 8): how long `trainyard train` takes from process start to its
# first batch, and to exit, with empty caches and with warm ones.
#
# The job is examples/spirals.json for 2 epochs (600 rows, dense 64-64, batches of 32): its
# arithmetic takes about a millisecond an epoch, so what is measured is start-up and compiling.
# JOB=shapes takes examples/shapes-job.json (the image example: conv 16, pool, conv 32, pool,
# dense 64, 160 images of 32×32) for 2 epochs instead.
# Each round runs three cases, each in fresh folders for what it leaves empty:
#   cold        TRAINYARD_KERNEL_CACHE and POCL_CACHE_DIR both empty
#   warm        both as the cold run left them
#   warm_ours   trainyard's kernel cache warm, PoCL's empty (what the saved binaries carry)
# and, when WORKER=1, the worker's start-up (build every family and warm up every kernel,
# then save) with both caches empty and then warm. A cold `train` leaves the writing of its
# kernel cache to a detached process (train/kbuild.h); the warm cases start once it is done
# (saver_s: how long after the cold run's exit, by its lock on the cache's .save.lock).
#
# One JSON line per run:
#   {"case": c, "round": r, "load1": l, "build_s": b, "first_batch_s": f, "epoch1_s": e1,
#    "epoch2_s": e2, "total_s": t}
# build_s is what the trainer logs for building the kernel programs; first_batch_s is process
# start to the "epoch 1/2" line (epoch 1 is 15 batches of ~0.1 ms after the first, so this is
# the first batch within a few ms; with JOB=shapes, 94 batches of ~2 ms: subtract epoch2_s);
# epoch1_s − epoch2_s is what the first launches compiled; total_s is start to exit (a build
# before train/kbuild.c writes the kernel cache before exiting; since, a detached process
# does, and saver_s is how long it ran on). Then one summary line with the best of each case.
# load1 is the 1-minute load average before the run.
# usage: [JOB=shapes] [WORKER=1] bench/coldstart.sh [BUILD_DIR] [ROUNDS]   (default build 3;
#        ~20 s a round)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-3}
bin=$build/trainyard
[ -x "$bin" ] || { echo "build first: meson setup $build && ninja -C $build" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
example=examples/spirals.json
[ "${JOB:-}" = shapes ] && example=examples/shapes-job.json
sed "s#@ROOT@#$PWD#" "$example" |
  python3 -c 'import json,sys; d=json.load(sys.stdin); d["hyperparameters"]["epochs"]=2;
print(json.dumps(d))' >"$tmp/job.json"

python3 - "$bin" "$tmp" "$rounds" "${WORKER:-0}" <<'PY'
import csv, fcntl, json, os, re, signal, subprocess, sys, tempfile, time

binary, tmp, rounds, worker = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"


def load1():
    return float(open("/proc/loadavg").read().split()[0])


def train(case, rnd, kcache, pcache):
    env = dict(os.environ, TRAINYARD_KERNEL_CACHE=kcache, POCL_CACHE_DIR=pcache)
    out = os.path.join(tmp, "out")
    row = {"case": case, "round": rnd, "load1": load1()}
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "train", os.path.join(tmp, "job.json"), "--out", out,
                          "--dataset-root", os.getcwd(), "--checkpoint-seconds", "-1"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    for line in p.stdout:
        m = re.search(r"kernels (?:compiled|loaded from cache) in ([0-9.]+)s", line)
        if m:
            row["build_s"] = float(m.group(1))
        if line.startswith("epoch 1/") and "first_batch_s" not in row:
            row["first_batch_s"] = round(time.perf_counter() - t0, 3)
    rc = p.wait()
    row["total_s"] = round(time.perf_counter() - t0, 3)
    if rc != 0:
        row["error"] = "exit %d" % rc
        return row
    secs = [float(r["seconds"]) for r in csv.DictReader(open(os.path.join(out, "metrics.csv")))]
    row["epoch1_s"], row["epoch2_s"] = round(secs[0], 4), round(secs[1], 4)
    return row


def worker_start(case, rnd, kcache, pcache):
    """Starts `trainyard worker` against a closed port and times it to its device line."""
    env = dict(os.environ, TRAINYARD_KERNEL_CACHE=kcache, POCL_CACHE_DIR=pcache)
    row = {"case": case, "round": rnd, "load1": load1()}
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "worker", "--server", "http://127.0.0.1:9"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    for line in p.stdout:
        m = re.search(r"kernels (?:compiled|from cache) in ([0-9.]+)s, warmed up in ([0-9.]+)s",
                      line)
        if m:
            row["build_s"], row["warmup_s"] = float(m.group(1)), float(m.group(2))
            row["ready_s"] = round(time.perf_counter() - t0, 3)
            break
    p.send_signal(signal.SIGTERM)
    p.wait()
    return row


def saver_wait(kcache):
    """Waits for the detached process writing kcache (it holds .save.lock until done)."""
    t0 = time.perf_counter()
    path = os.path.join(kcache, ".save.lock")
    if os.path.exists(path):
        with open(path) as f:
            fcntl.flock(f, fcntl.LOCK_EX)
    return round(time.perf_counter() - t0, 3)


rows = []
for r in range(1, rounds + 1):
    k, pc = tempfile.mkdtemp(dir=tmp), tempfile.mkdtemp(dir=tmp)
    runs = [("cold", k, pc), ("warm", k, pc), ("warm_ours", k, tempfile.mkdtemp(dir=tmp))]
    for case, kc, pcc in runs:
        rows.append(train(case, r, kc, pcc))
        if case == "cold":
            rows[-1]["saver_s"] = saver_wait(kc)
        print(json.dumps(rows[-1]), flush=True)
    if worker:
        k, pc = tempfile.mkdtemp(dir=tmp), tempfile.mkdtemp(dir=tmp)
        for case in ("worker_cold", "worker_warm"):
            rows.append(worker_start(case, r, k, pc))
            print(json.dumps(rows[-1]), flush=True)

best = {}
for row in rows:
    if "error" in row:
        continue
    b = best.setdefault(row["case"], {})
    for key, v in row.items():
        if key.endswith("_s"):
            b[key] = min(b.get(key, v), v)
print(json.dumps({"summary": "best of %d rounds" % rounds, **best}))
PY
