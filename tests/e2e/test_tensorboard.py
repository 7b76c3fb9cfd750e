"""TensorBoard event files (issue 15): when a job ends the server writes the artifact
events.out.tfevents.<time>.trainyard from its database, and TensorBoard's own reader (the PyPI
`tensorboard` package's EventAccumulator and EventMultiplexer) reads it.

- a built-in job with "tensorboard": {"histograms": true}: every scalar of every epoch equals
  GET /jobs/{id}/metrics (as the float TensorBoard keeps), at step = epoch and a wall time
  inside the job's run; a histogram per weight tensor per epoch, named as in model.safetensors,
  whose count is the tensor's size and whose last epoch's min/max are the saved model's;
- a job without histograms has scalars only; `trainyard download --tensorboard DIR` with both
  gives one run folder per job, which TensorBoard lists side by side;
- a script job's own metric names become scalars too, and a job that fails still gets its file;
- the heartbeat's histograms are checked: bad ones are a 400 naming the field.

One serve with one local worker runs the three jobs in turn (about 10 s on two cores)."""
import datetime
import io
import json
import tarfile
import subprocess

import numpy as np
import pytest
from safetensors.numpy import load

from conftest import BIN
from helpers import TERMINAL, job_doc, submit, wait_for

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
plugin_event_multiplexer = pytest.importorskip(
    "tensorboard.backend.event_processing.plugin_event_multiplexer")

PREFIX = "events.out.tfevents."
KNOWN = ("loss", "val_loss", "accuracy", "val_accuracy", "seconds", "samples_per_second")
SCRIPT = """
import os, sys, trainyard
trainyard.report(epoch=1, loss=0.5, **{"grad_norm": 2.5, "lr/group0": 0.01})
with open(os.environ["TRAINYARD_METRICS"], "a") as f:  # reserved: the line is ignored
    f.write('{"epoch": 2, "histograms": 1}\\n')
trainyard.report(epoch=2, loss=0.25, accuracy=0.75, grad_norm=1.5, **{"lr/group0": 0.005})
sys.exit(3)
"""


def seconds(iso):
    """Unix seconds of one of the API's times (2026-11-24T14:37:17.123Z)."""
    return datetime.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def artifacts(svc, job_id):
    listing = svc.http.get(f"{svc.url}/jobs/{job_id}/artifacts").json()["artifacts"]
    return {a["name"]: a for a in listing}


def events_file(svc, job, tmp_path):
    """The job's tfevents artifact, downloaded; a loaded EventAccumulator of it."""
    names = [n for n in artifacts(svc, job["id"]) if n.startswith(PREFIX)]
    assert names == [f"{PREFIX}{int(seconds(job['created_at']))}.trainyard"], names
    r = svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts/{names[0]}")
    assert r.status_code == 200, r.text
    folder = tmp_path / job["id"]
    folder.mkdir()
    (folder / names[0]).write_bytes(r.content)
    acc = event_accumulator.EventAccumulator(str(folder), size_guidance={
        event_accumulator.SCALARS: 0, event_accumulator.HISTOGRAMS: 0})
    acc.Reload()
    return acc


def check_scalars(svc, job, acc):
    """Every metric of every epoch, as TensorBoard shows it, equals the API's."""
    epochs = svc.http.get(f"{svc.url}/jobs/{job['id']}/metrics").json()["epochs"]
    assert epochs
    tags = set(acc.Tags()["scalars"])
    expected = {k for e in epochs for k, v in e.items() if k != "epoch" and v is not None}
    assert tags == expected, (tags, expected)
    for tag in tags:
        got = [(s.step, s.value) for s in acc.Scalars(tag)]
        want = [(e["epoch"], float(np.float32(e[tag]))) for e in epochs
                if e.get(tag) is not None]
        assert got == want, (tag, got, want)
    return epochs


