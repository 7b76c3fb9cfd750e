"""End-to-end tests of TLS: `serve --tls-cert/--tls-key`, local workers that trust exactly their
server's certificate, a remote `worker --ca`, and datasets behind a private CA (`--dataset-ca`).

Every certificate is made here with the openssl command: a private CA, a server certificate for
127.0.0.1 and localhost signed by it (served as a chain: leaf, then CA), and an unrelated key."""
import functools
import hashlib
import http.server
import shutil
import ssl
import subprocess
import threading

import pytest
import requests
from conftest import Handler
from helpers import TERMINAL, job_doc, submit, wait_for, write_blobs
from safetensors.numpy import load


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A private CA and a server certificate it signed; returns a dict of paths."""
    if not shutil.which("openssl"):
        pytest.skip("the openssl command is needed to make the test certificates")
    d = tmp_path_factory.mktemp("pki")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-days", "2", "-subj", "/CN=trainyard test CA",
            "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    openssl("req", *ec, "-subj", "/CN=localhost", "-keyout", "server.key", "-out", "server.csr",
            cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                               "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", "leaf.pem", cwd=d)
    (d / "chain.pem").write_text((d / "leaf.pem").read_text() + (d / "ca.pem").read_text())
    openssl("req", *ec, "-subj", "/CN=other", "-keyout", "other.key", "-out", "other.csr", cwd=d)
    return {name: d / f"{name}.pem" for name in ("ca", "leaf", "chain")} | {
        "key": d / "server.key", "other_key": d / "other.key"}


def tls_args(pki):
    return ("--tls-cert", str(pki["chain"]), "--tls-key", str(pki["key"]))


def serve_tls(serve, pki, *args, **kw):
    svc = serve(*tls_args(pki), *args, **kw)
    assert svc.url.startswith("https://127.0.0.1:")
    svc.http.verify = str(pki["ca"])
    # requests lets $REQUESTS_CA_BUNDLE override a session's verify; the CA must win here
    svc.http.trust_env = False
    return svc


@pytest.fixture(scope="module")
def https_blobs(pki, tmp_path_factory):
    """The blobs dataset served over HTTPS with the private CA's server certificate."""
    folder = tmp_path_factory.mktemp("served-tls")
    write_blobs(folder)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki["chain"], pki["key"])
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    server.daemon_threads = True
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{server.server_address[1]}/blobs.csv"
    server.shutdown()
    server.server_close()


def test_https_round_trip_with_local_workers(serve, pki, blobs):
    svc = serve_tls(serve, pki)
    # Local workers trust exactly the server's leaf, pinned alone from the chain.
    pinned = (svc.data_dir / "server-cert.pem").read_text()
    assert pinned.count("BEGIN CERTIFICATE") == 1
    assert pinned.strip() == pki["leaf"].read_text().strip()

    job = submit(svc, job_doc(blobs, epochs=3)).json()
    events = []

    def read_events():  # a stream parks and resumes over TLS like over plain HTTP
        with svc.http.get(f"{svc.url}/jobs/{job['id']}/events", stream=True, timeout=120) as r:
            for raw in r.iter_lines(decode_unicode=True):
                if raw.startswith("data:"):
                    events.append(raw)

    reader = threading.Thread(target=read_events)
    reader.start()
    done = wait_for(svc, job["id"], TERMINAL)
    reader.join(timeout=30)
    assert done["status"] == "succeeded", done
    assert any('"succeeded"' in e for e in events), events

    listing = svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts").json()["artifacts"]
    sha = {a["name"]: a["sha256"] for a in listing}["model.safetensors"]
    r = svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts/model.safetensors")
    assert r.status_code == 200 and hashlib.sha256(r.content).hexdigest() == sha
    assert load(r.content)["0.weight"].shape == (16, 2)
    # the host name in the certificate verifies as well as the address
    port = svc.url.rsplit(":", 1)[1]
    assert svc.http.get(f"https://localhost:{port}/healthz").json()["workers"] >= 1


