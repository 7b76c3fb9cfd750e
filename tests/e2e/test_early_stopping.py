"""Experiments on one job: a graceful stop (POST /jobs/{id}/stop, `trainyard stop`), early
stopping of built-in and script jobs (with restore_best: the model is the best epoch's), and a
warm start from another job's model (init_from)."""
import subprocess
import time

import numpy as np
import pytest
from safetensors.numpy import load as load_safetensors

from conftest import ROOT
from helpers import TERMINAL, job_doc, submit, wait_for, write_blobs


def logs(svc, job_id):
    return svc.http.get(f"{svc.url}/jobs/{job_id}/logs").text


def metrics(svc, job_id):
    return svc.http.get(f"{svc.url}/jobs/{job_id}/metrics").json()["epochs"]


def model_tensors(svc, job_id):
    r = svc.http.get(f"{svc.url}/jobs/{job_id}/artifacts/model.safetensors")
    assert r.status_code == 200, r.text
    return load_safetensors(r.content)


@pytest.fixture(scope="module")
def small_blobs(data_server):
    """300 rows of the three blobs: a job of 0.01 s epochs whose val_loss flattens out."""
    folder, base = data_server
    write_blobs(folder, "es-blobs.csv", rows=300)
    return f"{base}/es-blobs.csv"


def es_job(url, epochs, **es):
    doc = job_doc(url, epochs=epochs)
    doc["hyperparameters"]["learning_rate"] = 0.05
    if es:
        doc["early_stopping"] = es
    return doc


def test_early_stopping_with_restore_best_saves_the_best_epoch(serve, small_blobs):
    """patience 3 on val_loss: the job stops 3 epochs after its best one, and its model is
    exactly the model of the same job trained for best_epoch epochs (training is deterministic),
    not the last epoch's."""
    svc = serve()
    job = submit(svc, es_job(small_blobs, 200, monitor="val_loss", patience=3,
                             restore_best=True)).json()
    assert job["document"]["early_stopping"]["mode"] == "min"
    done = wait_for(svc, job["id"], TERMINAL, timeout=60)
    assert done["status"] == "succeeded", (done, logs(svc, job["id"]))
    epochs = metrics(svc, job["id"])
    val = [e["val_loss"] for e in epochs]
    best = int(np.argmin(val)) + 1
    assert done["stopped_epoch"] == len(epochs) < 200
    assert done["best_epoch"] == best == done["stopped_epoch"] - 3
    assert done["stop_reason"] == (
        f"early stopping: val_loss did not improve by more than 0 for 3 epochs "
        f"(best {val[best - 1]:.6g} at epoch {best})"), done["stop_reason"]
    got = model_tensors(svc, job["id"])
    at_best = submit(svc, es_job(small_blobs, best)).json()
    at_last = submit(svc, es_job(small_blobs, done["stopped_epoch"])).json()
    for other in (at_best, at_last):
        assert wait_for(svc, other["id"], TERMINAL, timeout=60)["status"] == "succeeded"
    want, last = model_tensors(svc, at_best["id"]), model_tensors(svc, at_last["id"])
    assert sorted(got) == sorted(want)
    for name in got:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert any(not np.array_equal(got[n], last[n]) for n in got)
    # without restore_best the model is the last epoch's, and no best_epoch is recorded
    plain = submit(svc, es_job(small_blobs, 200, monitor="val_loss", patience=3)).json()
    done = wait_for(svc, plain["id"], TERMINAL, timeout=60)
    assert done["best_epoch"] is None and done["stopped_epoch"] == best + 3
    for name, value in model_tensors(svc, plain["id"]).items():
        np.testing.assert_array_equal(value, last[name], err_msg=name)


def test_early_stopping_refuses_a_metric_the_job_never_reports(serve, small_blobs):
    svc = serve("--workers", "0")
    doc = es_job(small_blobs, 5, monitor="val_loss")
    doc["hyperparameters"]["validation_split"] = 0
    r = svc.http.post(f"{svc.url}/train", json=doc)
    assert r.status_code == 400, r.text
    assert "early_stopping.monitor" in {e["field"] for e in r.json()["errors"]}


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
    # the Python client's Job.stop()
    other = submit(svc, job_doc(blobs)).json()
    proc = subprocess.run(
        ["/usr/bin/python3", "-c", "import sys, trainyard; c = trainyard.Client(); "
         "print(c.job(sys.argv[1]).stop('from python')['stop_reason'])", other["id"]],
        capture_output=True, text=True, timeout=60,
        env={**svc.env(), "PYTHONPATH": str(ROOT / "python")})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "from python"


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


