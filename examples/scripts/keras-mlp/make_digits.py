"""Writes a digits-like CSV: 8×8 images as 64 integer features in 0..16 (like scikit-learn's
digits), then the class 0..9 in the last column, no header. Each class is a fixed random
stroke pattern; each row is its class's pattern, shifted by up to one pixel, with noise.

usage: python3 make_digits.py OUT.csv [ROWS (default 1797)] [SEED (default 0)]"""
import sys

import numpy as np


def main():
    out = sys.argv[1]
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 1797
    rng = np.random.default_rng(int(sys.argv[3]) if len(sys.argv) > 3 else 0)
    patterns = (rng.random((10, 8, 8)) < 0.35) * 14.0
    labels = rng.integers(0, 10, rows)
    images = patterns[labels]
    shifts = rng.integers(-1, 2, (rows, 2))
    for axis in (0, 1):
        for s in (-1, 1):
            pick = shifts[:, axis] == s
            images[pick] = np.roll(images[pick], s, axis=axis + 1)
    images = np.clip(np.rint(images + rng.normal(0, 4.0, images.shape)), 0, 16)
    data = np.column_stack([images.reshape(rows, 64), labels]).astype(np.int64)
    np.savetxt(out, data, fmt="%d", delimiter=",")


if __name__ == "__main__":
    main()
