"""Reads a CIFAR-10 binary archive (.tar.gz of data_batch_N.bin and test_batch.bin, as
bench/make_images.py writes and the real data set ships) into NHWC uint8 arrays, and the
command line, for bench/cnn_tf.py and bench/cnn_torch.py."""
import argparse
import tarfile

import numpy as np


def args():
    """The command line both scripts take: DATA.tar.gz [--threads 2] [--epochs 1]."""
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    return ap.parse_args()


def load(path):
    """(x_train, y_train, x_test, y_test): x uint8 (n, 32, 32, 3), y int64 (n,)."""
    train, test = [], []
    with tarfile.open(path) as tar:
        for m in sorted(tar.getmembers(), key=lambda m: m.name):
            name = m.name.rsplit("/", 1)[-1]
            if not m.isfile() or not name.endswith(".bin"):
                continue
            rec = np.frombuffer(tar.extractfile(m).read(), np.uint8).reshape(-1, 3073)
            (test if name.startswith("test_batch") else train).append(rec)
    split = []
    for recs in (train, test):
        rec = np.concatenate(recs)
        x = rec[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        split += [np.ascontiguousarray(x), rec[:, 0].astype(np.int64)]
    return tuple(split)
