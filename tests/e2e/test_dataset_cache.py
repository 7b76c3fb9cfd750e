"""End-to-end tests of the worker's dataset cache (data/dscache.h): a local HTTP server that
counts its requests serves CSV datasets with an ETag (answering If-None-Match with 304), or with
no validator at all; `trainyard train` runs twice on one URL, serve's local worker runs two
jobs on one dataset, and a job whose worker is killed resumes as attempt 2 on the restarted
worker. Each test has an empty cache of its own (conftest's `dataset_cache`)."""
import hashlib
import http.server
import os
import re
import signal
import threading

import pytest

from helpers import TERMINAL, checkpoint_epoch, job_doc, submit, until, wait_for, write_blobs


class CountingHandler(http.server.BaseHTTPRequestHandler):
    """Serves the files of `folder`: under /etag/ with ETag "<sha256 of the bytes>" and a 304
    to a matching If-None-Match, under /plain/ with no validator. Every GET is recorded in
    `seen` as (path, the If-None-Match sent or None, the status answered)."""

    folder = None
    seen = None

    def log_message(self, *args):
        pass

    def do_GET(self):
        kind, _, name = self.path.lstrip("/").partition("/")
        path = os.path.join(self.folder, name)
        if kind not in ("etag", "plain") or "/" in name or not os.path.isfile(path):
            self.seen.append((self.path, None, 404))
            self.send_error(404)
            return
        with open(path, "rb") as f:
            body = f.read()
        tag = '"%s"' % hashlib.sha256(body).hexdigest()
        sent = self.headers.get("If-None-Match")
        if kind == "etag" and sent == tag:
            self.seen.append((self.path, sent, 304))
            self.send_response(304)
            self.send_header("ETag", tag)
            self.end_headers()
            return
        self.seen.append((self.path, sent, 200))
        self.send_response(200)
        if kind == "etag":
            self.send_header("ETag", tag)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def counting_server(tmp_path):
    """(folder, base URL, seen): the server above on a free loopback port."""
    folder = tmp_path / "served"
    folder.mkdir()
    seen = []
    handler = type("Handler", (CountingHandler,), {"folder": str(folder), "seen": seen})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}", seen
    server.shutdown()
    server.server_close()


def cache_entries(folder):
    return sorted(p.name for p in folder.glob("*.data")) if folder.exists() else []


def test_train_twice_revalidates_with_the_etag_and_fetches_nothing(train, counting_server,
                                                                   dataset_cache):
    folder, base, seen = counting_server
    write_blobs(folder)
    job = job_doc(f"{base}/etag/blobs.csv", epochs=1)
    first, _ = train(job, "first")
    assert first.returncode == 0, first.stderr
    assert "bytes fetched" in first.stdout and "dataset from cache" not in first.stdout
    assert len(cache_entries(dataset_cache)) == 1

    second, out = train(job, "second")
    assert second.returncode == 0, second.stderr
    line = next(x for x in second.stdout.splitlines() if x.startswith("dataset from cache"))
    digest = hashlib.sha256((folder / "blobs.csv").read_bytes()).hexdigest()
    assert f"sha256 {digest}" in line and "304" in line, line
    assert "bytes fetched" not in second.stdout
    assert "dataset from cache" in (out / "train.log").read_text()
    # one full GET, then one conditional GET answered 304: the bytes came over once
    assert [(s[1] is not None, s[2]) for s in seen] == [(False, 200), (True, 304)], seen

    # the dataset changes: its ETag does, the conditional GET gets a 200 and the entry is
    # replaced
    write_blobs(folder, rows=700, seed=4)
    third, _ = train(job, "third")
    assert third.returncode == 0, third.stderr
    assert "dataset from cache" not in third.stdout and "bytes fetched" in third.stdout
    assert "dataset: 700 rows" in third.stdout, third.stdout  # the new bytes
    assert seen[-1][1] is not None and seen[-1][2] == 200, seen
    fourth, _ = train(job, "fourth")
    assert "dataset from cache" in fourth.stdout, fourth.stdout
    assert len(cache_entries(dataset_cache)) == 1


def test_a_job_with_sha256_hits_without_a_request(train, counting_server, tmp_path):
    folder, base, seen = counting_server
    write_blobs(folder)
    digest = hashlib.sha256((folder / "blobs.csv").read_bytes()).hexdigest()
    # a server without validators: the job's sha256 alone makes it cacheable
    job = job_doc(f"{base}/plain/blobs.csv", epochs=1, dataset={"sha256": digest})
    cache = tmp_path / "given-cache"
    flags = ("--dataset-cache", str(cache))
    first, _ = train(job, "first", extra=flags)
    assert first.returncode == 0, first.stderr
    second, _ = train(job, "second", extra=flags)
    assert second.returncode == 0, second.stderr
    assert f"dataset from cache ({(folder / 'blobs.csv').stat().st_size} bytes, sha256 " \
        f"{digest})" in second.stdout, second.stdout
    assert len(seen) == 1, seen  # the second run sent nothing
    assert len(cache_entries(cache)) == 1

    # the cached bytes still pass the size limit, and a corrupt entry is refetched
    small, _ = train(job, "small", extra=(*flags, "--max-dataset-bytes", "1K"))
    assert small.returncode == 1 and "larger than the limit of 1024 bytes" in small.stderr
    data = cache / cache_entries(cache)[0]
    data.write_bytes(data.read_bytes()[:-10])
    again, _ = train(job, "again", extra=flags)
    assert again.returncode == 0, again.stderr
    assert "cached copy was unusable" in again.stdout and "bytes fetched" in again.stdout
    assert len(seen) == 2, seen


