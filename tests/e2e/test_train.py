"""End-to-end tests of `trainyard train`: real datasets generated here and served over HTTP by a
local server, real OpenCL kernels on the default device (PoCL in CI), real artifacts read back
with the Python safetensors package and checked with an independent numpy forward pass.
"""
import csv
import gzip
import hashlib
import json

import numpy as np
import pytest
from safetensors.numpy import load_file
from safetensors import safe_open

from helpers import kill_after_epochs, resume


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        if header:
            w.writerow(header)
        w.writerows(rows)


def read_metrics(out):
    with open(out / "metrics.csv") as f:
        return list(csv.DictReader(f))


def load_model(out):
    path = str(out / "model.safetensors")
    tensors = load_file(path)
    with safe_open(path, framework="numpy") as f:
        meta = f.metadata()
    return tensors, meta


ACTS = {
    "relu": lambda z: np.maximum(z, 0),
    "tanh": np.tanh,
    "sigmoid": lambda z: 1 / (1 + np.exp(-z)),
    "linear": lambda z: z,
}


def predict(tensors, meta, x):
    """An independent forward pass from what the safetensors file says."""
    model = json.loads(meta["trainyard.model"])
    std = json.loads(meta["trainyard.standardization"])
    h = np.asarray(x, dtype=np.float64)
    if std:
        h = (h - np.array(std["mean"])) / np.array(std["std"])
    for layer in model["layers"]:
        if layer["type"] != "dense":
            continue  # dropout is the identity at inference
        w, b = tensors[layer["weight"]], tensors[layer["bias"]]
        assert w.shape == (layer["out"], layer["in"])
        h = ACTS[layer["activation"]](h @ w.T.astype(np.float64) + b)
    return h, model


def rings(n, rng):
    """Three concentric rings in 2-D: no linear model separates them, a small MLP does."""
    label = rng.integers(0, 3, n)
    radius = label * 1.5 + rng.uniform(0.2, 1.0, n)
    angle = rng.uniform(0, 2 * np.pi, n)
    x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    return x, label


@pytest.fixture(scope="module")
def rings_csv(data_server):
    folder, base = data_server
    rng = np.random.default_rng(7)
    x, label = rings(2000, rng)
    names = np.array(["inner", "middle", "outer"])
    write_csv(folder / "rings.csv", ["x", "y", "ring"],
              [[f"{a:.5f}", f"{b:.5f}", names[c]] for (a, b), c in zip(x, label)])
    return f"{base}/rings.csv", x, names[label]


def test_regression_recovers_weight_and_bias(data_server, train):
    folder, base = data_server
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, (1000, 2))
    y = 3.0 * x[:, 0] - 2.0 * x[:, 1] + 0.5 + rng.normal(0, 0.01, 1000)
    write_csv(folder / "linear.csv", ["a", "b", "target"],
              [[f"{p:.6f}", f"{q:.6f}", f"{t:.6f}"] for (p, q), t in zip(x, y)])
    job = {"dataset_url": f"{base}/linear.csv", "task": "regression",
           "hyperparameters": {"epochs": 300, "batch_size": 1000, "optimizer": "sgd",
                               "learning_rate": 0.1}}
    proc, out = train(job)
    assert proc.returncode == 0, proc.stderr
    assert "epoch 300/300" in proc.stdout

    tensors, meta = load_model(out)
    std = json.loads(meta["trainyard.standardization"])
    mean, sd = np.array(std["mean"]), np.array(std["std"])
    w = tensors["0.weight"][0] / sd              # back to the original feature units
    b = tensors["0.bias"][0] - np.sum(tensors["0.weight"][0] * mean / sd)
    assert abs(w[0] - 3.0) < 0.05 and abs(w[1] + 2.0) < 0.05, w
    assert abs(b - 0.5) < 0.05, b

    rows = read_metrics(out)
    assert len(rows) == 300
    assert rows[0]["accuracy"] == "" and rows[0]["val_accuracy"] == ""
    assert float(rows[-1]["loss"]) < 0.01 < float(rows[0]["loss"])


