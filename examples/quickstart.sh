#!/usr/bin/env bash
# The README's first command: installs what trainyard needs on Debian 12 (PoCL as the OpenCL
# device when there is no GPU driver), builds it, and trains the example job on the shipped
# spirals dataset, writing the model to out/spirals/.
set -euo pipefail
cd "$(dirname "$0")/.."
need=(build-essential meson ninja-build pkg-config libmicrohttpd-dev libjansson-dev
      libsqlite3-dev libcurl4-openssl-dev ocl-icd-opencl-dev opencl-headers zlib1g-dev python3)
# A machine with no OpenCL driver gets PoCL, which runs the kernels on the CPU.
ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 || need+=(pocl-opencl-icd)
missing=()
for p in "${need[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
[ -d build ] || meson setup build --buildtype=release >/dev/null
ninja -C build
./build/trainyard devices
cat > build/spirals-job.json <<JOB
{
  "name": "spirals",
  "dataset_url": "file://$PWD/examples/spirals.csv",
  "dataset": {"label_column": "arm"},
  "task": "classification",
  "model": {"layers": [{"type": "dense", "units": 64, "activation": "relu"},
                       {"type": "dense", "units": 64, "activation": "relu"}]},
  "hyperparameters": {"epochs": 60, "batch_size": 32, "learning_rate": 0.01,
                      "optimizer": "adam", "validation_split": 0.2, "seed": 1}
}
JOB
./build/trainyard train build/spirals-job.json --out out/spirals --dataset-root "$PWD/examples"
