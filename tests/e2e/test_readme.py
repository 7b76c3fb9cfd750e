"""The README as a new user meets it, on a fresh clone: a clone of this repository (with the
working tree's uncommitted changes laid over it, so a developer tests what they are about to
commit; on CI's clean checkout it is the plain clone), no build folder and no data. There the
block marked `readme-test: serve` runs exactly as written — it installs, makes the release build
and serves on 127.0.0.1:8080 — and each other `readme-test` block runs as written in bash from
the clone's root, the way the README tells a person to: `submit` (curl), then `tokens` and
`cli` each after `path` (which puts build/trainyard on the PATH). Nothing in a block is
replaced, so the README cannot rot without this failing.

It runs once per .ci/run: in the pass that tests build/ (the sanitizer pass skips it)."""
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import time

import pytest
from safetensors.numpy import load_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
README_PORT = 8080  # what the README's commands use


def block(tag):
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- readme-test: {tag} -->\s*```sh\n(.*?)```", text, re.S)
    assert m, f"README.md has no block marked readme-test: {tag}"
    return m.group(1)


def fresh_clone(dest):
    """A git clone of ROOT at `dest`, with the working tree's uncommitted changes copied in."""
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(dest)],
                   check=True)
    changed = subprocess.run(["git", "ls-files", "-z", "--modified", "--others",
                              "--exclude-standard"], cwd=ROOT, check=True,
                             capture_output=True).stdout.decode().split("\0")
    for name in filter(None, changed):
        src, dst = ROOT / name, dest / name
        if src.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        elif dst.exists():
            dst.unlink()
    assert not (dest / "build").exists()


def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def run_block(clone, *tags, timeout=300):
    script = "".join(block(t) for t in tags)
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=clone,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"blocks {tags} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def readme_clone(trainyard_bin, tmp_path_factory):
    if pathlib.Path(trainyard_bin).resolve() != (ROOT / "build" / "trainyard").resolve():
        pytest.skip("runs once per .ci/run, in the pass that tests build/")
    if not port_free(README_PORT):
        pytest.fail(f"127.0.0.1:{README_PORT} is taken, and the README's serve command binds "
                    "it: stop what listens there and run again")
    clone = tmp_path_factory.mktemp("readme") / "trainyard"
    fresh_clone(clone)
    log_path = clone.parent / "serve.log"
    log = open(log_path, "w")
    env = dict(os.environ)
    env.pop("TRAINYARD_KERNEL_CACHE", None)  # a new user has none: kernels compile on first use
    proc = subprocess.Popen(block("serve").strip(), shell=True, cwd=clone, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True, env=env)
    listening = f"listening on http://127.0.0.1:{README_PORT}"
    deadline = time.monotonic() + 900  # a cold release build on two cores takes a minute or two
    while listening not in log_path.read_text():
        assert proc.poll() is None, "the README's serve command stopped:\n" + log_path.read_text()
        assert time.monotonic() < deadline, log_path.read_text()
        time.sleep(0.2)
    yield clone
    os.killpg(proc.pid, 15)
    proc.wait(timeout=30)
    log.close()


def test_serve_makes_a_release_build(readme_clone):
    out = subprocess.run(["meson", "introspect", "--buildoptions", "build"], cwd=readme_clone,
                         capture_output=True, text=True, check=True).stdout
    assert re.search(r'"name": "buildtype", "value": "release"', out), out[:2000]
    assert re.search(r'"name": "werror", "value": true', out), "the release build lost -Werror"


def test_quick_start_submit(readme_clone):
    proc = run_block(readme_clone, "submit")
    assert '"epochs":[{"epoch":1' in proc.stdout, proc.stdout
    got = (readme_clone / "model.safetensors").read_bytes()
    assert not got.startswith(b"{"), got.decode(errors="replace")  # a problem+json, not a model
    model = load_file(str(readme_clone / "model.safetensors"))
    assert model["0.weight"].shape == (64, 2)
    # The trained model answers: a probability per arm for each point, the example's arms a, b
    at = proc.stdout.rindex('{"predictions":')
    preds = json.loads(proc.stdout[at:])["predictions"]
    assert len(preds) == 2 and all(len(p) == 2 and abs(sum(p) - 1) < 1e-5 for p in preds), preds
    assert preds[0][0] > 0.5 and preds[1][1] > 0.5, preds