def test_mlp_classifies_rings_above_95_percent(rings_csv, train):
    url, x, labels = rings_csv
    job = {"name": "rings", "dataset_url": url, "dataset": {"label_column": "ring"},
           "model": {"layers": [{"type": "dense", "units": 32, "activation": "relu"},
                                {"type": "dense", "units": 32, "activation": "tanh"}]},
           "hyperparameters": {"epochs": 30, "batch_size": 32, "learning_rate": 0.01,
                               "optimizer": "adam", "validation_split": 0.2, "seed": 3}}
    proc, out = train(job)
    assert proc.returncode == 0, proc.stderr
    rows = read_metrics(out)
    assert len(rows) == 30
    assert float(rows[-1]["val_accuracy"]) > 0.95, rows[-1]

    # The file loads with the safetensors package and holds the real model: an independent
    # numpy forward pass classifies the whole dataset as well as training reported.
    tensors, meta = load_model(out)
    classes = json.loads(meta["trainyard.classes"])
    assert classes == ["inner", "middle", "outer"]
    logits, model = predict(tensors, meta, x)
    assert model["output"] == "softmax" and model["outputs"] == 3
    predicted = np.array(classes)[np.argmax(logits, axis=1)]
    assert np.mean(predicted == labels) > 0.95

    resolved = json.loads((out / "job.json").read_text())
    assert resolved["hyperparameters"]["beta1"] == 0.9
    assert resolved["dataset"]["header"] == "auto"
    assert (out / "train.log").read_text().count("epoch ") == 30


def test_event_file_holds_every_epoch_and_histogram(rings_csv, train):
    """`trainyard train` leaves a TensorBoard event file as a job does: TensorBoard's own reader
    finds every metrics.csv value per epoch and, with histograms asked for, one histogram per
    weight tensor per epoch whose last ones match the saved model."""
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    url, _, _ = rings_csv
    job = {"name": "rings-tb", "dataset_url": url, "dataset": {"label_column": "ring"},
           "model": {"layers": [{"type": "dense", "units": 8, "activation": "relu"}]},
           "hyperparameters": {"epochs": 3, "batch_size": 64, "learning_rate": 0.01,
                               "validation_split": 0.2, "seed": 5},
           "tensorboard": {"histograms": True}}
    proc, out = train(job)
    assert proc.returncode == 0, proc.stderr
    [events] = list(out.glob("events.out.tfevents.*.trainyard"))
    assert events.name in proc.stdout  # the summary line names it
    acc = ea.EventAccumulator(str(out), size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0})
    acc.Reload()
    rows = read_metrics(out)
    for tag in ("loss", "val_loss", "accuracy", "val_accuracy", "seconds"):
        scalars = acc.Scalars(tag)
        assert [s.step for s in scalars] == [int(r["epoch"]) for r in rows], tag
        # metrics.csv has the double's shortest digits; the event file its float
        assert [s.value for s in scalars] == pytest.approx([float(r[tag]) for r in rows],
                                                          rel=1e-5), tag
    tensors, _ = load_model(out)
    assert set(acc.Tags()["histograms"]) == set(tensors)
    for name, tensor in tensors.items():
        hists = acc.Histograms(name)
        assert [h.step for h in hists] == [1, 2, 3], name
        last = hists[-1].histogram_value
        assert last.num == tensor.size and sum(last.bucket) == tensor.size, name
        assert (last.min, last.max) == (float(tensor.min()), float(tensor.max())), name


def test_val_outputs_of_a_csv_job(rings_csv, train, tmp_path):
    """--val-outputs writes one row of class probabilities per validation row, as float32."""
    url, _, _ = rings_csv
    job = {"dataset_url": url, "dataset": {"label_column": "ring"},
           "model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"}]},
           "hyperparameters": {"epochs": 3, "validation_split": 0.2, "seed": 2}}
    npy = tmp_path / "val.npy"
    proc, out = train(job, extra=("--val-outputs", str(npy)))
    assert proc.returncode == 0, proc.stderr
    p = np.load(npy)
    assert p.shape == (400, 3) and p.dtype == np.float32
    assert np.allclose(p.sum(axis=1), 1, atol=1e-5)
    assert "validation outputs: 400 rows × 3" in proc.stdout


