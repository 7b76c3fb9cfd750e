"""`trainyard serve --executor slurm` against a real single-node Slurm (slurm_cluster.py starts
munged, slurmctld and slurmd for this module): a 2-replica job submitted through POST /train is
handed to sbatch, waits queued while Slurm keeps it pending (its `waiting` giving squeue's
reason), runs under srun --mpi=pmix and succeeds; `trainyard cancel` scancels a pending Slurm
job and stops a running one; a killed step (a node failure, as far as trainyard can tell) is
retried as a new Slurm job that resumes from the checkpoint. With serve --allow-scripts, the
PyTorch DDP and Keras MultiWorkerMirroredStrategy examples run as 2-rank script jobs under srun.

Skipped, saying why, when not root or when Slurm, munge or Open MPI is not installed (CI
installs them: .ci/run). The node has 2 CPUs; a job that holds both ("the blocker") keeps a
trainyard job pending in Slurm for as long as a test needs.
"""
import pathlib
import re
import subprocess
import time

import pytest
from conftest import ROOT
from helpers import TERMINAL, checkpoint_epoch, job_doc, submit, until, wait_for
from slurm_cluster import SlurmCluster
from test_scripts import artifacts, folder, logs, metrics, script_doc, upload

EPOCHS_LONG = 3000  # ~2 ms an epoch on the blobs: long enough to act on a running job
EPOCHS_CANCEL = 30000  # a job that is cancelled long before it could end, however loaded


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    why = SlurmCluster.missing()
    if why:
        pytest.skip(why)
    c = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    c.start()
    yield c
    c.stop()


@pytest.fixture
def slurm_serve(serve, cluster, trainyard_bin, monkeypatch):
    """A serve whose executor submits to the test cluster (SLURM_CONF reaches sbatch, squeue
    and scancel through serve's environment)."""
    if not (trainyard_bin.parent / "trainyard-replica").exists():
        pytest.skip("trainyard-replica was not built (meson builds it when libopenmpi-dev is "
                    "installed)")
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    return lambda *args: serve("--executor", "slurm", "--checkpoint-seconds", "1", *args)