def test_predict_section(readme_clone):
    proc = run_block(readme_clone, "path", "predict")
    answers = [json.loads(a) for a in re.findall(r"^\{.*?^\}", proc.stdout, re.M | re.S)]
    assert len(answers) == 2, proc.stdout
    preds = answers[0]["predictions"]
    assert len(preds) == 2 and preds[0][0] > 0.5 and preds[1][1] > 0.5, preds
    [[a, b]] = answers[1]["results"]
    assert a[0] == "a" and b[0] == "b" and a[1] > 0.5, answers[1]


def test_data_parallel_section(readme_clone):
    """The quick start's worker runs the two-replica spirals job under mpirun."""
    proc = run_block(readme_clone, "path", "distributed")
    assert "succeeded" in proc.stdout, proc.stdout
    assert "data-parallel: 2 replicas" in proc.stdout, proc.stdout


def test_experiments_section(readme_clone):
    """The spirals sweep ends with a leaderboard, and the best three trials' TensorBoard files
    are laid out in runs/, one folder each, readable by TensorBoard's own reader."""
    proc = run_block(readme_clone, "path", "sweep")
    assert "succeeded" in proc.stdout, proc.stdout + proc.stderr
    runs = sorted((readme_clone / "runs").iterdir())
    assert len(runs) == 3 and all(r.name.startswith("spirals-search-") for r in runs), runs
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    for run in runs:
        acc = EventAccumulator(str(run))
        acc.Reload()
        assert "val_accuracy" in acc.Tags()["scalars"], (run, acc.Tags())


def test_training_without_the_service(readme_clone):
    """`trainyard train` into a folder whose parent does not exist yet, as a new user types it:
    the model, the metrics and a TensorBoard event file come out."""
    proc = run_block(readme_clone, "train")
    out = readme_clone / "out" / "spirals"
    assert "done after 60 epoch(s)" in proc.stdout, proc.stdout
    assert load_file(str(out / "model.safetensors"))["0.weight"].shape == (64, 2)
    assert len((out / "metrics.csv").read_text().splitlines()) == 61
    assert len(list(out.glob("events.out.tfevents.*.trainyard"))) == 1


def test_tokens_section(readme_clone):
    proc = run_block(readme_clone, "path", "tokens")
    assert re.search(r"^ty_[0-9a-f]+$", proc.stdout, re.M), proc.stdout  # gpu-box-2's secret
    assert "revoked" in proc.stderr, proc.stderr
    listed = subprocess.run(["sqlite3", "trainyard-data/trainyard.db",
                             "SELECT name, revoked_at IS NOT NULL FROM tokens ORDER BY name"],
                            cwd=readme_clone, capture_output=True, text=True, check=True).stdout
    assert "alice|1" in listed and "gpu-box-2|0" in listed and "admin2|0" in listed, listed


def test_command_line_section(readme_clone):
    (readme_clone / "model.safetensors").unlink(missing_ok=True)
    proc = run_block(readme_clone, "path", "cli")
    assert "succeeded" in proc.stdout, proc.stdout
    model = load_file(str(readme_clone / "model.safetensors"))
    assert model["0.weight"].shape == (64, 2)
    metrics = (readme_clone / "out" / "metrics.csv").read_text().splitlines()
    assert metrics[0].startswith("epoch,") and len(metrics) == 61, metrics[:3]


def test_image_job_section(readme_clone):
    proc = run_block(readme_clone, "path", "images")
    assert "succeeded" in proc.stdout, proc.stdout + proc.stderr
    model = load_file(str(readme_clone / "shapes" / "model.safetensors"))
    assert model["0.weight"].shape == (16, 3, 3, 3)  # Conv2d(3, 16, 3): [out, in, kh, kw]


def test_script_job_section(readme_clone):
    proc = run_block(readme_clone, "path", "script")
    assert "succeeded" in proc.stdout, proc.stdout + proc.stderr
    import json
    model = json.loads((readme_clone / "spirals-script" / "model.json").read_text())
    assert model["labels"] == ["a", "b"] and len(model["w1"]) == 2, list(model)
