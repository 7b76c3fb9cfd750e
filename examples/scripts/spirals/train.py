"""A training script in plain Python (no packages): a two-layer network on the spirals CSV.

It is an example of what a script job gets from trainyard: the dataset in
$TRAINYARD_DATASET, the job's hyperparameters, a checkpoint folder that comes back on a retried
attempt, an output folder whose files become the job's artifacts, and `trainyard.report()` for
per-epoch metrics. Run it by hand too: outside trainyard the helpers fall back to ./output,
./checkpoint and metrics printed on stderr (set TRAINYARD_DATASET to the CSV).
"""
import csv
import json
import math
import os
import random
import signal
import sys

import trainyard

hp = {"epochs": 40, "hidden": 16, "learning_rate": 0.1, "seed": 1}
hp.update(trainyard.hyperparameters())

stop = False


def on_term(signum, frame):
    global stop
    stop = True  # finish this epoch, checkpoint it, then leave


signal.signal(signal.SIGTERM, on_term)

with open(trainyard.dataset_path(), newline="") as f:
    rows = list(csv.reader(f))
header, rows = rows[0], rows[1:]
labels = sorted({r[-1] for r in rows})
xs = [[float(v) for v in r[:-1]] for r in rows]
ys = [labels.index(r[-1]) for r in rows]
mean = [sum(c) / len(c) for c in zip(*xs)]
std = [math.sqrt(sum((v - m) ** 2 for v in c) / len(c)) or 1.0 for c, m in zip(zip(*xs), mean)]
xs = [[(v - m) / s for v, m, s in zip(x, mean, std)] for x in xs]

rng = random.Random(hp["seed"])
order = list(range(len(xs)))
rng.shuffle(order)
cut = len(order) * 4 // 5
train, val = order[:cut], order[cut:]
n_in, n_hid, n_out = len(xs[0]), int(hp["hidden"]), len(labels)

ckpt = os.path.join(trainyard.checkpoint_dir(), "state.json")
if os.path.exists(ckpt):
    with open(ckpt) as f:
        state = json.load(f)
    print(f"resuming after epoch {state['epoch']}", flush=True)
else:
    state = {
        "epoch": 0,
        "w1": [[rng.gauss(0, 1 / math.sqrt(n_in)) for _ in range(n_hid)] for _ in range(n_in)],
        "b1": [0.0] * n_hid,
        "w2": [[rng.gauss(0, 1 / math.sqrt(n_hid)) for _ in range(n_out)] for _ in range(n_hid)],
        "b2": [0.0] * n_out,
    }
w1, b1, w2, b2 = state["w1"], state["b1"], state["w2"], state["b2"]


def forward(x):
    h = [math.tanh(sum(x[i] * w1[i][j] for i in range(n_in)) + b1[j]) for j in range(n_hid)]
    z = [sum(h[j] * w2[j][k] for j in range(n_hid)) + b2[k] for k in range(n_out)]
    top = max(z)
    e = [math.exp(v - top) for v in z]
    return h, [v / sum(e) for v in e]


def evaluate(idx):
    loss = correct = 0
    for i in idx:
        _, p = forward(xs[i])
        loss -= math.log(max(p[ys[i]], 1e-12))
        correct += p.index(max(p)) == ys[i]
    return loss / len(idx), correct / len(idx)


lr = float(hp["learning_rate"])
for epoch in range(state["epoch"] + 1, int(hp["epochs"]) + 1):
    rng_epoch = random.Random(hp["seed"] * 1000 + epoch)
    batch = train[:]
    rng_epoch.shuffle(batch)
    for i in batch:  # plain SGD, one row at a time
        x, y = xs[i], ys[i]
        h, p = forward(x)
        dz = [p[k] - (k == y) for k in range(n_out)]
        dh = [sum(dz[k] * w2[j][k] for k in range(n_out)) * (1 - h[j] ** 2) for j in range(n_hid)]
        for j in range(n_hid):
            for k in range(n_out):
                w2[j][k] -= lr * dz[k] * h[j]
        for k in range(n_out):
            b2[k] -= lr * dz[k]
        for i2 in range(n_in):
            for j in range(n_hid):
                w1[i2][j] -= lr * dh[j] * x[i2]
        for j in range(n_hid):
            b1[j] -= lr * dh[j]
    loss, acc = evaluate(train)
    val_loss, val_acc = evaluate(val)
    trainyard.report(epoch=epoch, loss=loss, accuracy=acc, val_loss=val_loss, val_accuracy=val_acc,
                     learning_rate=lr)
    state["epoch"] = epoch
    tmp = ckpt + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, ckpt)  # a checkpoint is never seen half written
    if stop:
        print(f"stopping after epoch {epoch}", flush=True)
        sys.exit(0)

with open(os.path.join(trainyard.output_dir(), "model.json"), "w") as f:
    json.dump({"labels": labels, "features": header[:-1], "mean": mean, "std": std,
               "w1": w1, "b1": b1, "w2": w2, "b2": b2}, f)
print(f"done: validation accuracy {val_acc:.3f}", flush=True)
