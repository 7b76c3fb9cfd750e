#!/usr/bin/env bash
# Seed 001's Keras MLP (examples/scripts/keras-mlp) run directly and as a script job through a
# real `trainyard serve --allow-scripts` (bubblewrap sandbox on), same dataset file, same
# hyperparameters, same interpreter; goal: the job ≤ 5% slower on a ~30 s run.
#  direct: `python train.py` with the variables a job gets set by hand (the dataset read in
#          place, PYTHONPATH=python for `import trainyard`), from exec to exit
#  job:    POST /code + POST /train → the event stream says succeeded (what a user waits), and
#          the job's own started_at → finished_at (fetch of the dataset, unpacking the code,
#          the sandboxed run, the artifact upload)
# Rounds alternate direct and job, so that drift on a shared machine hits both alike.
# usage: bench/script_overhead.sh [BUILD_DIR]
#   PYTHON=/work/benchvenv/bin/python (an interpreter with tensorflow-cpu/keras; default that)
#   ROWS=100000 EPOCHS=14 (about 30 s direct on the 2-core machine of bench/README.md), ROUNDS=3
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
root=$PWD
bin=$PWD/$build/trainyard
py=${PYTHON:-/work/benchvenv/bin/python}
rows=${ROWS:-100000}
epochs=${EPOCHS:-14}
rounds=${ROUNDS:-3}
code=$PWD/examples/scripts/keras-mlp
work=$PWD/$build/bench-script
hp="{\"epochs\": $epochs, \"batch_size\": 32, \"learning_rate\": 0.001, \"validation_split\": 0.1}"
"$py" -c 'import keras' 2>/dev/null || { echo "$py has no keras: pip install tensorflow-cpu into it (or set PYTHON)"; exit 1; }
[ -x "$bin" ] || { echo "$bin missing: meson setup $build && ninja -C $build"; exit 1; }
rm -rf "$work" && mkdir -p "$work/data"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
json() { /usr/bin/python3 -c "import json, sys; d = json.load(sys.stdin); print($1)"; }

/usr/bin/python3 "$code/make_digits.py" "$work/data/digits.csv" "$rows"
data=$work/data/digits.csv
# The interpreter's prefixes (the venv and the Python it was made from) must be visible in the
# sandbox; script_run binds them itself, naming them again is harmless and keeps this explicit.
binds=$("$py" -c 'import sys; print(",".join(sorted({sys.prefix, sys.base_prefix})))')

run_direct() { # round → prints wall ms
  local dir=$work/direct-$1
  rm -rf "$dir" && mkdir -p "$dir"/{output,checkpoint,tmp,home} && cp -r "$code" "$dir/code"
  local t0 t1
  t0=$(now_ms)
  (cd "$dir/code" && env -i PATH=/usr/bin:/bin LANG=C.UTF-8 PYTHONUNBUFFERED=1 HOME="$dir/home" \
     TMPDIR="$dir/tmp" PYTHONPATH="$root/python" TRAINYARD_JOB_ID=direct-$1 TRAINYARD_ATTEMPT=1 \
     TRAINYARD_DATASET="$data" TRAINYARD_HYPERPARAMETERS="$hp" TRAINYARD_CODE_DIR="$dir/code" \
     TRAINYARD_OUTPUT_DIR="$dir/output" TRAINYARD_CHECKPOINT_DIR="$dir/checkpoint" \
     TRAINYARD_METRICS="$dir/metrics.jsonl" "$py" train.py > "$dir/log" 2>&1) ||
    { echo "direct run $1 failed:"; tail -20 "$dir/log"; exit 1; }
  t1=$(now_ms)
  [ -s "$dir/output/model.keras" ] || { echo "direct run $1 wrote no model"; exit 1; }
  echo $((t1 - t0))
}

# One untimed short run first, so that neither side pays for a cold page cache of TensorFlow.
hp_full=$hp; hp='{"epochs": 1}'; run_direct warmup > /dev/null; hp=$hp_full

"$bin" serve --port 0 --data-dir "$work/serve" --workers 1 --dataset-root "$work/data" \
  --allow-scripts --python "$py" --script-ro-bind "$binds" > "$work/serve.log" 2>&1 &
