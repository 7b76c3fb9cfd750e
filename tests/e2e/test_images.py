"""End-to-end tests of convolutional jobs on images with `trainyard train`: a synthetic,
learnable CIFAR-10-format dataset generated here (class-dependent coloured squares on noise,
32×32, data_batch_1.bin and test_batch.bin in a .tar.gz) served over HTTP by the local data
server; the seed CNN trained on it; its model.safetensors loaded into PyTorch (Debian's
python3-torch under /usr/bin/python3, in a subprocess) whose outputs must match our
--val-outputs; a batchnorm + average pooling model and a binary float32 npz one likewise; the
bad-file cases; an image job through serve and a local worker; and a killed CNN run resumed to
the same model bit for bit.
"""
import io
import json
import pathlib
import subprocess
import tarfile

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file

from helpers import TERMINAL, kill_after_epochs, resume, submit, wait_for

HERE = pathlib.Path(__file__).resolve().parent
SYSTEM_PYTHON = "/usr/bin/python3"

PALETTE = np.array([[230, 40, 40], [40, 230, 40], [40, 40, 230], [230, 230, 40], [230, 40, 230],
                    [40, 230, 230], [240, 140, 20], [130, 60, 200], [120, 120, 120],
                    [250, 250, 250]], dtype=float)


def make_images(n, rng, noise=45.0):
    """Class k: a 12×12 square of colour k at a place that depends on k, on noise."""
    labels = rng.integers(0, 10, n)
    img = rng.normal(40, noise, (n, 32, 32, 3))
    for i, k in enumerate(labels):
        r0, c0 = 4 + (k % 3) * 6, 4 + (k // 3) * 5
        img[i, r0:r0 + 12, c0:c0 + 12, :] += PALETTE[k] * 0.7
    return np.clip(img, 0, 255).astype(np.uint8), labels


def cifar_records(images, labels):
    """CIFAR-10 binary: per image a label byte, then the R, G and B planes of 1024 bytes."""
    planes = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
    return np.concatenate([np.asarray(labels, np.uint8)[:, None], planes], axis=1).tobytes()


def tar_gz(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def npz(**arrays):
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


@pytest.fixture(scope="module")
def cifar(data_server):
    """(URL, test images, test labels) of a 1,000 + 300 image CIFAR-format .tar.gz."""
    folder, base = data_server
    rng = np.random.default_rng(0)
    train_x, train_y = make_images(1000, rng)
    test_x, test_y = make_images(300, rng)
    (folder / "cifar.tar.gz").write_bytes(tar_gz({
        "cifar-10-batches-bin/data_batch_1.bin": cifar_records(train_x, train_y),
        "cifar-10-batches-bin/test_batch.bin": cifar_records(test_x, test_y)}))
    return f"{base}/cifar.tar.gz", test_x, test_y


def seed_job(url, **hyper):
    """The seed workload: CIFAR-10 resized to 64×64, Conv2D(32, 3×3, relu) → MaxPooling2D(2×2) →
    Flatten → Dense(10, softmax), Adam."""
    return {"dataset_url": url, "dataset": {"format": "cifar10", "resize": [64, 64]},
            "model": {"input_shape": [64, 64, 3],
                      "layers": [{"type": "conv2d", "filters": 32, "kernel_size": 3,
                                  "activation": "relu"},
                                 {"type": "maxpool2d", "pool_size": 2},
                                 {"type": "flatten"},
                                 {"type": "dense", "units": 10, "activation": "softmax"}]},
            "hyperparameters": {"epochs": 1, "batch_size": 32, "optimizer": "adam", **hyper}}


def metrics(out):
    lines = (out / "metrics.csv").read_text().splitlines()
    keys = lines[0].split(",")
    return [dict(zip(keys, line.split(","))) for line in lines[1:]]


def torch_outputs_match(out, images, val_outputs, tmp_path):
    """Loads the model into PyTorch and compares its outputs on images with ours; and model.onnx
    in onnxruntime on the same images as they are (it resizes, scales and standardises them)."""
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import torch"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("PyTorch comparison: /usr/bin/python3 has no torch "
                    "(apt-get install -y python3-torch)")
    npy = tmp_path / "images.npy"
    np.save(npy, images)
    proc = subprocess.run([SYSTEM_PYTHON, str(HERE / "torch_compare.py"),
                           str(out / "model.safetensors"), str(npy), str(val_outputs)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    result["onnx_max_diff"] = onnx_max_diff(out / "model.onnx", images, np.load(val_outputs))
    print(f"model.onnx on raw images vs --val-outputs: max |difference| "
          f"{result['onnx_max_diff']:.3g}")
    return result


def onnx_max_diff(model_path, images, ours):
    """model.onnx run by onnxruntime on images (pixels as stored, [N, H, W, C]): the largest
    difference from our outputs."""
    ort = pytest.importorskip("onnxruntime", reason="the ONNX check needs onnxruntime (PyPI)")
    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    (got,) = session.run(["output"], {"input": np.asarray(images, np.float32)})
    assert got.shape == ours.shape, (got.shape, ours.shape)
    return float(np.abs(got - ours).max())


def test_seed_cnn_learns_and_loads_in_pytorch(cifar, train, tmp_path):
    url, test_x, test_y = cifar
    val_out = tmp_path / "val.npy"
    proc, out = train(seed_job(url), extra=("--val-outputs", str(val_out)))
    assert proc.returncode == 0, proc.stderr
    log = proc.stdout
    assert "1000 training images and 300 test images of 32×32×3 (uint8), 10 classes" in log, log
    assert "300 validation images (the test set)" in log
    row = metrics(out)[-1]
    print(f"seed CNN, one epoch of 1000 images 64×64×3: {float(row['seconds']):.2f} s, "
          f"val_accuracy {row['val_accuracy']}")
    assert float(row["val_accuracy"]) >= 0.9, row

    # Our outputs are probabilities in the test set's order, and agree with the accuracy.
    ours = np.load(val_out)
    assert ours.shape == (300, 10) and ours.dtype == np.float32
    assert np.allclose(ours.sum(axis=1), 1, atol=1e-5)
    assert abs(np.mean(ours.argmax(axis=1) == test_y) - float(row["val_accuracy"])) < 1e-6

    tensors = load_file(str(out / "model.safetensors"))
    assert tensors["0.weight"].shape == (32, 3, 3, 3) and tensors["0.bias"].shape == (32,)
    assert tensors["4.weight"].shape == (10, 31 * 31 * 32)
    with safe_open(str(out / "model.safetensors"), framework="numpy") as f:
        meta = f.metadata()
    assert meta["trainyard.pytorch"] == (
        "nn.Sequential(nn.Conv2d(3, 32, kernel_size=(3, 3), stride=(1, 1), padding=(0, 0)), "
        "nn.ReLU(), nn.MaxPool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0)), "
        "nn.Flatten(), nn.Linear(30752, 10), nn.Softmax(dim=1))")
    assert json.loads(meta["trainyard.classes"]) == [str(i) for i in range(10)]

    result = torch_outputs_match(out, test_x, val_out, tmp_path)
    assert result["max_diff"] < 1e-4, result
    assert result["onnx_max_diff"] < 1e-5, result  # model.onnx in onnxruntime
    assert result["agree"] == 1.0, result


def test_batchnorm_avgpool_model_loads_in_pytorch(cifar, train, tmp_path):
    """Same padding (symmetric and asymmetric), batchnorm after a conv and after a dense layer,
    average and global pooling, standardisation: PyTorch gives the same outputs."""
    url, test_x, _ = cifar
    job = {"dataset_url": url,
           "dataset": {"format": "cifar10", "resize": [16, 16], "scale": "standardize"},
           "model": {"input_shape": [16, 16, 3],
                     "layers": [{"type": "conv2d", "filters": 8, "kernel_size": 3,
                                 "padding": "same", "activation": "relu"},
                                {"type": "batchnorm"},
                                {"type": "avgpool2d", "pool_size": 2},
                                {"type": "conv2d", "filters": 8, "kernel_size": 3, "strides": 2,
                                 "padding": "same", "use_bias": False},
                                {"type": "batchnorm", "momentum": 0.9},
                                {"type": "global_avgpool2d"},
                                {"type": "dense", "units": 16, "activation": "tanh"},
                                {"type": "batchnorm"},
                                {"type": "dropout", "rate": 0.1}]},
           "hyperparameters": {"epochs": 2, "batch_size": 50, "learning_rate": 0.01}}
    val_out = tmp_path / "val.npy"
    proc, out = train(job, extra=("--val-outputs", str(val_out)))
    assert proc.returncode == 0, proc.stderr
    assert float(metrics(out)[-1]["val_accuracy"]) > 0.3  # well above chance after 2 epochs
    with safe_open(str(out / "model.safetensors"), framework="numpy") as f:
        meta = f.metadata()
        names = set(f.keys())
    assert "nn.ZeroPad2d((0, 1, 0, 1))" in meta["trainyard.pytorch"]  # 8 → 4 with stride 2
    assert "nn.BatchNorm2d(8" in meta["trainyard.pytorch"]
    assert "nn.BatchNorm1d(16" in meta["trainyard.pytorch"]
    assert {"2.running_mean", "2.running_var", "2.num_batches_tracked"} <= names
    assert len(json.loads(meta["trainyard.standardization"])["mean"]) == 3
    result = torch_outputs_match(out, test_x, val_out, tmp_path)
    assert result["max_diff"] < 1e-4, result
    assert result["onnx_max_diff"] < 1e-5, result  # model.onnx in onnxruntime


def test_batchnorm_after_flatten_loads_in_pytorch(cifar, train, tmp_path):
    """A batchnorm on flattened maps normalises each (h, w, c) feature: PyTorch's BatchNorm1d
    gets its vectors in (c, h, w) order, like the dense layer's columns after it."""
    url, test_x, _ = cifar
    job = {"dataset_url": url, "dataset": {"format": "cifar10", "resize": [8, 8]},
           "model": {"input_shape": [8, 8, 3],
                     "layers": [{"type": "conv2d", "filters": 3, "kernel_size": 3, "strides": 2,
                                 "padding": "same", "activation": "tanh"},
                                {"type": "flatten"}, {"type": "batchnorm"},
                                {"type": "dropout", "rate": 0.1}]},
           "hyperparameters": {"epochs": 2, "batch_size": 64}}
    val_out = tmp_path / "val.npy"
    proc, out = train(job, extra=("--val-outputs", str(val_out)))
    assert proc.returncode == 0, proc.stderr
    result = torch_outputs_match(out, test_x, val_out, tmp_path)
    assert result["max_diff"] < 1e-4, result
    assert result["onnx_max_diff"] < 1e-5, result  # model.onnx in onnxruntime
    assert ("nn.Flatten(), nn.BatchNorm1d(48, eps=0.001, momentum=0.01), nn.Dropout(p=0.1), "
            "nn.Linear(48, 10)") in result["modules"]


def test_binary_float_npz_model_loads_in_pytorch(data_server, train, tmp_path):
    """float32 grey images in an npz with its own test set, two classes as a binary job,
    standardised, flipped while training: the sigmoid outputs match PyTorch's."""
    folder, base = data_server
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 300)
    x = (rng.normal(0.3, 0.1, (300, 8, 8)) + y[:, None, None] * 0.4).astype(np.float32)
    (folder / "binary.npz").write_bytes(npz(x_train=x[:240], y_train=y[:240], x_test=x[240:],
                                            y_test=y[240:]))
    job = {"dataset_url": f"{base}/binary.npz", "binary": True,
           "dataset": {"format": "npz", "scale": "standardize", "augment": {"flip": True}},
           "model": {"input_shape": [8, 8, 1],
                     "layers": [{"type": "conv2d", "filters": 4, "kernel_size": 3,
                                 "activation": "relu"},
                                {"type": "global_avgpool2d"},
                                {"type": "dense", "units": 1, "activation": "sigmoid"}]},
           "hyperparameters": {"epochs": 5, "learning_rate": 0.01}}
    val_out = tmp_path / "val.npy"
    proc, out = train(job, extra=("--val-outputs", str(val_out)))
    assert proc.returncode == 0, proc.stderr
    assert "(float32), 2 classes, from npz" in proc.stdout
    assert float(metrics(out)[-1]["val_accuracy"]) > 0.9
    assert np.load(val_out).shape == (60, 1)
    result = torch_outputs_match(out, x[240:, :, :, None], val_out, tmp_path)
    assert result["max_diff"] < 1e-4, result
    assert result["onnx_max_diff"] < 1e-5, result  # model.onnx in onnxruntime
    assert result["modules"].endswith("nn.Linear(4, 1), nn.Sigmoid())")


def test_image_job_through_the_service(cifar, serve):
    """The same road in the service: submitted over HTTP, trained by a local worker, the model
    downloaded with its PyTorch names."""
    url, _, _ = cifar
    svc = serve()
    job = {"dataset_url": url, "dataset": {"format": "cifar10", "resize": [16, 16]},
           "model": {"input_shape": [16, 16, 3],
                     "layers": [{"type": "conv2d", "filters": 8, "kernel_size": 3,
                                 "activation": "relu"},
                                {"type": "maxpool2d"}, {"type": "batchnorm"},
                                {"type": "flatten"},
                                {"type": "dense", "units": 10, "activation": "softmax"}]},
           "hyperparameters": {"epochs": 2}}
    job_id = submit(svc, job).json()["id"]
    done = wait_for(svc, job_id, TERMINAL)
    assert done["status"] == "succeeded", done
    epochs = svc.http.get(f"{svc.url}/jobs/{job_id}/metrics").json()["epochs"]
    assert epochs[-1]["val_accuracy"] > 0.5  # chance is 0.1
    r = svc.http.get(f"{svc.url}/jobs/{job_id}/artifacts/model.safetensors")
    assert r.status_code == 200
    path = pathlib.Path(svc.data_dir.parent / "model.safetensors")
    path.write_bytes(r.content)
    tensors = load_file(str(path))
    assert tensors["0.weight"].shape == (8, 3, 3, 3)
    assert tensors["3.running_var"].shape == (8,) and tensors["5.weight"].shape == (10, 392)


def bad_case(data_server, name, blob):
    folder, base = data_server
    (folder / name).write_bytes(blob)
    return f"{base}/{name}"


def small_job(url, fmt="cifar10", shape=(32, 32, 3)):
    return {"dataset_url": url, "dataset": {"format": fmt},
            "model": {"input_shape": list(shape),
                      "layers": [{"type": "conv2d", "filters": 2, "kernel_size": 3},
                                 {"type": "global_avgpool2d"}]},
            "hyperparameters": {"epochs": 1}}


def test_bad_files_fail_cleanly(data_server, train):
    rng = np.random.default_rng(3)
    x, y = make_images(20, rng)
    good = cifar_records(x, y)
    cases = {
        "truncated record": (bad_case(data_server, "trunc.bin", good[:-100]), {},
                             "truncated record 20"),
        "label out of range": (bad_case(data_server, "label.bin",
                                        bytes([12]) + good[1:]), {},
                               "record 1 has label 12; CIFAR-10 labels are 0 to 9"),
        "wrong magic": (bad_case(data_server, "mnist.tar.gz", tar_gz({
            "train-images-idx3-ubyte": b"\0\0\x08\x09" + bytes(12),
            "train-labels-idx1-ubyte": b"\0\0\x08\x01" + bytes(4)})),
            {"fmt": "mnist", "shape": (28, 28, 1)}, "wrong magic 0x00000809"),
        "wrong size": (bad_case(data_server, "size.npz", npz(x=x, y=y)),
                       {"fmt": "npz", "shape": (28, 28, 3)},
                       "the images are 32×32 but model.input_shape is [28, 28, 3]"),
        "wrong channels": (bad_case(data_server, "channels.npz", npz(x=x[..., 0], y=y)),
                           {"fmt": "npz"},
                           "the images have 1 channel but model.input_shape [32, 32, 3] wants 3"),
    }
    for what, (url, opts, message) in cases.items():
        proc, out = train(small_job(url, **opts), what.replace(" ", "-"))
        assert proc.returncode == 1, (what, proc.stdout, proc.stderr)
        assert message in proc.stderr, (what, proc.stderr)
        assert not (out / "model.safetensors").exists(), what
        assert "failed: " in (out / "train.log").read_text(), what


def test_val_outputs_needs_validation_rows(data_server, train, tmp_path):
    rng = np.random.default_rng(4)
    x, y = make_images(16, rng)
    url = bad_case(data_server, "novalidation.bin", cifar_records(x, y))
    proc, _ = train(small_job(url), extra=("--val-outputs", str(tmp_path / "v.npy")))
    assert proc.returncode == 1 and "--val-outputs needs validation rows" in proc.stderr


def test_killed_cnn_run_resumes_to_the_same_model(cifar, trainyard_bin, train, tmp_path):
    """kill -9 after a few epochs of a small CNN with batchnorm, dropout and augmentation, then
    --resume: the model (moving statistics included) equals an uninterrupted run's bit for bit."""
    url, _, _ = cifar
    epochs = 30
    job = {"dataset_url": url,
           "dataset": {"format": "cifar10", "resize": [12, 12],
                       "augment": {"flip": True, "crop_padding": 2}},
           "model": {"input_shape": [12, 12, 3],
                     "layers": [{"type": "conv2d", "filters": 4, "kernel_size": 3,
                                 "activation": "relu"},
                                {"type": "batchnorm"},
                                {"type": "maxpool2d", "pool_size": 2},
                                {"type": "flatten"},
                                {"type": "dropout", "rate": 0.2}]},
           "hyperparameters": {"epochs": epochs, "batch_size": 64, "seed": 5}}
    every = ("--checkpoint-seconds", "0")
    full_proc, full = train(job, "full", extra=every)
    assert full_proc.returncode == 0, full_proc.stderr

    job_path = tmp_path / "full.json"
    out = tmp_path / "killed"
    kill_after_epochs(trainyard_bin, job_path, out, 3, every)
    ckpt = out / "checkpoint.safetensors"
    with safe_open(str(ckpt), framework="numpy") as f:
        done = int(f.metadata()["trainyard.epoch"])
        assert "stats" in f.keys()
    assert 2 <= done < epochs
    resumed = resume(trainyard_bin, job_path, out, ckpt, every)
    assert f"resuming after epoch {done} of {epochs}" in resumed.stdout
    a = load_file(str(full / "model.safetensors"))
    b = load_file(str(out / "model.safetensors"))
    assert sorted(a) == sorted(b) and "2.running_var" in a
    for k in a:
        assert a[k].tobytes() == b[k].tobytes(), k
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds"} for r in rows]
    assert strip(metrics(out)) == strip(metrics(full))
