"""End-to-end tests of `trainyard serve`: the real server on a loopback port with real worker
processes on the default OpenCL device, datasets from a local HTTP server, driven over HTTP with
requests as a user would with curl."""
import base64
import hashlib
import json
import sqlite3
import threading
import time

import numpy as np
import pytest
import requests
from helpers import TERMINAL, job_doc, submit, wait_for, write_blobs
from safetensors.numpy import load


def test_round_trip_submit_poll_download(serve, blobs):
    svc = serve()
    r = submit(svc, job_doc(blobs))
    assert r.status_code == 202
    job = r.json()
    assert r.headers["Location"] == f"/jobs/{job['id']}"
    assert job["status"] in ("queued", "running")
    assert job["document"]["hyperparameters"]["optimizer"] == "adam"  # defaults resolved

    done = wait_for(svc, job["id"], TERMINAL)
    assert done["status"] == "succeeded", done
    assert done["attempt"] == 1 and done["started_at"] and done["finished_at"]
    assert done["device"]

    epochs = svc.http.get(f"{svc.url}/jobs/{job['id']}/metrics").json()["epochs"]
    assert [e["epoch"] for e in epochs] == [1, 2, 3, 4, 5]
    assert epochs[-1]["val_accuracy"] > 0.9

    listing = svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts").json()["artifacts"]
    names = {a["name"]: a for a in listing}
    assert {"model.safetensors", "metrics.csv", "job.json", "train.log"} <= set(names)

    # metrics.csv holds the API's numbers to the last digit (train/metrics_csv.h)
    csv = svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts/metrics.csv").text.splitlines()
    cols = csv[0].split(",")
    assert cols == ["epoch", "loss", "val_loss", "accuracy", "val_accuracy", "seconds"]
    assert len(csv) == 1 + len(epochs)
    for line, e in zip(csv[1:], epochs):
        cells = line.split(",")
        assert [float(c) if c else None for c in cells] == [e[k] for k in cols], (line, e)

    r = svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts/model.safetensors")
    assert r.status_code == 200
    digest = hashlib.sha256(r.content).digest()
    assert names["model.safetensors"]["sha256"] == digest.hex()
    assert r.headers["ETag"] == f'"{digest.hex()}"'
    assert base64.b64encode(digest).decode() in r.headers["Repr-Digest"]
    tensors = load(r.content)
    assert tensors["0.weight"].shape == (16, 2) and tensors["2.weight"].shape == (3, 16)

    part = svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts/model.safetensors",
                        headers={"Range": "bytes=8-99"})
    assert part.status_code == 206 and part.content == r.content[8:100]

    logs = svc.http.get(f"{svc.url}/jobs/{job['id']}/logs").text
    assert "epoch 5/5" in logs
    health = svc.http.get(f"{svc.url}/healthz").json()
    assert health["status"] == "ok" and health["workers"] >= 1
    # serve logs one line per request and per job transition
    out = svc.output()
    for line in (f"job {job['id']} queued", f"job {job['id']} running on worker",
                 f"job {job['id']} succeeded", f"GET /jobs/{job['id']} 200"):
        assert line in out, line


def test_cancel_in_each_state(serve, blobs):
    svc = serve("--workers", "0")  # nothing runs: jobs stay queued
    queued = submit(svc, job_doc(blobs)).json()
    r = svc.http.post(f"{svc.url}/jobs/{queued['id']}/cancel")
    assert r.status_code == 200 and r.json()["status"] == "cancelled"
    r = svc.http.post(f"{svc.url}/jobs/{queued['id']}/cancel")
    assert r.status_code == 409
    assert r.headers["Content-Type"].startswith("application/problem+json")

    svc2 = serve(name="running")
    long_job = submit(svc2, job_doc(blobs, epochs=100000)).json()
    wait_for(svc2, long_job["id"], {"running"})
    time.sleep(0.5)
    t0 = time.time()
    r = svc2.http.post(f"{svc2.url}/jobs/{long_job['id']}/cancel")
    assert r.status_code == 200 and r.json()["cancel_requested"] is True
    done = wait_for(svc2, long_job["id"], TERMINAL, timeout=30)
    assert done["status"] == "cancelled"
    took = time.time() - t0
    assert took < 3, f"a running job must stop within about a second of cancel, took {took:.1f}s"
    # The worker is free again: the next job runs to the end.
    nxt = submit(svc2, job_doc(blobs, epochs=2)).json()
    assert wait_for(svc2, nxt["id"], TERMINAL)["status"] == "succeeded"