pids+=($!)
URL=
for _ in $(seq 200); do
  URL=$(grep -oE 'listening on http://[0-9.]+:[0-9]+' "$work/serve.log" | awk '{print $3}') || true
  [ -n "$URL" ] && break
  sleep 0.05
done
[ -n "$URL" ] || { echo "serve did not start:"; cat "$work/serve.log"; exit 1; }
AUTH="Authorization: Bearer $(cat "$work/serve/admin.token")"
(cd "$code" && tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -czf "$work/code.tar.gz" \
  $(ls))
sleep 1 # the local worker registers and parks its lease

run_job() { # round → prints "submit_to_succeeded_ms running_to_succeeded_ms"
  local t0 t1 addr jid
  t0=$(now_ms)
  addr=$(curl -sf -X POST "$URL/code" -H "$AUTH" -H 'Content-Type: application/gzip' \
    --data-binary @"$work/code.tar.gz" | json 'd["code"]')
  jid=$(curl -sf -X POST "$URL/train" -H "$AUTH" -H 'Content-Type: application/json' -d @- <<JOB | json 'd["job_id"]'
{"model_name": "bench-keras-$1", "dataset_location": "file://$data", "training_script": "train.py",
 "code": "$addr", "hyperparameters": $hp}
JOB
)
  # Wait as a user following the job would: its event stream ends when the job does.
  curl -sN -H "$AUTH" "$URL/jobs/$jid/events" > "$work/events-$1.txt"
  t1=$(now_ms)
  grep -q '"status":"succeeded"' "$work/events-$1.txt" ||
    { echo "job $jid did not succeed:"; curl -s -H "$AUTH" "$URL/jobs/$jid"; echo;
      curl -s -H "$AUTH" "$URL/jobs/$jid/logs" | tail -20; exit 1; }
  curl -sf -H "$AUTH" "$URL/jobs/$jid/artifacts" | grep -q '"model.keras"' ||
    { echo "job $jid has no model.keras"; exit 1; }
  curl -s -H "$AUTH" "$URL/jobs/$jid/logs" > "$work/job-$1.log"
  local own
  own=$(curl -sf -H "$AUTH" "$URL/jobs/$jid" | json '
__import__("datetime").datetime.fromisoformat(d["finished_at"].replace("Z", "+00:00")).timestamp() * 1000 -
__import__("datetime").datetime.fromisoformat(d["started_at"].replace("Z", "+00:00")).timestamp() * 1000')
  echo "$((t1 - t0)) ${own%.*}"
}

direct=(); submit=(); own=()
for round in $(seq "$rounds"); do
  d=$(run_direct "$round"); read -r s o <<< "$(run_job "$round")"
  direct+=("$d"); submit+=("$s"); own+=("$o")
  echo "round $round: direct ${d} ms, job submit->succeeded ${s} ms, job running->succeeded ${o} ms (load $(cut -d' ' -f1 /proc/loadavg))"
done
/usr/bin/python3 - "${direct[*]}" "${submit[*]}" "${own[*]}" "$rows" "$epochs" <<'PY'
import json, sys
d, s, o = ([int(x) / 1e3 for x in a.split()] for a in sys.argv[1:4])
md, ms, mo = (sum(v) / len(v) for v in (d, s, o))
print(f"Keras MLP, {sys.argv[4]} rows, {sys.argv[5]} epochs, {len(d)} rounds")
print("direct          ", " ".join(f"{x:.2f}" for x in d), f"s  mean {md:.2f} s")
print("job, submit     ", " ".join(f"{x:.2f}" for x in s), f"s  mean {ms:.2f} s  overhead {100 * (ms / md - 1):+.1f}% (goal <= +5%)")
print("job, running    ", " ".join(f"{x:.2f}" for x in o), f"s  mean {mo:.2f} s  overhead {100 * (mo / md - 1):+.1f}%")
print(json.dumps({"rows": int(sys.argv[4]), "epochs": int(sys.argv[5]), "direct_s": d, "submit_to_succeeded_s": s,
                  "running_to_succeeded_s": o, "overhead_submit_pct": round(100 * (ms / md - 1), 2),
                  "overhead_running_pct": round(100 * (mo / md - 1), 2)}))
PY
