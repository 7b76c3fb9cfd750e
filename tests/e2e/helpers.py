"""Helpers the service tests share: submitting a job, waiting for a status, a job document for
the small three-class dataset (`write_blobs`), which the `blobs` fixture serves over HTTP; and
for the training tests, a `trainyard train` killed mid-run and its resume."""
import os
import signal
import sqlite3
import subprocess
import time

import numpy as np

TERMINAL = {"succeeded", "failed", "cancelled"}


def wait_for(svc, job_id, statuses, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        job = svc.http.get(f"{svc.url}/jobs/{job_id}").json()
        if job["status"] in statuses:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} still {job['status']}:\n{svc.output()[-3000:]}")


def submit(svc, job, **headers):
    r = svc.http.post(f"{svc.url}/train", json=job, headers=headers)
    assert r.status_code in (200, 202), r.text
    return r


def write_blobs(folder, name="blobs.csv", rows=600, seed=3, scale=(1, 1), offset=(0, 0)):
    """Writes name: rows of three well-separated classes (features a, b; label kind), each
    feature times scale plus offset (the default leaves them near mean 1.3, std 2)."""
    rng = np.random.default_rng(seed)
    centers = np.array([[0, 0], [4, 0], [0, 4]])
    label = rng.integers(0, 3, rows)
    x = (centers[label] + rng.normal(0, 0.6, (rows, 2))) * scale + offset
    lines = ["a,b,kind"] + [f"{p:.4f},{q:.4f},k{c}" for (p, q), c in zip(x, label)]
    (folder / name).write_text("\n".join(lines) + "\n")


def job_doc(url, epochs=5, **extra):
    doc = {"name": "blobs", "dataset_url": url,
           "model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"}]},
           "hyperparameters": {"epochs": epochs, "batch_size": 32, "learning_rate": 0.01,
                               "validation_split": 0.2}}
    doc.update(extra)
    return doc


def kill_after_epochs(binary, job_path, out, epochs, extra=()):
    """Runs `trainyard train job_path --out out` and kill -9s it once metrics.csv holds `epochs`
    rows; fails when the run finished first."""
    proc = subprocess.Popen([str(binary), "train", str(job_path), "--out", str(out), "--quiet",
                             *extra], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        metrics = out / "metrics.csv"
        if metrics.exists() and metrics.read_text().count("\n") >= epochs + 1:  # and a header
            break
        time.sleep(0.002)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def resume(binary, job_path, out, checkpoint, extra=()):
    """`trainyard train job_path --out out --resume checkpoint`, which must succeed."""
    proc = subprocess.run([str(binary), "train", str(job_path), "--out", str(out), "--resume",
                           str(checkpoint), *extra], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc


def checkpoint_epoch(svc, job_id):
    """The epoch of the job's checkpoint the server holds (0: none yet), from its database."""
    with sqlite3.connect(svc.db_path) as conn:
        return conn.execute("SELECT checkpoint_epoch FROM jobs WHERE id = ?",
                            (job_id,)).fetchone()[0]


def until(cond, timeout, what):
    """cond()'s first true value, polled every 50 ms; an AssertionError naming what after
    timeout seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
