#!/usr/bin/env bash
# Serving figures (issue 13 item 6), all in one run so that the ratios compare like with like,
# each printed with its goal:
#  (1) single-row REST :predict latency, one client, sequential requests (wrk -t1 -c1 --latency),
#      p50/p99, for the digits MLP (784-128-10) and the seed CNN (one 32×32×3 image, resized to
#      64×64 by serve as in training); goal p50 ≤ 1 ms for one MLP row on loopback
#  (2) saturated REST throughput, 32 clients (wrk -t2 -c32), both models, batching on (serve's
#      defaults: --predict-max-batch 32) and off (a second serve, --predict-max-batch 1, on the
#      same data folder); rows/s and the ratio; goal batched ≥ 5× unbatched
#  (3) beside them: GET /jobs/{id} on the same serve (1 client latency, 32 clients req/s), and
#      onnxruntime in process on the same job's model.onnx (bench/predict_ort.py: session.run
#      p50/p99 on one row, rows/s at batch 32, 2 intra-op threads)
#  (4) gRPC PredictionService/Predict (bench/grpc_load.c, C core, one channel): 1 client latency
#      and 32 clients calls/s, beside REST; goal gRPC ≥ REST at 32 clients
# Then a table and one JSON line per figure ({"figure": ..., "load1": ...}).
#
# The models are trained by the serve itself, 1 epoch on small sets (6,000 digits rows; 320
# CIFAR-format images), since the figures are about serving, not training.
# Environment: PREDICT_SECONDS (each measurement, default 5), PREDICT_THREADS (serve --threads,
# default 4), PREDICT_WINDOW_US (serve --predict-window-us, default 250), BENCH_PYTHON (with
# numpy and onnxruntime; default /work/benchvenv/bin/python; without onnxruntime its figures are
# null). The whole run takes about 1.5 minutes (plus ~1 minute the first time, for the data).
# usage: bench/predict.sh [BUILD_DIR]   (default build; a release build for figures:
#        meson setup build-rel --buildtype=release && ninja -C build-rel)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin=$PWD/$build/trainyard
load=$PWD/$build/bench/grpc-load
data=$PWD/$build/bench-data
work=$PWD/$build/bench-serving
dur=${PREDICT_SECONDS:-5}
threads=${PREDICT_THREADS:-4}
window=${PREDICT_WINDOW_US:-250}
py=${BENCH_PYTHON:-/work/benchvenv/bin/python}
[ -x "$bin" ] && [ -x "$load" ] || { echo "build first: meson setup $build && ninja -C $build" >&2; exit 1; }
command -v wrk >/dev/null || { apt-get update -qq; apt-get install -y -qq wrk; }
[ -x "$py" ] && "$py" -c 'import numpy' 2>/dev/null || py=/usr/bin/python3
ort=1; "$py" -c 'import onnxruntime' 2>/dev/null || ort=0

rm -rf "$work" && mkdir -p "$work" "$data"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
results=$work/results.jsonl
: >"$results"
load1() { cut -d' ' -f1 /proc/loadavg; }
record() { # figure json-object-fields → one line of results.jsonl
  echo "{\"figure\": \"$1\", $2, \"load1\": $(load1)}" | tee -a "$results"
}

