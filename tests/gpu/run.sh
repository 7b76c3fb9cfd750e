#!/usr/bin/env bash
# tests/gpu/run.sh: the one check to run on a GPU machine (/work/shared/gpu/README.md says how to
# reach one), also runnable on PoCL. Steps, each time-boxed and reported as it ends:
#  1. the kernel unit tests and the model and predict ones, as built (the GPU class is the
#     device's own there; on PoCL its CPU class), then test-kernels-small with the CPU class
#     forced: the CPU forms on a GPU, for information only (NVIDIA faulted on them);
#  2. `trainyard serve` with one local worker: the seed CNN (Conv2D 3×3 relu → MaxPool 2×2 →
#     Flatten → Dense softmax) on a generated CIFAR-format set, and an MLP on three rings, each
#     submitted, followed to success and asked through :predict (answers checked: one
#     probability row per instance, the CNN right on most held-out images, the MLP on most
#     rings);
#  3. a PyTorch script job through the sandbox: on CUDA where torch sees a GPU (its log must say
#     so), on the CPU otherwise, with the CUDA check reported as skipped.
# Everything a step prints goes to $OUT/NAME.log; $OUT/summary.txt has one line per step and
# the last line "N passed, N failed, N skipped". Exit status 0 only when nothing failed.
#
# usage: on the GPU machine, with the packed build (.gpu, ../shared/gpu/pack.sh) carried along:
#          bash .gpu/on-gpu.sh tests/gpu/run.sh
#        here, on PoCL:  BUILD=build PYTHON=/usr/bin/python3 tests/gpu/run.sh
#        (OUT defaults to a new temporary folder; PYTHON to python3, which needs numpy)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
if [ -n "${BUILD:-}" ]; then
  build=$(cd "$root/$BUILD" && pwd) || exit 2
  PATH=$build:$build/tests/unit:$PATH
fi
export TRAINYARD_SOURCE_ROOT=${TRAINYARD_SOURCE_ROOT:-$root}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
PYDIR=${GPU_PY:-$root/bench} # make_images.py
PY=${PYTHON:-$(command -v python3)} # with numpy (and torch for step 3)
work=$(mktemp -d)
export TRAINYARD_KERNEL_CACHE=$work/kernels TRAINYARD_DATASET_CACHE=$work/datasets \
  TRAINYARD_SCRIPT_CACHE=$work/scripts
serve_pid=
cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
command -v trainyard >/dev/null || { echo "run.sh: no trainyard on PATH (BUILD=DIR?)" >&2; exit 2; }

pass=0 fail=0 skip=0
note() { printf '%s\n' "$*" | tee -a "$OUT/summary.txt"; }
# step NAME SECONDS COMMAND...: runs COMMAND with a time limit, its output in $OUT/NAME.log (and
# its tail here); exit 0 passes, 77 skips, 124 is a timeout, anything else fails.
step() {
  local name=$1 secs=$2 t0 rc
  shift 2
  printf '\n== %s (at most %ss)\n' "$name" "$secs"
  t0=$(date +%s.%N)
  # a shell function (exported) runs in a bash of its own, which timeout can start
  if declare -F "$1" >/dev/null; then set -- bash -c '"$@"' bash "$@"; fi
  timeout --kill-after=10 "$secs" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  tail -n 15 "$OUT/$name.log"
  local took
  took=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  case $rc in
  0) pass=$((pass + 1)); note "PASS $name (${took} s)" ;;
  77) skip=$((skip + 1)); note "SKIP $name (${took} s): $(grep -m1 -i skip "$OUT/$name.log")" ;;
  124 | 137) fail=$((fail + 1)); note "FAIL $name: timed out after $secs s" ;;
  *) fail=$((fail + 1)); note "FAIL $name (exit $rc, ${took} s)" ;;
  esac
}
# info NAME SECONDS COMMAND...: as step, but the result is only reported, never counted.
info() {
  local name=$1 secs=$2
  shift 2
  printf '\n== %s, for information (at most %ss)\n' "$name" "$secs"
  timeout --kill-after=10 "$secs" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 15 "$OUT/$name.log"
  note "INFO $name: exit $rc"
}

note "$(date -u +%FT%TZ) $(trainyard devices 2>&1 | head -1)"
command -v nvidia-smi >/dev/null && note "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"

