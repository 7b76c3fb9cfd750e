"""Experiments on one job: a graceful stop (POST /jobs/{id}/stop, `trainyard stop`), early
stopping of built-in and script jobs (with restore_best: the model is the best epoch's), and a
warm start from another job's model (init_from)."""
import json
import subprocess
import time

from helpers import TERMINAL, job_doc, submit, wait_for


def metrics(svc, job_id):
    return svc.http.get(f"{svc.url}/jobs/{job_id}/metrics").json()["epochs"]


def test_stop_running_job_keeps_its_model(serve, blobs):
    svc = serve()
    job = submit(svc, job_doc(blobs, epochs=100000)).json()
    wait_for(svc, job["id"], {"running"})
    # some epochs first, so that the stop lands mid-run
    deadline = time.time() + 30
    while time.time() < deadline and len(metrics(svc, job["id"])) < 3:
        time.sleep(0.05)
    r = svc.http.post(f"{svc.url}/jobs/{job['id']}/stop", json={"reason": "enough for today"})
    assert r.status_code == 200, r.text
    assert r.json()["stop_requested"] == "enough for today"
    done = wait_for(svc, job["id"], TERMINAL, timeout=30)
    assert done["status"] == "succeeded", done
    assert done["stop_reason"] == "enough for today"
    assert 3 <= done["stopped_epoch"] < 100000
    assert done["best_epoch"] is None
    assert len(metrics(svc, job["id"])) == done["stopped_epoch"]
    names = {a["name"] for a in svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts").json()["artifacts"]}
    assert {"model.safetensors", "model.onnx", "metrics.csv"} <= names
    # a finished job cannot be stopped again
    r = svc.http.post(f"{svc.url}/jobs/{job['id']}/stop")
    assert r.status_code == 409
    assert r.headers["Content-Type"].startswith("application/problem+json")


def test_stop_queued_job_cancels_it_and_cli(serve, blobs, trainyard_bin):
    svc = serve("--workers", "0")  # nothing runs
    job = submit(svc, job_doc(blobs)).json()
    proc = subprocess.run([str(trainyard_bin), "stop", job["id"], "--reason", "not needed"],
                          capture_output=True, text=True, env=svc.env(), timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "cancelled" in proc.stdout
    got = svc.http.get(f"{svc.url}/jobs/{job['id']}").json()
    assert got["status"] == "cancelled" and got["stop_reason"] == "not needed"
    r = svc.http.post(f"{svc.url}/jobs/{job['id']}/stop", json={"reason": 5})
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "reason"
    r = svc.http.post(f"{svc.url}/jobs/nosuchjob/stop")
    assert r.status_code == 404
