"""Tokens end to end: the real server with its SQLite file, tokens made through the API and the
`trainyard token` command, users kept apart, workers confined to the worker protocol, and the
per-token queue limit."""
import os
import sqlite3
import stat
import subprocess
import time

import requests
from helpers import TERMINAL, job_doc, submit, wait_for


def problem(r, status):
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["Content-Type"].startswith("application/problem+json"), r.headers
    return r.json()


def test_every_call_but_healthz_needs_a_valid_token(serve):
    svc = serve("--workers", "0")
    anon = requests.Session()
    assert anon.get(f"{svc.url}/healthz").status_code == 200
    for method, path in [("GET", "/jobs"), ("POST", "/train"), ("GET", "/jobs/x"),
                         ("GET", "/devices"), ("GET", "/workers"), ("POST", "/workers"),
                         ("GET", "/tokens"), ("GET", "/openapi.yaml")]:
        r = anon.request(method, f"{svc.url}{path}")
        assert problem(r, 401)["detail"].startswith("this endpoint needs a token"), path
        assert r.headers["WWW-Authenticate"].startswith("Bearer"), path
    bad = svc.session("ty_" + "0" * 40)
    r = bad.get(f"{svc.url}/jobs")
    assert "unknown or revoked" in problem(r, 401)["detail"]
    assert 'error="invalid_token"' in r.headers["WWW-Authenticate"]
    r = anon.get(f"{svc.url}/jobs", headers={"Authorization": "Basic dXNlcjpwdw=="})
    assert problem(r, 401)["detail"] == 'Authorization must be "Bearer <token>"'


def test_admin_token_file_and_hashed_storage(serve):
    svc = serve("--workers", "0")
    path = svc.data_dir / "admin.token"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "admin.token" in svc.output()
    secret = svc.token("carol", "user")
    assert secret.startswith("ty_") and len(secret) == 43
    db = sqlite3.connect(svc.data_dir / "trainyard.db")
    rows = db.execute("SELECT name, role, hash FROM tokens").fetchall()
    db.close()
    names = {name: (role, h) for name, role, h in rows}
    assert names["carol"][0] == "user" and names["admin"][0] == "admin"
    raw = (svc.data_dir / "trainyard.db").read_bytes() + \
        (svc.data_dir / "trainyard.db-wal").read_bytes()
    assert secret.encode() not in raw and svc.admin_token.encode() not in raw
    import hashlib
    assert names["carol"][1] == hashlib.sha256(secret.encode()).hexdigest()
    # A restart keeps the admin token (the file is written once) and the others.
    svc.stop()
    again = serve("--workers", "0")
    assert again.admin_token == svc.admin_token
    assert again.session(secret).get(f"{again.url}/jobs").status_code == 200


