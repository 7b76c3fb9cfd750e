#!/usr/bin/env bash
# The GPU figures in one run, for the few minutes a GPU machine is lent: the seed CNN epoch and
# the three MLP workloads of bench/train.sh with `trainyard train`, each beside PyTorch on CUDA on
# the same card with the data resident there (torch_cnn_cuda.py from ../shared/gpu, fp32 and
# TF32; bench/torch_train.py with the cuda device), then bench-gemm and bench-conv (their figures
# against the device's own FMA peak, measured in the same run), and a kernel profile of a small
# CNN epoch. Every step is time-boxed and prints as it goes; what it writes under $OUT comes back.
#
# On the GPU machine (../shared/gpu/README.md; the packed programs are on PATH, $GPU_PY holds
# the reference scripts, python3 is the image's PyTorch with CUDA):
#   bash .gpu/on-gpu.sh bench/gpu.sh
# Here, on PoCL, to try the script itself (the CUDA references say "skipped" without a GPU):
#   bench/gpu.sh build            (GPU_BENCH_PYTHON picks the python; default python3)
# Prints the steps' output, then a table of ours / PyTorch CUDA, and writes $OUT/gpu.json.
# GPU_BENCH_IMAGES sets the CNN's training images (default 50,000, the seed's size).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
if [ -n "${1:-}" ]; then
  PATH="$root/$1:$root/$1/bench:$PATH"
fi
command -v trainyard >/dev/null || { echo "gpu.sh: no trainyard on PATH (give the build folder)" >&2; exit 1; }
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
py=${GPU_BENCH_PYTHON:-python3}
ref=${GPU_PY:-$root/../shared/gpu}
images=${GPU_BENCH_IMAGES:-50000}
data=${TMPDIR:-/tmp}/trainyard-gpu-bench # large files stay out of $OUT, which travels back
mkdir -p "$data"
export TRAINYARD_KERNEL_CACHE=$data/kernel-cache
results=$OUT/gpu-results.jsonl
: >"$results"

step() { printf '\n== %s (%s)\n' "$*" "$(date +%T)"; }
record() { echo "$1" | tee -a "$results"; } # one JSON line

step "device"
command -v nvidia-smi >/dev/null &&
  timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
timeout 60 trainyard devices
cuda=$(timeout 60 "$py" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)
echo "PyTorch CUDA: $([ "$cuda" = 1 ] && echo available || echo 'not available: the references are skipped')"

step "data"
[ -f "$data/cifar.tar.gz" ] && [ "$(cat "$data/cifar.n" 2>/dev/null)" = "$images" ] ||
  { timeout 300 "$py" bench/make_images.py "$data/cifar.tar.gz" --train "$images" --test 1000 &&
    echo "$images" >"$data/cifar.n"; }
[ -f "$data/cifar-small.tar.gz" ] ||
  timeout 120 "$py" bench/make_images.py "$data/cifar-small.tar.gz" --train 2000 --test 64
timeout 300 "$py" bench/make_data.py "$data"
ls -la "$data"

. bench/seed_cnn.sh
cnn_job() { # name archive
  seed_cnn_job "$data/$1.json" "$1" "$data/$2"
}
mlp_job() { # name task layers hyperparameters (bench/train.sh's workloads)
  cat >"$data/$1.json" <<JOB
{"name": "$1", "dataset_url": "file://$data/$1.csv", "dataset": {"header": false},
 "task": "$2", "model": {"layers": $3}, "hyperparameters": $4}
JOB
}
cnn_job cnn cifar.tar.gz
cnn_job cnn-small cifar-small.tar.gz
mlp_job linear regression '[]' \
  '{"epochs": 1000, "batch_size": 1000, "optimizer": "sgd", "learning_rate": 0.1, "shuffle": false}'
mlp_job wide regression '[{"type": "dense", "units": 64, "activation": "relu"}]' \
  '{"epochs": 100, "batch_size": 100000, "optimizer": "adam", "learning_rate": 0.01, "shuffle": false}'
mlp_job digits classification '[{"type": "dense", "units": 128, "activation": "relu"}]' \
  '{"epochs": 1, "batch_size": 64, "optimizer": "adam", "learning_rate": 0.001}'

