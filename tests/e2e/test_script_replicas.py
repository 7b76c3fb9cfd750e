"""Distributed script jobs on one machine: a training_script with "distribution": {"replicas": 2}
runs as two copies under a worker with --replicas 2 (mpirun, trainyard-replica), each in its own
bubblewrap sandbox, the two sandboxes sharing a network namespace of their own.

- examples/scripts/torch-ddp (DistributedDataParallel over gloo, as torchrun would start it)
  and examples/scripts/keras-mwms (MultiWorkerMirroredStrategy from TF_CONFIG, tensorflow-cpu)
  train on two ranks; both ranks took part (each printed its place in the group and its epochs,
  labelled in the job's log), the metrics are rank 0's alone, once per epoch, and they equal a
  one-rank run of the same script within the frameworks' float tolerance; rank 0's model comes
  back as the artifact;
- the ranks see the variables their frameworks read, reach each other on 127.0.0.1, and reach
  nothing of the machine's (a server listening here on 127.0.0.1); without a sandbox they take
  free ports of the machine instead, learnt from each other through MPI;
- a rank whose script fails ends the attempt: retried while attempts are left, failed after;
- cancel stops the scripts of every rank.

The PyTorch cases use Debian's /usr/bin/python3 (python3-torch); the Keras one the tensorflow-cpu
venv .venv-tf that .ci/run makes."""
import json
import math
import subprocess
import time

import pytest

from conftest import ROOT
from helpers import TERMINAL, submit, until, wait_for
from test_scripts import (PYTHON, alive, artifacts, download, folder, job_pids, logs, metrics,
                          needs_torch, script_doc, upload)

TF_PYTHON = ROOT / ".venv-tf" / "bin" / "python"
TORCH_DDP = ROOT / "examples" / "scripts" / "torch-ddp"
KERAS_MWMS = ROOT / "examples" / "scripts" / "keras-mwms"


def tf_available():
    return TF_PYTHON.exists() and subprocess.run(
        [str(TF_PYTHON), "-c", "import tensorflow"], capture_output=True).returncode == 0


needs_tf = pytest.mark.skipif(not tf_available(),
                              reason=f"{TF_PYTHON} has no tensorflow (.ci/run makes it)")


def serve_args(python):
    return ("--workers", "1", "--replicas", "2", "--rank-threads", "1", "--allow-scripts",
            "--python", str(python))


def train_one_and_two(svc, example, dataset, epochs=3):
    """The example folder as a job of 2 ranks and as one of 1; both must succeed. Returns the
    two finished jobs (two, one)."""
    code = upload(svc, folder(example))
    hp = {"epochs": epochs, "batch_size": 64}
    two = submit(svc, script_doc(code, name="two", hyperparameters=hp, dataset_location=dataset,
                                 distribution={"replicas": 2})).json()
    one = submit(svc, script_doc(code, name="one", hyperparameters=hp,
                                 dataset_location=dataset)).json()
    done = [wait_for(svc, j["id"], TERMINAL, timeout=240) for j in (two, one)]
    for job in done:
        assert job["status"] == "succeeded", (job, logs(svc, job["id"]))
    assert done[0]["document"]["distribution"] == {"replicas": 2}
    return done


def check_ranks_and_metrics(svc, two, one, epochs, tolerance):
    text = logs(svc, two["id"])
    for rank in (0, 1):
        assert f"[rank {rank}] running train.py" in text, text
        assert "in the network namespace the job's ranks share" in text, text
        # each rank trained every epoch: its own lines, labelled
        for e in range(1, epochs + 1):
            assert f"[rank {rank}] epoch {e}: loss=" in text, text
    got, want = metrics(svc, two["id"]), metrics(svc, one["id"])
    assert [e["epoch"] for e in got] == list(range(1, epochs + 1)), got  # rank 0's, once each
    for g, w in zip(got, want):
        assert math.isclose(g["loss"], w["loss"], rel_tol=tolerance), (got, want)
        assert abs(g["accuracy"] - w["accuracy"]) <= 2 / 3000, (got, want)
    assert "[rank" not in logs(svc, one["id"])  # a job of one rank is as before