def test_two_users_cannot_see_each_others_jobs(serve, blobs):
    svc = serve("--workers", "0")
    alice = svc.session(svc.token("alice", "user"))
    bob = svc.session(svc.token("bob", "user"))
    a_job = alice.post(f"{svc.url}/train", json=job_doc(blobs, name="alices")).json()
    b_job = bob.post(f"{svc.url}/train", json=job_doc(blobs, name="bobs")).json()
    jid = a_job["id"]

    assert alice.get(f"{svc.url}/jobs/{jid}").status_code == 200
    for method, path in [("GET", ""), ("GET", "/metrics"), ("GET", "/logs"), ("GET", "/events"),
                         ("GET", "/artifacts"), ("GET", "/artifacts/model.safetensors"),
                         ("POST", "/cancel"), ("DELETE", "")]:
        r = bob.request(method, f"{svc.url}/jobs/{jid}{path}", timeout=10)
        assert problem(r, 404)["detail"] == f"no job has the id {jid}", (method, path)
    assert [j["id"] for j in bob.get(f"{svc.url}/jobs").json()["jobs"]] == [b_job["id"]]
    assert [j["id"] for j in alice.get(f"{svc.url}/jobs").json()["jobs"]] == [jid]
    assert alice.get(f"{svc.url}/jobs", params={"name": "bobs"}).json()["jobs"] == []
    # The admin sees both; bob's failed attempts changed nothing.
    every = svc.http.get(f"{svc.url}/jobs").json()["jobs"]
    assert {j["id"] for j in every} == {jid, b_job["id"]}
    assert alice.get(f"{svc.url}/jobs/{jid}").json()["status"] == "queued"
    # Each job names the token that submitted it; the admin can tell whose it is.
    tokens = {t["id"]: t["name"] for t in svc.http.get(f"{svc.url}/tokens").json()["tokens"]}
    assert tokens[svc.http.get(f"{svc.url}/jobs/{jid}").json()["owner"]] == "alice"
    assert tokens[b_job["owner"]] == "bob"
    # The same Idempotency-Key from two users makes two jobs; a retry finds one's own.
    key = {"Idempotency-Key": "nightly-1"}
    a1 = alice.post(f"{svc.url}/train", json=job_doc(blobs), headers=key)
    b1 = bob.post(f"{svc.url}/train", json=job_doc(blobs, epochs=7), headers=key)
    assert a1.status_code == 202 and b1.status_code == 202
    assert a1.json()["id"] != b1.json()["id"]
    a2 = alice.post(f"{svc.url}/train", json=job_doc(blobs), headers=key)
    assert a2.status_code == 200 and a2.json()["id"] == a1.json()["id"]
    # Users cannot manage tokens or speak the worker protocol.
    assert "needs an admin token" in problem(alice.get(f"{svc.url}/tokens"), 403)["detail"]
    r = alice.post(f"{svc.url}/workers", json={"name": "w", "devices": []})
    assert "a user token may not call POST /workers" in problem(r, 403)["detail"]


def test_revoked_tokens_stop_at_once_and_the_last_admin_stays(serve):
    svc = serve("--workers", "0")
    secret = svc.token("dave", "user")
    dave = svc.session(secret)
    assert dave.get(f"{svc.url}/jobs").status_code == 200
    listed = svc.http.get(f"{svc.url}/tokens").json()["tokens"]
    dave_id = next(t["id"] for t in listed if t["name"] == "dave")
    assert all("token" not in t and "hash" not in t for t in listed)
    assert svc.http.delete(f"{svc.url}/tokens/{dave_id}").status_code == 204
    problem(dave.get(f"{svc.url}/jobs"), 401)
    problem(svc.http.delete(f"{svc.url}/tokens/{dave_id}"), 404)
    assert dave_id not in [t["id"] for t in svc.http.get(f"{svc.url}/tokens").json()["tokens"]]
    revoked = svc.http.get(f"{svc.url}/tokens", params={"revoked": "true"}).json()["tokens"]
    assert next(t for t in revoked if t["id"] == dave_id)["revoked_at"]
    admin_id = next(t["id"] for t in listed if t["role"] == "admin")
    assert "last admin token" in problem(svc.http.delete(f"{svc.url}/tokens/{admin_id}"),
                                         409)["detail"]
    r = svc.http.post(f"{svc.url}/tokens", json={"name": "x", "role": "root", "extra": 1})
    fields = {e["field"] for e in problem(r, 400)["errors"]}
    assert fields == {"role", "extra"}


