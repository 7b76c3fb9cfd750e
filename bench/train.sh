#!/usr/bin/env bash
# Times three workloads with `trainyard train` beside the same models in PyTorch on the CPU
# (Debian's python3-torch, every core) and prints a table with the ratio ours / PyTorch:
#   linear  1000-row linear regression, 1000 full-batch SGD epochs
#   wide    100,000×10 → dense 64 relu → 1 regression, 100 full-batch Adam epochs
#   digits  60,000×784 → dense 128 relu → 10 classes, batch 64, one epoch
# "train" is the epoch loop alone (trainyard: the sum of metrics.csv's seconds; PyTorch: its
# loop); "total" is the whole process, start to exit, data loading and start-up included.
# PyTorch is Debian's python3-torch with Debian's OpenBLAS as its BLAS (libopenblas0-pthread,
# picked up through the libblas.so.3 alternative): without it Debian's torch falls back to the
# reference BLAS at ~6 GFLOP/s, a reference no one should be measured against.
# usage: bench/train.sh [BUILD_DIR]   (default build; installs python3-torch and OpenBLAS)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin=$build/trainyard
data=$build/bench-data
[ -x "$bin" ] || { echo "build first: meson setup $build && ninja -C $build"; exit 1; }
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null ||
   ! dpkg-query -W -f='${Status}' libopenblas0-pthread 2>/dev/null | grep -q 'ok installed'; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch libopenblas0-pthread
fi
/usr/bin/python3 bench/make_data.py "$data"

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

# Warm the kernel binary cache so neither side pays a one-time compile.
"$bin" train "$data/linear.json" --out "$data/warm" --quiet --dataset-root "$PWD/$data"

printf '%-8s %10s %10s %7s   %10s %10s %7s\n' workload ours_train torch_train ratio \
  ours_total torch_total ratio
for w in linear wide digits; do
  t0=$(date +%s%N)
  "$bin" train "$data/$w.json" --out "$data/out-$w" --quiet --dataset-root "$PWD/$data"
  t1=$(date +%s%N)
  torch=$(/usr/bin/python3 bench/torch_train.py "$w" "$data")
  /usr/bin/python3 - "$w" "$(( (t1 - t0) / 1000 ))" "$data/out-$w/metrics.csv" "$torch" <<'PY'
import csv, json, sys
name, ours_total, metrics, torch = sys.argv[1], int(sys.argv[2]) / 1e6, sys.argv[3], json.loads(sys.argv[4])
ours_train = sum(float(r["seconds"]) for r in csv.DictReader(open(metrics)))
print("%-8s %10.3f %10.3f %6.2fx   %10.3f %10.3f %6.2fx" % (
    name, ours_train, torch["train_s"], ours_train / torch["train_s"],
    ours_total, torch["total_s"], ours_total / torch["total_s"]))
PY
done
