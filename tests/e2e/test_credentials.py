"""Credentials in a dataset URL (`http://user:password@host/...`) reach the dataset server and
nothing else: the job document, every API answer, the event stream, the logs, the artifacts
(job.json, train.log, the model's metadata), the files under the data directory (the SQLite
database and its WAL included), serve's own output, and `trainyard train`'s outputs show the
URL as `http://***@host/...`. The dataset server here demands HTTP Basic auth."""
import base64
import functools
import http.server
import json
import sqlite3
import subprocess
import threading

import pytest

from conftest import BIN, sanitizer_reports
from helpers import job_doc, submit, wait_for, write_blobs

USER, PASSWORD = "alice-u7", "pw-Zq8xK2vN-secret"


class BasicAuthHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the folder only to requests carrying USER:PASSWORD; counts the ones that did."""
    good = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        want = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != want:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="data"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.good.append(self.path)
        super().do_GET()


@pytest.fixture
def auth_server(tmp_path):
    folder = tmp_path / "private"
    folder.mkdir()
    write_blobs(folder)
    handler = functools.partial(type("H", (BasicAuthHandler,), {"good": []}),
                                directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    yield handler.func, f"127.0.0.1:{port}"
    server.shutdown()
    server.server_close()


def assert_no_secret(where, data):
    if isinstance(data, str):
        data = data.encode()
    assert PASSWORD.encode() not in data, f"the password shows in {where}"
    assert USER.encode() not in data, f"the user name shows in {where}"


def read_events(svc, jid):
    with svc.http.get(f"{svc.url}/jobs/{jid}/events", stream=True, timeout=10) as r:
        assert r.status_code == 200
        return r.raw.read()


def test_dataset_credentials_reach_the_fetch_and_nothing_else(serve, auth_server, tmp_path):
    handler, host = auth_server
    svc = serve()
    url = f"http://{USER}:{PASSWORD}@{host}/blobs.csv"
    shown = f"http://***@{host}/blobs.csv"
    doc = job_doc(url, epochs=2, name="private-data")

    first = submit(svc, doc, **{"Idempotency-Key": "cred-1"})
    assert first.status_code == 202
    assert first.json()["document"]["dataset_url"] == shown
    assert_no_secret("the submit answer", first.text)
    jid = first.json()["id"]
    again = submit(svc, doc, **{"Idempotency-Key": "cred-1"})  # a retry: the same job
    assert again.status_code == 200 and again.json()["id"] == jid

    job = wait_for(svc, jid, {"succeeded", "failed"})
    assert job["status"] == "succeeded", job
    assert handler.good == ["/blobs.csv"]  # fetched once, with the credentials

    answers = {
        "GET /jobs/{id}": svc.http.get(f"{svc.url}/jobs/{jid}").text,
        "GET /jobs": svc.http.get(f"{svc.url}/jobs").text,
        "GET /jobs?name=": svc.http.get(f"{svc.url}/jobs", params={"name": "private-data"}).text,
        "logs": svc.http.get(f"{svc.url}/jobs/{jid}/logs").text,
        "metrics": svc.http.get(f"{svc.url}/jobs/{jid}/metrics").text,
        "events": read_events(svc, jid),
        "GET /metrics": svc.http.get(f"{svc.url}/metrics").text,
        "GET /workers": svc.http.get(f"{svc.url}/workers").text,
    }
    listed = json.loads(answers["GET /jobs?name="])["jobs"]
    assert [j["id"] for j in listed] == [jid]
    assert listed[0]["document"]["dataset_url"] == shown
    for name in ("job.json", "train.log", "metrics.csv", "model.safetensors"):
        answers[name] = svc.http.get(f"{svc.url}/jobs/{jid}/artifacts/{name}").content
    assert json.loads(answers["job.json"])["dataset_url"] == shown
    for where, data in answers.items():
        assert_no_secret(where, data)

    # The secret was kept apart (sealed) while the job could still run, and is gone now.
    with sqlite3.connect(svc.db_path) as db:
        row = db.execute("SELECT document, dataset_credentials FROM jobs WHERE id = ?",
                         (jid,)).fetchone()
    assert json.loads(row[0])["dataset_url"] == shown and row[1] is None
    # Nothing under the data directory holds it: database, WAL, artifacts, checkpoints, the
    # local worker's work files.
    files = [p for p in svc.data_dir.rglob("*") if p.is_file()]
    assert any(p.name == "trainyard.db" for p in files)
    for p in files:
        assert_no_secret(str(p), p.read_bytes())
    assert_no_secret("serve's output", svc.output())

    # The document as shown cannot be submitted again as it is: its credentials are ***.
    resubmit = svc.http.post(f"{svc.url}/train", json=job["document"])
    assert resubmit.status_code == 400
    assert "dataset_url" in resubmit.text and "redacted" in resubmit.text

    # Wrong credentials fail the job with the server's 401, and the error does not quote them.
    bad = submit(svc, job_doc(f"http://{USER}:wrong-{PASSWORD}@{host}/blobs.csv")).json()
    failed = wait_for(svc, bad["id"], {"succeeded", "failed"})
    assert failed["status"] == "failed" and "401" in failed["error"], failed
    assert_no_secret("a failed job", svc.http.get(f"{svc.url}/jobs/{bad['id']}").text)
    with sqlite3.connect(svc.db_path) as db:
        assert db.execute("SELECT count(*) FROM jobs WHERE dataset_credentials IS NOT NULL"
                          ).fetchone()[0] == 0


def test_train_redacts_its_outputs(auth_server, tmp_path, trainyard_bin):
    handler, host = auth_server
    job = tmp_path / "job.json"
    job.write_text(json.dumps(job_doc(f"http://{USER}:{PASSWORD}@{host}/blobs.csv", epochs=2)))
    out = tmp_path / "out"
    proc = subprocess.run([str(BIN), "train", str(job), "--out", str(out)], capture_output=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert sanitizer_reports(proc.stderr.decode()) is None, proc.stderr.decode()
    assert handler.good == ["/blobs.csv"]
    assert_no_secret("train's output", proc.stdout + proc.stderr)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {"job.json", "train.log", "model.safetensors", "checkpoint.safetensors"} <= \
        {p.name for p in files}
    for p in files:
        assert_no_secret(str(p), p.read_bytes())
    assert json.loads((out / "job.json").read_text())["dataset_url"] == \
        f"http://***@{host}/blobs.csv"
