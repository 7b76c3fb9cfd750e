"""Code for script jobs through a real `trainyard serve`: POST /code stores a checked .tar.gz by
its SHA-256 and refuses bundles that could write outside their folder (a `../` member, an
absolute path, a symlink out) or pass the size cap; GET /code/{address} gives the bytes back to
workers; the scripts right decides who may upload and submit script jobs (403 without it, 202
with it); every Job answer carries job_id; a script job is leased only to a worker registered
with scripts; a heartbeat's metrics under a script's own names come back in GET
/jobs/{id}/metrics; a script job's checkpoint is a .tar.gz with ?epoch=N, kept as
checkpoint.tar.gz. Workers here are HTTP clients with a worker token, as a remote worker is."""
import hashlib
import io
import os
import subprocess
import tarfile

from helpers import job_doc, submit

GZIP = {"Content-Type": "application/gzip"}


def problem(r, status):
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["Content-Type"].startswith("application/problem+json"), r.headers
    return r.json()


def tar_gz(members):
    """A .tar.gz of members: (name, kind, data or link target, mode); kind is file, dir,
    symlink or hardlink."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, kind, data, mode in members:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if kind == "file":
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
                         "hardlink": tarfile.LNKTYPE}[kind]
            info.linkname = data if kind != "dir" else ""
            tar.addfile(info)
    return buf.getvalue()


TRAIN_PY = b"import json, os\nprint(json.loads(os.environ['TRAINYARD_HYPERPARAMETERS']))\n"
GOOD = [("train.py", "file", TRAIN_PY, 0o644),
        ("lib", "dir", None, 0o755),
        ("lib/util.py", "file", b"X = 1\n", 0o644),
        ("run.sh", "file", b"#!/bin/sh\nexec python3 train.py\n", 0o755),
        ("lib/same.py", "symlink", "util.py", 0o777),
        ("top.py", "symlink", "lib/util.py", 0o777)]


def upload(session, svc, body, headers=GZIP):
    return session.post(f"{svc.url}/code", data=body, headers=headers)


def script_doc(code, **extra):
    return {"model_name": "mlp", "training_script": "train.py", "code": code,
            "hyperparameters": {"epochs": 2, "lr": 0.01}, **extra}


def register(session, svc, name, scripts=None):
    body = {"name": name, "devices": [{"index": 0, "name": "cpu0", "type": "cpu"}]}
    if scripts is not None:
        body["scripts"] = scripts
    r = session.post(f"{svc.url}/workers", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def test_code_is_stored_by_its_sha256_and_served_to_workers(serve):
    svc = serve("--workers", "0")
    body = tar_gz(GOOD)
    digest = hashlib.sha256(body).hexdigest()
    r = upload(svc.http, svc, body)
    assert r.status_code == 201, r.text
    stored = r.json()
    assert stored == {"code": f"sha256:{digest}", "bytes": len(body), "files": 3,
                      "unpacked_bytes": len(TRAIN_PY) + 6 + 32}
    assert (svc.data_dir / "code" / f"{digest}.tar.gz").read_bytes() == body
    # The same bytes again: nothing new, the same address; octet-stream is taken too.
    again = upload(svc.http, svc, body, {"Content-Type": "application/octet-stream"})
    assert again.status_code == 200 and again.json() == stored

    worker = svc.session(svc.token("box", "worker"))
    got = worker.get(f"{svc.url}/code/sha256:{digest}")
    assert got.status_code == 200 and got.content == body
    assert got.headers["Content-Type"] == "application/gzip"
    assert got.headers["ETag"] == f'"{digest}"'
    assert worker.get(f"{svc.url}/code/sha256:{digest}",
                      headers={"If-None-Match": f'"{digest}"'}).status_code == 304
    problem(worker.get(f"{svc.url}/code/sha256:{'0' * 64}"), 404)
    assert problem(worker.get(f"{svc.url}/code/{digest}"), 400)["errors"][0]["field"] == "address"
    # Users upload code but do not download it: that is the workers' path.
    user = svc.session(svc.http.post(f"{svc.url}/tokens", json={
        "name": "u", "role": "user", "scripts": True}).json()["token"])
    problem(user.get(f"{svc.url}/code/sha256:{digest}"), 403)


def test_bundles_that_could_escape_or_are_too_big_are_refused(serve):
    svc = serve("--workers", "0", "--max-code-bytes", "4K")
    cases = [
        ([("../evil.py", "file", b"x", 0o644)], "../evil.py"),
        ([("ok.py", "file", b"x", 0o644), ("a/../../evil.py", "file", b"x", 0o644)],
         "a/../../evil.py"),
        ([("/etc/cron.d/evil", "file", b"x", 0o644)], "/etc/cron.d/evil"),
        ([("data", "symlink", "../../etc", 0o777)], "data"),
        ([("abs", "symlink", "/etc/passwd", 0o777)], "abs"),
        ([("t.py", "file", b"x", 0o644), ("h", "hardlink", "t.py", 0o644)], "h"),
    ]
    for members, named in cases:
        p = problem(upload(svc.http, svc, tar_gz(members)), 400)
        assert p["errors"][0]["field"] == "body", p
        assert named in p["errors"][0]["message"], (named, p)
    # Not a tar.gz at all, or the wrong media type.
    assert problem(upload(svc.http, svc, b"not gzip at all"), 400)["errors"][0]["field"] == "body"
    problem(upload(svc.http, svc, tar_gz(GOOD), {"Content-Type": "application/json"}), 415)
    # Past --max-code-bytes: 413. Random bytes do not compress.
    big = tar_gz([("blob.bin", "file", os.urandom(8192), 0o644)])
    assert len(big) > 4096
    assert "--max-code-bytes" in problem(upload(svc.http, svc, big), 413)["detail"]
    # Nothing refused was stored.
    assert list((svc.data_dir / "code").iterdir()) == []


def test_the_scripts_right_and_job_id(serve):
    svc = serve("--workers", "0")
    plain_token = svc.token("plain", "user")
    plain = svc.session(plain_token)
    r = svc.http.post(f"{svc.url}/tokens", json={"name": "scripter", "role": "user",
                                                 "scripts": True})
    assert r.status_code == 201 and r.json()["scripts"] is True
    scripter = svc.session(r.json()["token"])
    tokens = {t["name"]: t for t in svc.http.get(f"{svc.url}/tokens").json()["tokens"]}
    assert tokens["plain"]["scripts"] is False and tokens["scripter"]["scripts"] is True
    assert tokens["admin"]["scripts"] is True

    body = tar_gz(GOOD)
    assert "scripts" in problem(upload(plain, svc, body), 403)["detail"]
    code = upload(scripter, svc, body).json()["code"]
    # Without the right: 403 naming training_script; with it: 202.
    p = problem(plain.post(f"{svc.url}/train", json=script_doc(code)), 403)
    assert p["errors"] == [{"field": "training_script",
                            "message": "this token may not submit script jobs; an admin can "
                                       "create one with scripts: true"}]
    r = scripter.post(f"{svc.url}/train", json=script_doc(code))
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["job_id"] == job["id"]
    assert job["name"] == "mlp"
    doc = job["document"]
    assert doc["training_script"] == "train.py" and doc["code"] == code
    assert doc["hyperparameters"] == {"epochs": 2, "lr": 0.01}
    assert "model_name" not in doc and doc["dataset_url"] is None
    # job_id in every Job answer: GET, the listing, a cancel.
    assert scripter.get(f"{svc.url}/jobs/{job['id']}").json()["job_id"] == job["id"]
    assert all(j["job_id"] == j["id"] for j in scripter.get(f"{svc.url}/jobs").json()["jobs"])
    assert scripter.post(f"{svc.url}/jobs/{job['id']}/cancel").json()["job_id"] == job["id"]
    # Built-in jobs need no right; an address never uploaded is a 400 on code.
    assert plain.post(f"{svc.url}/train", json=job_doc("http://127.0.0.1:9/x.csv")).status_code \
        == 202
    p = problem(scripter.post(f"{svc.url}/train",
                              json=script_doc(f"sha256:{'ab' * 32}")), 400)
    assert p["errors"][0]["field"] == "code"
    assert "POST /code" in p["errors"][0]["message"]
    p = problem(scripter.post(f"{svc.url}/train", json={"training_script": "train.py"}), 400)
    assert p["errors"][0]["field"] == "code"
    # The CLI's --scripts, through the API.
    out = subprocess.run([str(svc.binary), "token", "create", "--name", "cli", "--role", "user",
                          "--scripts", "--json"], env=svc.env(), capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    tokens = {t["name"]: t for t in svc.http.get(f"{svc.url}/tokens").json()["tokens"]}
    assert tokens["cli"]["scripts"] is True


def test_script_jobs_go_only_to_script_workers_and_report_any_metric(serve):
    svc = serve("--workers", "0")
    code = upload(svc.http, svc, tar_gz(GOOD)).json()["code"]
    job = submit(svc, script_doc(code, delete_checkpoint=False)).json()
    worker = svc.session(svc.token("box", "worker"))
    plain = register(worker, svc, "plain")
    assert plain["scripts"] is False
    r = worker.post(f"{svc.url}/workers/{plain['id']}/lease", params={"wait": 0})
    assert r.status_code == 204, r.text  # the script job is not for it

    runner = register(worker, svc, "runner", scripts=True)
    assert runner["scripts"] is True
    listed = {w["name"]: w for w in svc.http.get(f"{svc.url}/workers").json()["workers"]}
    assert listed["runner"]["scripts"] is True and listed["plain"]["scripts"] is False
    r = worker.post(f"{svc.url}/workers/{runner['id']}/lease", params={"wait": 0})
    assert r.status_code == 200, r.text
    lease = r.json()
    assert lease["job_id"] == job["id"] and lease["code"] == f"/code/{code}"
    assert worker.get(f"{svc.url}{lease['code']}").status_code == 200

    base = f"{svc.url}/workers/{runner['id']}/jobs/{job['id']}"
    beat = {"phase": "training", "epochs": [
        {"epoch": 1, "loss": 0.9, "top5/acc": 0.5, "lr": 0.01, "gap": None},
        {"epoch": 2, "val_accuracy": 0.75, "f1": 0.6}]}
    r = worker.post(f"{base}/heartbeat", json=beat)
    assert r.status_code == 200, r.text
    bad = worker.post(f"{base}/heartbeat", json={"epochs": [{"epoch": 3, "9x": 1}]})
    assert problem(bad, 400)["errors"][0]["field"] == "epochs[0].9x"
    metrics = svc.http.get(f"{svc.url}/jobs/{job['id']}/metrics").json()["epochs"]
    assert [m["epoch"] for m in metrics] == [1, 2]
    assert metrics[0]["top5/acc"] == 0.5 and metrics[0]["lr"] == 0.01
    assert metrics[0]["gap"] is None and metrics[0]["loss"] == 0.9
    assert metrics[1]["f1"] == 0.6 and metrics[1]["val_accuracy"] == 0.75
    assert metrics[1]["loss"] is None and "top5/acc" not in metrics[1]

    # Checkpoints: a .tar.gz with ?epoch=N; the same epoch again replaces it.
    snap1 = tar_gz([("state.txt", "file", b"one", 0o644)])
    snap2 = tar_gz([("state.txt", "file", b"two", 0o644)])
    assert problem(worker.put(f"{base}/checkpoint", data=snap1), 400)["errors"][0]["field"] \
        == "epoch"
    assert problem(worker.put(f"{base}/checkpoint", params={"epoch": 1}, data=b"plain"),
                   400)["errors"][0]["field"] == "body"
    r = worker.put(f"{base}/checkpoint", params={"epoch": 1}, data=snap1)
    assert r.status_code == 201 and r.json() == {"epoch": 1, "stored": True}
    r = worker.put(f"{base}/checkpoint", params={"epoch": 1}, data=snap2)
    assert r.status_code == 201, r.text
    assert worker.get(f"{base}/checkpoint").content == snap2
    r = worker.post(f"{base}/complete", json={"status": "succeeded"})
    assert r.status_code == 200, r.text
    arts = {a["name"] for a in svc.http.get(
        f"{svc.url}/jobs/{job['id']}/artifacts").json()["artifacts"]}
    assert "checkpoint.tar.gz" in arts
    kept = svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts/checkpoint.tar.gz")
    assert kept.content == snap2


def test_builtin_jobs_still_go_to_any_worker(serve):
    svc = serve("--workers", "0")
    job = submit(svc, job_doc("http://127.0.0.1:9/x.csv")).json()
    worker = svc.session(svc.token("box", "worker"))
    plain = register(worker, svc, "plain")
    r = worker.post(f"{svc.url}/workers/{plain['id']}/lease", params={"wait": 0})
    assert r.status_code == 200 and r.json()["job_id"] == job["id"]
    assert "code" not in r.json()
