"""Seed 001's Keras MLP as a trainyard script job: Dense(64, relu) → Dense(10, softmax), Adam,
sparse categorical cross-entropy, on a digits-like CSV (64 features, then the class 0..9 in the
last column; make_digits.py writes one).

trainyard gives the dataset's path in $TRAINYARD_DATASET, the hyperparameters as JSON in
$TRAINYARD_HYPERPARAMETERS and the output folder in $TRAINYARD_OUTPUT_DIR (every file in it
becomes an artifact); trainyard.KerasCallback() reports each epoch's logs (loss, accuracy,
val_loss, val_accuracy) as the job's metrics. The model ends as output/model.keras.

Hyperparameters (all optional): epochs (10), batch_size (32), learning_rate (0.001),
validation_split (0.1), seed (42).

Outside trainyard it needs the package on the path (pip install ./python, or
PYTHONPATH=python from the repository's root): TRAINYARD_DATASET=digits.csv python train.py
(metrics then go to stderr, the model to ./output)."""
import json
import os
import sys
import time

import numpy as np

import keras
import trainyard


def load(path):
    """Features (float32, N × F) and labels (int, N): comma-separated numbers, a header row
    (anything not numeric in the first line) skipped."""
    with open(path) as f:
        first = f.readline()
    try:
        [float(c) for c in first.strip().split(",")]
        skip = 0
    except ValueError:
        skip = 1
    data = np.loadtxt(path, delimiter=",", skiprows=skip, dtype=np.float32, ndmin=2)
    return data[:, :-1], data[:, -1].astype(np.int64)


def main():
    t0 = time.monotonic()
    hp = json.loads(os.environ.get("TRAINYARD_HYPERPARAMETERS") or "{}")
    dataset = os.environ.get("TRAINYARD_DATASET")
    if not dataset:
        sys.exit("no dataset: TRAINYARD_DATASET is not set (give the job a dataset_location)")
    out_dir = os.environ.get("TRAINYARD_OUTPUT_DIR", "output")
    os.makedirs(out_dir, exist_ok=True)
    keras.utils.set_random_seed(int(hp.get("seed", 42)))

    x, y = load(dataset)
    x /= 16.0
    print(f"{len(x)} rows, {x.shape[1]} features; keras {keras.__version__}", flush=True)
    model = keras.Sequential([keras.Input(shape=(x.shape[1],)),
                              keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(10, activation="softmax")])
    model.compile(optimizer=keras.optimizers.Adam(float(hp.get("learning_rate", 0.001))),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.fit(x, y, epochs=int(hp.get("epochs", 10)), batch_size=int(hp.get("batch_size", 32)),
              validation_split=float(hp.get("validation_split", 0.1)), verbose=2,
              callbacks=[trainyard.KerasCallback()])
    path = os.path.join(out_dir, "model.keras")
    model.save(path)
    print(f"wrote {path} in {time.monotonic() - t0:.2f}s", flush=True)


if __name__ == "__main__":
    main()
