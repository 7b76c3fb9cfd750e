#!/usr/bin/env bash
# The README's first command: installs what trainyard needs on Debian 12 (PoCL as the OpenCL
# device when no GPU driver is installed), builds it, and starts the service on
# http://127.0.0.1:8080 with one local worker per OpenCL device, its data in ./trainyard-data,
# and file:// datasets allowed from examples/. Extra arguments go to `trainyard serve`
# (e.g. --port 9000, --bind 0.0.0.0).
set -euo pipefail
cd "$(dirname "$0")/.."
need=(build-essential meson ninja-build pkg-config libmicrohttpd-dev libjansson-dev
      libsqlite3-dev libcurl4-openssl-dev ocl-icd-opencl-dev opencl-headers zlib1g-dev python3)
# A machine with no OpenCL driver gets PoCL, which runs the kernels on the CPU.
ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 || need+=(pocl-opencl-icd)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
[ -d build ] || meson setup build --buildtype=release >/dev/null
ninja -C build >/dev/null
exec build/trainyard serve --dataset-root "$PWD/examples" "$@"
