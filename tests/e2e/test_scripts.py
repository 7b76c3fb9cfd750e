"""Script jobs end to end (issue 12): users' own training scripts, uploaded with POST /code and
run by a real `trainyard serve --allow-scripts` on its local worker, in the bubblewrap sandbox.

- seed 002's request shape ({model_name, dataset_location, training_script, hyperparameters},
  plus the code's address) with examples/scripts/torch-mlp: metrics, logs and artifacts come
  back through GET metrics, logs, artifacts and the event stream; metric names of the script's
  own (and a bad metrics line) land where they should;
- the same PyTorch script survives kill -9 of its worker: attempt 2 resumes from the
  checkpoint it wrote, and every epoch's metrics appear once;
- cancel of a running script: SIGTERM to its whole process group, its handler runs, the job is
  cancelled within the grace; one that ignores SIGTERM gets SIGKILL after it;
- the sandbox: no worker token, no data dir, no writes outside the job folder;
- POST /code refuses a `../` member; a failing script fails the job with its last lines; the
  scripts right of tokens; a worker without --allow-scripts never takes a script job;
  `trainyard submit job.json --code DIR`; code_url with its sha256; max_runtime_seconds and
  --script-memory.

Scripts run with Debian's /usr/bin/python3 (python3-torch for the PyTorch ones). Every wait polls
with a generous deadline: the machine may be loaded."""
import hashlib
import io
import json
import os
import pathlib
import re
import signal
import subprocess
import tarfile
import threading
import time
import uuid

import pytest

from conftest import BIN, ROOT
from helpers import TERMINAL, checkpoint_epoch, job_doc, submit, until, wait_for, write_blobs

PYTHON = "/usr/bin/python3"
TORCH_MLP = ROOT / "examples" / "scripts" / "torch-mlp"
SERVE_ARGS = ("--workers", "1", "--allow-scripts", "--python", PYTHON)


def torch_available():
    return subprocess.run([PYTHON, "-c", "import torch"], capture_output=True).returncode == 0


needs_torch = pytest.mark.skipif(not torch_available(),
                                 reason=f"{PYTHON} has no torch: apt-get install python3-torch")


# ---- helpers ---------------------------------------------------------------------------------

def pack(files):
    """A .tar.gz in memory of files: {name: text or bytes, or (content, mode)}, sorted."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in sorted(files):
            content, mode = files[name] if isinstance(files[name], tuple) else (files[name],
                                                                                 0o644)
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def folder(path):
    """The files of a folder, for pack (names relative to it, modes kept)."""
    path = pathlib.Path(path)
    return {str(p.relative_to(path)): (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(path.rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


def post_code(svc, body, session=None):
    return (session or svc.http).post(f"{svc.url}/code", data=body,
                                      headers={"Content-Type": "application/gzip"})


def upload(svc, files, session=None):
    """POST /code of files; returns the code's address."""
    r = post_code(svc, pack(files), session)
    assert r.status_code in (200, 201), r.text
    return r.json()["code"]


def script_doc(code, name="script", script="train.py", hyperparameters=None, **extra):
    doc = {"model_name": name, "training_script": script, "code": code,
           "hyperparameters": hyperparameters or {}}
    doc.update(extra)
    return doc


def run_script(svc, source, hyperparameters=None, **extra):
    """Uploads one python file as train.py and submits it; returns the Job answer."""
    code = upload(svc, {"train.py": source})
    return submit(svc, script_doc(code, hyperparameters=hyperparameters, **extra)).json()


def logs(svc, job_id):
    return svc.http.get(f"{svc.url}/jobs/{job_id}/logs").text


def metrics(svc, job_id):
    return svc.http.get(f"{svc.url}/jobs/{job_id}/metrics").json()["epochs"]


def artifacts(svc, job_id):
    listing = svc.http.get(f"{svc.url}/jobs/{job_id}/artifacts").json()["artifacts"]
    return {a["name"]: a for a in listing}


def download(svc, job_id, name):
    """An artifact's bytes, checked against the listing's SHA-256."""
    listed = artifacts(svc, job_id)[name]
    r = svc.http.get(f"{svc.url}/jobs/{job_id}/artifacts/{name}")
    assert r.status_code == 200, r.text
    assert hashlib.sha256(r.content).hexdigest() == listed["sha256"]
    return r.content


def wait_log(svc, job_id, text, timeout=60):
    return until(lambda: text in logs(svc, job_id), timeout, f"{text!r} in the job's log")