start_serve() { # dir args... → sets URL, GRPC, AUTH, SERVE_PID
  local dir=$1; shift
  [ ! -f "$dir.log" ] || mv "$dir.log" "$dir.$(date +%s%N).log" # the address must be this serve's
  "$bin" serve --port 0 --grpc-port 0 --data-dir "$dir" --threads "$threads" \
    --predict-window-us "$window" "$@" >"$dir.log" 2>&1 &
  SERVE_PID=$!; pids+=($SERVE_PID)
  for _ in $(seq 400); do
    URL=$(grep -soE 'listening on http://[0-9.]+:[0-9]+' "$dir.log" | tail -1 | awk '{print $3}') || true
    GRPC=$(grep -soE 'gRPC PredictionService on [0-9.]+:[0-9]+' "$dir.log" | tail -1 | awk '{print $4}') || true
    if [ -n "$URL" ] && [ -n "$GRPC" ]; then
      AUTH="Authorization: Bearer $(cat "$dir/admin.token")"; export TRAINYARD_TOKEN=${AUTH#*Bearer }
      return 0
    fi
    sleep 0.05
  done
  echo "serve did not start:" >&2; cat "$dir.log" >&2; exit 1
}
stop_serve() { kill -TERM "$SERVE_PID"; wait "$SERVE_PID" 2>/dev/null || true; }

# serve's CPU time so far, all threads, in clock ticks: per request it is the server-side cost
# that the client's share of these two cores does not blur.
serve_ticks() { awk '{print $14 + $15}' "/proc/$SERVE_PID/stat"; }
hz=$(getconf CLK_TCK)
# wrk → fields: latency p50/p99 (ms), req/s, serve's CPU µs per request, non-2xx (must be 0).
wrk_run() { # figure connections body-file url
  local out t0
  t0=$(serve_ticks)
  out=$(PREDICT_BODY=$3 wrk -t"$(( $2 > 1 ? 2 : 1 ))" -c"$2" -d"${dur}s" --latency \
        -s bench/predict.lua -H "$AUTH" "$4")
  echo "$out" >"$work/$1.wrk"
  record "$1" "$(echo "$out" | awk -v c="$2" -v dt="$(( $(serve_ticks) - t0 ))" -v hz="$hz" '
    function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0;
                     if (v ~ /s$/) return v * 1000; return v + 0 }
    $1 == "50%" { p50 = ms($2) } $1 == "99%" { p99 = ms($2) }
    /^Requests\/sec/ { rps = $2 }
    /^predict.lua:/ { n = $3; bad = $5 + $7 }
    END { printf "\"clients\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"per_s\": %.1f, " \
                 "\"serve_cpu_us\": %.1f, \"errors\": %d", c, p50, p99, rps, n ? dt / hz * 1e6 / n : 0, bad }')"
}
grpc_run() { # figure clients shape
  local out t0
  t0=$(serve_ticks)
  out=$("$load" "$GRPC" "$model_name" "$3" "$2" "$dur" 1 0) || echo "grpc-load: $out" >&2
  [ -n "$out" ] || { record "$1" "\"clients\": $2, \"errors\": 1, \"per_s\": null"; return; }
  record "$1" "$("$py" -c 'import json,sys; d=json.loads(sys.argv[1]); dt=int(sys.argv[2]) / int(sys.argv[3])
print(", ".join(f"\"{k}\": {json.dumps(v)}" for k, v in [("clients", d["clients"]),
  ("p50_ms", d["p50_ms"]), ("p99_ms", d["p99_ms"]), ("per_s", d["calls_per_s"]),
  ("serve_cpu_us", round(dt / d["calls"] * 1e6, 1) if d["calls"] else None),
  ("errors", d["errors"]), ("first_error", d["first_error"]), ("outputs", d["outputs"])]))' \
    "$out" "$(( $(serve_ticks) - t0 ))" "$hz" 2>/dev/null || echo '"errors": 1')"
}

echo "== data and models (1 epoch each, trained by serve)" >&2
"$py" bench/make_data.py "$data" >&2
[ -f "$data/digits-small.csv" ] || head -n 6000 "$data/digits.csv" >"$data/digits-small.csv"
[ -f "$data/cifar-small.tar.gz" ] ||
  "$py" bench/make_images.py "$data/cifar-small.tar.gz" --train 320 --test 64 >&2
cat >"$work/mlp.json" <<JOB
{"name": "predict-mlp", "dataset_url": "file://$data/digits-small.csv", "dataset": {"header": false},
 "task": "classification", "model": {"layers": [{"type": "dense", "units": 128, "activation": "relu"}]},
 "hyperparameters": {"epochs": 1, "batch_size": 64, "optimizer": "adam"}}