def test_token_command_through_the_api_and_on_the_data_dir(serve, trainyard_bin):
    svc = serve("--workers", "0")

    def run(*args, env=None):
        return subprocess.run([str(trainyard_bin), "token", *args], capture_output=True,
                              text=True, timeout=30, env=env or svc.env())

    made = run("create", "--name", "erin", "--role", "user")
    assert made.returncode == 0, made.stderr
    erin = made.stdout.strip()
    assert erin.startswith("ty_") and "shown only now" in made.stderr
    assert svc.session(erin).get(f"{svc.url}/jobs").status_code == 200
    listing = run("list")
    assert listing.returncode == 0 and "erin" in listing.stdout and "ROLE" in listing.stdout
    import json
    tokens = json.loads(run("list", "--json").stdout)["tokens"]
    erin_id = next(t["id"] for t in tokens if t["name"] == "erin")
    assert run("revoke", erin_id).returncode == 0
    problem(svc.session(erin).get(f"{svc.url}/jobs"), 401)
    # A user token may not make tokens: the command says why and fails.
    denied = run("create", "--name", "x", "--role", "admin",
                 env=svc.env(TRAINYARD_TOKEN=svc.token("frank", "user")))
    assert denied.returncode == 1 and "403" in denied.stderr
    assert run("create", "--name", "x", "--role", "boss").returncode == 2
    # With the server down, on the data dir: the new token works once it is back.
    svc.stop()
    offline = run("create", "--name", "gina", "--role", "user", "--data-dir", str(svc.data_dir))
    assert offline.returncode == 0, offline.stderr
    again = serve("--workers", "0")
    assert again.session(offline.stdout.strip()).get(f"{again.url}/jobs").status_code == 200


def test_a_remote_worker_with_a_worker_token(serve, blobs, trainyard_bin, tmp_path):
    svc = serve("--workers", "0")
    worker_token = svc.token("gpu-box-1", "worker")
    worker = svc.session(worker_token)
    problem(worker.get(f"{svc.url}/jobs"), 403)
    # It may act only as the workers it registered.
    other = svc.http.post(f"{svc.url}/workers", json={
        "name": "admin-made", "devices": [{"index": 0, "name": "d", "type": "other"}]})
    assert other.status_code == 201
    r = worker.post(f"{svc.url}/workers/{other.json()['id']}/lease", params={"wait": 0})
    assert "registered with another token" in problem(r, 403)["detail"]

    job = submit(svc, job_doc(blobs, epochs=2)).json()
    proc = subprocess.Popen([str(trainyard_bin), "worker", "--server", svc.url, "--work-dir",
                             str(tmp_path / "work"), "--dataset-allow", "127.0.0.1",
                             "--max-jobs", "1"],
                            env=svc.env(TRAINYARD_TOKEN=worker_token), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        done = wait_for(svc, job["id"], TERMINAL, timeout=120)
        assert done["status"] == "succeeded", done
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_queued_jobs_per_token_are_capped(serve, blobs):
    svc = serve("--workers", "0", "--max-queued", "2")
    hank = svc.session(svc.token("hank", "user"))
    first = hank.post(f"{svc.url}/train", json=job_doc(blobs)).json()
    assert hank.post(f"{svc.url}/train", json=job_doc(blobs)).status_code == 202
    r = hank.post(f"{svc.url}/train", json=job_doc(blobs))
    assert "2 queued jobs" in problem(r, 429)["detail"]
    # Another token has its own allowance; a cancelled job frees a place.
    assert svc.http.post(f"{svc.url}/train", json=job_doc(blobs)).status_code == 202
    assert hank.post(f"{svc.url}/jobs/{first['id']}/cancel").status_code == 200
    assert hank.post(f"{svc.url}/train", json=job_doc(blobs)).status_code == 202
    assert len(hank.get(f"{svc.url}/jobs").json()["jobs"]) == 3


def test_an_unauthenticated_upload_is_refused_before_its_body(serve):
    svc = serve("--workers", "0")
    body = b"x" * (64 << 20)
    t0 = time.time()
    try:
        r = requests.put(f"{svc.url}/workers/w/jobs/j/artifacts/model.safetensors", data=body,
                         headers={"Content-Type": "application/octet-stream"}, timeout=30)
        assert r.status_code == 401
    except requests.ConnectionError:
        pass  # the server answered and closed before the client finished sending: refused
    assert time.time() - t0 < 20
    assert list((svc.data_dir / "tmp").iterdir()) == []
    assert svc.http.get(f"{svc.url}/healthz").json()["status"] == "ok"