class Events:
    """Reads a job's event stream in a thread from now until it ends: (kind, data) pairs."""

    def __init__(self, svc, job_id):
        self.items = []
        self.thread = threading.Thread(target=self._read, args=(svc, job_id), daemon=True)
        self.thread.start()

    def _read(self, svc, job_id):
        with svc.http.get(f"{svc.url}/jobs/{job_id}/events", stream=True, timeout=180) as r:
            kind = None
            for raw in r.iter_lines(decode_unicode=True):
                if raw.startswith("event:"):
                    kind = raw.split(":", 1)[1].strip()
                elif raw.startswith("data:"):
                    self.items.append((kind, json.loads(raw[5:])))

    def of(self, kind):
        self.thread.join(timeout=30)
        return [d for k, d in self.items if k == kind]


def job_pids(job_id):
    """The processes whose environment names job_id (the script, its children, bwrap)."""
    mark = f"TRAINYARD_JOB_ID={job_id}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if mark in f.read().split(b"\0"):
                        pids.append(int(entry))
            except OSError:
                pass
    return pids


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def local_worker_pid(svc):
    return int(re.findall(r"local worker 0 started \(pid (\d+)", svc.output())[-1])


def worker_token(pid):
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    return env[b"TRAINYARD_TOKEN"].decode()


# ---- the seed's request, a real train.py ---------------------------------------------------

