"""Writes the three datasets of bench/train.sh into a folder (argument 1), seeded:
  linear.csv   1000 × 8 features → 1 target (y = x·w + b + noise)
  wide.csv     100000 × 10 features → 1 target (a nonlinear function)
  digits.csv   60000 × 784 integer features in 0..255 → 10 classes (MNIST-sized synthetic)"""
import pathlib
import sys

import numpy as np

out = pathlib.Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(0)


def save(name, x, y, fmt):
    data = np.column_stack([x, y])
    np.savetxt(out / name, data, fmt=fmt, delimiter=",")


if not (out / "linear.csv").exists():
    x = rng.uniform(-1, 1, (1000, 8))
    y = x @ rng.normal(0, 1, 8) + 0.3 + rng.normal(0, 0.01, 1000)
    save("linear.csv", x, y, "%.6f")
if not (out / "wide.csv").exists():
    x = rng.normal(0, 1, (100000, 10))
    y = np.sin(x[:, 0]) + x[:, 1] * x[:, 2] - 0.5 * x[:, 3] ** 2
    save("wide.csv", x, y, "%.5f")
if not (out / "digits.csv").exists():
    labels = rng.integers(0, 10, 60000)
    centers = rng.integers(0, 256, (10, 784))
    noise = rng.integers(-60, 61, (60000, 784))
    x = np.clip(centers[labels] + noise, 0, 255)
    save("digits.csv", x, labels, "%d")