def test_a_remote_worker_with_ca_runs_a_job(serve, pki, blobs, trainyard_bin, tmp_path):
    svc = serve_tls(serve, pki, "--workers", "0")
    job = submit(svc, job_doc(blobs, epochs=2)).json()
    worker = subprocess.run(
        [str(trainyard_bin), "worker", "--server", svc.url, "--ca", str(pki["ca"]),
         "--max-jobs", "1", "--dataset-allow", "127.0.0.1", "--work-dir", str(tmp_path / "w")],
        env=svc.env(), capture_output=True, text=True, timeout=120)
    assert worker.returncode == 0, worker.stderr
    assert wait_for(svc, job["id"], TERMINAL)["status"] == "succeeded"


def test_a_worker_without_ca_says_the_certificate_failed(serve, pki, trainyard_bin, tmp_path):
    svc = serve_tls(serve, pki, "--workers", "0")
    env = svc.env()
    env.pop("TRAINYARD_CA", None)
    worker = subprocess.run(
        [str(trainyard_bin), "worker", "--server", svc.url, "--work-dir", str(tmp_path / "w")],
        env=env, capture_output=True, text=True, timeout=60)
    assert worker.returncode != 0
    assert "certificate failed verification" in worker.stderr, worker.stderr
    assert "--ca FILE" in worker.stderr, worker.stderr
    # A --ca file that is not there is named before anything is dialled.
    worker = subprocess.run(
        [str(trainyard_bin), "worker", "--server", svc.url, "--ca", str(tmp_path / "nope.pem")],
        env=env, capture_output=True, text=True, timeout=60)
    assert worker.returncode == 2 and "nope.pem" in worker.stderr, worker.stderr


def test_plain_http_to_the_tls_port_fails(serve, pki):
    svc = serve_tls(serve, pki, "--workers", "0")
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(svc.url.replace("https://", "http://") + "/healthz", timeout=10)
    assert svc.http.get(f"{svc.url}/healthz").json()["status"] == "ok"


def test_serve_refuses_a_half_or_mismatched_tls_pair(trainyard_bin, pki, tmp_path):
    def run(*args):
        return subprocess.run([str(trainyard_bin), "serve", "--port", "0", "--workers", "0",
                               "--data-dir", str(tmp_path / "d"), *args],
                              capture_output=True, text=True, timeout=60)

    alone = run("--tls-cert", str(pki["chain"]))
    assert alone.returncode != 0 and "--tls-key" in alone.stderr, alone.stderr
    wrong = run("--tls-cert", str(pki["chain"]), "--tls-key", str(pki["other_key"]))
    assert wrong.returncode != 0, wrong.stdout
    assert "other.key" in wrong.stderr and "do not match" in wrong.stderr, wrong.stderr
    missing = run("--tls-cert", str(tmp_path / "gone.pem"), "--tls-key", str(pki["key"]))
    assert missing.returncode != 0 and "gone.pem" in missing.stderr, missing.stderr
    swapped = run("--tls-cert", str(pki["key"]), "--tls-key", str(pki["chain"]))
    assert swapped.returncode != 0 and "not a PEM file" in swapped.stderr, swapped.stderr


def test_a_dataset_behind_a_private_ca_needs_dataset_ca(serve, pki, https_blobs, train):
    refused = serve(name="no-ca")
    trusted = serve("--dataset-ca", str(pki["ca"]), name="ca")
    bad = submit(refused, job_doc(https_blobs, epochs=1)).json()
    good = submit(trusted, job_doc(https_blobs, epochs=1)).json()
    assert wait_for(trusted, good["id"], TERMINAL)["status"] == "succeeded"
    failed = wait_for(refused, bad["id"], TERMINAL)
    assert failed["status"] == "failed", failed
    assert "certificate failed verification" in failed["error"], failed
    assert "--dataset-ca" in failed["error"], failed

    proc, _ = train(job_doc(https_blobs, epochs=1), extra=("--dataset-ca", str(pki["ca"])))
    assert proc.returncode == 0, proc.stderr