@needs_torch
def test_seed_002_request_runs_the_torch_script_and_everything_comes_back(serve, blobs):
    """The seed's four fields (plus the code's address) make a job whose metrics, log lines and
    artifacts arrive through every interface; model.pt loads in PyTorch."""
    svc = serve(*SERVE_ARGS)
    code = upload(svc, folder(TORCH_MLP))
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", code)
    hp = {"epochs": 6, "batch_size": 32, "learning_rate": 0.01, "hidden": 32}
    r = submit(svc, {"model_name": "seed-002", "dataset_location": blobs,
                     "training_script": "train.py", "hyperparameters": hp, "code": code})
    assert r.status_code == 202
    job = r.json()
    assert job["job_id"] == job["id"] and r.headers["Location"] == f"/jobs/{job['id']}"
    events = Events(svc, job["id"])

    done = wait_for(svc, job["id"], TERMINAL, timeout=120)
    assert done["status"] == "succeeded", (done, logs(svc, job["id"]))
    assert done["name"] == "seed-002" and done["job_id"] == job["id"]
    document = done["document"]
    assert document["name"] == "seed-002" and document["dataset_url"] == blobs
    assert document["training_script"] == "train.py" and document["code"] == code
    assert document["hyperparameters"] == hp
    assert not {"model_name", "dataset_location", "model", "task"} & set(document)

    epochs = metrics(svc, job["id"])
    assert [e["epoch"] for e in epochs] == list(range(1, 7))
    for e in epochs:
        assert 0 <= e["loss"] < 5 and 0 <= e["accuracy"] <= 1, e
        assert e["val_loss"] is not None and 0 <= e["val_accuracy"] <= 1, e
    assert epochs[-1]["val_accuracy"] > 0.9, epochs  # three well-separated blobs

    text = logs(svc, job["id"])
    assert "480 training rows, 120 validation rows, 2 features, 3 classes" in text, text
    assert len(re.findall(r"^epoch \d/6 loss ", text, re.M)) == 6, text
    assert "resuming" not in text

    streamed = events.of("metrics")
    assert [m["epoch"] for m in streamed] == list(range(1, 7)), events.items
    assert streamed[-1]["val_accuracy"] == epochs[-1]["val_accuracy"]
    assert events.of("status")[-1]["status"] == "succeeded"

    names = artifacts(svc, job["id"])
    assert "model.pt" in names, names
    model = download(svc, job["id"], "model.pt")
    path = svc.data_dir.parent / "model.pt"
    path.write_bytes(model)
    check = subprocess.run([PYTHON, "-c", "import sys, torch; m = torch.load(sys.argv[1]); "
                            "print(m['classes'], sorted(m['model']))", str(path)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    assert "['k0', 'k1', 'k2']" in check.stdout and "4.weight" in check.stdout, check.stdout
    csv = download(svc, job["id"], "metrics.csv").decode().splitlines()
    assert len(csv) == 7 and csv[0].startswith("epoch,"), csv


def test_metrics_of_any_name_and_bad_lines(serve):
    """`import trainyard` works in the sandbox; trainyard.report's metric names of the script's
    own come back beside the known ones (API and event stream); a bad metrics line becomes a log
    line and is skipped."""
    svc = serve(*SERVE_ARGS)
    job = run_script(svc, """
import os, time, trainyard
trainyard.report(epoch=1, loss=0.5, **{"grad_norm": 2.5, "lr/group0": 0.01})
with open(os.environ["TRAINYARD_METRICS"], "a") as f:
    f.write("not json\\n")
    f.write('{"epoch": 0, "loss": 1}\\n')
trainyard.report(epoch=2, loss=0.25, accuracy=0.75, grad_norm=1.5, **{"lr/group0": 0.005})
print("reported", flush=True)
time.sleep(1)
""")
    events = Events(svc, job["id"])
    done = wait_for(svc, job["id"], TERMINAL, timeout=60)
    assert done["status"] == "succeeded", (done, logs(svc, job["id"]))
    epochs = metrics(svc, job["id"])
    assert [(e["epoch"], e["loss"], e["grad_norm"], e["lr/group0"]) for e in epochs] == [
        (1, 0.5, 2.5, 0.01), (2, 0.25, 1.5, 0.005)], epochs
    assert epochs[1]["accuracy"] == 0.75
    streamed = events.of("metrics")
    assert [(m["epoch"], m["grad_norm"]) for m in streamed] == [(1, 2.5), (2, 1.5)], streamed
    text = logs(svc, job["id"])
    assert re.search(r"metrics line 2 ignored: \S", text), text
    assert re.search(r"metrics line 3 ignored: \S", text), text
    assert "reported" in text


# ---- kill -9 of the worker: the script resumes from its checkpoint ---------------------------

EPOCHS = 12


@pytest.fixture(scope="module")
def slow_blobs(data_server):
    """20,000 rows: at batch 4 an epoch of torch-mlp takes about a second on two cores."""
    folder_, base = data_server
    write_blobs(folder_, "script-slow-blobs.csv", rows=20000, seed=11)
    return f"{base}/script-slow-blobs.csv"


@needs_torch
def test_torch_script_killed_with_its_worker_resumes_from_its_checkpoint(serve, slow_blobs):
    """kill -9 of the local worker mid-run (after a checkpoint reached the server): the script
    dies with it, attempt 2 gets the checkpoint back and says where it resumes, every epoch's
    metrics appear once, and model.pt downloads."""
    svc = serve(*SERVE_ARGS, "--lease-seconds", "30")
    code = upload(svc, folder(TORCH_MLP))
    hp = {"epochs": EPOCHS, "batch_size": 4, "learning_rate": 0.005, "hidden": 32}
    job = submit(svc, script_doc(code, "torch-resume", dataset_location=slow_blobs,
                                 hyperparameters=hp)).json()
    until(lambda: checkpoint_epoch(svc, job["id"]) >= 2, 120,
          "a checkpoint of epoch 2 or later on the server")
    assert len(metrics(svc, job["id"])) < EPOCHS, "the run ended before it could be killed"
    scripts = job_pids(job["id"])
    assert scripts, "no process of the script found"
    pid = local_worker_pid(svc)

    os.kill(pid, signal.SIGKILL)
    until(lambda: not any(alive(p) for p in scripts), 15,
          f"the script's processes {scripts} to die with their worker")

    done = wait_for(svc, job["id"], TERMINAL, timeout=240)
    assert done["status"] == "succeeded", (done, logs(svc, job["id"]))
    assert done["attempt"] == 2
    attempts = svc.http.get(f"{svc.url}/jobs/{job['id']}").json()["attempts"]
    assert [(a["attempt"], a["outcome"]) for a in attempts] == [(1, "requeued"),
                                                                (2, "succeeded")]
    text = logs(svc, job["id"])
    stored = int(re.search(r"^attempt 2 resumes after epoch (\d+)$", text, re.M).group(1))
    resumed = [int(n) for n in re.findall(r"^resuming after epoch (\d+)$", text, re.M)]
    # the snapshot's label is the newest epoch reported when it was packed; the script reports
    # an epoch before it writes that epoch's checkpoint, so the file holds the label or one less
    assert len(resumed) == 1 and stored - 1 <= resumed[0] <= stored, (resumed, stored, text)
    assert resumed[0] >= 1
    # attempt 2 trained only what was left: after its resume line, epochs resumed+1.. only
    after = text[text.index("resuming after epoch"):]
    assert [int(n) for n in re.findall(rf"^epoch (\d+)/{EPOCHS} ", after, re.M)] == list(
        range(resumed[0] + 1, EPOCHS + 1)), after
    assert [e["epoch"] for e in metrics(svc, job["id"])] == list(range(1, EPOCHS + 1))
    model = download(svc, job["id"], "model.pt")
    assert len(model) > 1000


# ---- cancel ---------------------------------------------------------------------------------

def test_cancel_sends_sigterm_to_the_script_s_process_group(serve):
    """Cancel of a running script: its SIGTERM handler runs (and is heard in the log), a child
    it started goes too, and the job is cancelled well within the 10 s grace."""
    svc = serve(*SERVE_ARGS)
    job = run_script(svc, """
import signal, subprocess, sys, time
child = subprocess.Popen(["sleep", "600"])
def on_term(signum, frame):
    print("got SIGTERM, cleaning up", flush=True)
    time.sleep(0.5)
    print("clean exit", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("waiting for cancel", flush=True)
while True:
    time.sleep(0.1)
""")
    wait_log(svc, job["id"], "waiting for cancel")
    pids = until(lambda: (lambda p: p if len(p) >= 2 else None)(job_pids(job["id"])), 15,
                 "the script and its child")

    t0 = time.time()
    r = svc.http.post(f"{svc.url}/jobs/{job['id']}/cancel")
    assert r.status_code in (200, 202), r.text
    done = wait_for(svc, job["id"], TERMINAL, timeout=30)
    took = time.time() - t0
    assert done["status"] == "cancelled", done
    assert took < 8, f"cancelled {took:.1f}s after the request (the script exits in 0.5 s)"
    until(lambda: not any(alive(p) for p in pids), 15, f"the processes {pids} to end")
    text = logs(svc, job["id"])
    assert "got SIGTERM, cleaning up" in text and "clean exit" in text, text


def test_a_script_that_ignores_sigterm_is_killed_after_the_grace(serve):
    """--script-grace-seconds 1: a script that ignores SIGTERM gets SIGKILL a second later,
    and the job is cancelled."""
    svc = serve(*SERVE_ARGS, "--script-grace-seconds", "1")
    job = run_script(svc, """
import signal, time
signal.signal(signal.SIGTERM, lambda signum, frame: print("ignoring SIGTERM", flush=True))
print("waiting for cancel", flush=True)
while True:
    time.sleep(0.1)
""")
    wait_log(svc, job["id"], "waiting for cancel")
    pids = until(lambda: job_pids(job["id"]), 15, "the script's processes")
    t0 = time.time()
    assert svc.http.post(f"{svc.url}/jobs/{job['id']}/cancel").status_code in (200, 202)
    done = wait_for(svc, job["id"], TERMINAL, timeout=30)
    took = time.time() - t0
    assert done["status"] == "cancelled", done
    assert 0.9 < took < 6, f"cancelled {took:.1f}s after the request (grace 1 s)"
    until(lambda: not any(alive(p) for p in pids), 15, f"the processes {pids} to end")
    assert "ignoring SIGTERM" in logs(svc, job["id"])


# ---- the sandbox ----------------------------------------------------------------------------

SNOOP = """
import glob, json, os
hp = json.loads(os.environ["TRAINYARD_HYPERPARAMETERS"])
print("TOKEN", os.environ.get("TRAINYARD_TOKEN"), flush=True)
print("ENV", " ".join(sorted(os.environ)), flush=True)
for path in hp["read"]:
    try:
        with open(path) as f:
            print("READ", path, "ok", f.read(200).strip(), flush=True)
    except OSError as e:
        print("READ", path, "failed", type(e).__name__, flush=True)
found = []
for env in glob.glob("/proc/*/environ"):
    try:
        with open(env, "rb") as f:
            if b"TRAINYARD_TOKEN" in f.read():
                found.append(env)
    except OSError:
        pass
print("PROC", found, flush=True)
for path in hp["write"] + [os.path.join(os.getcwd(), "..", "..", hp["name"])]:
    try:
        with open(path, "w") as f:
            f.write("escaped")
        print("WRITE", path, "ok", flush=True)
    except OSError as e:
        print("WRITE", path, "failed", type(e).__name__, flush=True)
print("ROOT", sorted(os.listdir("/")), flush=True)
with open(os.path.join(os.environ["TRAINYARD_OUTPUT_DIR"], "proof.txt"), "w") as f:
    f.write("ran")
"""


def test_the_sandbox_hides_tokens_and_stops_writes_outside_the_job_folder(serve, tmp_path):
    """A script that looks for the worker's token (its environment, the data dir's admin.token
    by absolute path, every /proc/*/environ) finds nothing, and its writes to /usr, the data
    dir, the job folder's parents and folders outside it fail or land inside its own folder:
    nothing appears outside. The script itself runs (its output file is an artifact)."""
    svc = serve(*SERVE_ARGS)
    secret = uuid.uuid4().hex
    (tmp_path / "secret.txt").write_text(secret)
    name = f"trainyard-escape-{uuid.uuid4().hex[:12]}"
    targets = [pathlib.Path("/usr") / name, svc.data_dir / name, pathlib.Path("/tmp") / name,
               tmp_path / name, pathlib.Path("/") / name]
    hp = {"name": name,
          "read": [str(svc.data_dir / "admin.token"), str(svc.data_dir / "trainyard.db"),
                   str(tmp_path / "secret.txt"), str(ROOT / "README.md")],
          "write": [str(t) for t in targets]}
    job = run_script(svc, SNOOP, hyperparameters=hp)
    done = wait_for(svc, job["id"], TERMINAL, timeout=60)
    text = logs(svc, job["id"])
    assert done["status"] == "succeeded", (done, text)
    assert download(svc, job["id"], "proof.txt") == b"ran"

    token = worker_token(local_worker_pid(svc))
    for what in (token, svc.admin_token, secret):
        assert what not in text, text
    assert re.search(r"^TOKEN None$", text, re.M), text
    env_names = re.search(r"^ENV (.*)$", text, re.M).group(1).split()
    assert "TRAINYARD_TOKEN" not in env_names and "TRAINYARD_JOB_ID" in env_names, env_names
    for path in hp["read"]:
        assert re.search(rf"^READ {re.escape(path)} failed ", text, re.M), (path, text)
    assert re.search(r"^PROC \[\]$", text, re.M), text
    for path in (f"/usr/{name}", str(svc.data_dir / name), str(tmp_path / name)):
        assert re.search(rf"^WRITE {re.escape(path)} failed ", text, re.M), (path, text)
    listing = re.search(r"^ROOT (\[.*\])$", text, re.M).group(1)
    seen = set(json.loads(listing.replace("'", '"')))
    assert "usr" in seen and not {"work", "home", "root", "srv", "opt", "var"} & seen, seen
    # whatever the script could write stayed inside the sandbox: nothing outside, anywhere
    job_parent = list((svc.data_dir / "work").glob("*"))
    for target in targets + [p / name for p in job_parent] + [svc.data_dir / "work" / name]:
        assert not target.exists(), f"the script wrote {target}"


# ---- refusals ---------------------------------------------------------------------------------

def test_post_code_checks_the_tarball(serve):
    """A `../` member (or an absolute one) is refused with 400 naming the member, and nothing is
    stored; a good folder is stored once by its content's address."""
    svc = serve("--workers", "0")
    for member in ("../evil.py", "/etc/evil.py", "code/../../evil.py"):
        r = post_code(svc, pack({"train.py": "print(1)\n", member: "print('evil')\n"}))
        assert r.status_code == 400, (member, r.status_code, r.text)
        assert r.headers["Content-Type"].startswith("application/problem+json")
        errors = r.json()["errors"]
        assert errors[0]["field"] == "body" and member.lstrip("/") in errors[0]["message"], (
            member, errors)
    r = post_code(svc, b"not a tarball at all")
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "body", r.text
    assert not list(svc.data_dir.glob("code/*")), "a refused bundle was stored"

    body = pack({"train.py": "print(1)\n", "lib/util.py": "X = 1\n"})
    first, second = post_code(svc, body), post_code(svc, body)
    assert (first.status_code, second.status_code) == (201, 200), (first.text, second.text)
    answer = first.json()
    assert answer["code"] == "sha256:" + hashlib.sha256(body).hexdigest()
    assert answer["bytes"] == len(body) and answer["files"] == 2, answer
    assert second.json()["code"] == answer["code"]
    stored = list((svc.data_dir / "code").glob("*"))
    assert [p.name for p in stored] == [hashlib.sha256(body).hexdigest() + ".tar.gz"], stored


def test_a_failing_script_fails_the_job_with_its_last_lines(serve):
    svc = serve(*SERVE_ARGS)
    job = run_script(svc, """
import sys
for i in range(1, 31):
    print(f"line {i}", flush=True)
print("ValueError: the script gave up", file=sys.stderr, flush=True)
sys.exit(7)
""", max_attempts=1)
    done = wait_for(svc, job["id"], TERMINAL, timeout=60)
    assert done["status"] == "failed", done
    error = done["error"]
    assert "ValueError: the script gave up" in error and "line 30" in error, error
    assert "line 5" not in error, error  # the last lines, not all of them
    assert re.search(r"\b7\b", error), error
    assert re.search(r"^line 5$", logs(svc, job["id"]), re.M)


def test_the_scripts_right_of_tokens(serve):
    """A user token without the scripts right may not upload code nor submit a script job (403
    naming what is missing), but still submits built-in jobs; one with the right may do both."""
    svc = serve("--workers", "0")
    code = upload(svc, {"train.py": "print(1)\n"})
    plain = svc.http.post(f"{svc.url}/tokens", json={"name": "alice", "role": "user"})
    allowed = svc.http.post(f"{svc.url}/tokens", json={"name": "bob", "role": "user",
                                                        "scripts": True})
    assert plain.status_code == allowed.status_code == 201, (plain.text, allowed.text)
    assert plain.json()["scripts"] is False and allowed.json()["scripts"] is True
    alice, bob = svc.session(plain.json()["token"]), svc.session(allowed.json()["token"])

    r = post_code(svc, pack({"train.py": "print(2)\n"}), alice)
    assert r.status_code == 403 and "scripts" in r.text, r.text
    r = alice.post(f"{svc.url}/train", json=script_doc(code))
    assert r.status_code == 403, r.text
    assert r.headers["Content-Type"].startswith("application/problem+json")
    assert r.json()["errors"] == [{"field": "training_script", "message":
                                   "this token may not submit script jobs; an admin can create "
                                   "one with scripts: true"}], r.json()
    r = alice.post(f"{svc.url}/train", json=job_doc("http://127.0.0.1:9/x.csv"))
    assert r.status_code == 202, r.text

    mine = upload(svc, {"train.py": "print(3)\n"}, bob)
    r = bob.post(f"{svc.url}/train", json=script_doc(mine))
    assert r.status_code == 202 and r.json()["job_id"] == r.json()["id"], r.text
    jobs = {j["id"] for j in alice.get(f"{svc.url}/jobs").json()["jobs"]}
    assert r.json()["id"] not in jobs  # bob's job stays his


def test_a_worker_without_allow_scripts_never_takes_a_script_job(serve, blobs):
    svc = serve("--workers", "1")
    script = run_script(svc, "print('ran')\n")
    builtin = submit(svc, job_doc(blobs, epochs=2)).json()
    assert wait_for(svc, builtin["id"], TERMINAL)["status"] == "succeeded"
    time.sleep(1)
    job = svc.http.get(f"{svc.url}/jobs/{script['id']}").json()
    assert job["status"] == "queued" and job["attempt"] == 0, job
    workers = svc.http.get(f"{svc.url}/workers").json()["workers"]
    assert workers and not any(w["scripts"] for w in workers), workers


# ---- the command line ---------------------------------------------------------------------

def test_cli_submit_with_code_packs_uploads_and_runs_the_folder(serve, tmp_path):
    """`trainyard submit job.json --code DIR`: the folder is packed the same way twice (same
    address), the job runs it (a module beside train.py imports), and --follow exits 0."""
    svc = serve(*SERVE_ARGS)
    src = tmp_path / "project"
    (src / "helpers").mkdir(parents=True)
    (src / "helpers" / "__init__.py").write_text("GREETING = 'hello from a helper module'\n")
    (src / "train.py").write_text(
        "import trainyard\nfrom helpers import GREETING\nprint(GREETING, flush=True)\n"
        "for e in (1, 2):\n    trainyard.report(epoch=e, loss=1.0 / e)\n")
    job_path = tmp_path / "job.json"
    job_path.write_text(json.dumps({"model_name": "cli-script", "training_script": "train.py",
                                    "hyperparameters": {"epochs": 2}}))
    out = subprocess.run([str(BIN), "submit", str(job_path), "--code", str(src)],
                         capture_output=True, text=True, env=svc.env(), timeout=60)
    assert out.returncode == 0, out.stderr
    first = out.stdout.strip()
    done = wait_for(svc, first, TERMINAL, timeout=60)
    assert done["status"] == "succeeded", (done, logs(svc, first))
    assert "hello from a helper module" in logs(svc, first)
    assert [e["epoch"] for e in metrics(svc, first)] == [1, 2]

    follow = subprocess.run([str(BIN), "submit", str(job_path), "--code", str(src), "--follow"],
                            capture_output=True, text=True, env=svc.env(), timeout=120)
    assert follow.returncode == 0, (follow.stdout, follow.stderr)
    assert "succeeded" in follow.stdout, follow.stdout
    jobs = svc.http.get(f"{svc.url}/jobs").json()["jobs"]
    codes = {j["document"]["code"] for j in jobs}
    assert len(jobs) == 2 and len(codes) == 1, jobs


def test_code_url_with_its_sha256(serve, data_server):
    """code_url instead of an upload: the worker fetches the tar.gz and checks code_sha256; a
    digest that does not match fails the job saying so, and the script never runs."""
    folder_, base = data_server
    body = pack({"train.py": "print('from code_url', flush=True)\n"})
    (folder_ / "script-code.tar.gz").write_bytes(body)
    svc = serve(*SERVE_ARGS)
    good = submit(svc, {"model_name": "by-url", "training_script": "train.py",
                        "code_url": f"{base}/script-code.tar.gz",
                        "code_sha256": hashlib.sha256(body).hexdigest()}).json()
    done = wait_for(svc, good["id"], TERMINAL, timeout=60)
    assert done["status"] == "succeeded", (done, logs(svc, good["id"]))
    assert "from code_url" in logs(svc, good["id"])

    bad = submit(svc, {"model_name": "by-url", "training_script": "train.py", "max_attempts": 1,
                       "code_url": f"{base}/script-code.tar.gz", "code_sha256": "0" * 64}).json()
    done = wait_for(svc, bad["id"], TERMINAL, timeout=60)
    assert done["status"] == "failed" and "sha256" in done["error"].lower(), done
    assert "from code_url" not in logs(svc, bad["id"])


def test_max_runtime_and_memory_limits_hold_for_scripts(serve):
    """max_runtime_seconds ends a script that runs past it (its process group goes too); with
    --script-memory a script that allocates past the limit fails instead of taking the machine."""
    svc = serve(*SERVE_ARGS, "--script-memory", "256M")
    slow = run_script(svc, "import time\nprint('sleeping', flush=True)\ntime.sleep(600)\n",
                      max_runtime_seconds=2, max_attempts=1)
    t0 = time.time()
    wait_log(svc, slow["id"], "sleeping")
    pids = until(lambda: job_pids(slow["id"]), 15, "the script's processes")
    done = wait_for(svc, slow["id"], TERMINAL, timeout=60)
    assert done["status"] == "failed" and "max_runtime_seconds" in done["error"], done
    assert time.time() - t0 < 30
    until(lambda: not any(alive(p) for p in pids), 15, f"the processes {pids} to end")

    hog = run_script(svc, "x = bytearray(1 << 30)\nprint('allocated 1 GiB', flush=True)\n",
                     max_attempts=1)
    done = wait_for(svc, hog["id"], TERMINAL, timeout=60)
    assert done["status"] == "failed", done
    assert "MemoryError" in done["error"], done
    assert "allocated 1 GiB" not in logs(svc, hog["id"])


LINKS = """
import json, os, shutil, trainyard
hp = trainyard.hyperparameters()
out = trainyard.output_dir()
if hp["swap_output"]:
    shutil.rmtree(out)
    os.symlink(hp["data_dir"], out)  # the data dir's path on the worker, not in the sandbox
else:
    os.symlink(hp["token"], os.path.join(out, "stolen.txt"))
    os.makedirs(os.path.join(out, "folder"))
    os.symlink(hp["token"], os.path.join(out, "folder", "inner.txt"))
    with open(os.path.join(out, "folder", "mine.txt"), "w") as f:
        f.write("mine")
    with open(os.path.join(out, "real.txt"), "w") as f:
        f.write("real")
    os.symlink(hp["token"], os.path.join(trainyard.checkpoint_dir(), "ck.txt"))
print("planted", flush=True)
"""


def test_links_a_script_plants_never_reach_the_worker_s_files(serve):
    """The script made every entry of output/ and checkpoint/, output/ itself included: a link
    there names a path on the worker's side (its token, its data dir), and the worker must
    neither upload what it points at nor move files out of where it points."""
    svc = serve(*SERVE_ARGS)
    token_path = svc.data_dir / "admin.token"
    hp = {"token": str(token_path), "data_dir": str(svc.data_dir), "swap_output": False}
    job = run_script(svc, LINKS, hyperparameters=hp)
    done = wait_for(svc, job["id"], TERMINAL, timeout=60)
    text = logs(svc, job["id"])
    assert done["status"] == "succeeded", (done, text)
    got = artifacts(svc, job["id"])
    assert "stolen.txt" not in got and "real.txt" in got and "folder.tar.gz" in got, got
    assert "output/stolen.txt is not a file or a folder" in text, text
    folder_tar = tarfile.open(fileobj=io.BytesIO(download(svc, job["id"], "folder.tar.gz")))
    inner = folder_tar.getmember("./inner.txt") if "./inner.txt" in folder_tar.getnames() \
        else folder_tar.getmember("inner.txt")
    assert inner.issym(), "a link in an output folder was packed as the file it points at"
    for name in got:
        assert svc.admin_token.encode() not in download(svc, job["id"], name), name
    assert token_path.read_text().strip() == svc.admin_token

    hp["swap_output"] = True
    before = sorted(p.name for p in svc.data_dir.iterdir())
    job = run_script(svc, LINKS, hyperparameters=hp)
    done = wait_for(svc, job["id"], TERMINAL, timeout=60)
    text = logs(svc, job["id"])
    assert done["status"] == "succeeded", (done, text)
    assert set(artifacts(svc, job["id"])) == {"job.json", "metrics.csv", "train.log"}, text
    assert "output is not a folder" in text, text
    assert sorted(p.name for p in svc.data_dir.iterdir()) == before
    assert token_path.read_text().strip() == svc.admin_token


def wheel(name, version, module_text):
    """A pure-Python wheel in memory: the module and the three dist-info files pip reads."""
    dist = f"{name}-{version}.dist-info"
    files = {f"{name}/__init__.py": module_text,
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}
    record = "".join(f"{path},,\n" for path in files) + f"{dist}/RECORD,,\n"
    buf = io.BytesIO()
    import zipfile
    with zipfile.ZipFile(buf, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
        z.writestr(f"{dist}/RECORD", record)
    return buf.getvalue()


def test_allow_pip_installs_requirements_into_a_cached_venv(serve):
    """With --allow-pip a requirements.txt in the code goes into a venv (here a wheel shipped in
    the code, so no network is needed); the script imports it, and a second job with the same
    file reuses the venv. Without --allow-pip the file is ignored, saying so, and the import
    fails the job."""
    files = {"train.py": "import tyx_pkg\nprint('tyx says', tyx_pkg.WORD, flush=True)\n",
             "requirements.txt": "./wheels/tyx_pkg-1.0-py3-none-any.whl\n",
             "wheels/tyx_pkg-1.0-py3-none-any.whl": wheel("tyx_pkg", "1.0", "WORD = 'hello'\n")}
    svc = serve(*SERVE_ARGS, "--allow-pip")
    code = upload(svc, files)
    first = submit(svc, script_doc(code, "pip-1")).json()
    done = wait_for(svc, first["id"], TERMINAL, timeout=180)
    text = logs(svc, first["id"])
    assert done["status"] == "succeeded", (done, text)
    assert "tyx says hello" in text and "requirements.txt installed" in text, text
    assert "Processing" in text, "pip's own lines should be in the first job's log"
    venv = re.search(r"requirements.txt installed: (\S+)", text).group(1)
    second = submit(svc, script_doc(code, "pip-2")).json()
    done = wait_for(svc, second["id"], TERMINAL, timeout=120)
    again = logs(svc, second["id"])
    assert done["status"] == "succeeded" and f"requirements.txt installed: {venv}" in again, again
    assert "Processing" not in again, "the second job ran pip again instead of reusing the venv"

    plain = serve(*SERVE_ARGS, name="no-pip")
    job = submit(plain, script_doc(upload(plain, files), "no-pip")).json()
    done = wait_for(plain, job["id"], TERMINAL, timeout=60)
    text = logs(plain, job["id"])
    assert done["status"] == "failed" and "without --allow-pip" in text, (done, text)
    assert "No module named 'tyx_pkg'" in done["error"], done["error"]