# ---- 1. unit tests ----
for t in test-kernels-class test-kernels-ocl-diag test-kernels-small test-kernels-ops \
  test-kernels-gemm test-kernels-conv test-kernels-ocl test-kernels-warmup test-worker-model \
  test-predict; do
  if command -v "$t" >/dev/null; then
    step "${t#test-}" 300 "$t"
  else
    skip=$((skip + 1)) && note "SKIP ${t#test-}: not built"
  fi
done
command -v test-kernels-small >/dev/null &&
  info cpu-forms-here 120 env TRAINYARD_DEVICE_CLASS=cpu test-kernels-small

# ---- 2. serve round trips ----
mkdir -p "$work/ds" "$work/code"
"$PY" "$PYDIR/make_images.py" "$work/ds/cifar.tar.gz" --train 2000 --test 200 >/dev/null ||
  { note "FAIL data: make_images.py"; exit 1; }
"$PY" - "$work/ds" <<'EOF' || { note "FAIL data: rings"; exit 1; }
import sys
import numpy as np
rng = np.random.default_rng(7)
n = 2000
label = rng.integers(0, 3, n)
r = label * 1.5 + rng.uniform(0.2, 1.0, n)
a = rng.uniform(0, 2 * np.pi, n)
with open(sys.argv[1] + "/rings.csv", "w") as f:
    f.write("x,y,ring\n")
    for x, y, c in zip(r * np.cos(a), r * np.sin(a), label):
        f.write(f"{x:.5f},{y:.5f},{c}\n")
EOF

start_serve() {
  trainyard serve --port 0 --data-dir "$work/srv" --workers 1 --dataset-root "$work/ds" \
    --allow-scripts --python "$PY" >"$OUT/serve.log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 300); do
    TRAINYARD_URL=$(grep -oE 'listening on http://[0-9.]+:[0-9]+' "$OUT/serve.log" |
      awk '{print $3}')
    if [ -n "$TRAINYARD_URL" ] && [ -s "$work/srv/admin.token" ]; then
      TRAINYARD_TOKEN=$(cat "$work/srv/admin.token")
      export TRAINYARD_URL TRAINYARD_TOKEN
      return 0
    fi
    sleep 0.1
  done
  cat "$OUT/serve.log"
  return 1
}
# job_run NAME JOB.json [submit options]: submits, follows to the end (exit 0 when it succeeded),
# and leaves the job's id in $work/NAME.id.
job_run() {
  local name=$1 doc=$2 id
  shift 2
  id=$(trainyard submit "$doc" "$@") || return 1
  echo "$id" >"$work/$name.id"
  echo "job $id"
  trainyard status "$id" --follow
  local rc=$?
  trainyard logs "$id" | tail -n 20
  return $rc
}
# predict_check NAME REQUEST.json CHECK.py: the job's :predict answer, checked by the script.
predict_check() {
  local id
  id=$(cat "$work/$1.id") || return 1
  trainyard predict "$id" "$2" >"$work/$1.answer.json" || return 1
  "$PY" "$3" "$work/$1.answer.json"
}

export -f job_run predict_check
export work PY

if start_serve; then
  cat >"$work/cnn.json" <<EOF
{"name": "gpu-seed-cnn", "dataset_url": "file://$work/ds/cifar.tar.gz",
 "dataset": {"format": "cifar10"},
 "model": {"input_shape": [32, 32, 3],
           "layers": [{"type": "conv2d", "filters": 32, "kernel_size": 3, "activation": "relu"},
                      {"type": "maxpool2d", "pool_size": 2}, {"type": "flatten"},
                      {"type": "dense", "units": 10, "activation": "softmax"}]},
 "hyperparameters": {"epochs": 3, "batch_size": 32, "optimizer": "adam", "seed": 1}}
EOF
  cat >"$work/mlp.json" <<EOF
{"name": "gpu-mlp", "dataset_url": "file://$work/ds/rings.csv",
 "dataset": {"label_column": "ring"},
 "model": {"layers": [{"type": "dense", "units": 32, "activation": "relu"},
                      {"type": "dense", "units": 32, "activation": "tanh"}]},
 "hyperparameters": {"epochs": 20, "batch_size": 32, "learning_rate": 0.01,
                     "optimizer": "adam", "validation_split": 0.2, "seed": 3}}
