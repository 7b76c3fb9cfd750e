"""End-to-end tests of the GPU kernel combination on PoCL: `trainyard train` with
TRAINYARD_DEVICE_CLASS=gpu takes every choice a GPU takes (tiled GEMM, im2col convolutions with no
fused conv + max pool, the element-wise GPU forms) on the CPU device, and must learn what the CPU
class learns from the same job: the seed CNN on a small generated CIFAR-format set and an MLP on
three rings. The two runs share data, seed and batch order, so their loss curves differ only by
float rounding (other summation orders); they are compared with each other, not with fixed
numbers. TRAINYARD_PROFILE's per-kernel table shows which kernels each run launched.
"""
import subprocess

import numpy as np
import pytest

from test_images import cifar_records, make_images, metrics, tar_gz
from test_train import rings, write_csv

CLASSES = ("cpu", "gpu")


def device_kind(trainyard_bin):
    """The kind of the first device `trainyard devices` lists (the one train picks, "any")."""
    out = subprocess.run([str(trainyard_bin), "devices"], capture_output=True, text=True,
                         timeout=60).stdout
    kinds = [line.split()[1] for line in out.splitlines() if line[:1].isdigit()]
    return "gpu" if "gpu" in kinds else (kinds[0] if kinds else None)


@pytest.fixture(scope="module")
def pocl(trainyard_bin):
    if device_kind(trainyard_bin) != "cpu":
        pytest.skip("needs a CPU OpenCL device (PoCL) to run the GPU class beside the CPU class")


def run_both(train, monkeypatch, job, name):
    """Trains job under each class, profiled; returns {class: (metrics rows, stderr)}."""
    runs = {}
    monkeypatch.setenv("TRAINYARD_PROFILE", "1")
    for cls in CLASSES:
        monkeypatch.setenv("TRAINYARD_DEVICE_CLASS", cls)
        proc, out = train(job, out_name=f"{name}-{cls}")
        assert proc.returncode == 0, (cls, proc.stderr)
        runs[cls] = (metrics(out), proc.stderr)
    return runs


def launched(stderr):
    """Kernel names of TRAINYARD_PROFILE's table (the first word of each row)."""
    return {line.split()[0] for line in stderr.splitlines() if line.strip()}


def assert_curves_agree(runs, keys):
    """Same epochs; each curve within a small part of its own range of the other class's."""
    cpu, gpu = runs["cpu"][0], runs["gpu"][0]
    assert len(cpu) == len(gpu) > 1
    for key in keys:
        a = np.array([float(r[key]) for r in cpu])
        b = np.array([float(r[key]) for r in gpu])
        span = max(np.ptp(a), np.ptp(b))
        assert span > 0, (key, a)  # the curve moved: the runs trained
        diff = np.abs(a - b).max()
        print(f"{key}: cpu {np.round(a, 4)}, gpu {np.round(b, 4)}, max diff {diff:.2e}")
        assert diff <= 0.05 * span, (key, a, b)


def test_seed_cnn_gpu_class_matches_cpu_class(pocl, data_server, train, monkeypatch):
    folder, base = data_server
    rng = np.random.default_rng(11)
    x, y = make_images(320, rng)
    tx, ty = make_images(64, rng)
    (folder / "gpu-paths.tar.gz").write_bytes(tar_gz({
        "cifar-10-batches-bin/data_batch_1.bin": cifar_records(x, y),
        "cifar-10-batches-bin/test_batch.bin": cifar_records(tx, ty)}))
    job = {"dataset_url": f"{base}/gpu-paths.tar.gz", "dataset": {"format": "cifar10"},
           "model": {"input_shape": [32, 32, 3],
                     "layers": [{"type": "conv2d", "filters": 8, "kernel_size": 3,
                                 "activation": "relu"},
                                {"type": "maxpool2d", "pool_size": 2},
                                {"type": "flatten"},
                                {"type": "dense", "units": 10, "activation": "softmax"}]},
           "hyperparameters": {"epochs": 4, "batch_size": 32, "optimizer": "adam",
                               "learning_rate": 0.002, "seed": 5}}
    runs = run_both(train, monkeypatch, job, "cnn")
    cpu, gpu = launched(runs["cpu"][1]), launched(runs["gpu"][1])
    # the CPU class: direct convolutions fused with the pool, the CPU GEMMs; the GPU class:
    # im2col, the tiled GEMM, pooling and the image batch one work-item per element, and the
    # per-element bias + activation and Adam
    assert {"conv_fwd_pool", "conv_dw_pool", "act_bias_fwd_cpu", "image_batch"} <= cpu, cpu
    assert not {"gemm_tiled", "pool_fwd_gpu", "image_batch_gpu"} & cpu, cpu
    assert {"conv_im2col", "gemm_tiled", "pool_fwd_gpu", "pool_bwd_gpu", "image_batch_gpu",
            "act_bias_fwd", "optim_adam"} <= gpu, gpu
    assert not {"gemm_cpu", "gemm_nt_narrow", "gemm_tn_narrow", "conv_fwd", "conv_fwd_pool",
                "act_bias_fwd_cpu", "optim_adam_cpu", "pool_fwd", "pool_bwd",
                "image_batch"} & gpu, gpu
    assert_curves_agree(runs, ("loss", "val_loss", "accuracy"))


def test_mlp_gpu_class_matches_cpu_class(pocl, data_server, train, monkeypatch):
    folder, base = data_server
    x, label = rings(600, np.random.default_rng(12))
    write_csv(folder / "gpu-rings.csv", ["x", "y", "ring"],
              [[f"{a:.5f}", f"{b:.5f}", int(c)] for (a, b), c in zip(x, label)])
    job = {"dataset_url": f"{base}/gpu-rings.csv", "dataset": {"label_column": "ring"},
           "task": "classification",
           "model": {"layers": [{"type": "dense", "units": 32, "activation": "relu"},
                                {"type": "dense", "units": 32, "activation": "tanh"}]},
           "hyperparameters": {"epochs": 8, "batch_size": 32, "learning_rate": 0.01,
                               "optimizer": "adam", "validation_split": 0.2, "seed": 3}}
    runs = run_both(train, monkeypatch, job, "mlp")
    assert "gemm_tiled" in launched(runs["gpu"][1]) and "gemm_tiled" not in launched(
        runs["cpu"][1])
    assert_curves_agree(runs, ("loss", "val_loss", "accuracy", "val_accuracy"))
