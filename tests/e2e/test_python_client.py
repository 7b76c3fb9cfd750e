"""The Python package in python/ (trainyard/__init__.py), run with a plain interpreter: Debian's
/usr/bin/python3 with PYTHONPATH=python, as a script job's `import trainyard` and a user's
client see it; `pip install ./python` into a fresh venv, offline; and the client against a real
serve: a built-in job submitted, waited for, its metrics, logs and artifacts read and
downloaded, errors of the API and of the job raised as ApiError and JobFailed; and a script job
submitted with code="dir" where the server and worker have script jobs."""
import hashlib
import io
import json
import os
import pathlib
import shutil
import subprocess
import tarfile
import textwrap

import pytest

from helpers import job_doc

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3"  # Debian's, with numpy and torch; not the test venv


def run_py(code, env=None, cwd=None, check=True):
    """Runs code with the plain interpreter and python/ on its path; returns the process."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("TRAINYARD_")}
    full.update({"PYTHONPATH": str(ROOT / "python"), **(env or {})})
    proc = subprocess.run([PYTHON, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full, cwd=cwd, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture(autouse=True)
def plain_python():
    if not os.access(PYTHON, os.X_OK):
        pytest.skip(f"{PYTHON} is not installed")


def test_report_writes_json_lines_to_the_metrics_file(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    run_py("""
        import math, numpy as np, torch, trainyard
        assert trainyard.report(epoch=1, loss=0.5, accuracy=np.float32(0.25)) == \\
            {"epoch": 1, "loss": 0.5, "accuracy": 0.25}
        trainyard.report(loss=torch.tensor(0.125), steps=np.int64(7), bad=float("nan"),
                         none=None, **{"val/acc": 1})          # epoch 2: the next one
        trainyard.report(epoch=np.int64(5), top_k=3)
        for bad, kind in [(dict(epoch=0, x=1), ValueError), (dict(x="high"), TypeError),
                          (dict(flag=True), TypeError), ({"1st": 1}, ValueError),
                          ({"a b": 1}, ValueError), ({"m%d" % i: i for i in range(65)}, ValueError)]:
            try:
                trainyard.report(**bad)
            except kind:
                pass
            else:
                raise AssertionError(bad)
    """, env={"TRAINYARD_METRICS": str(metrics)})
    lines = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert lines == [{"epoch": 1, "loss": 0.5, "accuracy": 0.25},
                     {"epoch": 2, "loss": 0.125, "steps": 7, "bad": None, "none": None,
                      "val/acc": 1},
                     {"epoch": 5, "top_k": 3}]
    assert metrics.read_text().endswith("\n")


def test_helpers_inside_and_outside_trainyard(tmp_path):
    job = tmp_path / "job"
    env = {"TRAINYARD_OUTPUT_DIR": str(job / "output"),
           "TRAINYARD_CHECKPOINT_DIR": str(job / "checkpoint"),
           "TRAINYARD_DATASET": str(job / "data" / "d.csv"),
           "TRAINYARD_HYPERPARAMETERS": '{"epochs": 3, "layers": [64, 10], "opt": {"lr": 0.1}}'}
    out = run_py("""
        import json, trainyard
        print(json.dumps([trainyard.output_dir(), trainyard.checkpoint_dir(),
                          trainyard.dataset_path(), trainyard.hyperparameters()]))
    """, env=env).stdout
    assert json.loads(out) == [str(job / "output"), str(job / "checkpoint"),
                               str(job / "data" / "d.csv"),
                               {"epochs": 3, "layers": [64, 10], "opt": {"lr": 0.1}}]
    assert (job / "output").is_dir() and (job / "checkpoint").is_dir()

    # outside trainyard: folders under the current one, no dataset, no hyperparameters, and
    # report prints its line to stderr
    proc = run_py("""
        import json, trainyard
        trainyard.report(epoch=2, loss=1.5)
        print(json.dumps([trainyard.output_dir(), trainyard.checkpoint_dir(),
                          trainyard.dataset_path(), trainyard.hyperparameters()]))
    """, cwd=tmp_path)
    assert json.loads(proc.stdout) == [str(tmp_path / "output"), str(tmp_path / "checkpoint"),
                                       None, {}]
    assert '{"epoch":2,"loss":1.5}' in proc.stderr


def test_keras_callback_reports_each_epoch(tmp_path):
    """With keras if installed, else a stand-in keras module (only its Callback base class):
    the package imports keras only when the callback is made."""
    path = [str(ROOT / "python")]
    if run_py("import keras", check=False).returncode != 0:
        stub = tmp_path / "stub" / "keras"
        stub.mkdir(parents=True)
        (stub / "__init__.py").write_text("from . import callbacks\n")
        (stub / "callbacks.py").write_text("class Callback:\n    pass\n")
        path.append(str(stub.parent))
    metrics = tmp_path / "metrics.jsonl"
    run_py("""
        import sys, trainyard
        assert "keras" not in sys.modules
        cb = trainyard.KerasCallback()
        import keras
        assert isinstance(cb, keras.callbacks.Callback)
        cb.on_epoch_end(0, {"loss": 0.9, "accuracy": 0.5})
        cb.on_epoch_end(1, {"loss": 0.4, "val_accuracy": 0.75})
    """, env={"TRAINYARD_METRICS": str(metrics), "PYTHONPATH": os.pathsep.join(path)})
    assert [json.loads(line) for line in metrics.read_text().splitlines()] == [
        {"epoch": 1, "loss": 0.9, "accuracy": 0.5}, {"epoch": 2, "loss": 0.4, "val_accuracy": 0.75}]


def test_pack_is_deterministic(tmp_path):
    code = tmp_path / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "train.py").write_text("print('hi')\n")
    (code / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(code / "run.sh", 0o700)
    (code / "pkg" / "m.py").write_text("x = 1\n")
    os.symlink("pkg/m.py", code / "link.py")
    archive = tmp_path / "code.tar.gz"
    run_py(f"""
        import os, trainyard
        a = trainyard.pack({str(code)!r})
        os.utime({str(code / "train.py")!r}, (1, 1))
        assert trainyard.pack({str(code)!r}) == a   # the same bytes: no mtimes, no owners
        open({str(archive)!r}, "wb").write(a)
    """)
    data = archive.read_bytes()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == list(members) == ["link.py", "pkg", "pkg/m.py", "run.sh",
                                                    "train.py"]
        assert members["run.sh"].mode == 0o755 and members["train.py"].mode == 0o644
        assert members["pkg"].isdir() and members["link.py"].issym()
        assert all(m.mtime == 0 and m.uid == 0 for m in members.values())
        assert tar.extractfile("train.py").read() == b"print('hi')\n"


def test_pip_install_into_a_fresh_venv_offline(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "python", src)  # pip builds in place: keep the tree clean
    venv = tmp_path / "venv"
    # the system's setuptools and wheel build it (Debian's python3-setuptools, python3-wheel):
    # a fresh venv's own setuptools 66 has no bdist_wheel, and nothing may be downloaded
    subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", str(venv)], check=True,
                   timeout=120)
    proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-build-isolation",
                           "--no-index", str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import trainyard; print(trainyard.__version__, trainyard.__file__)"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          env={"PATH": os.environ.get("PATH", "")})
    assert proc.returncode == 0, proc.stderr
    version, path = proc.stdout.split()
    assert version == "0.1.0" and path.startswith(str(venv)), proc.stdout


def test_client_runs_a_builtin_job_against_serve(serve, blobs, tmp_path):
    svc = serve("--workers", "1")
    env = {"TRAINYARD_URL": svc.url, "TRAINYARD_TOKEN": svc.admin_token}
    out = run_py(f"""
        import json, os, trainyard
        client = trainyard.Client()               # from TRAINYARD_URL and TRAINYARD_TOKEN
        job = client.submit({json.dumps(job_doc(blobs, epochs=3))})
        final = job.wait(timeout=240, poll=0.2)
        assert final["status"] == "succeeded" and job.status == "succeeded", final
        metrics = job.metrics()
        assert [m["epoch"] for m in metrics] == [1, 2, 3], metrics
        assert "epoch 3/3" in job.logs()
        names = sorted(a["name"] for a in job.artifacts())
        path = job.download("model.safetensors", {str(tmp_path)!r})
        again = trainyard.Client(os.environ["TRAINYARD_URL"], os.environ["TRAINYARD_TOKEN"])
        assert again.job(job.id).data["status"] == "succeeded"

        # errors of the API name the fields
        try:
            client.submit({{"name": "x", "hyperparameters": {{}}}})
        except trainyard.ApiError as e:
            assert e.status == 400 and "dataset_url" in str(e), str(e)
        else:
            raise AssertionError("no ApiError")
        try:
            trainyard.Client(token="wrong").job(job.id)
        except trainyard.ApiError as e:
            assert e.status == 401, str(e)
        # a failing job raises JobFailed with its error
        bad = client.submit({json.dumps(job_doc(blobs.rsplit('/', 1)[0] + '/missing.csv',
                                                 epochs=1))})
        try:
            bad.wait(timeout=120, poll=0.2)
        except trainyard.JobFailed as e:
            assert "404" in e.error and e.job["status"] == "failed", e.error
        else:
            raise AssertionError("no JobFailed")
        print(json.dumps({{"id": job.id, "names": names, "path": path,
                           "loss": metrics[-1]["loss"]}}))
    """, env=env).stdout
    res = json.loads(out.strip().splitlines()[-1])
    assert "model.safetensors" in res["names"] and "metrics.csv" in res["names"]
    listed = {a["name"]: a for a in
              svc.http.get(f"{svc.url}/jobs/{res['id']}/artifacts").json()["artifacts"]}
    data = pathlib.Path(res["path"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == listed["model.safetensors"]["sha256"]
    assert not list(tmp_path.glob(".trainyard-*"))  # no temporary file left


def test_client_uploads_code_and_submits_a_script_job(serve, tmp_path):
    """code="dir" on the server side: the packed folder passes POST /code's checks, its address
    is the SHA-256 of the bytes, the same folder gives the same address again, and the script
    job is queued naming it (no worker here: the next test runs one)."""
    svc = serve("--workers", "0", name="code")
    code = tmp_path / "project"
    (code / "lib").mkdir(parents=True)
    (code / "train.py").write_text("import trainyard\ntrainyard.report(epoch=1, loss=0.5)\n")
    (code / "lib" / "util.py").write_text("X = 1\n")
    env = {"TRAINYARD_URL": svc.url, "TRAINYARD_TOKEN": svc.admin_token}
    out = run_py(f"""
        import hashlib, json, trainyard
        client = trainyard.Client()
        first = client.upload_code({str(code)!r})
        again = client.upload_code({str(code)!r})
        digest = hashlib.sha256(trainyard.pack({str(code)!r})).hexdigest()
        job = client.submit({{"model_name": "seed-002", "dataset_location": "s3://data/x.csv",
                              "training_script": "train.py",
                              "hyperparameters": {{"epochs": 2}}}}, code={str(code)!r})
        try:
            client.upload_code({str(tmp_path / "nowhere")!r})
        except NotADirectoryError:
            pass
        else:
            raise AssertionError("packed a missing folder")
        print(json.dumps({{"first": first, "again": again, "digest": digest, "job": job.data}}))
    """, env=env).stdout
    res = json.loads(out.strip().splitlines()[-1])
    assert res["first"] == res["again"], res
    assert res["first"]["code"] == "sha256:" + res["digest"]
    assert res["first"]["files"] == 2, res["first"]
    job = res["job"]
    assert job["status"] == "queued" and job["job_id"] == job["id"], job
    doc = job["document"]
    assert job["name"] == "seed-002" and doc["training_script"] == "train.py", job
    assert doc["code"] == res["first"]["code"], job


def test_client_submits_a_script_job_with_its_code(trainyard_bin, serve, blobs, tmp_path):
    """code="dir": the folder is packed, uploaded with POST /code and run by a worker that
    allows scripts."""
    svc = serve("--workers", "1", "--allow-scripts", "--no-sandbox", name="scripts")
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(textwrap.dedent("""
        import json, os, trainyard
        hp = trainyard.hyperparameters()
        with open(trainyard.dataset_path()) as f:
            rows = sum(1 for _ in f) - 1
        for epoch in range(1, hp["epochs"] + 1):
            trainyard.report(epoch=epoch, loss=1.0 / epoch, rows=rows)
        with open(os.path.join(trainyard.output_dir(), "summary.json"), "w") as f:
            json.dump({"rows": rows, "lr": hp["lr"]}, f)
        print("trained on", rows, "rows")
    """))
    env = {"TRAINYARD_URL": svc.url, "TRAINYARD_TOKEN": svc.admin_token}
    out = run_py(f"""
        import json, trainyard
        client = trainyard.Client()
        job = client.submit({{"model_name": "client-script", "dataset_location": {blobs!r},
                              "training_script": "train.py",
                              "hyperparameters": {{"epochs": 3, "lr": 0.5}}}},
                            code={str(code)!r})
        final = job.wait(timeout=240, poll=0.2)
        assert [m["epoch"] for m in job.metrics()] == [1, 2, 3]
        assert job.metrics()[-1]["rows"] == 600
        assert "trained on 600 rows" in job.logs()
        path = job.download("summary.json", {str(tmp_path)!r})
        print(json.dumps({{"status": final["status"], "summary": json.load(open(path))}}))
    """, env=env).stdout
    res = json.loads(out.strip().splitlines()[-1])
    assert res == {"status": "succeeded", "summary": {"rows": 600, "lr": 0.5}}
