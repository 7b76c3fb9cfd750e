#!/usr/bin/env bash
# The service's figures, each printed with its goal:
#  (a) GET /jobs/{id} requests/s under wrk, beside bench's http-min (a libmicrohttpd server that
#      answers a fixed JSON body of the same size from the same thread pool) in the same run;
#      goal ≥ 0.6 of http-min
#  (b) durable submits per second (POST /train, 64 concurrent connections); goal ≥ 2,000/s
#  (c) submit → running latency on an idle worker, p50 and p99 (server timestamps); goal ≤ 10 ms
#  (d) the same training job through the service (submit → model.safetensors downloaded) and
#      with `trainyard train`; goal ≤ 5% slower
# usage: bench/service.sh [BUILD_DIR]   (installs wrk and python3-requests if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
bin=$PWD/$build/trainyard
work=$PWD/$build/bench-service
for tool in wrk; do command -v $tool >/dev/null || { apt-get update -qq; apt-get install -y -qq wrk; }; done
/usr/bin/python3 -c 'import requests' 2>/dev/null || apt-get install -y -qq python3-requests
rm -rf "$work" && mkdir -p "$work"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

start_serve() { # dir args... → sets URL and AUTH (the admin token serve wrote)
  local dir=$1; shift
  "$bin" serve --port 0 --data-dir "$dir" "$@" > "$dir.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do
    URL=$(grep -oE 'listening on http://[0-9.]+:[0-9]+' "$dir.log" | awk '{print $3}') || true
    if [ -n "$URL" ]; then
      AUTH="Authorization: Bearer $(cat "$dir/admin.token")"; export TRAINYARD_TOKEN=${AUTH#*Bearer }
      return 0
    fi
    sleep 0.05
  done
  echo "serve did not start:"; cat "$dir.log"; exit 1
}
rps() { awk '/Requests\/sec/ {print $2}'; }

echo "== (a) GET /jobs/{id}: trainyard vs http-min (wrk -t2 -c32 -d10s)"
start_serve "$work/a" --workers 0
id=$(curl -s -X POST "$URL/train" -H "$AUTH" -H 'Content-Type: application/json' \
  -d '{"dataset_url": "http://127.0.0.1:9/x.csv", "hyperparameters": {}}' |
  /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
ours=$(wrk -t2 -c32 -d10s -H "$AUTH" "$URL/jobs/$id" | rps)
"$PWD/$build/bench/http-min" 0 4 > "$work/min.log" & pids+=($!)
sleep 0.3
min_port=$(awk '/listening on/ {print $3}' "$work/min.log")
ref=$(wrk -t2 -c32 -d10s "http://127.0.0.1:$min_port/jobs/$id" | rps)
/usr/bin/python3 -c "o, r = $ours, $ref; print(f'trainyard {o:.0f} req/s, http-min {r:.0f} req/s, ratio {o / r:.2f} (goal >= 0.60)')"

echo "== (b) durable submits (wrk -t2 -c64 -d10s POST /train)"
start_serve "$work/b" --workers 0 --max-queued 0 # one token submits them all
out=$(wrk -t2 -c64 -d10s -H "$AUTH" -s bench/submit.lua "$URL/train")
echo "$out" | grep -E 'Requests/sec|Non-2xx' || true
stored=$(curl -s "$URL/healthz" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["queued"])')
echo "jobs stored: $stored (goal >= 2000/s)"

echo "== (c) submit -> running on an idle worker (200 tiny jobs, one at a time)"
mkdir -p "$work/data" && printf 'a,y\n' > "$work/data/tiny.csv"
for i in $(seq 40); do echo "$i,$((i % 2))" >> "$work/data/tiny.csv"; done
start_serve "$work/c" --workers 1 --dataset-root "$work/data"
/usr/bin/python3 bench/latency.py "$URL" "file://$work/data/tiny.csv" 200

echo "== (d) one training job: service round trip vs trainyard train"
/usr/bin/python3 bench/make_data.py "$PWD/$build/bench-data"
data=$PWD/$build/bench-data
cat > "$work/job.json" <<JOB
{"name": "overhead", "dataset_url": "file://$data/digits.csv", "dataset": {"header": false},
 "model": {"layers": [{"type": "dense", "units": 128, "activation": "relu"}]},
 "hyperparameters": {"epochs": 8, "batch_size": 64, "optimizer": "adam"}}
JOB
"$bin" train "$work/job.json" --out "$work/warm" --quiet --dataset-root "$data"
start_serve "$work/d" --workers 1 --dataset-root "$data"
sleep 1 # the worker registers and parks its lease
# Three rounds, alternating, so that drift on a shared machine hits both sides alike; single
# runs swing by ±10% here, the means of three much less.
local_s=(); service_s=()
for round in 1 2 3; do
  t0=$(date +%s%N)
  "$bin" train "$work/job.json" --out "$work/local" --quiet --dataset-root "$data"
  t1=$(date +%s%N)
  jid=$(curl -s -X POST "$URL/train" -H "$AUTH" -H 'Content-Type: application/json' -d @"$work/job.json" |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  # Wait as a user following the job would: its event stream ends when the job does. (Polling
  # with a process per poll would take CPU from the worker on a small machine.)
  curl -sN -H "$AUTH" "$URL/jobs/$jid/events" > "$work/events.txt"
  grep -q '"status":"succeeded"' "$work/events.txt" || { echo "the job did not succeed"; exit 1; }
  curl -s -H "$AUTH" -o "$work/model.safetensors" "$URL/jobs/$jid/artifacts/model.safetensors"
  t2=$(date +%s%N)
  local_s+=($(( (t1 - t0) / 1000000 ))); service_s+=($(( (t2 - t1) / 1000000 )))
done
/usr/bin/python3 -c "
l = [x / 1e3 for x in ($(IFS=,; echo "${local_s[*]}"),)]
s = [x / 1e3 for x in ($(IFS=,; echo "${service_s[*]}"),)]
ml, ms = sum(l) / len(l), sum(s) / len(s)
print('trainyard train', ' '.join(f'{x:.2f}' for x in l), 's; service (submit to model downloaded)',
      ' '.join(f'{x:.2f}' for x in s), 's')
print(f'means {ml:.2f}s vs {ms:.2f}s: overhead {100 * (ms / ml - 1):+.1f}% (goal <= +5%)')"
