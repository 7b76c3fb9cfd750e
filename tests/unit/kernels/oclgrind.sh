#!/bin/sh
# Runs a kernel test program (test-kernels-small: every kernel of the GPU class once, on small
# shapes) under Oclgrind, the OpenCL simulator that checks each access: an out-of-bounds access,
# a data race, a read of uninitialised memory, a barrier some work-items of a group miss, or an
# API misuse is reported (kernels' faults in its log; API errors through the context's notify
# callback, which our programs print as "OpenCL driver: ..."), and either report fails the test.
# 48 KiB of local memory per work-group, as NVIDIA's GPUs give. -cl-opt-disable: Oclgrind 21.10's
# uninitialised-value checker stops at the LLVM `freeze` instructions the optimiser emits. No
# kernel cache: the binaries would be Oclgrind's alone. Skips (77) when oclgrind is not
# installed, and in a sanitizer build.
# usage: oclgrind.sh TEST-PROGRAM
command -v oclgrind >/dev/null 2>&1 ||
  { echo "SKIP: oclgrind is not installed (apt-get install oclgrind)"; exit 77; }
log=$(mktemp) || exit 1
err=$(mktemp) || exit 1
trap 'rm -f "$log" "$err"' EXIT
# The device code is the same in every build, and under a sanitizer the run takes minutes (the
# preloaded Oclgrind runtime also has to be let in ahead of ASan's): the plain build checks it.
if ldd "$1" 2>/dev/null | grep -q libasan; then
  echo "SKIP: a sanitizer build; the same kernels are checked by the unsanitized build's run"
  exit 77
fi
TRAINYARD_KERNEL_CACHE='' oclgrind --build-options -cl-opt-disable --local-mem-size 49152 \
  --check-api --data-races --uninitialized --log "$log" "$@" 2>"$err"
rc=$?
cat "$err" >&2
if [ -s "$log" ] || grep -q '^OpenCL driver: ' "$err"; then
  cat "$log" >&2
  echo "oclgrind: the kernels above misbehaved" >&2
  exit 1
fi
exit $rc
