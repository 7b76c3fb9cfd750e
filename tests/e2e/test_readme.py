"""The README's quick start, executed: the block marked `readme-test: serve` starts the service
(with `--port 0 --data-dir …` appended so the test owns its port and data), and the block marked
`readme-test: submit` runs as written in bash, with only 127.0.0.1:8080 replaced by the port the
service took. The lines cannot rot without this test failing."""
import os
import pathlib
import re
import subprocess
import time

import pytest
from safetensors.numpy import load_file

ROOT = pathlib.Path(__file__).resolve().parents[2]


def block(tag):
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- readme-test: {tag} -->\s*```sh\n(.*?)```", text, re.S)
    assert m, f"README.md has no block marked readme-test: {tag}"
    return m.group(1)


@pytest.fixture
def readme_service(trainyard_bin, tmp_path):
    if pathlib.Path(trainyard_bin).resolve() != (ROOT / "build" / "trainyard").resolve():
        pytest.skip("the README's commands use build/; this run tests another build")
    command = block("serve").strip()
    log = open(tmp_path / "serve.log", "w")
    proc = subprocess.Popen(f"{command} --port 0 --data-dir {tmp_path / 'data'}", shell=True,
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = None
    for _ in range(1200):
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", (tmp_path / "serve.log").read_text())
        if m:
            url = m.group(1)
            break
        assert proc.poll() is None, (tmp_path / "serve.log").read_text()
        time.sleep(0.1)
    assert url, (tmp_path / "serve.log").read_text()
    yield url, tmp_path / "data"
    os.killpg(proc.pid, 15)
    proc.wait(timeout=30)
    log.close()


def test_readme_quick_start(readme_service, tmp_path):
    url, data_dir = readme_service
    script = block("submit").replace("http://127.0.0.1:8080", url)
    script = script.replace("trainyard-data/admin.token", str(data_dir / "admin.token"))
    # Run where the README says, the repository root; the download is moved out right after
    # (and /model.safetensors is git-ignored should a run be cut short).
    download = ROOT / "model.safetensors"
    try:
        proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
    finally:
        if download.exists():
            download.rename(tmp_path / "model.safetensors")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '"epochs":[{"epoch":1' in proc.stdout, proc.stdout
    got = (tmp_path / "model.safetensors").read_bytes()
    assert not got.startswith(b"{"), got.decode(errors="replace")  # a problem+json, not a model
    model = load_file(str(tmp_path / "model.safetensors"))
    assert model["0.weight"].shape == (64, 2)