def test_tfevents_of_builtin_script_and_download(serve, blobs, tmp_path):
    svc = serve("--workers", "1", "--allow-scripts", "--python", "/usr/bin/python3")
    layers = [{"type": "dense", "units": 8, "activation": "relu"},
              {"type": "batchnorm"},
              {"type": "dense", "units": 4, "activation": "tanh"}]
    with_h = submit(svc, job_doc(blobs, epochs=3, name="with-hist", model={"layers": layers},
                                 tensorboard={"histograms": True})).json()
    plain = submit(svc, job_doc(blobs, epochs=2, name="plain")).json()
    code = svc.http.post(f"{svc.url}/code", data=_pack({"train.py": SCRIPT}),
                         headers={"Content-Type": "application/gzip"})
    assert code.status_code in (200, 201), code.text
    script = submit(svc, {"model_name": "script", "training_script": "train.py",
                          "code": code.json()["code"], "hyperparameters": {}}).json()

    # ---- the built-in job with histograms
    done = wait_for(svc, with_h["id"], TERMINAL)
    assert done["status"] == "succeeded", done
    acc = events_file(svc, done, tmp_path)
    epochs = check_scalars(svc, done, acc)
    assert set(KNOWN) <= set(acc.Tags()["scalars"])
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    for s in acc.Scalars("loss"):  # wall time: when the server stored the epoch
        assert seconds(done["started_at"]) - 1 <= s.wall_time <= seconds(done["finished_at"]) + 1
    model = load(svc.http.get(f"{svc.url}/jobs/{done['id']}/artifacts/model.safetensors").content)
    weights = {k: v for k, v in model.items() if v.dtype == np.float32}
    assert len(weights) == 2 + 4 + 2 + 2  # dense, batchnorm (with its statistics), dense, output
    assert set(acc.Tags()["histograms"]) == set(weights), (acc.Tags()["histograms"], weights)
    for name, tensor in weights.items():
        hists = acc.Histograms(name)
        assert [h.step for h in hists] == [1, 2, 3], name
        for h in hists:
            v = h.histogram_value
            assert v.num == tensor.size and sum(v.bucket) == tensor.size, name
            assert len(v.bucket_limit) == len(v.bucket) <= 30
            assert v.min <= v.max and v.bucket_limit[-1] == v.max
        last = hists[-1].histogram_value
        assert (last.min, last.max) == (float(tensor.min()), float(tensor.max())), name
        assert last.sum == pytest.approx(float(tensor.astype(np.float64).sum()), abs=1e-4)

    # ---- the job without histograms: scalars only
    done_plain = wait_for(svc, plain["id"], TERMINAL)
    assert done_plain["status"] == "succeeded", done_plain
    acc_plain = events_file(svc, done_plain, tmp_path)
    check_scalars(svc, done_plain, acc_plain)
    assert acc_plain.Tags()["histograms"] == []

    # ---- `trainyard download --tensorboard DIR` with both: two runs side by side
    board = tmp_path / "boards" / "compare"  # parents made as needed
    proc = subprocess.run([str(BIN), "download", "--tensorboard", str(board), with_h["id"],
                           plain["id"]], env=svc.env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    runs = sorted(p.name for p in board.iterdir())
    assert runs == sorted([f"with-hist-{with_h['id'][:8]}", f"plain-{plain['id'][:8]}"]), runs
    mux = plugin_event_multiplexer.EventMultiplexer().AddRunsFromDirectory(str(board))
    mux.Reload()
    assert sorted(mux.Runs()) == runs
    listed = mux.PluginRunToTagToContent("scalars")
    assert set(listed) == set(runs) and all("val_loss" in t for t in listed.values()), listed
    proc = subprocess.run([str(BIN), "download", "--tensorboard", str(board), "--json",
                           plain["id"]], env=svc.env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    [entry] = json.loads(proc.stdout)
    assert entry["job_id"] == plain["id"] and entry["path"].startswith(str(board))

    # ---- the script job: its own metric names are scalars too; it failed and still has a file
    done_script = wait_for(svc, script["id"], TERMINAL, timeout=60)
    assert done_script["status"] == "failed", done_script
    acc_script = events_file(svc, done_script, tmp_path)
    check_scalars(svc, done_script, acc_script)
    assert {"grad_norm", "lr/group0"} <= set(acc_script.Tags()["scalars"])
    assert [s.value for s in acc_script.Scalars("grad_norm")] == [2.5, 1.5]
    log = svc.http.get(f"{svc.url}/jobs/{script['id']}/logs").text
    assert 'metrics line 2 ignored: the name "histograms" is reserved' in log, log


def _pack(files):
    """A .tar.gz in memory of {name: text}, for POST /code."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_job_without_epochs_has_no_file(serve, tmp_path):
    """A job cancelled while queued reported nothing: no event file; `download --tensorboard`
    says why and exits 1."""
    svc = serve("--workers", "0")
    job = submit(svc, job_doc("http://127.0.0.1:9/none.csv")).json()
    r = svc.http.post(f"{svc.url}/jobs/{job['id']}/cancel")
    assert r.status_code == 200, r.text
    assert not [n for n in artifacts(svc, job["id"]) if n.startswith(PREFIX)]
    proc = subprocess.run([str(BIN), "download", "--tensorboard", str(tmp_path / "b"), job["id"]],
                          env=svc.env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "no TensorBoard file" in proc.stderr, proc.stderr


def hist(**over):
    h = {"tensor": "0.weight", "min": -1, "max": 1, "num": 4, "sum": 0, "sum_squares": 2,
         "limits": [0, 1], "counts": [2, 2]}
    h.update(over)
    return h


@pytest.mark.parametrize("histograms, field", [
    ([hist(limits=[1, 0])], "epochs[0].histograms[0].limits"),
    ([hist(counts=[2])], "epochs[0].histograms[0].counts"),
    ([hist(counts=[2, -1])], "epochs[0].histograms[0].counts"),
    ([hist(tensor="")], "epochs[0].histograms[0].tensor"),
    ([hist(tensor="x" * 129)], "epochs[0].histograms[0].tensor"),
    ([hist(num=-1)], "epochs[0].histograms[0].num"),
    ([hist(min=2)], "epochs[0].histograms[0].max"),
    ([hist(limits=list(range(257)), counts=[0] * 257)], "epochs[0].histograms[0].limits"),
    ([hist(extra=1)], "epochs[0].histograms[0].extra"),
    ([hist()] * 257, "epochs[0].histograms"),
    ({"tensor": "a"}, "epochs[0].histograms"),
])
def test_heartbeat_histograms_are_checked(serve, histograms, field):
    svc = serve("--workers", "0")
    body = {"epochs": [{"epoch": 1, "loss": 0.5, "histograms": histograms}]}
    r = svc.http.post(f"{svc.url}/workers/w/jobs/j/heartbeat", json=body)
    assert r.status_code == 400, r.text
    assert field in [e["field"] for e in r.json()["errors"]], r.json()