def test_model_onnx_of_a_csv_job_matches_its_safetensors(rings_csv, train):
    """model.onnx in onnxruntime on raw rows gives what the safetensors weights give computed by
    hand on the rows standardised with the saved mean and std (Linear, tanh, batchnorm on
    features, Softmax): names, shapes and the batch dimension as docs/API.md says."""
    ort = pytest.importorskip("onnxruntime", reason="the ONNX check needs onnxruntime (PyPI)")
    url, _, _ = rings_csv
    job = {"dataset_url": url, "dataset": {"label_column": "ring"},
           "model": {"layers": [{"type": "dense", "units": 16, "activation": "tanh"},
                                {"type": "batchnorm"}, {"type": "dropout", "rate": 0.1}]},
           "hyperparameters": {"epochs": 2, "seed": 3}}
    proc, out = train(job)
    assert proc.returncode == 0, proc.stderr
    session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    (inp,), (outp,) = session.get_inputs(), session.get_outputs()
    assert (inp.name, inp.shape, outp.name, outp.shape) == ("input", ["batch", 2], "output",
                                                            ["batch", 3])
    std = json.loads(session.get_modelmeta().custom_metadata_map["trainyard.standardization"])
    mean, sd = np.float32(std["mean"]), np.float32(std["std"])
    x = np.random.default_rng(0).normal(size=(50, 2)).astype(np.float32) * sd + mean
    (got,) = session.run(["output"], {"input": x})
    w = load_file(str(out / "model.safetensors"))
    h = np.tanh(((x - mean) / sd) @ w["0.weight"].T + w["0.bias"])
    h = (h - w["2.running_mean"]) / np.sqrt(w["2.running_var"] + 1e-3) * w["2.weight"] \
        + w["2.bias"]
    z = h @ w["4.weight"].T + w["4.bias"]
    want = np.exp(z - z.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    assert np.abs(got - want).max() < 1e-5


def test_a_linear_model_cannot_do_rings(rings_csv, train):
    """The rings need the hidden layers: the same data without them stays far below 95%."""
    url, _, _ = rings_csv
    job = {"dataset_url": url, "hyperparameters": {"epochs": 10, "learning_rate": 0.01,
                                                   "validation_split": 0.2}}
    proc, out = train(job)
    assert proc.returncode == 0, proc.stderr
    assert float(read_metrics(out)[-1]["val_accuracy"]) < 0.8


def test_same_job_gives_the_same_numbers(rings_csv, train):
    url, _, _ = rings_csv
    job = {"dataset_url": url,
           "model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"},
                                {"type": "dropout", "rate": 0.2}]},
           "hyperparameters": {"epochs": 3, "batch_size": 64, "validation_split": 0.1,
                               "seed": 11}}
    p1, out1 = train(job, "first")
    p2, out2 = train(job, "second")
    assert p1.returncode == 0 and p2.returncode == 0, p1.stderr + p2.stderr
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]
    assert strip(read_metrics(out1)) == strip(read_metrics(out2))
    t1, _ = load_model(out1)
    t2, _ = load_model(out2)
    assert all(np.array_equal(t1[k], t2[k]) for k in t1)

    job["hyperparameters"]["seed"] = 12
    p3, out3 = train(job, "third")
    assert p3.returncode == 0
    assert not np.array_equal(load_model(out3)[0]["0.weight"], t1["0.weight"])


def test_binary_classification_gzip_without_header_and_sha256(data_server, train):
    folder, base = data_server
    rng = np.random.default_rng(5)
    x = rng.normal(0, 1, (600, 3))
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(int)
    text = "\n".join(f"{a:.4f},{b:.4f},{c:.4f},{t}" for (a, b, c), t in zip(x, y)) + "\n"
    blob = gzip.compress(text.encode())
    (folder / "binary.data").write_bytes(blob)  # gzip is found by its magic bytes, not a name
    job = {"dataset_url": f"{base}/binary.data", "binary": True,
           "dataset": {"sha256": hashlib.sha256(blob).hexdigest()},
           "hyperparameters": {"epochs": 20, "batch_size": 50, "learning_rate": 0.05,
                               "validation_split": 0.25}}
    proc, out = train(job)
    assert proc.returncode == 0, proc.stderr
    assert float(read_metrics(out)[-1]["val_accuracy"]) > 0.9
    tensors, meta = load_model(out)
    assert json.loads(meta["trainyard.model"])["output"] == "sigmoid"
    assert tensors["0.weight"].shape == (1, 3)
    assert json.loads(meta["trainyard.features"]) == ["c1", "c2", "c3"]

    job["dataset"]["sha256"] = "0" * 64
    proc, _ = train(job, "badsum")
    assert proc.returncode == 1
    assert "sha256" in proc.stderr.lower() or "checksum" in proc.stderr.lower()


