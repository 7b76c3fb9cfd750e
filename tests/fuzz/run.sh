#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time, as suite 'fuzz' does (tests/fuzz/meson.build).
# usage: run.sh FUZZER SEED_DIR WORK_DIR SECONDS [LIBFUZZER_FLAG...]
# The fuzzer reads WORK_DIR/corpus (a copy of SEED_DIR, where it adds what it finds) and SEED_DIR
# (read only). Exit status 0 when it ran out its time without a crash, leak, timeout or running
# out of memory; else 1 (never libFuzzer's 77, which meson would count as a skip), with each
# reproducer's path and the command that replays it.
set -u
fuzzer=$1 seeds=$2 work=$3 seconds=$4
shift 4
rm -rf "$work/artifacts"
mkdir -p "$work/corpus" "$work/artifacts" || exit 1
cp -n "$seeds"/* "$work/corpus/" 2>/dev/null
"$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
  -error_exitcode=1 -timeout_exitcode=1 \
  -artifact_prefix="$work/artifacts/" "$@" "$work/corpus" "$seeds"
rc=$?
if [ "$rc" -ne 0 ]; then
  for f in "$work"/artifacts/*; do
    [ -e "$f" ] || continue
    echo "FUZZ FAILURE: reproducer $f"
    echo "  replay: $fuzzer $f"
  done
fi
[ "$rc" -eq 0 ] || exit 1