JOB
cat >"$work/cnn.json" <<JOB
{"name": "predict-cnn", "dataset_url": "file://$data/cifar-small.tar.gz",
 "dataset": {"format": "cifar10", "resize": [64, 64]}, "task": "classification",
 "model": {"input_shape": [64, 64, 3],
           "layers": [{"type": "conv2d", "filters": 32, "kernel_size": 3, "activation": "relu"},
                      {"type": "maxpool2d", "pool_size": 2}, {"type": "flatten"},
                      {"type": "dense", "units": 10, "activation": "softmax"}]},
 "hyperparameters": {"epochs": 1, "batch_size": 32, "optimizer": "adam", "seed": 0}}
JOB
"$py" - "$work" <<'PY'
import json, sys
w = sys.argv[1]
json.dump({"instances": [[(i * 37) % 256 for i in range(784)]]}, open(f"{w}/mlp-body.json", "w"))
img = [[[(y * 32 + x + c * 85) % 256 for c in range(3)] for x in range(32)] for y in range(32)]
json.dump({"instances": [img]}, open(f"{w}/cnn-body.json", "w"))
PY

start_serve "$work/a" --workers 1 --dataset-root "$data"
declare -A job
for m in mlp cnn; do
  job[$m]=$(curl -sf -X POST "$URL/train" -H "$AUTH" -H 'Content-Type: application/json' \
    -d @"$work/$m.json" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  curl -sN -H "$AUTH" "$URL/jobs/${job[$m]}/events" >"$work/$m-events.txt"
  grep -q '"status":"succeeded"' "$work/$m-events.txt" ||
    { echo "the $m job did not succeed:" >&2; tail -5 "$work/$m-events.txt" >&2; exit 1; }
  curl -sf -H "$AUTH" -o "$work/$m.onnx" "$URL/jobs/${job[$m]}/artifacts/model.onnx"
  # One answer first: the bodies must give predictions, not errors.
  curl -sf -H "$AUTH" -H 'Content-Type: application/json' -d @"$work/$m-body.json" \
    "$URL/v1/models/predict-$m:predict" | "$py" -c '
import json, sys
p = json.load(sys.stdin)["predictions"]
assert len(p) == 1 and len(p[0]) == 10, p
print(f"predict-'"$m"': one answer, {len(p[0])} probabilities", file=sys.stderr)'
done

echo "== serve batching on (max batch 32, window ${window} us, ${threads} HTTP threads)" >&2
grpc_shape() { [ "$1" = mlp ] && echo 1,784 || echo 1,32,32,3; }
for m in mlp cnn; do
  model_name=predict-$m
  wrk_run "rest_${m}_1" 1 "$work/$m-body.json" "$URL/v1/models/predict-$m:predict"
  grpc_run "grpc_${m}_1" 1 "$(grpc_shape $m)"
done
wrk_run get_job_1 1 "" "$URL/jobs/${job[mlp]}"
for m in mlp cnn; do
  model_name=predict-$m
  wrk_run "rest_${m}_32_batched" 32 "$work/$m-body.json" "$URL/v1/models/predict-$m:predict"
  grpc_run "grpc_${m}_32_batched" 32 "$(grpc_shape $m)"
done
wrk_run get_job_32 32 "" "$URL/jobs/${job[mlp]}"
stop_serve

echo "== serve batching off (--predict-max-batch 1), the same data folder" >&2
start_serve "$work/a" --workers 0 --predict-max-batch 1
for m in mlp cnn; do # load the models before the clock starts
  curl -sf -o /dev/null -H "$AUTH" -H 'Content-Type: application/json' -d @"$work/$m-body.json" "$URL/v1/models/predict-$m:predict"
done
for m in mlp cnn; do
  model_name=predict-$m
  wrk_run "rest_${m}_32_unbatched" 32 "$work/$m-body.json" "$URL/v1/models/predict-$m:predict"
  grpc_run "grpc_${m}_32_unbatched" 32 "$(grpc_shape $m)"
done
stop_serve

echo "== onnxruntime in process (2 threads) on the jobs' model.onnx" >&2
for m in mlp cnn; do
  if [ "$ort" = 1 ]; then
    record "ort_$m" "$("$py" bench/predict_ort.py "$work/$m.onnx" "$(( dur > 2 ? dur : 2 ))" 2 |
      "$py" -c 'import json,sys; d=json.load(sys.stdin); print(", ".join(f"\"{k}\": {json.dumps(v)}"
      for k, v in d.items()))')"
  else
    record "ort_$m" '"p50_ms": null, "note": "no onnxruntime in '"$py"'"'
  fi
