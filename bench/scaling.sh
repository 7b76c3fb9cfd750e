#!/usr/bin/env bash
# Data-parallel scaling on this machine (issue 14): the 784-128-10 MLP on 60,000 rows × 784
# features (bench/make_data.py's digits.csv, seeded), batch 64, Adam, EPOCHS epochs, run as
#   1 replica × 1 thread    POCL_MAX_PTHREAD_COUNT=1 trainyard train JOB --out d1
#   2 replicas × 1 thread   mpirun -np 2 --bind-to none trainyard-replica --train JOB --out d2
#                           --rank-threads 1
# and prints the samples/s of each (the median over the epochs after the first, which pays
# the kernel compiles and first touches), their ratio beside the goal (≥ 1.7×), the last
# epoch's loss of each, and this machine's FMA peak from bench-conv in the same run (when
# built). samples/s is metrics.csv's samples_per_second column where it has one, else the
# training rows (60,000: the job has no validation split) over the epoch's seconds.
# Prints one JSON line per run with the 1-minute load average before it; the machine should
# be quiet (see bench/README.md).
#
# The 2-replica half needs BUILD/trainyard-replica (Open MPI); without it the script prints
# the 1-replica figure and stops with status 2 and a message saying so.
# usage: bench/scaling.sh [BUILD_DIR] [EPOCHS]   (default build 4; ~25 s, data made once)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
epochs=${2:-4}
goal=1.7
bin=$build/trainyard
replica=$build/trainyard-replica
[ -x "$bin" ] || { echo "build first: meson setup $build && ninja -C $build" >&2; exit 1; }
data=$(cd "$build" && pwd)/bench-data
work=$build/bench-scaling
[ "$epochs" -ge 2 ] 2>/dev/null ||
  { echo "EPOCHS must be 2 or more (the first is left out)" >&2; exit 1; }

# bench/make_data.py needs NumPy: the benchmark venv, else a python3 that has it.
py=${BENCH_PYTHON:-/work/benchvenv/bin/python}
[ -x "$py" ] || py=python3
"$py" -c 'import numpy' 2>/dev/null || {
  echo "no NumPy for bench/make_data.py: set BENCH_PYTHON, or" \
       "python3 -m venv /work/benchvenv && /work/benchvenv/bin/pip install numpy" >&2; exit 1; }
"$py" bench/make_data.py "$data"

rm -rf "$work"
mkdir -p "$work"
cat > "$work/job.json" <<JOB
{"name": "scaling-mlp", "dataset_url": "file://$data/digits.csv", "dataset": {"header": false},
 "task": "classification",
 "model": {"layers": [{"type": "dense", "units": 128, "activation": "relu"}]},
 "hyperparameters": {"epochs": $epochs, "batch_size": 64, "optimizer": "adam",
                     "learning_rate": 0.001, "seed": 1}}
JOB

load1() { cut -d' ' -f1 /proc/loadavg; }

# report NAME METRICS LOAD: a JSON line; the samples/s alone on the last line of stdout.
report() {
  python3 - "$1" "$2" "$3" <<'PY'
import csv, json, statistics, sys
name, path, load = sys.argv[1], sys.argv[2], float(sys.argv[3])
rows = list(csv.DictReader(open(path)))
if len(rows) < 2:
    sys.exit("%s: %s has %d epochs, need 2 or more" % (name, path, len(rows)))
if "samples_per_second" in rows[0]:
    per_epoch = [float(r["samples_per_second"]) for r in rows]
else:
    per_epoch = [60000 / float(r["seconds"]) for r in rows]
sps = statistics.median(per_epoch[1:])
print(json.dumps({"run": name, "samples_per_second": round(sps),
                  "epochs": [round(x) for x in per_epoch], "last_loss": float(rows[-1]["loss"]),
                  "load1": load}))
print(sps)
PY
}

if [ -x "$build/bench/bench-conv" ]; then
  "$build/bench/bench-conv" --quick | grep fma_peak | head -1
else
  echo '{"fma_peak_gflops": null, "note": "build/bench/bench-conv is not built"}'
fi

l=$(load1)
POCL_MAX_PTHREAD_COUNT=1 "$bin" train "$work/job.json" --out "$work/d1" --quiet \
  --dataset-root "$data" >"$work/d1.log" 2>&1 || { cat "$work/d1.log" >&2; exit 1; }
out1=$(report "1 replica x 1 thread" "$work/d1/metrics.csv" "$l")
echo "$out1" | head -1
one=$(echo "$out1" | tail -1)

if [ ! -x "$replica" ]; then
  echo "$replica is missing: the 2-replica half needs trainyard-replica (Open MPI;" \
       "meson setup $build -Dmpi=enabled && ninja -C $build). 1 replica x 1 thread:" \
       "$(printf '%.0f' "$one") samples/s." >&2
  exit 2
fi

mpi=(mpirun -np 2 --bind-to none)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
[ "$(nproc)" -lt 2 ] && mpi+=(--oversubscribe)
# two_ranks NAME JOB DIR: JOB on 2 ranks into DIR; report's two lines (a failed run exits).
two_ranks() {
  local l
  l=$(load1)
  "${mpi[@]}" "$replica" --train "$2" --out "$3" --rank-threads 1 >"$3.log" 2>&1 ||
    { cat "$3.log" >&2; exit 1; }
  report "$1" "$3/metrics.csv" "$l"
}
out2=$(two_ranks "2 replicas x 1 thread" "$work/job.json" "$work/d2")
echo "$out2" | head -1
two=$(echo "$out2" | tail -1)

# The same 2 ranks with 64 rows each (a global batch of 128): what the ranks gain when their
# share of a batch is the one-replica batch (weak scaling), beside the split of one batch of 64.
sed 's/"batch_size": 64/"batch_size": 128/' "$work/job.json" >"$work/job128.json"
out3=$(two_ranks "2 replicas x 1 thread, 64 rows each" "$work/job128.json" "$work/d3")
echo "$out3" | head -1
three=$(echo "$out3" | tail -1)

python3 - "$one" "$two" "$three" "$goal" <<'PY'
import json, sys
one, two, three, goal = map(float, sys.argv[1:5])
for name, x in (("batch 64 split over 2 replicas (the same loss curve)", two),
                ("64 rows per replica (global batch 128)", three)):
    ratio = x / one
    print(json.dumps({"summary": "2 replicas / 1 replica, samples/s: " + name,
                      "one": round(one), "two": round(x), "ratio": round(ratio, 2),
                      "goal": goal, "met": ratio >= goal}))
PY
