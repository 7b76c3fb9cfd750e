#!/usr/bin/env bash
# Times three workloads with `trainyard train` beside the same models in PyTorch on the CPU and
# prints the ratio ours / PyTorch:
#   linear  1000-row linear regression, 1000 full-batch SGD epochs
#   wide    100,000×10 → dense 64 relu → 1 regression, 100 full-batch Adam epochs
#   digits  60,000×784 → dense 128 relu → 10 classes, batch 64, one epoch
# "train" is the epoch loop alone (trainyard: the sum of metrics.csv's seconds; PyTorch: its
# loop); "total" is the whole process, start to exit, data loading and start-up included. Ours is
# run twice: "cold" with empty kernel caches (trainyard's and PoCL's, fresh folders), "warm"
# with the caches the cold run left; the ratios use the warm run. PyTorch runs after ours, so its
# files are in the page cache too.
#
# PyTorch: $BENCH_PYTHON, else /work/benchvenv/bin/python when it exists (PyPI's torch 2.x:
# python3 -m venv /work/benchvenv && /work/benchvenv/bin/pip install 'torch>=2,<3' numpy),
# else Debian's python3-torch 1.13 with Debian's OpenBLAS (installed here if missing; without
# OpenBLAS Debian's torch falls back to the reference BLAS at ~6 GFLOP/s). Every core, and
# OMP_WAIT_POLICY=passive unless set: PyTorch's OpenMP threads otherwise spin-wait and run at
# half speed or worse whenever the machine has other work (bench/cnn_torch.py).
# Prints the table, then one JSON line per workload.
# usage: bench/train.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin=$build/trainyard
data=$build/bench-data
[ -x "$bin" ] || { echo "build first: meson setup $build && ninja -C $build"; exit 1; }
py=${BENCH_PYTHON:-/work/benchvenv/bin/python}
if [ ! -x "$py" ]; then
  py=/usr/bin/python3
  if ! "$py" -c 'import torch' 2>/dev/null ||
     ! dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null | grep -q 'ok installed'; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch libopenblas0-pthread
  fi
fi
"$py" bench/make_data.py "$data"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

job() { # name task layers hyperparameters
  cat > "$data/$1.json" <<JOB
{"name": "$1", "dataset_url": "file://$PWD/$data/$1.csv", "dataset": {"header": false},
 "task": "$2", "model": {"layers": $3}, "hyperparameters": $4}
JOB
}
job linear regression '[]' \
  '{"epochs": 1000, "batch_size": 1000, "optimizer": "sgd", "learning_rate": 0.1, "shuffle": false}'
job wide regression '[{"type": "dense", "units": 64, "activation": "relu"}]' \
  '{"epochs": 100, "batch_size": 100000, "optimizer": "adam", "learning_rate": 0.01, "shuffle": false}'
job digits classification '[{"type": "dense", "units": 128, "activation": "relu"}]' \
  '{"epochs": 1, "batch_size": 64, "optimizer": "adam", "learning_rate": 0.001}'

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ours() { # workload kernel-cache pocl-cache → microseconds, start to exit
  local t0 t1
  t0=$(date +%s%N)
  TRAINYARD_KERNEL_CACHE=$2 POCL_CACHE_DIR=$3 "$bin" train "$data/$1.json" --out "$data/out-$1" \
    --quiet --dataset-root "$PWD/$data"
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000 ))
}

printf '%-8s %10s %10s %7s   %10s %10s %10s %7s\n' workload ours_train torch_train ratio \
  ours_cold ours_total torch_total ratio
json=()
for w in linear wide digits; do
  mkdir -p "$tmp/$w/k" "$tmp/$w/p"
  cold=$(ours "$w" "$tmp/$w/k" "$tmp/$w/p")
  warm=$(ours "$w" "$tmp/$w/k" "$tmp/$w/p")
  torch=$("$py" bench/torch_train.py "$w" "$data")
  json+=("$("$py" - "$w" "$cold" "$warm" "$data/out-$w/metrics.csv" "$torch" "$(cut -d' ' -f1 /proc/loadavg)" <<'PY'
import csv, json, sys
name, cold, warm, metrics, torch, load1 = sys.argv[1:7]
cold, warm, torch = int(cold) / 1e6, int(warm) / 1e6, json.loads(torch)
train = sum(float(r["seconds"]) for r in csv.DictReader(open(metrics)))
print("%-8s %10.3f %10.3f %6.2fx   %10.3f %10.3f %10.3f %6.2fx" % (
    name, train, torch["train_s"], train / torch["train_s"], cold, warm, torch["total_s"],
    warm / torch["total_s"]), file=sys.stderr)
print(json.dumps({"workload": name, "ours_train_s": round(train, 3),
                  "torch_train_s": round(torch["train_s"], 3),
                  "ours_total_cold_s": round(cold, 3), "ours_total_warm_s": round(warm, 3),
                  "torch_total_s": round(torch["total_s"], 3), "torch": torch["version"],
                  "torch_threads": torch["threads"], "load1": float(load1)}))
PY
)")
done 2>&1
printf '%s\n' "${json[@]}"
