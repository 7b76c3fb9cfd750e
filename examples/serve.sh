#!/usr/bin/env bash
# The README's first command: installs what trainyard needs on Debian 12 (PoCL as the OpenCL
# device when no GPU driver is installed), builds it (a release build in build/), and starts the
# service on http://127.0.0.1:8080 with one local worker per OpenCL device, its data in
# ./trainyard-data, file:// datasets allowed from examples/, script jobs (users' own
# training programs, in a bubblewrap sandbox; only admin tokens and tokens made with the scripts
# right may submit them), and data-parallel jobs of up to two replicas (--replicas 2: their ranks
# under Open MPI's mpirun, sharing the worker's device; a CPU's cores are split between them). Extra arguments go to `trainyard serve` (e.g. --port 9000,
# --bind 0.0.0.0).
#
# The build is quiet when it works; when it fails, the compiler's or meson's own messages are
# printed and the script exits 1 saying so. A build/ folder left by a configure that failed is
# configured again, so running this a second time after fixing the cause just works.
set -euo pipefail
cd "$(dirname "$0")/.."
need=(build-essential meson ninja-build pkg-config libmicrohttpd-dev libjansson-dev
      libsqlite3-dev libcurl4-openssl-dev ocl-icd-opencl-dev opencl-headers zlib1g-dev
      libpng-dev libjpeg62-turbo-dev protobuf-c-compiler libprotobuf-c-dev libgrpc-dev python3
      bubblewrap
      libopenmpi-dev openmpi-bin)  # data-parallel jobs: trainyard-replica ranks under mpirun
# A machine with no OpenCL driver gets PoCL, which runs the kernels on the CPU.
ls /etc/OpenCL/vendors/*.icd >/dev/null 2>&1 || need+=(pocl-opencl-icd)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "serve.sh: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() {
  cat "$log" >&2
  echo "serve.sh: $1 failed (its messages are above); fix the cause and run examples/serve.sh again" >&2
  exit 1
}
if [ ! -f build/build.ninja ]; then
  echo "serve.sh: configuring a release build in build/" >&2
  wipe=()
  [ -d build/meson-private ] && wipe=(--wipe)
  meson setup "${wipe[@]}" build --buildtype=release >"$log" 2>&1 || fail "meson setup"
fi
echo "serve.sh: building build/trainyard" >&2
ninja -C build >"$log" 2>&1 || fail "the build (ninja -C build)"
exec build/trainyard serve --dataset-root "$PWD/examples" --allow-scripts --replicas 2 "$@"
