"""Webhooks end to end: a real serve POSTs to an HTTP receiver this test runs on loopback.

Checked: the events a notify entry asks for and no others; the X-Trainyard-* headers and the
HMAC-SHA256 signature over "<timestamp>.<body>" recomputed here with hmac; a receiver that
answers 500 twice and then 200 gets three attempts, spaced by the backoff, all recorded in
GET /jobs/{id}/deliveries; a URL the host rules refuse is a 400 at submit naming
notify[i].url; a token's own secret (set by the token itself, refused to another user) and
the server-wide one for a token without; a delivery still pending when serve stops is sent by
the next serve."""
import hashlib
import hmac
import http.server
import json
import subprocess
import threading
import time

import pytest
from helpers import job_doc, submit, until, wait_for


class Receiver:
    """An HTTP server on 127.0.0.1 that records every POST (path, headers, body, time) and
    answers each path with the next status of its script (then 200)."""

    def __init__(self):
        self.posts, self.scripts, self.lock = [], {}, threading.Lock()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with outer.lock:
                    outer.posts.append({"path": self.path, "headers": dict(self.headers),
                                        "body": body, "t": time.monotonic()})
                    script = outer.scripts.get(self.path, [])
                    status = script.pop(0) if script else 200
                if status == "hang":  # no answer for longer than serve's stop may take
                    time.sleep(15)
                    status = 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def at(self, path):
        with self.lock:
            return [p for p in self.posts if p["path"] == path]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def check_signature(post, secret):
    """The signature header is sha256=HMAC(secret, timestamp + "." + body), and the body's event
    matches X-Trainyard-Event."""
    h = post["headers"]
    ts = h["X-Trainyard-Timestamp"]
    assert abs(int(ts) - time.time()) < 120
    want = hmac.new(secret.encode(), ts.encode() + b"." + post["body"], hashlib.sha256)
    assert hmac.compare_digest(h["X-Trainyard-Signature"], "sha256=" + want.hexdigest())
    body = json.loads(post["body"])
    assert body["event"] == h["X-Trainyard-Event"]
    return body


def test_job_events_signed_and_retried(serve, blobs, receiver):
    svc = serve("--notify-backoff-ms", "300")
    user = svc.session(svc.token("alice", "user"))
    me = user.get(f"{svc.url}/jobs").status_code  # the user token works
    assert me == 200
    tokens = svc.http.get(f"{svc.url}/tokens").json()["tokens"]
    alice = next(t["id"] for t in tokens if t["name"] == "alice")
    # another user may not set alice's secret; alice may
    bob = svc.session(svc.token("bob", "user"))
    assert bob.post(f"{svc.url}/tokens/{alice}/webhook-secret").status_code == 404
    r = user.post(f"{svc.url}/tokens/{alice}/webhook-secret")
    assert r.status_code == 200, r.text
    secret = r.json()["secret"]
    assert secret.startswith("whsec_") and r.json()["token_id"] == alice

    receiver.scripts["/flaky"] = [500, 500]
    job = job_doc(blobs, epochs=2, notify=[
        {"url": receiver.url + "/ok", "events": ["running", "succeeded"]},
        {"url": receiver.url + "/flaky", "events": ["succeeded"]},
        {"url": receiver.url + "/never", "events": ["failed", "cancelled"]},
    ])
    r = user.post(f"{svc.url}/train", json=job)
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    wait_for(svc, job_id, {"succeeded"})

    until(lambda: len(receiver.at("/flaky")) >= 3 and len(receiver.at("/ok")) >= 2, 20,
          "the webhooks")
    ok = receiver.at("/ok")
    events = [check_signature(p, secret)["event"] for p in ok]
    assert events == ["job.running", "job.succeeded"], events
    done = json.loads(ok[1]["body"])
    assert done["job"]["id"] == job_id and done["job"]["status"] == "succeeded"
    assert done["job"]["metrics"]["epoch"] == 2 and "loss" in done["job"]["metrics"]
    assert done["job"]["links"]["job"] == f"{svc.url}/jobs/{job_id}"
    assert ok[1]["headers"]["Content-Type"] == "application/json"

    flaky = receiver.at("/flaky")
    assert len(flaky) == 3
    ids = {p["headers"]["X-Trainyard-Delivery"] for p in flaky}
    assert len(ids) == 1  # one delivery, three attempts
    for p in flaky:
        check_signature(p, secret)
    gaps = [b["t"] - a["t"] for a, b in zip(flaky, flaky[1:])]
    assert gaps[0] >= 0.28 and gaps[1] >= 0.58, gaps  # 300 ms, then 600 ms
    time.sleep(0.5)
    assert receiver.at("/never") == []

    # an attempt is recorded once its answer is in: the receiver may have it a moment earlier
    def all_delivered():
        r = user.get(f"{svc.url}/jobs/{job_id}/deliveries")
        assert r.status_code == 200, r.text
        got = r.json()["deliveries"]
        return got if all(d["status"] == "delivered" for d in got) else None
    ds = until(all_delivered, 10, "every delivery recorded as delivered")
    assert [(d["event"], d["url"].rsplit("/", 1)[1]) for d in ds] == [
        ("job.running", "ok"), ("job.succeeded", "ok"), ("job.succeeded", "flaky")]
    f = ds[2]
    assert str(f["id"]) == ids.pop()
    assert [a["http_status"] for a in f["attempts"]] == [500, 500, 200]
    assert [a["attempt"] for a in f["attempts"]] == [1, 2, 3]
    assert all(a["error"] is None and a["ms"] >= 0 for a in f["attempts"])
    assert f["finished_at"] and f["next_at"] is None
    assert bob.get(f"{svc.url}/jobs/{job_id}/deliveries").status_code == 404