def test_what_is_not_cached(train, counting_server, tmp_path, dataset_cache):
    folder, base, seen = counting_server
    write_blobs(folder)
    # no validator and no sha256: fetched each time, and the log says why
    job = job_doc(f"{base}/plain/blobs.csv", epochs=1)
    for name in ("a", "b"):
        proc, _ = train(job, name)
        assert proc.returncode == 0, proc.stderr
        assert "dataset cache: not cached: the server sent neither ETag nor Last-Modified" \
            in proc.stdout, proc.stdout
        assert "dataset from cache" not in proc.stdout
    assert [s[2] for s in seen] == [200, 200]
    assert cache_entries(dataset_cache) == []

    # over the cap: not cached; with --dataset-cache none: no cache at all
    job = job_doc(f"{base}/etag/blobs.csv", epochs=1)
    proc, _ = train(job, "capped", extra=("--dataset-cache-bytes", "1K"))
    assert proc.returncode == 0, proc.stderr
    assert "not cached:" in proc.stdout and "cap of 1024" in proc.stdout, proc.stdout
    for name in ("off1", "off2"):
        proc, _ = train(job, name, extra=("--dataset-cache", "none"))
        assert proc.returncode == 0 and "dataset from cache" not in proc.stdout
    assert [s[1] for s in seen[-3:]] == [None, None, None]  # nothing to revalidate with
    assert cache_entries(dataset_cache) == []

    # file:// is read in place
    (tmp_path / "local.csv").write_bytes((folder / "blobs.csv").read_bytes())
    job = job_doc((tmp_path / "local.csv").as_uri(), epochs=1)
    for name in ("f1", "f2"):
        proc, _ = train(job, name)
        assert proc.returncode == 0 and "dataset from cache" not in proc.stdout
    assert cache_entries(dataset_cache) == []


def test_a_second_job_on_the_same_dataset_hits_the_cache(serve, counting_server, tmp_path):
    """serve passes --dataset-cache on to its local worker."""
    folder, base, seen = counting_server
    write_blobs(folder)
    cache = tmp_path / "serve-cache"
    svc = serve("--workers", "1", "--dataset-cache", str(cache))
    url = f"{base}/etag/blobs.csv"
    logs = []
    for _ in range(2):
        job = submit(svc, job_doc(url, epochs=2)).json()
        assert wait_for(svc, job["id"], TERMINAL)["status"] == "succeeded"
        logs.append(svc.http.get(f"{svc.url}/jobs/{job['id']}/logs").text)
    assert "dataset from cache" not in logs[0] and "bytes fetched" in logs[0]
    assert "dataset from cache" in logs[1] and "bytes fetched" not in logs[1], logs[1]
    assert [(s[1] is not None, s[2]) for s in seen] == [(False, 200), (True, 304)], seen
    assert len(cache_entries(cache)) == 1


def test_a_requeued_attempt_reads_its_dataset_from_the_cache(serve, counting_server):
    """kill -9 of the local worker mid-job: attempt 2, on the restarted worker (a new
    process), takes the dataset from the cache that attempt 1 filled."""
    folder, base, seen = counting_server
    write_blobs(folder, "slow.csv", rows=20000, seed=11)
    digest = hashlib.sha256((folder / "slow.csv").read_bytes()).hexdigest()
    svc = serve("--workers", "1", "--checkpoint-seconds", "0")
    doc = job_doc(f"{base}/plain/slow.csv", epochs=6, dataset={"sha256": digest})
    doc["hyperparameters"]["batch_size"] = 4
    job = submit(svc, doc).json()
    # an epoch's metrics reach the server a moment before its checkpoint: wait for the
    # checkpoint itself, or attempt 2 may rightly start from scratch (it did, 1 CI run in 3)
    until(lambda: checkpoint_epoch(svc, job["id"]) >= 1, 120, "a checkpoint on the server")
    pid = int(re.findall(r"local worker 0 started \(pid (\d+)", svc.output())[-1])
    os.kill(pid, signal.SIGKILL)

    done = wait_for(svc, job["id"], TERMINAL, timeout=240)
    assert done["status"] == "succeeded" and done["attempt"] == 2, done
    log = svc.http.get(f"{svc.url}/jobs/{job['id']}/logs").text
    first, _, second = log.partition("attempt 2 resumes after epoch")
    assert second, log
    assert "bytes fetched" in first and "dataset from cache" not in first
    assert "dataset from cache (" in second and digest in second, second
    assert "bytes fetched" not in second
    assert len(seen) == 1, seen  # attempt 2 sent no request