ours() { # workload [env...]: trains once, records the epoch loop (metrics.csv) and the process
  local w=$1 t0 t1
  shift
  rm -rf "$data/out-$w"
  t0=$(date +%s%N)
  if env "$@" timeout 300 trainyard train "$data/$w.json" --out "$data/out-$w" --quiet \
      --dataset-root "$data" >"$OUT/train-$w.log" 2>&1; then
    t1=$(date +%s%N)
    record "$("$py" - "$w" "$(((t1 - t0) / 1000))" "$data/out-$w/metrics.csv" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[3])))
print(json.dumps({"workload": sys.argv[1], "framework": "trainyard",
                  "train_s": round(sum(float(r["seconds"]) for r in rows), 3),
                  "total_s": round(int(sys.argv[2]) / 1e6, 3),
                  "loss": float(rows[-1]["loss"])}))
PY
)"
  else
    record "{\"workload\": \"$w\", \"framework\": \"trainyard\", \"error\": \"exit $? (train-$w.log)\"}"
    tail -5 "$OUT/train-$w.log"
  fi
}

step "warm-up: kernels built and cached, untimed"
timeout 300 trainyard train "$data/cnn-small.json" --out "$data/out-warm" --quiet \
  --dataset-root "$data" 2>&1 | tail -3

step "seed CNN, $images images 64x64, batch 32, one epoch"
ours cnn
if [ "$cuda" = 1 ]; then
  for tf32 in 0 1; do
    line=$(timeout 300 "$py" "$ref/torch_cnn_cuda.py" "$data/cifar.tar.gz" "$tf32" 2>"$OUT/torch-cnn.err" | tail -1)
    [ -n "$line" ] && record "$("$py" -c 'import json,sys; d=json.loads(sys.argv[1])
print(json.dumps({"workload": "cnn", "framework": "torch-cuda-tf32" if d["tf32"] else "torch-cuda",
                  "train_s": d["epoch2_s"], "first_epoch_s": d["epoch1_s"], "total_s": d["total_s"],
                  "version": d["version"]}))' "$line")"
  done
fi

for w in digits wide linear; do
  step "MLP $w"
  ours "$w"
  if [ "$cuda" = 1 ]; then
    line=$(timeout 300 "$py" bench/torch_train.py "$w" "$data" cuda 2>"$OUT/torch-$w.err" | tail -1)
    [ -n "$line" ] && record "$("$py" -c 'import json,sys; d=json.loads(sys.argv[1])
print(json.dumps({"workload": sys.argv[2], "framework": "torch-cuda", "train_s": round(d["train_s"], 3),
                  "total_s": round(d["total_s"], 3), "version": d["version"]}))' "$line" "$w")"
  fi
done

step "where a small CNN epoch goes (TRAINYARD_PROFILE=1: the queue finished around each launch)"
TRAINYARD_PROFILE=1 timeout 300 trainyard train "$data/cnn-small.json" --out "$data/out-prof" \
  --quiet --dataset-root "$data" 2>&1 | tail -30

step "GEMM against the device's FMA peak"
if command -v bench-gemm >/dev/null; then
  timeout 240 bench-gemm 2>&1 | tee "$OUT/bench-gemm.jsonl"
else
  echo "bench-gemm is not built: it needs CLBlast (apt-get install libclblast-dev, then reconfigure)"
fi
step "convolutions against the device's FMA peak"
timeout 240 bench-conv 2>&1 | tee "$OUT/bench-conv.jsonl"

step "summary"
"$py" - "$results" "$OUT/gpu.json" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {(r["workload"], r["framework"]): r for r in runs}
rows = []
print("%-8s %12s %14s %7s %14s %7s" % ("workload", "ours_s", "torch_cuda_s", "ratio",
                                       "torch_tf32_s", "ratio"))
for w in ("cnn", "digits", "wide", "linear"):
    ours = by.get((w, "trainyard"), {}).get("train_s")
    fp32 = by.get((w, "torch-cuda"), {}).get("train_s")
    tf32 = by.get((w, "torch-cuda-tf32"), {}).get("train_s")
    ratio = lambda t: round(ours / t, 3) if ours and t else None
    rows.append({"workload": w, "ours_train_s": ours, "torch_cuda_train_s": fp32,
                 "ours_over_torch_cuda": ratio(fp32), "torch_cuda_tf32_train_s": tf32,
                 "ours_over_torch_cuda_tf32": ratio(tf32)})
    fmt = lambda v: "-" if v is None else "%.3f" % v
    print("%-8s %12s %14s %7s %14s %7s" % (w, fmt(ours), fmt(fp32), fmt(ratio(fp32)), fmt(tf32),
                                           fmt(ratio(tf32))))
json.dump({"runs": runs, "table": rows}, open(sys.argv[2], "w"), indent=1)
PY
echo "written: $OUT/gpu.json"