done

"$py" - "$results" "$(uptime)" <<'PY'
import json, sys
r = {d["figure"]: d for d in map(json.loads, open(sys.argv[1]))}
g = lambda f, k: r.get(f, {}).get(k)
def fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)
print(f"\n{sys.argv[2].strip()}")
print("latency, 1 client, one row    p50 ms    p99 ms")
for m in ("mlp", "cnn"):
    for label, f in ((f"{m.upper()} REST :predict", f"rest_{m}_1"), (f"{m.upper()} gRPC Predict", f"grpc_{m}_1"),
                     (f"{m.upper()} onnxruntime run", f"ort_{m}")):
        print(f"  {label:27s} {fmt(g(f, 'p50_ms')):>8s}  {fmt(g(f, 'p99_ms')):>8s}")
print(f"  {'GET /jobs/{id}':27s} {fmt(g('get_job_1', 'p50_ms')):>8s}  {fmt(g('get_job_1', 'p99_ms')):>8s}")
p50 = g("rest_mlp_1", "p50_ms")
print(f"  goal: MLP REST p50 <= 1 ms: {'met' if p50 is not None and p50 <= 1 else 'MISSED'} ({fmt(p50)} ms)")
print("\nthroughput, 32 clients, rows/s   batched  unbatched  ratio   gRPC/REST   serve CPU us/request (b, u)")
summary = {"summary": "predict.sh", "uptime": sys.argv[2].strip()}
for m in ("mlp", "cnn"):
    for proto in ("rest", "grpc"):
        b, u = g(f"{proto}_{m}_32_batched", "per_s"), g(f"{proto}_{m}_32_unbatched", "per_s")
        ratio = b / u if b and u else None
        gr = g(f"grpc_{m}_32_batched", "per_s"), g(f"rest_{m}_32_batched", "per_s")
        vs = gr[0] / gr[1] if all(gr) else None
        cpu = [g(f"{proto}_{m}_32_{k}", "serve_cpu_us") for k in ("batched", "unbatched")]
        print(f"  {m.upper() + ' ' + proto:28s} {fmt(b, '.0f'):>8s} {fmt(u, '.0f'):>9s}  {fmt(ratio, '.2f'):>5s}x"
              + f"   {fmt(vs, '.2f') + 'x' if proto == 'grpc' else '':>8s}   {fmt(cpu[0], '.0f'):>5s} {fmt(cpu[1], '.0f'):>5s}")
        summary[f"{proto}_{m}_batched_over_unbatched"] = ratio and round(ratio, 2)
    summary[f"grpc_over_rest_{m}"] = vs and round(vs, 2)
print(f"  {'GET /jobs/{id} req/s':28s} {fmt(g('get_job_32', 'per_s'), '.0f'):>8s} {'':>9s}  {'':>6s}   {'':>8s}   {fmt(g('get_job_32', 'serve_cpu_us'), '.0f'):>5s}")
for m in ("mlp", "cnn"):
    print(f"  {m.upper() + ' onnxruntime batch 32':28s} {fmt(g(f'ort_{m}', 'batch32_rows_per_s'), '.0f'):>8s}")
for m in ("mlp", "cnn"):
    ratio = summary[f"rest_{m}_batched_over_unbatched"]
    print(f"  goal: {m.upper()} REST batched >= 5x unbatched: {'met' if ratio and ratio >= 5 else 'MISSED'} ({fmt(ratio, '.2f')}x)")
    vs = summary[f"grpc_over_rest_{m}"]
    print(f"  goal: {m.upper()} gRPC >= REST at 32 clients: {'met' if vs and vs >= 1 else 'MISSED'} ({fmt(vs, '.2f')}x)")
errors = sum(d.get("errors") or 0 for d in r.values())
summary["errors"] = errors
if errors:
    print(f"  WARNING: {errors} failed requests in all; see {sys.argv[1]} and the .wrk files")
print(json.dumps(summary))
PY
