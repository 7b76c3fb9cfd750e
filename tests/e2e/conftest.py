"""Shared fixtures of the end-to-end tests: the trainyard binary, a local HTTP server that serves
the datasets each test writes, and a helper that runs `trainyard train` on a job.

The binary is $TRAINYARD_BIN, else build/trainyard. Compiled kernels are cached in
$TRAINYARD_KERNEL_CACHE (set here to a folder under the build tree when unset) so that only the
first run of a session compiles them. Fetched datasets are cached in $TRAINYARD_DATASET_CACHE,
which each test gets empty (the `dataset_cache` fixture), so that no test sees another's and
none writes into the user's own cache; the same goes for script jobs' code bundles and venvs in
$TRAINYARD_SCRIPT_CACHE (the `script_cache` fixture).
"""
import functools
import http.server
import json
import os
import pathlib
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import pytest
import requests
from helpers import write_blobs

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("TRAINYARD_BIN", ROOT / "build" / "trainyard")).resolve()


def opencl_device_count():
    out = subprocess.run([str(BIN), "devices", "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        return 0
    return len(json.loads(out.stdout)["devices"])


def pytest_configure(config):
    os.environ.setdefault("TRAINYARD_KERNEL_CACHE", str(BIN.parent / "kernel-cache"))
    # for processes that fixtures wider than a test start; each test gets its own (below)
    config.dataset_cache_root = tempfile.mkdtemp(prefix="trainyard-e2e-datasets-")
    os.environ["TRAINYARD_DATASET_CACHE"] = config.dataset_cache_root
    config.script_cache_root = tempfile.mkdtemp(prefix="trainyard-e2e-scripts-")
    os.environ["TRAINYARD_SCRIPT_CACHE"] = config.script_cache_root


def pytest_unconfigure(config):
    shutil.rmtree(getattr(config, "dataset_cache_root", ""), ignore_errors=True)
    shutil.rmtree(getattr(config, "script_cache_root", ""), ignore_errors=True)


@pytest.fixture(autouse=True)
def dataset_cache(tmp_path, monkeypatch):
    """An empty dataset cache folder of this test's own, in TRAINYARD_DATASET_CACHE, which
    train, worker and serve's local workers read when no --dataset-cache is given."""
    path = tmp_path / "dataset-cache"
    monkeypatch.setenv("TRAINYARD_DATASET_CACHE", str(path))
    return path


@pytest.fixture(autouse=True)
def script_cache(tmp_path, monkeypatch):
    """An empty cache of script code bundles and venvs of this test's own, in
    TRAINYARD_SCRIPT_CACHE, which worker and serve's local workers read when no --script-cache
    is given: every script job of a test fetches its code anew, and none lands in ~/.cache."""
    path = tmp_path / "script-cache"
    monkeypatch.setenv("TRAINYARD_SCRIPT_CACHE", str(path))
    return path


@pytest.fixture(scope="session")
def trainyard_bin():
    if not BIN.exists():
        pytest.fail(f"{BIN} does not exist: build first (meson setup build && ninja -C build)")
    if opencl_device_count() == 0:
        pytest.skip("no OpenCL device: install pocl-opencl-icd to run the training tests")
    return BIN


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def data_server(tmp_path_factory):
    """Serves files from a folder over HTTP on a free loopback port; yields (folder, base URL)."""
    folder = tmp_path_factory.mktemp("served")
    handler = functools.partial(Handler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def train(trainyard_bin, tmp_path):
    """Runs `trainyard train` on a job dict; returns (CompletedProcess, output folder)."""

    def run(job, out_name="out", extra=(), cwd=None):
        job_path = tmp_path / f"{out_name}.json"
        job_path.write_text(json.dumps(job))
        out = tmp_path / out_name
        proc = subprocess.run([str(trainyard_bin), "train", str(job_path), "--out", str(out),
                               *extra], capture_output=True, text=True, timeout=600,
                              cwd=cwd or tmp_path)
        return proc, out

    return run


@pytest.fixture(scope="session")
def blobs(data_server):
    """The URL of a small three-class dataset (helpers.write_blobs) served over HTTP."""
    folder, base = data_server
    write_blobs(folder)
    return f"{base}/blobs.csv"


@pytest.fixture
def digits(data_server):
    """A digits-like CSV (examples/scripts/keras-mlp/make_digits.py: 64 features, 10 classes)
    served over HTTP; its URL."""
    root, base = data_server
    subprocess.run([sys.executable, str(ROOT / "examples/scripts/keras-mlp/make_digits.py"),
                    str(root / "digits.csv"), "3000"], check=True, capture_output=True)
    return f"{base}/digits.csv"


class FaultyHandler(Handler):
    """Serves files, plus /stall (sends headers and a few bytes, then nothing), /garbage
    (random bytes), /reset (half the promised body, then a TCP reset) and /truncate (half the
    promised body, then an orderly close) for the dataset-failure tests."""

    def do_GET(self):
        if self.path.startswith("/reset") or self.path.startswith("/truncate"):
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(b"a,b,y\n" + b"1.0,2.0,0\n" * 5000)
            self.wfile.flush()
            if self.path.startswith("/reset"):
                # SO_LINGER with a zero timeout: close() sends RST instead of FIN.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if self.path.startswith("/stall"):
            self.send_response(200)
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self.wfile.write(b"a,b,y\n")
            self.wfile.flush()
            try:
                threading.Event().wait(60)
            except Exception:
                pass
            return
        if self.path.startswith("/garbage"):
            body = bytes((i * 7919 + 13) % 256 for i in range(5000))
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()


@pytest.fixture(scope="session")
def faulty_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("faulty")
    handler = functools.partial(FaultyHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class Service:
    """A running `trainyard serve` on a free loopback port, its output kept in a log file.

    Tests talk to it through `http`, a requests session that carries the credentials the
    service expects; processes a test starts against it (workers, the CLI) take `env()`."""

    def __init__(self, binary, data_dir, args, preexec_fn=None):
        self.binary, self.data_dir, self.args = binary, data_dir, tuple(args)
        self.preexec_fn = preexec_fn
        self.http = requests.Session()
        self.log_path = data_dir.parent / (data_dir.name + ".log")
        self.log = open(self.log_path, "w")
        self.url = None
        self._start("0")

    @property
    def db_path(self):
        return self.data_dir / "trainyard.db"

    def _start(self, port):
        start = self.log_path.stat().st_size
        self.proc = subprocess.Popen([str(self.binary), "serve", "--data-dir", str(self.data_dir),
                                      *self.args, "--port", port], stdout=self.log,
                                     stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=self.preexec_fn)
        deadline = time.time() + 60
        while time.time() < deadline:
            text = self.log_path.read_text()[start:]
            m = re.search(r"listening on (https?://127\.0\.0\.1:\d+)", text)
            if m:
                self.url = m.group(1)
                self.admin_token = (self.data_dir / "admin.token").read_text().strip()
                self.http.headers["Authorization"] = f"Bearer {self.admin_token}"
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        raise RuntimeError("serve did not start:\n" + self.log_path.read_text()[start:])

    def restart(self):
        """Starts serve again on the same data directory and port (the old process must have
        ended: a test kills or stops it first); the url stays the same."""
        assert self.proc.poll() is not None, "stop or kill the running serve first"
        port = self.url.rsplit(":", 1)[1]
        deadline = time.time() + 30
        while True:  # a port in TIME_WAIT or still held by a dying child is retried a while
            try:
                self._start(port)
                return
            except RuntimeError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)

    def output(self):
        return self.log_path.read_text()

    def env(self, **extra):
        """The environment for a process that talks to this service, with the admin token."""
        return {**os.environ, "TRAINYARD_URL": self.url, "TRAINYARD_TOKEN": self.admin_token,
                **extra}

    def token(self, name, role):
        """A new token of role, made through the API; returns its secret."""
        r = self.http.post(f"{self.url}/tokens", json={"name": name, "role": role})
        assert r.status_code == 201, r.text
        return r.json()["token"]

    def session(self, token):
        """A requests session that sends token."""
        s = requests.Session()
        s.headers["Authorization"] = f"Bearer {token}"
        return s

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()
            self.final_output = self.log_path.read_text()


SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def sanitizer_reports(text):
    """The first sanitizer report in a process's output, or None (an ASan/UBSan build prints
    them; the process may still have exited 0 or been stopped before it could)."""
    for mark in SANITIZER_MARKS:
        at = text.find(mark)
        if at >= 0:
            return text[max(0, at - 200):at + 3000]
    return None


@pytest.fixture
def serve(trainyard_bin, tmp_path):
    """Starts `trainyard serve` with extra arguments; every service is stopped at teardown.

    The datasets of these tests are on 127.0.0.1, which serve refuses by default (a private
    address); allow_loopback=True passes --dataset-allow 127.0.0.1 for them. preexec_fn runs in
    the serve process before it starts (e.g. to set a resource limit). A job queued again after
    a lost attempt is leased again at once (--retry-backoff-seconds 0) unless a test gives its
    own back-off (a later flag wins), so the tests of lost workers do not wait 5 s per loss."""
    started = []

    def start(*args, name="data", allow_loopback=True, preexec_fn=None):
        args = ("--retry-backoff-seconds", "0", *args)
        if allow_loopback:
            args = ("--dataset-allow", "127.0.0.1", *args)
        svc = Service(trainyard_bin, tmp_path / name, args, preexec_fn=preexec_fn)
        started.append(svc)
        return svc

    yield start
    for svc in started:
        svc.stop()
    for svc in started:
        report = sanitizer_reports(svc.final_output)
        assert report is None, f"serve or a local worker reported:\n{report}"