def test_delete_only_finished_jobs(serve, blobs):
    svc = serve("--workers", "0")
    job = submit(svc, job_doc(blobs)).json()
    assert svc.http.delete(f"{svc.url}/jobs/{job['id']}").status_code == 409
    svc.http.post(f"{svc.url}/jobs/{job['id']}/cancel")
    assert svc.http.delete(f"{svc.url}/jobs/{job['id']}").status_code == 204
    assert svc.http.get(f"{svc.url}/jobs/{job['id']}").status_code == 404
    assert svc.http.delete(f"{svc.url}/jobs/{job['id']}").status_code == 404


def test_pagination_filters_and_newest_first(serve, blobs):
    svc = serve("--workers", "0")
    ids = []
    for i in range(260):
        ids.append(submit(svc, job_doc(blobs, name=f"p{i % 3}")).json()["id"])
    seen, cursor = [], None
    while True:
        params = {"limit": 50}
        if cursor:
            params["cursor"] = cursor
        page = svc.http.get(f"{svc.url}/jobs", params=params).json()
        seen += [j["id"] for j in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids[::-1]
    p1 = svc.http.get(f"{svc.url}/jobs", params={"name": "p1", "limit": 500}).json()["jobs"]
    assert len(p1) == 87 and all(j["name"] == "p1" for j in p1)
    svc.http.post(f"{svc.url}/jobs/{ids[5]}/cancel")
    cancelled = svc.http.get(f"{svc.url}/jobs", params={"status": "cancelled"}).json()["jobs"]
    assert [j["id"] for j in cancelled] == [ids[5]]
    for bad in ({"limit": 0}, {"limit": 501}, {"status": "sleeping"}, {"cursor": "!!"}):
        r = svc.http.get(f"{svc.url}/jobs", params=bad)
        assert r.status_code == 400, (bad, r.text)


def test_idempotent_resubmit(serve, blobs):
    svc = serve("--workers", "0")
    first = submit(svc, job_doc(blobs), **{"Idempotency-Key": "k-1"})
    again = submit(svc, job_doc(blobs), **{"Idempotency-Key": "k-1"})
    assert first.status_code == 202 and again.status_code == 200
    assert first.json()["id"] == again.json()["id"]
    other = submit(svc, job_doc(blobs), **{"Idempotency-Key": "k-2"})
    assert other.json()["id"] != first.json()["id"]
    assert len(svc.http.get(f"{svc.url}/jobs").json()["jobs"]) == 2


def test_invalid_submissions_name_the_field(serve):
    svc = serve("--workers", "0")
    r = svc.http.post(f"{svc.url}/train", json={"dataset_url": "gopher://x",
                                                "hyperparameters": {"epochs": -1}})
    assert r.status_code == 400
    assert r.headers["Content-Type"].startswith("application/problem+json")
    fields = {e["field"] for e in r.json()["errors"]}
    assert {"dataset_url", "hyperparameters.epochs"} <= fields
    r = svc.http.post(f"{svc.url}/train", data="{not json", headers={"Content-Type":
                                                                     "application/json"})
    assert r.status_code == 400
    r = svc.http.post(f"{svc.url}/train", data="x" * (2 << 20),
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 413
    assert svc.http.get(f"{svc.url}/jobs/nope").status_code == 404
    assert svc.http.get(f"{svc.url}/healthz").status_code == 200


def test_events_and_logs_arrive_before_the_job_ends(serve, blobs):
    svc = serve()
    job = submit(svc, job_doc(blobs, epochs=400)).json()
    events, lines = [], []
    # What the job's status was when the first metrics event and the first epoch's log line
    # reached the client: "running" shows they streamed while it ran. (Comparing clock times
    # with the job's end instead flaked on a loaded machine, where the last epochs can follow
    # the first event within the margin.)
    seen_while = {}

    def status_now(what):
        if what not in seen_while:
            seen_while[what] = svc.http.get(f"{svc.url}/jobs/{job['id']}").json()["status"]

    def read_events():
        with svc.http.get(f"{svc.url}/jobs/{job['id']}/events", stream=True, timeout=120) as r:
            assert r.headers["Content-Type"].startswith("text/event-stream")
            kind = None
            for raw in r.iter_lines(decode_unicode=True):
                if raw.startswith("event:"):
                    kind = raw.split(":", 1)[1].strip()
                elif raw.startswith("data:"):
                    events.append((time.time(), kind, json.loads(raw[5:])))
                    if kind == "metrics":
                        status_now("metrics")

    def read_logs():
        with svc.http.get(f"{svc.url}/jobs/{job['id']}/logs", params={"follow": "true"},
                          stream=True, timeout=120) as r:
            for raw in r.iter_lines(decode_unicode=True):
                lines.append((time.time(), raw))
                if raw.startswith("epoch "):
                    status_now("log")

    threads = [threading.Thread(target=read_events), threading.Thread(target=read_logs)]
    for t in threads:
        t.start()
    done = wait_for(svc, job["id"], TERMINAL)
    ended = time.time()
    for t in threads:
        t.join(timeout=30)
    assert done["status"] == "succeeded"
    metrics = [e for e in events if e[1] == "metrics"]
    assert [m[2]["epoch"] for m in metrics] == list(range(1, 401))
    assert seen_while["metrics"] == "running", "metrics must stream while the job runs"
    statuses = [e[2]["status"] for e in events if e[1] == "status"]
    assert statuses[-1] == "succeeded" and "running" in statuses
    epoch_lines = [t for t, text in lines if text.startswith("epoch ")]
    assert len(epoch_lines) == 400 and seen_while["log"] == "running"


@pytest.mark.parametrize("path,expect", [("missing.csv", "404"), ("garbage", "line"),
                                         ("stall", "timed out")])
def test_bad_datasets_fail_clearly_and_service_stays_healthy(serve, faulty_server, path,
                                                              expect):
    _, base = faulty_server
    svc = serve("--dataset-stall-seconds", "2")
    job = submit(svc, {"dataset_url": f"{base}/{path}", "hyperparameters": {"epochs": 1}}).json()
    done = wait_for(svc, job["id"], TERMINAL, timeout=60)
    assert done["status"] == "failed" and done["error"], done
    assert expect in done["error"]
    assert svc.http.get(f"{svc.url}/healthz").json()["status"] == "ok"
    ok = submit(svc, {"dataset_url": f"{base}/missing.csv", "hyperparameters": {"epochs": 1}})
    assert ok.status_code == 202


def test_a_private_dataset_host_is_refused_without_dataset_allow(serve, blobs):
    """Without --dataset-allow, serve's workers refuse 127.0.0.1 and say how to allow it; the
    service stays healthy and a second service that allows it trains the same job."""
    svc = serve(allow_loopback=False)
    job = submit(svc, job_doc(blobs, epochs=1)).json()
    done = wait_for(svc, job["id"], TERMINAL, timeout=60)
    assert done["status"] == "failed", done
    assert "private address 127.0.0.1" in done["error"], done
    assert "--dataset-allow" in done["error"], done
    assert svc.http.get(f"{svc.url}/healthz").json()["status"] == "ok"


def test_a_killed_local_worker_is_restarted(serve, blobs):
    import os
    import re
    import signal
    svc = serve()
    first = submit(svc, job_doc(blobs, epochs=2)).json()
    assert wait_for(svc, first["id"], TERMINAL)["status"] == "succeeded"
    pid = int(re.search(r"local worker 0 started \(pid (\d+)", svc.output()).group(1))
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 30
    while time.time() < deadline and f"(pid {pid}) was killed by signal 9" not in svc.output():
        time.sleep(0.1)
    assert f"local worker 0 (pid {pid}) was killed by signal 9; restarting" in svc.output()
    # The replacement registers and trains the next job at once: the dead worker's parked long
    # poll must not take it (it would sit out the 30 s lease).
    t0 = time.time()
    second = submit(svc, job_doc(blobs, epochs=2)).json()
    done = wait_for(svc, second["id"], TERMINAL, timeout=60)
    assert done["status"] == "succeeded" and done["worker"] != first["worker"]
    assert time.time() - t0 < 15, "the job went to the dead worker and waited out its lease"


def test_a_job_whose_worker_is_killed_resumes_from_its_last_epoch(serve, data_server):
    """kill -9 of the worker in the middle of an epoch: the lease lapses, the job is queued
    again (attempt 2), the restarted worker resumes from the checkpoint the server kept, and
    the job's metrics hold every epoch exactly once."""
    import os
    import re
    import signal
    folder, base = data_server
    write_blobs(folder, "many-blobs.csv", rows=20000, seed=5)
    epochs = 20  # of about 0.25 s each: batches of 4 rows
    doc = job_doc(f"{base}/many-blobs.csv", epochs=epochs)
    doc["hyperparameters"]["batch_size"] = 4
    svc = serve("--workers", "1", "--lease-seconds", "2", "--checkpoint-seconds", "0")
    job = submit(svc, doc).json()
    deadline = time.time() + 60
    while time.time() < deadline:
        got = svc.http.get(f"{svc.url}/jobs/{job['id']}/metrics").json()["epochs"]
        if len(got) >= 3:
            break
        time.sleep(0.05)
    assert len(got) >= 3, svc.output()[-3000:]
    pid = int(re.findall(r"local worker 0 started \(pid (\d+)", svc.output())[-1])
    os.kill(pid, signal.SIGKILL)

    done = wait_for(svc, job["id"], TERMINAL, timeout=120)
    assert done["status"] == "succeeded", done
    assert done["attempt"] == 2, done
    got = svc.http.get(f"{svc.url}/jobs/{job['id']}/metrics").json()["epochs"]
    assert [e["epoch"] for e in got] == list(range(1, epochs + 1))
    log = svc.http.get(f"{svc.url}/jobs/{job['id']}/logs").text
    m = re.search(r"attempt 2 resumes after epoch (\d+)", log)
    assert m, log
    after = int(m.group(1))
    assert 1 <= after < epochs
    # The second attempt did not train the checkpoint's epochs again: each logged once.
    for k in range(1, after + 1):
        assert len(re.findall(rf"^epoch {k}/{epochs} ", log, re.M)) == 1, (k, log)
    assert "resuming after epoch" in log
    r = svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts/model.safetensors")
    assert r.status_code == 200
    tensors = load(r.content)
    assert tensors and all(np.isfinite(t).all() for t in tensors.values())
    listing = svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts").json()["artifacts"]
    assert not any(a["name"].startswith(".") for a in listing)


def test_a_finished_job_s_checkpoint_is_deleted_unless_kept(serve, blobs):
    """A job's checkpoint (stored for a retried attempt to resume from) goes when the job ends;
    "delete_checkpoint": false keeps the last one as the artifact checkpoint.safetensors, which
    DELETE removes with the rest. The worker keeps no copy either way."""
    svc = serve("--workers", "1", "--checkpoint-seconds", "0")
    dropped = submit(svc, job_doc(blobs, epochs=3)).json()
    kept = submit(svc, job_doc(blobs, epochs=3, delete_checkpoint=False)).json()
    assert dropped["document"]["delete_checkpoint"] is True  # the default, resolved
    assert kept["document"]["delete_checkpoint"] is False
    def names(job_id):
        listing = svc.http.get(f"{svc.url}/jobs/{job_id}/artifacts").json()["artifacts"]
        return {a["name"]: a for a in listing}

    # A kept checkpoint is an artifact in the very transaction that ends the job; an unkept one
    # is deleted just after it commits (and the worker empties its folder just after it
    # reports), so those two are given a moment.
    def soon(check, seconds=5):
        deadline = time.monotonic() + seconds
        while not check() and time.monotonic() < deadline:
            time.sleep(0.05)
        return check()

    for job in (dropped, kept):
        done = wait_for(svc, job["id"], TERMINAL)
        assert done["status"] == "succeeded", done
        if job is kept:
            assert "checkpoint.safetensors" in names(kept["id"])  # as soon as it ended
        assert soon(lambda: not (svc.data_dir / "artifacts" / job["id"] / ".checkpoint").exists())

    assert "checkpoint.safetensors" not in names(dropped["id"])
    with sqlite3.connect(svc.db_path) as conn:  # it had one: the last epoch's
        assert conn.execute("SELECT checkpoint_epoch FROM jobs WHERE id = ?",
                            (dropped["id"],)).fetchone()[0] == 3
    listed = names(kept["id"])["checkpoint.safetensors"]
    r = svc.http.get(f"{svc.url}/jobs/{kept['id']}/artifacts/checkpoint.safetensors")
    assert r.status_code == 200 and hashlib.sha256(r.content).hexdigest() == listed["sha256"]
    head_len = int.from_bytes(r.content[:8], "little")
    meta = json.loads(r.content[8:8 + head_len])["__metadata__"]
    assert meta["trainyard.epoch"] == "3"  # the last epoch's state
    assert set(load(r.content)) >= {"params", "moment1", "moment2"}
    assert soon(lambda: list((svc.data_dir / "work" / "worker-0").iterdir()) == [])

    assert svc.http.delete(f"{svc.url}/jobs/{kept['id']}").status_code == 204
    assert not (svc.data_dir / "artifacts" / kept["id"]).exists()


def test_epochs_that_pile_up_behind_a_stalled_server_all_arrive(serve, blobs):
    """Epochs of a few milliseconds pile up while the server does not answer (SIGSTOP): the
    worker sends them at most 1,000 a heartbeat (the API's limit) once it answers, so none is
    refused and every epoch arrives once."""
    import os
    import signal
    epochs = 4000
    svc = serve("--workers", "1")
    job = submit(svc, job_doc(blobs, epochs=epochs)).json()
    deadline = time.time() + 60
    while time.time() < deadline:
        got = svc.http.get(f"{svc.url}/jobs/{job['id']}/metrics").json()["epochs"]
        if got:
            break
        time.sleep(0.02)
    os.kill(svc.proc.pid, signal.SIGSTOP)
    time.sleep(4)  # ~2 ms an epoch: well over 1,000 epochs queue up
    os.kill(svc.proc.pid, signal.SIGCONT)
    done = wait_for(svc, job["id"], {"succeeded", "failed", "cancelled"}, timeout=120)
    got = svc.http.get(f"{svc.url}/jobs/{job['id']}/metrics").json()["epochs"]
    assert [e["epoch"] for e in got] == list(range(1, epochs + 1))

    # Stalled again at the very end: the final flush still sends every queued epoch.
    job = submit(svc, job_doc(blobs, epochs=1500)).json()
    while not svc.http.get(f"{svc.url}/jobs/{job['id']}/metrics").json()["epochs"]:
        time.sleep(0.02)
    os.kill(svc.proc.pid, signal.SIGSTOP)
    time.sleep(6)  # the job's remaining epochs end while serve is stopped
    os.kill(svc.proc.pid, signal.SIGCONT)
    epochs = 1500
    done = wait_for(svc, job["id"], {"succeeded", "failed", "cancelled"}, timeout=120)
    assert done["status"] == "succeeded", done
    got = svc.http.get(f"{svc.url}/jobs/{job['id']}/metrics").json()["epochs"]
    assert [e["epoch"] for e in got] == list(range(1, epochs + 1))
    assert "heartbeat answered 400" not in svc.output()