EOF
  step serve-cnn 400 job_run cnn "$work/cnn.json"
  step serve-mlp 300 job_run mlp "$work/mlp.json"

  # requests: the CNN on 64 held-out images of the test set, the MLP on points of each ring
  "$PY" - "$work" <<'EOF'
import io, json, sys, tarfile
import numpy as np
w = sys.argv[1]
with tarfile.open(w + "/ds/cifar.tar.gz") as t:
    name = next(m for m in t.getnames() if m.endswith("test_batch.bin"))
    raw = np.frombuffer(t.extractfile(name).read(), np.uint8).reshape(-1, 3073)[:64]
imgs = raw[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
json.dump({"instances": imgs.tolist()}, open(w + "/cnn.req.json", "w"))
json.dump(raw[:, 0].tolist(), open(w + "/cnn.labels.json", "w"))
pts, labels = [], []
for ring, radius in enumerate((0.6, 2.1, 3.6)):
    for a in np.linspace(0, 2 * np.pi, 8, endpoint=False):
        pts.append([radius * np.cos(a), radius * np.sin(a)])
        labels.append(ring)
json.dump({"instances": pts}, open(w + "/mlp.req.json", "w"))
json.dump(labels, open(w + "/mlp.labels.json", "w"))
EOF
  for m in cnn mlp; do
    cat >"$work/$m.check.py" <<EOF
import json, sys
import numpy as np
p = np.array(json.load(open(sys.argv[1]))["predictions"], dtype=float)
want = np.array(json.load(open("$work/$m.labels.json")))
assert p.shape == (len(want), p.shape[1]) and p.shape[1] >= 3, p.shape
assert np.allclose(p.sum(axis=1), 1, atol=1e-4), p.sum(axis=1)
acc = float(np.mean(p.argmax(axis=1) == want))
print(f"$m: {len(want)} predictions, accuracy {acc:.3f}")
assert acc >= 0.8, acc
EOF
    if [ -s "$work/$m.id" ]; then
      step "predict-$m" 60 predict_check "$m" "$work/$m.req.json" "$work/$m.check.py"
    else
      fail=$((fail + 1)) && note "FAIL predict-$m: no job"
    fi
  done

  # ---- 3. a PyTorch script job ----
  if "$PY" -c 'import torch' 2>/dev/null; then
    cuda=$("$PY" -c 'import torch; print(int(torch.cuda.is_available()))')
    cat >"$work/code/train.py" <<'EOF'
import torch
import trainyard

dev = "cuda" if torch.cuda.is_available() else "cpu"
print("torch", torch.__version__, "device", dev,
      torch.cuda.get_device_name(0) if dev == "cuda" else "", flush=True)
torch.manual_seed(0)
x = torch.randn(8192, 16, device=dev)
y = (x @ torch.randn(16, 1, device=dev) > 0).float()
m = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(dev)
opt = torch.optim.Adam(m.parameters(), lr=1e-2)
for epoch in (1, 2, 3):
    for i in range(0, len(x), 256):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(m(x[i:i + 256]), y[i:i + 256])
        loss.backward()
        opt.step()
    acc = float(((m(x) > 0).float() == y).float().mean())
    trainyard.report(epoch=epoch, loss=float(loss), accuracy=acc)
assert acc > 0.9, acc
EOF
    echo '{"name": "gpu-torch", "training_script": "train.py", "hyperparameters": {}}' \
      >"$work/torch.json"
    step script-torch 300 job_run torch "$work/torch.json" --code "$work/code"
    if [ "$cuda" = 1 ]; then
      if grep -q "device cuda" "$OUT/script-torch.log"; then
        pass=$((pass + 1)) && note "PASS script-torch-cuda: the job ran on CUDA"
      else
        fail=$((fail + 1)) && note "FAIL script-torch-cuda: torch sees CUDA here, the job did not"
      fi
    else
      skip=$((skip + 1)) && note "SKIP script-torch-cuda: torch.cuda is not available here"
    fi
  else
    skip=$((skip + 2)) && note "SKIP script-torch, script-torch-cuda: $PY has no torch"
  fi
else
  fail=$((fail + 1)) && note "FAIL serve: did not start"
fi

note "$pass passed, $fail failed, $skip skipped (logs in $OUT)"
[ "$fail" -eq 0 ]