def test_file_url_under_the_dataset_root(train, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_csv(data / "tiny.csv", ["a", "y"], [[i, i % 2] for i in range(40)])
    job = {"dataset_url": f"file://{data}/tiny.csv", "hyperparameters": {"epochs": 2}}
    proc, _ = train(job, extra=("--dataset-root", str(data)))
    assert proc.returncode == 0, proc.stderr
    proc, _ = train(job, "outside", extra=("--dataset-root", str(tmp_path / "elsewhere")))
    assert proc.returncode == 1 and "root" in proc.stderr


def test_invalid_job_exits_2_naming_every_field(train):
    job = {"dataset_url": "ftp://x/y.csv", "colour": "red",
           "hyperparameters": {"epochs": 0, "optimizer": "rmsprop"},
           "model": {"layers": [{"type": "dense", "units": -3}]}}
    proc, out = train(job)
    assert proc.returncode == 2
    for field in ("dataset_url", "colour", "hyperparameters.epochs",
                  "hyperparameters.optimizer", "model.layers[0].units"):
        assert field in proc.stderr, (field, proc.stderr)
    assert not (out / "model.safetensors").exists()


def test_bad_cell_names_line_and_column(data_server, train):
    folder, base = data_server
    (folder / "bad.csv").write_text("a,b,y\n1,2,0\n3,oops,1\n")
    proc, out = train({"dataset_url": f"{base}/bad.csv", "hyperparameters": {"epochs": 1}})
    assert proc.returncode == 1
    assert "line 3" in proc.stderr and "oops" in proc.stderr, proc.stderr
    assert "failed" in (out / "train.log").read_text()


def test_missing_dataset_is_a_clear_failure(data_server, train):
    _, base = data_server
    proc, _ = train({"dataset_url": f"{base}/nope.csv", "hyperparameters": {"epochs": 1}})
    assert proc.returncode == 1 and "404" in proc.stderr


def test_devices_lists_json(trainyard_bin):
    import subprocess
    out = subprocess.run([str(trainyard_bin), "devices", "--json"], capture_output=True,
                         text=True, check=True)
    devices = json.loads(out.stdout)["devices"]
    assert devices and {"name", "type", "compute_units", "global_mem_bytes",
                        "opencl_c_version"} <= set(devices[0])


def checkpoint_epoch(path):
    with safe_open(str(path), framework="numpy") as f:
        return int(f.metadata()["trainyard.epoch"])


def test_killed_run_resumes_to_the_same_model(data_server, trainyard_bin, train, tmp_path):
    """kill -9 mid-run, then --resume from the checkpoint: the final model equals an uninterrupted
    run's bit for bit, and metrics.csv holds every epoch once, the early ones as first reported.
    Dropout and Adam make the optimizer moments, step and dropout stream part of the state."""
    folder, base = data_server
    rng = np.random.default_rng(21)
    x, label = rings(20000, rng)
    write_csv(folder / "rings-big.csv", ["x", "y", "ring"],
              [[f"{a:.5f}", f"{b:.5f}", c] for (a, b), c in zip(x, label)])
    epochs = 40
    job = {"dataset_url": f"{base}/rings-big.csv", "dataset": {"label_column": "ring"},
           "model": {"layers": [{"type": "dense", "units": 32, "activation": "relu"},
                                {"type": "dropout", "rate": 0.2},
                                {"type": "dense", "units": 16, "activation": "tanh"}]},
           "hyperparameters": {"epochs": epochs, "batch_size": 32, "learning_rate": 0.003,
                               "optimizer": "adam", "validation_split": 0.1, "seed": 4}}
    every = ("--checkpoint-seconds", "0")
    full_proc, full = train(job, "full", extra=every)
    assert full_proc.returncode == 0, full_proc.stderr

    job_path = tmp_path / "full.json"
    out = tmp_path / "killed"
    kill_after_epochs(trainyard_bin, job_path, out, 3, every)
    assert not (out / "model.safetensors").exists()
    ckpt = out / "checkpoint.safetensors"
    done = checkpoint_epoch(ckpt)  # metrics.csv gets an epoch's row before its checkpoint
    assert 2 <= done < epochs

    resumed = resume(trainyard_bin, job_path, out, ckpt, every)
    assert f"resuming after epoch {done} of {epochs}" in resumed.stdout
    assert f"epoch {done}/{epochs}" not in resumed.stdout  # finished epochs are not re-reported

    t_full, meta_full = load_model(full)
    t_res, meta_res = load_model(out)
    assert sorted(t_full) == sorted(t_res)
    for k in t_full:
        assert t_full[k].tobytes() == t_res[k].tobytes(), k
    assert meta_full == meta_res

    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]
    rows = read_metrics(out)
    assert [int(r["epoch"]) for r in rows] == list(range(1, epochs + 1))
    assert strip(rows) == strip(read_metrics(full))