def test_disallowed_urls_refused_at_submit(serve, blobs):
    svc = serve("--workers", "0")
    cases = ["http://10.1.2.3/hook", "http://localhost:9/hook", "http://[::1]:9/hook",
             "http://hooks.example.com/x"]  # the last: not in --dataset-allow 127.0.0.1
    for url in cases:
        job = job_doc(blobs, notify=[{"url": "http://127.0.0.1:9/fine"}, {"url": url}])
        r = svc.http.post(f"{svc.url}/train", json=job)
        assert r.status_code == 400, (url, r.text)
        fields = [e["field"] for e in r.json()["errors"]]
        assert fields == ["notify[1].url"], (url, r.json())


def test_private_address_refused_without_allow(serve, blobs):
    svc = serve("--workers", "0", allow_loopback=False)
    r = svc.http.post(f"{svc.url}/train",
                      json=job_doc(blobs, notify=[{"url": "http://127.0.0.1:9/x"}]))
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "notify[0].url", r.text
    r = svc.http.post(f"{svc.url}/train",
                      json=job_doc(blobs, notify=[{"url": "https://hooks.example.com/x"}]))
    assert r.status_code == 202, r.text


def test_server_secret_and_restart(serve, blobs, receiver, trainyard_bin):
    """A job of a token without a secret is signed with the data directory's; a delivery still
    failing when serve stops is sent by the next serve."""
    svc = serve("--workers", "0", "--notify-backoff-ms", "200", "--notify-attempts", "20")
    receiver.scripts["/down"] = [503] * 1000
    job = job_doc(blobs, notify=[{"url": receiver.url + "/down", "events": ["cancelled"]}])
    job_id = submit(svc, job).json()["id"]
    assert svc.http.post(f"{svc.url}/jobs/{job_id}/cancel").status_code == 200
    until(lambda: len(receiver.at("/down")) >= 2, 10, "two failed attempts")
    svc.proc.terminate()  # a clean stop; the pending row waits in the database
    svc.proc.wait(timeout=30)
    n_before = len(receiver.at("/down"))
    receiver.scripts["/down"] = []  # up again
    svc.restart()
    until(lambda: len(receiver.at("/down")) > n_before, 10, "the delivery after the restart")

    out = subprocess.run([str(trainyard_bin), "token", "webhook-secret", "--server-wide",
                          "--data-dir", str(svc.data_dir)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    secret = out.stdout.strip()
    assert secret == (svc.data_dir / "webhook.secret").read_text().strip()
    posts = receiver.at("/down")
    body = check_signature(posts[-1], secret)
    assert body["event"] == "job.cancelled" and body["job"]["status"] == "cancelled"
    ds = until(lambda: [d for d in svc.http.get(f"{svc.url}/jobs/{job_id}/deliveries")
                        .json()["deliveries"] if d["status"] == "delivered"], 10, "delivered")
    statuses = [a["http_status"] for a in ds[0]["attempts"]]
    assert statuses[-1] == 200 and set(statuses[:-1]) == {503}, statuses
    assert len(statuses) == len(posts)

    # the CLI sets a token's secret through the server, shown once on stdout
    tokens = svc.http.get(f"{svc.url}/tokens").json()["tokens"]
    admin = next(t["id"] for t in tokens if t["role"] == "admin")
    out = subprocess.run([str(trainyard_bin), "token", "webhook-secret", admin],
                         capture_output=True, text=True, env=svc.env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("whsec_") and out.stdout.strip() != secret


def test_stop_does_not_wait_for_a_hanging_receiver(serve, blobs, receiver):
    """serve's stop cuts an attempt in flight short and does not record it; the next serve
    delivers."""
    svc = serve("--workers", "0")
    receiver.scripts["/hang"] = ["hang"]
    job = job_doc(blobs, notify=[{"url": receiver.url + "/hang", "events": ["cancelled"]}])
    job_id = submit(svc, job).json()["id"]
    assert svc.http.post(f"{svc.url}/jobs/{job_id}/cancel").status_code == 200
    until(lambda: receiver.at("/hang"), 10, "the first attempt")
    t = time.monotonic()
    svc.proc.terminate()
    svc.proc.wait(timeout=30)
    assert time.monotonic() - t < 5
    svc.restart()
    ds = until(lambda: [d for d in svc.http.get(f"{svc.url}/jobs/{job_id}/deliveries")
                        .json()["deliveries"] if d["status"] == "delivered"], 10, "delivered")
    assert [a["http_status"] for a in ds[0]["attempts"]] == [200]
    assert len(receiver.at("/hang")) == 2
