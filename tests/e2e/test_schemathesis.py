"""schemathesis against the running server, from openapi.yaml: every operation, the worker
protocol included, with its coverage, fuzzing and stateful phases and all of its checks (no 5xx,
responses that match their schemas, valid data accepted, invalid data refused). Settings and the
reasons for each are in tests/e2e/schemathesis.toml. The seeds are fixed so that a failure is
reproducible; each run still generates over a thousand requests. It calls with the admin token
(which may call every operation); its ignored_auth check also calls each one without it."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parents[1]


def schemathesis_cmd():
    exe = pathlib.Path(sys.executable).parent / "schemathesis"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("schemathesis")
    if not found:
        pytest.fail("schemathesis is not installed: .ci/run installs it into .venv")
    return [found]


@pytest.mark.parametrize("seed", [1, 3])
def test_schemathesis_finds_nothing(serve, seed, tmp_path):
    svc = serve("--workers", "0")
    cmd = schemathesis_cmd() + ["--config-file", str(HERE / "schemathesis.toml"), "run",
                                str(ROOT / "openapi.yaml"), "--url", svc.url, "--checks", "all",
                                "--max-examples", "40", "--seed", str(seed), "--no-color",
                                "-H", f"Authorization: Bearer {svc.admin_token}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path,
                          env={**os.environ, "NO_COLOR": "1"})  # its cache goes to tmp_path
    assert proc.returncode == 0, proc.stdout[-12000:] + proc.stderr[-4000:]
    # The server survived every request and still answers.
    import requests
    assert requests.get(f"{svc.url}/healthz").json()["status"] == "ok"