def test_resume_refuses_other_jobs_and_corrupt_checkpoints(rings_csv, train, tmp_path):
    url, _, _ = rings_csv
    job = {"dataset_url": url, "hyperparameters": {"epochs": 2, "seed": 1}}
    proc, out = train(job, "first")
    assert proc.returncode == 0, proc.stderr
    ckpt = out / "checkpoint.safetensors"
    assert checkpoint_epoch(ckpt) == 2  # the last epoch always gets one

    job["hyperparameters"]["learning_rate"] = 0.5
    proc, _ = train(job, "other", extra=("--resume", str(ckpt)))
    assert proc.returncode == 1
    assert "another job" in proc.stderr and "hyperparameters.learning_rate" in proc.stderr

    bad = tmp_path / "corrupt.safetensors"
    bad.write_bytes(ckpt.read_bytes()[:100])
    proc, _ = train(job, "corrupt", extra=("--resume", str(bad)))
    assert proc.returncode == 1 and "checkpoint" in proc.stderr, proc.stderr

    proc, _ = train(job, "model", extra=("--resume", str(out / "model.safetensors")))
    assert proc.returncode == 1 and "not a trainyard checkpoint" in proc.stderr, proc.stderr


def wait_for_saver(kcache):
    """Blocks until the detached process writing kcache is done (it holds .save.lock)."""
    import fcntl
    lock = kcache / ".save.lock"
    if lock.exists():
        with open(lock) as f:
            fcntl.flock(f, fcntl.LOCK_EX)


def test_cold_kernel_build_on_two_processes_matches_serial(rings_csv, train, tmp_path,
                                                            monkeypatch):
    """With both kernel caches empty, train builds on two processes (train/kbuild.c) and leaves
    the cache to a detached saver: same numbers as the one-process build, a cache that a later
    run loads (even with PoCL's own cache empty, and with one of its files corrupt)."""
    url, _, _ = rings_csv
    job = {"dataset_url": url,
           "model": {"layers": [{"type": "dense", "units": 16, "activation": "relu"},
                                {"type": "dropout", "rate": 0.2}]},
           "hyperparameters": {"epochs": 2, "batch_size": 64, "validation_split": 0.1}}
    runs = {}
    for name, extra_env in (("split", {}), ("serial", {"TRAINYARD_KERNEL_BUILD": "serial"})):
        kcache, pcache = tmp_path / f"k-{name}", tmp_path / f"p-{name}"
        monkeypatch.setenv("TRAINYARD_KERNEL_CACHE", str(kcache))
        monkeypatch.setenv("POCL_CACHE_DIR", str(pcache))
        monkeypatch.delenv("TRAINYARD_KERNEL_BUILD", raising=False)
        for k, v in extra_env.items():
            monkeypatch.setenv(k, v)
        proc, out = train(job, name)
        assert proc.returncode == 0, proc.stderr
        assert "kernels compiled in" in proc.stdout
        runs[name] = (out, kcache)
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]
    (out1, kcache), (out2, _) = runs["split"], runs["serial"]
    assert strip(read_metrics(out1)) == strip(read_metrics(out2))
    t1, t2 = load_model(out1)[0], load_model(out2)[0]
    assert all(np.array_equal(t1[k], t2[k]) for k in t1)

    wait_for_saver(kcache)
    bins = sorted(kcache.glob("*.bin"))
    assert len(bins) >= 6, bins
    monkeypatch.delenv("TRAINYARD_KERNEL_BUILD")
    monkeypatch.setenv("TRAINYARD_KERNEL_CACHE", str(kcache))
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path / "p-empty"))
    proc, out3 = train(job, "warm")
    assert proc.returncode == 0, proc.stderr
    assert "kernels loaded from cache" in proc.stdout
    bins[0].write_bytes(b"not a binary")
    proc, out4 = train(job, "corrupt")
    assert proc.returncode == 0, proc.stderr
    for out in (out3, out4):
        assert strip(read_metrics(out)) == strip(read_metrics(out1))
