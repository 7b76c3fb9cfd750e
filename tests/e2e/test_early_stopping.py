"""Experiments on one job: a graceful stop (POST /jobs/{id}/stop, `trainyard stop`), early
stopping of built-in and script jobs (with restore_best: the model is the best epoch's), and a
warm start from another job's model (init_from)."""
import json
import subprocess
import time

from helpers import TERMINAL, job_doc, submit, wait_for


def logs(svc, job_id):
    return svc.http.get(f"{svc.url}/jobs/{job_id}/logs").text


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


# ---- script jobs: early stopping on the script's own metrics ------------------------------------

SCRIPT = """
import os, time, trainyard
scores = [0.1, 0.5, 0.4, 0.45, 0.3, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2]
obey = trainyard.hyperparameters()["obey"]
for epoch, score in enumerate(scores, 1):
    time.sleep(0.3)
    trainyard.report(epoch=epoch, loss=1 - score, score=score)
    if obey and trainyard.stop_requested():
        break
with open(os.path.join(trainyard.output_dir(), "result.txt"), "w") as f:
    f.write(f"{epoch} {trainyard.stop_requested()}")
"""


def test_script_job_stopped_by_early_stopping(serve):
    from test_scripts import SERVE_ARGS, script_doc, upload
    svc = serve(*SERVE_ARGS)
    code = upload(svc, {"train.py": SCRIPT})
    es = {"monitor": "score", "mode": "max", "patience": 2}
    obeys = submit(svc, script_doc(code, name="obeys", hyperparameters={"obey": True},
                                   early_stopping=es)).json()
    ignores = submit(svc, script_doc(code, name="ignores", hyperparameters={"obey": False},
                                     early_stopping=es)).json()
    done = wait_for(svc, obeys["id"], TERMINAL, timeout=60)
    assert done["status"] == "succeeded", (done, logs(svc, obeys["id"]))
    # best 0.5 at epoch 2; epochs 3 and 4 do not beat it: asked to end after epoch 4, which the
    # script sees after epoch 4 or 5 (the worker reads the metrics file as it grows)
    assert done["stop_reason"].startswith("early stopping: score did not improve by more than 0 "
                                          "for 2 epochs (best 0.5 at epoch 2)"), done
    assert done["stopped_epoch"] in (4, 5), done
    assert len(metrics(svc, obeys["id"])) == done["stopped_epoch"]
    text = svc.http.get(f"{svc.url}/jobs/{obeys['id']}/artifacts/result.txt").text
    assert text.startswith(f"{done['stopped_epoch']} early stopping: score"), text
    # A script that does not look is ended (SIGTERM) once it went a whole epoch further; the
    # job still succeeds, with what its output folder holds (nothing here).
    done = wait_for(svc, ignores["id"], TERMINAL, timeout=60)
    assert done["status"] == "succeeded", done
    assert done["stop_reason"].startswith("early stopping: score"), done
    assert done["stopped_epoch"] in (6, 7), done
    assert len(metrics(svc, ignores["id"])) < 15


def test_script_job_restore_best_is_refused(serve):
    svc = serve("--workers", "0")
    r = svc.http.post(f"{svc.url}/train", json={
        "training_script": "train.py", "code": "sha256:" + "0" * 64,
        "early_stopping": {"monitor": "score", "restore_best": True}})
    assert r.status_code == 400
    assert "early_stopping.restore_best" in {e["field"] for e in r.json()["errors"]}
