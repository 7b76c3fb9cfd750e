"""Why a queued job waits: every queued job carries `waiting` (reason and message) in the API,
`trainyard status` and `trainyard list`, and GET /workers says what each worker takes. The real
server with real local workers on PoCL; reasons are read the moment after submit. Besides the
workers: a token's caps (max_running holds its jobs while workers are free, max_queued refuses
a submit with 429) and a lost attempt's back-off (retry_at). Slurm's own reason is in
test_slurm.py."""
import re
import subprocess
import time

from helpers import TERMINAL, job_doc, submit, wait_for


def waiting(svc, job_id):
    return svc.http.get(f"{svc.url}/jobs/{job_id}").json()["waiting"]


def cli(svc, *args):
    p = subprocess.run([str(svc.binary), *args], capture_output=True, text=True, env=svc.env(),
                       timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def wait_running(svc, job_id, timeout=120):
    job = wait_for(svc, job_id, ("running", *TERMINAL), timeout)
    assert job["status"] == "running", job
    return job


def test_no_worker_connected(serve, blobs):
    svc = serve("--workers", "0")
    r = submit(svc, job_doc(blobs))
    job = r.json()
    assert job["waiting"] == {"reason": "no_worker", "message": "no worker is connected"}
    assert waiting(svc, job["id"])["reason"] == "no_worker"
    listed = svc.http.get(f"{svc.url}/jobs").json()["jobs"][0]
    assert listed["waiting"]["reason"] == "no_worker"


def test_what_no_connected_worker_has(serve, blobs):
    """One local worker on PoCL: one CPU device, one slot, no scripts. Each job asks for what it
    lacks, and says so from its submit on; GET /workers tells what the worker takes."""
    svc = serve("--workers", "1")
    deadline = time.time() + 60
    while not svc.http.get(f"{svc.url}/workers").json()["workers"]:
        assert time.time() < deadline, svc.output()[-2000:]
        time.sleep(0.1)
    worker = svc.http.get(f"{svc.url}/workers").json()["workers"][0]
    assert worker["takes"] == {"built_in": True, "scripts": False, "devices": ["cpu"],
                               "replicas": 1, "only_its_slurm_job": False}

    t0 = time.time()
    two = submit(svc, job_doc(blobs, distribution={"replicas": 2})).json()
    gpu = submit(svc, job_doc(blobs, resources={"device": "gpu"})).json()
    assert time.time() - t0 < 1.0
    for job, needs in ((two, "a worker with 2 slots (the most any has is 1)"),
                       (gpu, "a GPU (resources.device: gpu)")):
        assert job["waiting"]["reason"] == "no_capable_worker", job["waiting"]
        assert job["waiting"]["message"] == f"no connected worker can take it: it needs {needs}"
        assert waiting(svc, job["id"]) == job["waiting"]

    # the CLI: status says it in words, list names the reason
    text = cli(svc, "status", two["id"])
    assert re.search(r"^waiting: +no connected worker can take it: it needs a worker with 2 "
                     r"slots", text, re.M), text
    rows = {line.split()[0]: line.split() for line in cli(svc, "list").splitlines()[1:]}
    assert rows[two["id"]][4] == "no_capable_worker" and rows[gpu["id"]][4] == "no_capable_worker"

    # a job the worker can take runs past both, and then has no reason to wait
    ok = submit(svc, job_doc(blobs, epochs=2)).json()
    done = wait_for(svc, ok["id"], TERMINAL)
    assert done["status"] == "succeeded" and done["waiting"] is None
    assert waiting(svc, two["id"])["reason"] == "no_capable_worker"


def test_scripts_need_a_worker_that_runs_them(serve, blobs):
    svc = serve("--workers", "1")
    code = svc.http.post(f"{svc.url}/code", data=_bundle(),
                         headers={"Content-Type": "application/gzip"})
    assert code.status_code in (200, 201), code.text
    job = {"name": "script", "dataset_url": blobs, "training_script": "train.py",
           "code": code.json()["code"], "hyperparameters": {"epochs": 1}}
    r = submit(svc, job).json()
    assert r["waiting"]["reason"] in ("no_worker", "no_capable_worker"), r["waiting"]
    deadline = time.time() + 60
    while waiting(svc, r["id"])["reason"] != "no_capable_worker":
        assert time.time() < deadline
        time.sleep(0.1)
    assert waiting(svc, r["id"])["message"] == ("no connected worker can take it: it needs a "
                                                "worker that runs scripts (--allow-scripts)")


def _bundle():
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"print('hello')\n"
        info = tarfile.TarInfo("train.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_behind_jobs_and_busy_workers(serve, blobs):
    """One worker busy with a long job: the next in line waits for it, the ones after are
    behind, and a higher priority goes to the front of the line."""
    svc = serve("--workers", "1")
    long = submit(svc, job_doc(blobs, epochs=50000)).json()
    wait_running(svc, long["id"])
    b = submit(svc, job_doc(blobs, name="b")).json()
    c = submit(svc, job_doc(blobs, name="c")).json()
    assert b["waiting"]["reason"] == "workers_busy", b["waiting"]
    assert b["waiting"]["message"] == ("first in line: waiting for a free worker (the 1 that can "
                                       "take it are busy)")
    assert c["waiting"] == {"reason": "behind_jobs", "jobs_ahead": 1,
                            "message": "behind 1 job(s) submitted earlier"}
    urgent = submit(svc, job_doc(blobs, name="urgent", priority=5)).json()
    assert urgent["waiting"]["reason"] == "workers_busy"
    assert waiting(svc, b["id"]) == {"reason": "behind_jobs", "jobs_ahead": 1,
                                     "message": "behind 1 job(s) of higher priority"}
    assert waiting(svc, c["id"]) == {
        "reason": "behind_jobs", "jobs_ahead": 2,
        "message": "behind 2 job(s): 1 of higher priority, 1 submitted earlier"}
    # jobs no worker can take do not count as ahead: they do not hold the line
    submit(svc, job_doc(blobs, name="gpu", resources={"device": "gpu"}, priority=9))
    assert waiting(svc, c["id"])["jobs_ahead"] == 2
    for j in (long, b, c, urgent):
        svc.http.post(f"{svc.url}/jobs/{j['id']}/cancel")
    assert wait_for(svc, long["id"], TERMINAL)["status"] == "cancelled"


def test_a_tokens_caps(serve, blobs):
    """A token made with `trainyard token create --max-running 1 --max-queued 3`: its second job
    waits (token_cap) while a worker is free, which another token's job then uses; its fourth
    queued-or-running job is refused with 429 naming the cap; the listing shows both caps."""
    svc = serve("--workers", "2")
    p = subprocess.run([str(svc.binary), "token", "create", "--name", "capped", "--role", "user",
                        "--max-running", "1", "--max-queued", "3"], capture_output=True,
                       text=True, env=svc.env(), timeout=60)
    assert p.returncode == 0, p.stderr
    secret = p.stdout.strip()
    listed = [t for t in svc.http.get(f"{svc.url}/tokens").json()["tokens"]
              if t["name"] == "capped"]
    assert [(t["max_running"], t["max_queued"]) for t in listed] == [(1, 3)]
    row = [line for line in cli(svc, "token", "list").splitlines() if line.endswith(" capped")]
    assert row and row[0].split()[4:6] == ["1", "3"], row
    admin = [t for t in svc.http.get(f"{svc.url}/tokens").json()["tokens"]
             if t["name"] == "admin"][0]
    assert admin["max_running"] is None and admin["max_queued"] is None

    user = svc.session(secret)
    long = user.post(f"{svc.url}/train", json=job_doc(blobs, epochs=50000)).json()
    wait_running(svc, long["id"])
    held = user.post(f"{svc.url}/train", json=job_doc(blobs, name="held", epochs=2)).json()
    message = ("its token's cap: 1 of its jobs are running and its max_running is 1; it starts "
               "when one of them ends")
    assert held["waiting"] == {"reason": "token_cap", "message": message}, held["waiting"]
    # the second worker is free, and another token's job takes it while `held` waits
    other = submit(svc, job_doc(blobs, name="other", epochs=2)).json()
    assert wait_for(svc, other["id"], TERMINAL)["status"] == "succeeded"
    assert waiting(svc, held["id"]) == {"reason": "token_cap", "message": message}
    text = subprocess.run([str(svc.binary), "status", held["id"]], capture_output=True,
                          text=True, env=svc.env(TRAINYARD_TOKEN=secret), timeout=60).stdout
    assert f"waiting:   {message}" in text, text

    # max_queued counts queued and running jobs: 2 now, one more fits, the next does not
    third = user.post(f"{svc.url}/train", json=job_doc(blobs, name="third", epochs=2))
    assert third.status_code == 202, third.text
    refused = user.post(f"{svc.url}/train", json=job_doc(blobs, name="fourth", epochs=2))
    assert refused.status_code == 429, refused.text
    assert refused.headers["Content-Type"].startswith("application/problem+json")
    assert "max_queued is 3 and it has 3 jobs queued or running" in refused.json()["detail"]

    # the running job ends: the held ones run, one at a time
    svc.http.post(f"{svc.url}/jobs/{long['id']}/cancel")
    for j in (held, third.json()):
        assert wait_for(svc, j["id"], TERMINAL)["status"] == "succeeded"
    assert user.post(f"{svc.url}/train", json=job_doc(blobs, epochs=1)).status_code == 202


def test_a_lost_attempt_waits_out_its_backoff(serve, blobs):
    """The local worker running a job is killed: the job is queued again at once with a
    back-off (--retry-backoff-seconds 3), says retry_backoff with the seconds left, and the
    restarted worker, parked in its long poll, leases it once retry_at has passed (the end of
    a back-off wakes it: it does not wait out its 30 s poll)."""
    import os
    import signal
    svc = serve("--workers", "1", "--retry-backoff-seconds", "3")
    job = submit(svc, job_doc(blobs, epochs=50000)).json()
    wait_running(svc, job["id"])
    pid = int(re.search(r"local worker 0 started \(pid (\d+)", svc.output()).group(1))
    os.kill(pid, signal.SIGKILL)
    t0 = time.time()
    queued = wait_for(svc, job["id"], {"queued"}, timeout=15)
    assert queued["retry_at"] is not None
    assert queued["waiting"]["reason"] == "retry_backoff", queued["waiting"]
    assert re.fullmatch(r"its attempt 1 was lost: retrying in [1-3] s \(the back-off after a "
                        r"lost attempt\)", queued["waiting"]["message"]), queued["waiting"]
    assert re.search(r"^waiting: +its attempt 1 was lost: retrying in",
                     cli(svc, "status", job["id"]), re.M)
    rows = {line.split()[0]: line.split() for line in cli(svc, "list").splitlines()[1:]}
    assert rows[job["id"]][4] == "retry_backoff"
    again = wait_for(svc, job["id"], ("running", *TERMINAL), timeout=60)
    took = time.time() - t0
    print(f"attempt 2 leased {took:.2f}s after the kill (back-off 3 s)")
    assert again["status"] == "running" and again["attempt"] == 2, again
    assert again["retry_at"] is None and again["waiting"] is None
    assert took >= 2.0, "leased again before its back-off was over"
    assert took < 8.0, "the end of the back-off did not wake the parked worker"
    attempts = svc.http.get(f"{svc.url}/jobs/{job['id']}").json()["attempts"]
    assert attempts[0]["reason"].endswith("was killed by signal 9; retrying in 3 s"), attempts
    svc.http.post(f"{svc.url}/jobs/{job['id']}/cancel")
    assert wait_for(svc, job["id"], TERMINAL)["status"] == "cancelled"