@needs_torch
def test_pytorch_ddp_on_two_ranks_trains_what_one_rank_does(serve, digits):
    svc = serve(*serve_args(PYTHON))
    two, one = train_one_and_two(svc, TORCH_DDP, digits)
    text = logs(svc, two["id"])
    assert "[rank 0] rank 0 of 2 (local rank 0)" in text, text
    assert "[rank 1] rank 1 of 2 (local rank 1)" in text, text
    # gloo sums the gradients in another order than one process adds them: float rounding only
    check_ranks_and_metrics(svc, two, one, 3, 1e-4)
    assert "model.pt" in artifacts(svc, two["id"])
    path = svc.data_dir.parent / "ddp-model.pt"
    path.write_bytes(download(svc, two["id"], "model.pt"))
    check = subprocess.run([PYTHON, "-c", "import sys, torch; m = torch.load(sys.argv[1]); "
                            "print(m['classes'], sorted(m['state_dict']))", str(path)],
                           capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.startswith("10 "), check


@needs_tf
def test_keras_multi_worker_mirrored_strategy_on_two_workers(serve, digits):
    svc = serve(*serve_args(TF_PYTHON))
    two, one = train_one_and_two(svc, KERAS_MWMS, digits)
    text = logs(svc, two["id"])
    assert "[rank 0] worker 0 of 2" in text and "[rank 1] worker 1 of 2" in text, text
    assert "worker 0 of 1" in logs(svc, one["id"])
    check_ranks_and_metrics(svc, two, one, 3, 1e-4)
    assert "model.keras" in artifacts(svc, two["id"])
    assert download(svc, two["id"], "model.keras")[:2] == b"PK"  # a Keras 3 zip


PROBE = r"""
import json, os, socket, sys, time
rank = int(os.environ["RANK"])
env = {k: os.environ.get(k) for k in ("TRAINYARD_RANK", "TRAINYARD_WORLD_SIZE", "RANK",
       "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
       "TF_CONFIG", "TRAINYARD_DEVICE")}
print("env " + json.dumps(env, sort_keys=True), flush=True)
port = int(os.environ["MASTER_PORT"])
if rank == 0:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((os.environ["MASTER_ADDR"], port)); s.listen(1); s.settimeout(60)
    c, _ = s.accept()
    print("rank 0 heard " + c.recv(100).decode(), flush=True)
else:
    for _ in range(600):
        try:
            c = socket.create_connection((os.environ["MASTER_ADDR"], port), timeout=1); break
        except OSError:
            time.sleep(0.05)
    c.sendall(b"hello-from-rank-1")
host, outside = sys.argv[1], int(sys.argv[2])
try:
    socket.create_connection((host, outside), timeout=3)
    print("REACHED-THE-MACHINE", flush=True)
except OSError:
    print("the machine is out of reach", flush=True)
"""


def test_the_ranks_reach_each_other_and_nothing_else(serve, data_server):
    _, base = data_server  # a server on this machine's 127.0.0.1
    port = int(base.rsplit(":", 1)[1])
    svc = serve(*serve_args(PYTHON))
    code = upload(svc, {"train.py": PROBE, "run.sh": (f"#!/bin/sh\nexec python3 train.py "
                                                      f"127.0.0.1 {port}\n", 0o755)})
    job = submit(svc, script_doc(code, script="run.sh", distribution={"replicas": 2})).json()
    done = wait_for(svc, job["id"], TERMINAL, timeout=120)
    text = logs(svc, job["id"])
    assert done["status"] == "succeeded", (done, text)
    assert "[rank 0] rank 0 heard hello-from-rank-1" in text, text
    assert text.count("the machine is out of reach") == 2 and "REACHED" not in text, text
    envs = {}
    for line in text.splitlines():
        if "] env {" in line:
            rank = int(line.split("[rank ")[1].split("]")[0])
            envs[rank] = json.loads(line.split("] env ", 1)[1])
    assert sorted(envs) == [0, 1], text
    for rank, env in envs.items():
        assert env["TRAINYARD_RANK"] == env["RANK"] == env["LOCAL_RANK"] == str(rank)
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == env["TRAINYARD_WORLD_SIZE"] == "2"
        assert env["MASTER_ADDR"] == "127.0.0.1" and env["MASTER_PORT"] == "29500"
        assert env["TRAINYARD_DEVICE"] is not None
        tf = json.loads(env["TF_CONFIG"])
        assert tf == {"cluster": {"worker": ["127.0.0.1:29501", "127.0.0.1:29502"]},
                      "task": {"type": "worker", "index": rank}}, tf
    # only rank 0 reports: no metrics, and its artifacts only
    assert metrics(svc, job["id"]) == []


FAILS = r"""
import os, sys, time
rank = os.environ["RANK"]
if rank == os.environ["FAIL_RANK"] and os.environ["TRAINYARD_ATTEMPT"] == "1":
    print(f"rank {rank} gives up", flush=True)
    sys.exit(3)
time.sleep(2 if rank == "1" else 4)
print("done", flush=True)
"""


@pytest.mark.parametrize("attempts, rank, status", [(2, 1, "succeeded"), (1, 1, "failed"),
                                                   (1, 0, "failed")])
def test_a_rank_whose_script_fails_ends_the_attempt(serve, attempts, rank, status):
    """Any rank's failure is a rank that died: the attempt is lost, the job queued again while
    attempts are left (here the script fails on attempt 1 only), else failed with that rank's
    reason and last lines."""
    svc = serve(*serve_args(PYTHON))
    code = upload(svc, {"train.py": FAILS,
                        "run.sh": (f"#!/bin/sh\nFAIL_RANK={rank} exec python3 train.py\n", 0o755)})
    job = submit(svc, script_doc(code, script="run.sh", distribution={"replicas": 2},
                                 max_attempts=attempts)).json()
    done = wait_for(svc, job["id"], TERMINAL, timeout=120)
    text = logs(svc, job["id"])
    assert done["status"] == status, (done, text)
    assert f"[rank {rank}] rank {rank} gives up" in text, text
    assert f"[rank {rank}] run.sh ended with status 3" in text, text
    if status == "succeeded":
        assert done["attempt"] == 2 and "[rank 0] done" in text, (done, text)
    else:
        assert done["error"].startswith(f"rank {rank}: run.sh exited with status 3; its last "
                                        "lines:"), done
        assert f"rank {rank} gives up" in done["error"], done


def test_cancel_stops_every_rank(serve):
    svc = serve(*serve_args(PYTHON))
    code = upload(svc, {"train.py": "import time\nwhile True:\n    print('tick', flush=True)\n"
                                    "    time.sleep(0.2)\n"})
    job = submit(svc, script_doc(code, distribution={"replicas": 2})).json()
    until(lambda: "[rank 1] tick" in logs(svc, job["id"]) and
          "[rank 0] tick" in logs(svc, job["id"]), 60, "both ranks ticking")
    pids = job_pids(job["id"])
    assert len(pids) >= 2, pids
    r = svc.http.post(f"{svc.url}/jobs/{job['id']}/cancel")
    assert r.status_code in (200, 202), r.text
    done = wait_for(svc, job["id"], TERMINAL, timeout=60)
    assert done["status"] == "cancelled", done
    until(lambda: not any(alive(p) for p in pids), 30, f"the ranks' processes {pids} to end")
    time.sleep(0.5)
    assert svc.http.get(f"{svc.url}/jobs/{job['id']}").json()["status"] == "cancelled"


def test_without_a_sandbox_the_ranks_take_free_ports_of_the_machine(serve, data_server):
    """--no-sandbox (like ranks on several machines): no namespace of their own, so each rank
    takes a free port of its machine and the ranks learn each other's through MPI."""
    _, base = data_server
    port = int(base.rsplit(":", 1)[1])
    svc = serve("--workers", "1", "--replicas", "2", "--rank-threads", "1", "--allow-scripts",
                "--no-sandbox", "--python", PYTHON)
    code = upload(svc, {"train.py": PROBE, "run.sh": (f"#!/bin/sh\nexec {PYTHON} train.py "
                                                      f"127.0.0.1 {port}\n", 0o755)})
    job = submit(svc, script_doc(code, script="run.sh", distribution={"replicas": 2})).json()
    done = wait_for(svc, job["id"], TERMINAL, timeout=120)
    text = logs(svc, job["id"])
    assert done["status"] == "succeeded", (done, text)
    assert "[rank 0] rank 0 heard hello-from-rank-1" in text, text
    assert "without a sandbox" in text and "network namespace" not in text, text
    envs = {}
    for line in text.splitlines():
        if "] env {" in line:
            envs[int(line.split("[rank ")[1].split("]")[0])] = json.loads(line.split("] env ", 1)[1])
    assert sorted(envs) == [0, 1], text
    workers = [json.loads(envs[r]["TF_CONFIG"])["cluster"]["worker"] for r in (0, 1)]
    assert workers[0] == workers[1] and len(set(workers[0])) == 2, workers
    tf_ports = {int(w.rsplit(":", 1)[1]) for w in workers[0]}
    master = int(envs[0]["MASTER_PORT"])
    assert envs[1]["MASTER_PORT"] == envs[0]["MASTER_PORT"] and master not in tf_ports, envs
    assert all(w.startswith("127.0.0.1:") for w in workers[0]), workers
    # the kernel's free ports (its ephemeral range), not the namespace's fixed ones
    assert not (tf_ports | {master}) & {29500, 29501, 29502}, (tf_ports, master)
