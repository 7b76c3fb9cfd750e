"""`trainyard download` of an artifact of several megabytes: whole, resumed from a correct
partial file, from a partial file whose bytes are wrong or too many, and through a server that
ignores Range (it answers 200 with everything). The artifact is a real model: a job with two
dense layers of 1,024 units writes a model.safetensors of about 4 MB, hundreds of the client's
16 KiB chunks. Each result is compared, byte for byte and by SHA-256, with what curl gets and
with the artifact listing."""
import hashlib
import http.server
import json
import shutil
import subprocess
import threading

import pytest
import requests

from helpers import job_doc, submit, wait_for
from test_cli import cli


@pytest.fixture
def wide_model(serve, blobs):
    """A service, the id of a finished job whose model is several MB, and the model's bytes as
    curl downloads them."""
    svc = serve()
    doc = job_doc(blobs, epochs=1,
                  model={"layers": [{"type": "dense", "units": 1024, "activation": "relu"},
                                    {"type": "dense", "units": 1024, "activation": "relu"}]})
    jid = submit(svc, doc).json()["id"]
    assert wait_for(svc, jid, {"succeeded", "failed"}, timeout=300)["status"] == "succeeded"
    url = f"{svc.url}/jobs/{jid}/artifacts/model.safetensors"
    if shutil.which("curl"):
        model = subprocess.run(["curl", "-sSf", "-H", f"Authorization: Bearer {svc.admin_token}",
                                url], capture_output=True, check=True, timeout=60).stdout
    else:
        model = svc.http.get(url).content
    assert len(model) > 3 << 20, len(model)
    listing = svc.http.get(f"{svc.url}/jobs/{jid}/artifacts").json()["artifacts"]
    entry = next(a for a in listing if a["name"] == "model.safetensors")
    assert entry["size"] == len(model)
    assert entry["sha256"] == hashlib.sha256(model).hexdigest()
    return svc, jid, model


def download(svc, jid, target, env=None):
    run = cli(svc, "download", jid, "model.safetensors", "-o", str(target), "--json", env=env)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout), run.stderr


def test_whole_and_resumed_downloads_of_a_multi_megabyte_model(wide_model, tmp_path):
    svc, jid, model = wide_model
    sha = hashlib.sha256(model).hexdigest()
    target = tmp_path / "model.safetensors"
    part = tmp_path / "model.safetensors.part"

    got, _ = download(svc, jid, target)
    assert target.read_bytes() == model and not part.exists()
    assert got["sha256"] == sha and got["size"] == len(model) and got["resumed_from"] == 0

    # A partial file holding the first third of the real bytes: only the rest is fetched.
    third = len(model) // 3
    part.write_bytes(model[:third])
    got, _ = download(svc, jid, target)
    assert got["resumed_from"] == third and got["sha256"] == sha
    assert target.read_bytes() == model and not part.exists()

    # A partial file of the right length but wrong bytes: the resumed result cannot match, so
    # the artifact is fetched whole instead of producing a corrupt file.
    wrong = bytearray(model[:third])
    wrong[100:200] = bytes(100)
    part.write_bytes(bytes(wrong))
    target.unlink()
    got, err = download(svc, jid, target)
    assert "downloading it whole" in err
    assert got["resumed_from"] == 0 and got["sha256"] == sha
    assert target.read_bytes() == model and not part.exists()

    # A partial file longer than the artifact cannot be its start either.
    part.write_bytes(model + b"more")
    got, _ = download(svc, jid, target)
    assert target.read_bytes() == model and got["resumed_from"] == 0


class RangeBlindProxy(http.server.BaseHTTPRequestHandler):
    """Forwards GETs to the service but drops Range, so every answer is a 200 with the whole
    body, as from a server or proxy that does not do ranges."""
    upstream = None

    def log_message(self, *args):
        pass

    def do_GET(self):
        headers = {"Authorization": self.headers.get("Authorization", "")}
        with requests.get(self.upstream + self.path, headers=headers, stream=True) as r:
            self.send_response(r.status_code)
            for name in ("Content-Type", "Content-Length", "ETag"):
                if name in r.headers:
                    self.send_header(name, r.headers[name])
            self.end_headers()
            for piece in r.iter_content(1 << 15):
                self.wfile.write(piece)


def test_resume_through_a_server_that_ignores_range(wide_model, tmp_path):
    svc, jid, model = wide_model
    handler = type("Proxy", (RangeBlindProxy,), {"upstream": svc.url})
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        env = svc.env(TRAINYARD_URL=f"http://127.0.0.1:{proxy.server_address[1]}")
        target = tmp_path / "model.safetensors"
        part = tmp_path / "model.safetensors.part"
        part.write_bytes(model[:len(model) // 2])
        got, _ = download(svc, jid, target, env=env)
        # The 200 starts the file over once, at its first byte, not at every chunk.
        assert target.read_bytes() == model and not part.exists()
        assert got["sha256"] == hashlib.sha256(model).hexdigest() and got["resumed_from"] == 0
    finally:
        proxy.shutdown()
        proxy.server_close()
