"""docs/API.md runs: its blocks marked doc-test, in order, as one bash script against a fresh
server (no local workers: the guide plays the worker by hand), and together they call every
operation of openapi.yaml. The answers are checked where the guide says what they are."""
import pathlib
import re
import subprocess

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "API.md"


def guide_script():
    text = GUIDE.read_text()
    blocks = re.findall(r"<!-- doc-test -->\s*```sh\n(.*?)```", text, re.S)
    assert blocks, "docs/API.md has no doc-test blocks"
    return "".join(blocks)


def curl_calls(script):
    """(method, path) of every curl command in the script."""
    joined = script.replace("\\\n", " ")
    calls = []
    for line in joined.splitlines():
        for cmd in re.findall(r"curl\b[^|;)]*", line):
            url = re.search(r"\$TRAINYARD_URL(/[^\s\"'?]*)", cmd)
            if not url:
                continue
            method = re.search(r"-X\s+([A-Z]+)", cmd)
            calls.append((method.group(1) if method else "GET", url.group(1)))
    return calls


def operations():
    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    for path, item in spec["paths"].items():
        for method in item:
            if method in ("get", "post", "put", "delete"):
                yield method.upper(), path


def test_the_guide_calls_every_operation():
    calls = curl_calls(guide_script())
    missing = []
    for method, path in operations():
        pattern = "^" + re.sub(r"\\\{[^}]+\\\}", r"[^/]+", re.escape(path)) + "$"
        if not any(m == method and re.match(pattern, p) for m, p in calls):
            missing.append(f"{method} {path}")
    assert not missing, f"docs/API.md has no curl example for: {missing}"


def test_the_guide_runs(serve, tmp_path):
    svc = serve("--workers", "0")
    script = guide_script().replace("http://127.0.0.1:8080", svc.url)
    script = script.replace("trainyard-data/admin.token", str(svc.data_dir / "admin.token"))
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert '"status":"ok"' in out
    assert "trainyard_jobs{status=" in out
    assert out.count("204") >= 2  # a revoked token, a deleted job
    assert '"field":"hyperparameters.epochs"' in out and '"field":"dataset_url"' in out
    assert '"cancel":false' in out  # the heartbeat's answer
    assert '"epoch":1' in out and '"status":"succeeded"' in out
    assert '"name":"checkpoint.safetensors"' in out  # "delete_checkpoint": false kept it
    assert "event: " in out and "epoch 1 done" in out
    assert '"status":"cancelled"' in out
    assert '"stop_reason":"not needed any more"' in out  # a stopped queued job
    # Models: the succeeded iris job is version 1 of iris.
    assert '{"model_version_status":[{"version":"1","state":"AVAILABLE"' in out
    assert '"latest":1' in out
    # Predictions: the by-hand iris job left no model file, and says so on every route.
    assert out.count("version 1 of model iris has no model.safetensors to serve") == 7, out
    # The image job: its resolved model, and a layer that does not fit its input.
    assert '"kernel_size": [3, 3], "strides": [1, 1], "padding": "valid"' in out
    assert '"field":"model.layers[0]"' in out and "does not fit its input 3×3×32" in out
    assert (tmp_path / "metrics.csv").read_text().startswith("epoch,loss")
    assert (tmp_path / "resumed.safetensors").read_bytes() == \
        (tmp_path / "checkpoint.safetensors").read_bytes()
    job = [j for j in svc.http.get(f"{svc.url}/jobs").json()["jobs"] if j["name"] == "iris"]
    assert len(job) == 1 and job[0]["status"] == "succeeded"
    # Script jobs: the code's address, Alice's 403, the lease's code path, metrics of the
    # script's own names, the job done.
    assert re.search(r"^sha256:[0-9a-f]{64}$", out, re.M)
    assert '"field":"training_script"' in out
    assert re.search(r"^/code/sha256:[0-9a-f]{64}$", out, re.M)
    assert '"top5":0.95' in out
    job = [j for j in svc.http.get(f"{svc.url}/jobs").json()["jobs"] if j["name"] == "my-mlp"]
    assert len(job) == 1 and job[0]["status"] == "succeeded", job
    assert job[0]["document"]["hyperparameters"] == {"epochs": 2, "units": 64}
    # Sweeps: four trials queued at once, listed by ?sweep=, cancelled with the sweep; a 400.
    assert "running 4 iris-search-1" in out and "cancelled 4" in out
    assert '"field":"parameters[\\"hyperparameters.learning_rate\\"].min"' in out


def test_the_operations_guide_backup_runs_on_a_live_service(serve, tmp_path):
    svc = serve("--workers", "0")
    for i in range(20):
        r = svc.http.post(f"{svc.url}/train", json={
            "name": f"b{i}", "dataset_url": "https://data.example.com/x.csv",
            "hyperparameters": {}})
        assert r.status_code == 202, r.text
    text = (ROOT / "docs" / "OPERATIONS.md").read_text()
    blocks = re.findall(r"<!-- ops-test -->\s*```sh\n(.*?)```", text, re.S)
    assert blocks, "docs/OPERATIONS.md has no ops-test block"
    script = "".join(blocks).replace("trainyard-data", str(svc.data_dir))
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "ok"
    import sqlite3
    copy = sqlite3.connect(tmp_path / "trainyard-backup.db")
    assert copy.execute("SELECT count(*) FROM jobs").fetchone()[0] == 20
    copy.close()