def test_stop_reaches_a_script_through_its_stop_file(serve):
    from test_scripts import SERVE_ARGS, script_doc, upload
    svc = serve(*SERVE_ARGS)
    code = upload(svc, {"train.py": """
import os, time, trainyard
for epoch in range(1, 200):
    time.sleep(0.2)
    trainyard.report(epoch=epoch, loss=1.0 / epoch)
    if trainyard.stop_requested():
        break
with open(os.path.join(trainyard.output_dir(), "why.txt"), "w") as f:
    f.write(trainyard.stop_requested())
"""})
    job = submit(svc, script_doc(code)).json()
    deadline = time.time() + 30
    while time.time() < deadline and len(metrics(svc, job["id"])) < 2:
        time.sleep(0.05)
    r = svc.http.post(f"{svc.url}/jobs/{job['id']}/stop")
    assert r.status_code == 200, r.text
    done = wait_for(svc, job["id"], TERMINAL, timeout=30)
    assert done["status"] == "succeeded", (done, logs(svc, job["id"]))
    assert done["stop_reason"] == "stopped by a user"
    assert 2 <= done["stopped_epoch"] < 199
    why = svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts/why.txt").text
    assert why == "stopped by a user"


def test_script_job_restore_best_is_refused(serve):
    svc = serve("--workers", "0")
    r = svc.http.post(f"{svc.url}/train", json={
        "training_script": "train.py", "code": "sha256:" + "0" * 64,
        "early_stopping": {"monitor": "score", "restore_best": True}})
    assert r.status_code == 400
    assert "early_stopping.restore_best" in {e["field"] for e in r.json()["errors"]}


# ---- warm start ---------------------------------------------------------------------------------

def test_init_from_starts_from_another_job_s_model(serve, small_blobs, data_server):
    svc = serve()
    first = submit(svc, es_job(small_blobs, 20)).json()
    assert wait_for(svc, first["id"], TERMINAL, timeout=60)["status"] == "succeeded"
    start = model_tensors(svc, first["id"])
    # a learning rate of 1e-9 with SGD leaves the weights where they started: the model that
    # comes back is the first job's, exactly (every tensor mapped back where it belongs)
    doc = es_job(small_blobs, 1)
    doc["hyperparameters"].update(optimizer="sgd", learning_rate=1e-9)
    doc["init_from"] = first["id"]
    warm = submit(svc, doc).json()
    assert warm["document"]["init_from"] == first["id"]
    done = wait_for(svc, warm["id"], TERMINAL, timeout=60)
    assert done["status"] == "succeeded", (done, logs(svc, warm["id"]))
    for name, value in model_tensors(svc, warm["id"]).items():
        np.testing.assert_array_equal(value, start[name], err_msg=name)
    assert f"warm start: the weights of job {first['id']}'s model" in logs(svc, warm["id"])
    # it starts where the first job ended, not from scratch
    scratch = metrics(svc, first["id"])[0]["val_loss"]
    assert metrics(svc, warm["id"])[0]["val_loss"] < scratch / 10

    # A dataset with another number of features fails the job, naming the tensor.
    folder, base = data_server
    lines = (folder / "es-blobs.csv").read_text().splitlines()
    (folder / "es-blobs3.csv").write_text(
        "\n".join([lines[0].replace("a,b", "a,b,c")] +
                  [ln.replace(",", ",1.0,", 1) for ln in lines[1:]]) + "\n")
    doc = es_job(f"{base}/es-blobs3.csv", 2)
    doc["init_from"] = first["id"]
    other = submit(svc, doc).json()
    done = wait_for(svc, other["id"], TERMINAL, timeout=60)
    assert done["status"] == "failed"
    assert "init_from: tensor 0.weight" in done["error"] and "features" in done["error"], done

    # Refused at submit, naming init_from: a missing job, one that did not succeed, another
    # architecture, a script job.
    def refused(doc, words):
        r = svc.http.post(f"{svc.url}/train", json=doc)
        assert r.status_code == 400, r.text
        errors = {e["field"]: e["message"] for e in r.json()["errors"]}
        assert words in errors.get("init_from", ""), errors

    refused(dict(es_job(small_blobs, 2), init_from="0" * 32), "there is no job")
    failed_doc = dict(es_job(small_blobs, 2), init_from=other["id"])
    refused(failed_doc, "is failed")
    wider = es_job(small_blobs, 2)
    wider["model"]["layers"][0]["units"] = 32
    wider["init_from"] = first["id"]
    refused(wider, "model.layers[0] differs")
    regression = dict(es_job(small_blobs, 2), init_from=first["id"], task="regression")
    r = svc.http.post(f"{svc.url}/train", json=regression)
    assert r.status_code == 400
    # a user who may not see the job gets the same answer as for a missing one
    alice = svc.session(svc.token("alice", "user"))
    r = alice.post(f"{svc.url}/train", json=dict(es_job(small_blobs, 2), init_from=first["id"]))
    assert r.status_code == 400 and "there is no job" in r.json()["errors"][0]["message"]
