"""Writes a CIFAR-10-format data set for bench/cnn.sh: 50,000 training and 10,000 test images,
32×32×3 uint8, labels 0–9, as the real archive lays them out (cifar-10-batches-bin/
data_batch_1.bin … data_batch_5.bin of 10,000 records each, test_batch.bin, batches.meta.txt;
a record is the label byte then the 1024 red, 1024 green and 1024 blue bytes, row-major).

The images are learnable but not trivial: class c is a sinusoidal grating at its own angle and
frequency, tinted with its own colour, shifted by a random phase, at a random contrast, under
Gaussian noise (σ = 40 of 255). Deterministic: numpy's default_rng(seed).

usage: python make_images.py OUT.tar.gz [--seed 0] [--train 50000] [--test 10000]
Prints one JSON line: the path, counts, bytes and seconds."""
import argparse
import io
import json
import tarfile
import time

import numpy as np

CLASSES = ["grating%d" % c for c in range(10)]


def images(rng, n):
    labels = rng.integers(0, 10, n)
    angle = labels * (np.pi / 10)
    freq = 0.25 + 0.05 * labels
    tint = np.stack([(labels * 37) % 256, (labels * 91 + 60) % 256, (labels * 53 + 120) % 256],
                    axis=1).astype(np.float32)
    yy, xx = np.mgrid[0:32, 0:32].astype(np.float32)
    out = np.empty((n, 3, 32, 32), np.uint8)
    for s in range(0, n, 5000):  # in slices: a few hundred MB of float32 at most
        e = min(s + 5000, n)
        m = e - s
        u = (np.cos(angle[s:e])[:, None, None] * xx + np.sin(angle[s:e])[:, None, None] * yy)
        phase = rng.uniform(0, 2 * np.pi, m)[:, None, None]
        contrast = rng.uniform(0.5, 1.0, m)[:, None, None]
        wave = contrast * np.sin(u * freq[s:e][:, None, None] * 2 * np.pi / 4 + phase)
        img = 128 + (tint[s:e, :, None, None] - 128) * 0.5 + 90 * wave[:, None, :, :]
        img += rng.normal(0, 40, (m, 3, 32, 32))
        out[s:e] = np.clip(img, 0, 255).astype(np.uint8)
    return labels.astype(np.uint8), out


def records(labels, pixels):
    n = len(labels)
    rec = np.empty((n, 3073), np.uint8)
    rec[:, 0] = labels
    rec[:, 1:] = pixels.reshape(n, 3072)  # planes R, G, B, each row-major: CIFAR's order
    return rec.tobytes()


def add(tar, name, data):
    info = tarfile.TarInfo("cifar-10-batches-bin/" + name)
    info.size = len(data)
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train", type=int, default=50000)
    ap.add_argument("--test", type=int, default=10000)
    a = ap.parse_args()
    t0 = time.perf_counter()
    rng = np.random.default_rng(a.seed)
    ytr, xtr = images(rng, a.train)
    yte, xte = images(rng, a.test)
    per = (a.train + 4) // 5
    with tarfile.open(a.out, "w:gz", compresslevel=1) as tar:
        for b in range(5):
            s, e = b * per, min((b + 1) * per, a.train)
            if s < e:
                add(tar, "data_batch_%d.bin" % (b + 1), records(ytr[s:e], xtr[s:e]))
        add(tar, "test_batch.bin", records(yte, xte))
        add(tar, "batches.meta.txt", ("\n".join(CLASSES) + "\n").encode())
    size = open(a.out, "rb").seek(0, 2)
    print(json.dumps({"path": a.out, "train": a.train, "test": a.test, "bytes": size,
                      "seconds": round(time.perf_counter() - t0, 2)}))


if __name__ == "__main__":
    main()
