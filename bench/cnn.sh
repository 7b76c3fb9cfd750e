#!/usr/bin/env bash
# The seed CNN (issue 11): one epoch of Conv2D(32, 3×3, relu) → MaxPooling2D(2×2) → Flatten →
# Dense(10, softmax), Adam, batch 32, on 50,000 CIFAR-format images resized to 64×64, with
# TensorFlow (bench/cnn_tf.py), PyTorch (bench/cnn_torch.py) and `trainyard train`
# (build/bench-data/cnn.json), 2 threads each, interleaved over ROUNDS rounds (the order rotates
# each round), and this machine's FMA peak with the conv kernels' GFLOP/s in the same run
# (build/bench/bench-conv --quick, when built).
#
# Prints JSON lines: the peak line(s) of bench-conv; one line per run
#   {"round": r, "framework": f, "epoch_s": t, "total_s": T, "load1": l, ...}
# ("epoch_s" is the training loop of the one epoch: Keras's epoch from a callback, PyTorch's
# loop, trainyard's metrics.csv seconds; "total_s" is the whole process, start to exit, imports,
# data loading and evaluation included; "load1" the 1-minute load average before the run);
# then one summary line with the best of each and the ratios ours / theirs.
#
# Python: $BENCH_PYTHON, else /work/benchvenv/bin/python, a venv with the PyPI frameworks:
#   python3 -m venv /work/benchvenv &&
#   /work/benchvenv/bin/pip install 'tensorflow-cpu==2.21.*' 'torch>=2,<3'
# trainyard runs with a warm kernel cache (a small job first). OMP_WAIT_POLICY defaults to
# passive: PyTorch's OpenMP threads otherwise spin and run at half speed or worse whenever the
# machine has other work (bench/cnn_torch.py).
# usage: bench/cnn.sh [BUILD_DIR] [ROUNDS]   (default build 3; ~2 minutes a round)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rounds=${2:-3}
py=${BENCH_PYTHON:-/work/benchvenv/bin/python}
bin=$build/trainyard
data=$build/bench-data
[ -x "$bin" ] || { echo "build first: meson setup $build && ninja -C $build" >&2; exit 1; }
"$py" -c 'import tensorflow, torch' 2>/dev/null || {
  echo "no $py with tensorflow and torch: python3 -m venv /work/benchvenv &&" \
       "/work/benchvenv/bin/pip install 'tensorflow-cpu==2.21.*' 'torch>=2,<3'" >&2; exit 1; }
mkdir -p "$data"
[ -f "$data/cifar.tar.gz" ] || "$py" bench/make_images.py "$data/cifar.tar.gz" >&2
[ -f "$data/cifar-small.tar.gz" ] ||
  "$py" bench/make_images.py "$data/cifar-small.tar.gz" --train 320 --test 64 >&2

. bench/seed_cnn.sh
job() { # name archive
  seed_cnn_job "$data/$1.json" "$1" "$PWD/$data/$2"
}
job cnn cifar.tar.gz
job cnn-small cifar-small.tar.gz

if [ -x "$build/bench/bench-conv" ]; then
  "$build/bench/bench-conv" --quick
else
  echo '{"fma_peak_gflops": null, "note": "build/bench/bench-conv is not built"}'
fi

export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
load1() { cut -d' ' -f1 /proc/loadavg; }
now() { date +%s%N; }

ours() { # round
  local l t0 t1 out=$data/out-cnn
  rm -rf "$out"
  l=$(load1)
  t0=$(now)
  if "$bin" train "$data/cnn.json" --out "$out" --quiet \
       --dataset-root "$PWD/$data" >"$data/cnn-train.err" 2>&1; then
    t1=$(now)
    "$py" - "$1" "$l" "$(( (t1 - t0) / 1000 ))" "$out/metrics.csv" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[4])))
print(json.dumps({"round": int(sys.argv[1]), "framework": "trainyard",
                  "epoch_s": round(float(rows[0]["seconds"]), 3),
                  "total_s": round(int(sys.argv[3]) / 1e6, 3), "load1": float(sys.argv[2]),
                  "accuracy": float(rows[0]["accuracy"]),
                  "val_accuracy": float(rows[0]["val_accuracy"]) if rows[0]["val_accuracy"]
                  else None}))
PY
  else
    printf '{"round": %d, "framework": "trainyard", "error": %s}\n' "$1" \
      "$("$py" -c 'import json,sys; print(json.dumps(sys.stdin.read()[-300:]))' \
         <"$data/cnn-train.err")"
  fi
}

theirs() { # round framework script
  local l t0 t1 line
  l=$(load1)
  t0=$(now)
  line=$("$py" "bench/$3" "$data/cifar.tar.gz" --threads 2 2>"$data/$2.err" | tail -1)
  t1=$(now)
  if [ -z "$line" ]; then
    printf '{"round": %d, "framework": "%s", "error": %s}\n' "$1" "$2" \
      "$("$py" -c 'import json,sys; print(json.dumps(sys.stdin.read()[-300:]))' <"$data/$2.err")"
    return
  fi
  "$py" -c 'import json,sys; d=json.loads(sys.argv[1]); d = {"round": int(sys.argv[2]), **d,
"load1": float(sys.argv[3]), "wall_s": round(int(sys.argv[4]) / 1e9, 3)}; print(json.dumps(d))' \
    "$line" "$1" "$l" "$(( t1 - t0 ))"
}

# Warm trainyard's kernel cache (and PoCL's) on the small set, untimed.
"$bin" train "$data/cnn-small.json" --out "$data/out-cnn-small" --quiet \
  --dataset-root "$PWD/$data" >/dev/null 2>&1 || true

results=$data/cnn-results.jsonl
: >"$results"
order=(tf torch ours)
for r in $(seq 1 "$rounds"); do
  for i in 0 1 2; do
    case ${order[$(( (i + r - 1) % 3 ))]} in
      tf) theirs "$r" tensorflow cnn_tf.py ;;
      torch) theirs "$r" torch cnn_torch.py ;;
      ours) ours "$r" ;;
    esac
  done | tee -a "$results"
done

"$py" - "$results" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
best = {}
for r in runs:
    if "epoch_s" not in r:
        continue
    b = best.setdefault(r["framework"], {"epoch_s": 1e9, "total_s": 1e9})
    b["epoch_s"] = min(b["epoch_s"], r["epoch_s"])
    b["total_s"] = min(b["total_s"], r["total_s"])
out = {"summary": "best of %d rounds" % max([r["round"] for r in runs] or [0]), **best}
ours = best.get("trainyard")
for f in ("tensorflow", "torch"):
    if ours and f in best:
        out["epoch_ours_over_" + f] = round(ours["epoch_s"] / best[f]["epoch_s"], 3)
        out["total_ours_over_" + f] = round(ours["total_s"] / best[f]["total_s"], 3)
print(json.dumps(out))
PY