def slurm(cluster, *argv):
    p = subprocess.run(argv, env=cluster.env, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, (argv, p.stderr)
    return p.stdout.strip()


def blocker(cluster):
    """A Slurm job holding both CPUs until scancelled: the next job stays PENDING."""
    jid = slurm(cluster, "sbatch", "--parsable", "--ntasks=2", "--output=/dev/null",
                "--job-name=blocker", "--wrap", "sleep 300")
    until(lambda: cluster.squeue().get(jid) == "RUNNING", 20, "the blocker to run")
    return jid


def get(svc, jid):
    return svc.http.get(f"{svc.url}/jobs/{jid}").json()


def slurm_id_of(svc, jid):
    return until(lambda: get(svc, jid)["slurm_job_id"], 20, "the job's Slurm job id")


def two_replicas(url, epochs):
    return job_doc(url, epochs=epochs, distribution={"replicas": 2})


def test_a_two_replica_job_runs_through_slurm(slurm_serve, cluster, blobs, trainyard_bin):
    svc = slurm_serve()
    assert "executor: slurm" in svc.output()
    hold = blocker(cluster)
    jid = submit(svc, two_replicas(blobs, 5)).json()["id"]
    sid = slurm_id_of(svc, jid)
    # pending in Slurm: queued in trainyard, and it stays so, saying why Slurm holds it
    # (squeue's %r: the blocker holds the node's CPUs)
    assert cluster.squeue()[sid] == "PENDING"
    time.sleep(1.5)
    job = get(svc, jid)
    assert job["status"] == "queued" and job["slurm_job_id"] == sid
    held = until(lambda: (lambda w: w if w["message"].startswith("held by Slurm") else None)(
        get(svc, jid)["waiting"]), 20, "squeue's reason in the job's waiting")
    assert held["reason"] == "slurm"
    assert re.fullmatch(rf"held by Slurm \(job {sid}\): (Resources|Priority)",
                        held["message"]), held
    slurm(cluster, "scancel", hold)

    job = wait_for(svc, jid, TERMINAL, timeout=60)
    assert job["status"] == "succeeded", (job["error"], svc.output()[-3000:])
    assert job["slurm_job_id"] == sid and job["attempt"] == 1
    log = svc.http.get(f"{svc.url}/jobs/{jid}/logs").text
    assert f"submitted to Slurm as job {sid} (its output: " in log
    assert "data-parallel: 2 replicas" in log
    model = svc.http.get(f"{svc.url}/jobs/{jid}/artifacts/model.safetensors")
    assert model.status_code == 200 and len(model.content) > 100
    status = subprocess.run([str(trainyard_bin), "status", jid], env=svc.env(),
                            capture_output=True, text=True, timeout=30)
    assert f"\nslurm job: {sid}\n" in status.stdout, status.stdout
    out = svc.data_dir / "slurm" / f"{jid}-{sid}.out"
    assert "replica 1 of 2" in out.read_text()

    # the worker made for the Slurm job is gone and its token no longer works
    workers = svc.http.get(f"{svc.url}/workers").json()["workers"]
    mine = [w for w in workers if w["name"] == f"slurm-{jid}"]
    assert len(mine) == 1 and mine[0]["slots"] == 2
    until(lambda: [w for w in svc.http.get(f"{svc.url}/workers").json()["workers"]
                   if w["name"] == f"slurm-{jid}" and w["status"] == "gone"], 15,
          "the job's worker to be gone")
    tokens = svc.http.get(f"{svc.url}/tokens", params={"revoked": "true"}).json()["tokens"]
    slurm_tokens = [t for t in tokens if t["name"] == f"slurm-{jid}"]
    assert slurm_tokens and slurm_tokens[0]["revoked_at"], slurm_tokens


def test_trainyard_cancel_scancels_the_slurm_job(slurm_serve, cluster, blobs, trainyard_bin):
    svc = slurm_serve()

    def cancel(jid):
        p = subprocess.run([str(trainyard_bin), "cancel", jid], env=svc.env(),
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr

    # pending in Slurm: cancelled at once, and the executor scancels it
    hold = blocker(cluster)
    pending = submit(svc, two_replicas(blobs, 5)).json()["id"]
    sid = slurm_id_of(svc, pending)
    cancel(pending)
    assert get(svc, pending)["status"] == "cancelled"
    until(lambda: sid not in cluster.squeue(), 15, f"Slurm job {sid} to be scancelled")
    assert re.search(rf"slurm: job {pending} is cancelled: scancel {sid}", svc.output())
    slurm(cluster, "scancel", hold)

    # running: rank 0 stops at the cancel and Slurm lets the job go
    running = submit(svc, two_replicas(blobs, EPOCHS_CANCEL)).json()["id"]
    sid = slurm_id_of(svc, running)
    try:
        until(lambda: checkpoint_epoch(svc, running) >= 1, 60, "the job to train")
    except AssertionError as e:
        raise AssertionError(f"{e}; squeue: {cluster.squeue()}\n{svc.output()[-4000:]}")
    cancel(running)
    job = wait_for(svc, running, TERMINAL, timeout=60)
    assert job["status"] == "cancelled", job["error"]
    until(lambda: sid not in cluster.squeue(), 20, f"Slurm job {sid} to end")


def test_a_killed_step_is_retried_as_a_new_slurm_job_from_the_checkpoint(slurm_serve, cluster,
                                                                        blobs):
    svc = slurm_serve()
    jid = submit(svc, two_replicas(blobs, EPOCHS_LONG)).json()["id"]
    first = slurm_id_of(svc, jid)
    until(lambda: checkpoint_epoch(svc, jid) >= 3, 60, "a checkpoint after epoch 3")
    slurm(cluster, "scancel", "--signal=KILL", f"{first}.0")  # the ranks die, as with their node

    def retried():
        job = get(svc, jid)
        return job if job["slurm_job_id"] not in (None, first) else None

    again = until(retried, 30, "a second Slurm job")
    assert again["status"] in ("queued", "running")
    # the rest of 3,000 epochs: a few seconds alone, minutes under ASan beside another file
    job = wait_for(svc, jid, TERMINAL, timeout=300)
    assert job["status"] == "succeeded", job["error"]
    assert job["attempt"] == 2 and job["slurm_job_id"] == again["slurm_job_id"]
    log = svc.http.get(f"{svc.url}/jobs/{jid}/logs").text
    resumed = re.search(r"attempt 2 resumes after epoch (\d+)", log)
    assert resumed and int(resumed.group(1)) >= 3, log[-2000:]
    assert f"resuming after epoch {resumed.group(1)}" in log
    assert f"submitted to Slurm as job {again['slurm_job_id']}" in log
    assert re.search(rf"slurm: job {jid}: Slurm job {first} ended \((FAILED|CANCELLED)\); the "
                     r"job is queued", svc.output())


@pytest.mark.parametrize("example, python", [
    ("torch-ddp", "/usr/bin/python3"),
    ("keras-mwms", str(ROOT / ".venv-tf" / "bin" / "python")),
])
def test_a_two_rank_script_job_runs_through_slurm(slurm_serve, cluster, digits, example,
                                                   python):
    """serve --allow-scripts sends script jobs to Slurm too: srun starts the ranks, each runs
    the script in its own sandbox (the two sharing a network namespace: one node), with the
    framework's variables; rank 0's metrics and model come back."""
    if not pathlib.Path(python).exists():
        pytest.skip(f"{python} is missing (.ci/run makes .venv-tf)")
    svc = slurm_serve("--allow-scripts", "--python", python)
    code = upload(svc, folder(ROOT / "examples" / "scripts" / example))
    jid = submit(svc, script_doc(code, hyperparameters={"epochs": 2}, dataset_location=digits,
                                 distribution={"replicas": 2})).json()["id"]
    sid = slurm_id_of(svc, jid)
    job = wait_for(svc, jid, TERMINAL, timeout=180)
    text = logs(svc, jid)
    assert job["status"] == "succeeded", (job["error"], text[-3000:], svc.output()[-3000:])
    assert job["slurm_job_id"] == sid
    assert f"submitted to Slurm as job {sid}" in text
    for rank in (0, 1):
        assert f"[rank {rank}] epoch 2: loss=" in text, text
        assert f"[rank {rank}] running train.py" in text, text
    assert "in the network namespace the job's ranks share" in text, text
    assert [e["epoch"] for e in metrics(svc, jid)] == [1, 2]
    model = "model.pt" if example == "torch-ddp" else "model.keras"
    assert model in artifacts(svc, jid)
