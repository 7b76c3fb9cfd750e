"""A PyTorch MLP on a CSV, written as a trainyard script job (and runnable by hand).

What trainyard gives it (docs/API.md, "Script jobs"): the dataset's path in $TRAINYARD_DATASET
(a CSV, label in the last column, a header row or none), the hyperparameters as JSON in
$TRAINYARD_HYPERPARAMETERS, and three folders: $TRAINYARD_CHECKPOINT_DIR (uploaded as it
changes, handed back to the next attempt), $TRAINYARD_OUTPUT_DIR (every file in it becomes an
artifact) and, through `import trainyard`, a place for per-epoch metrics.

- Each epoch ends with its metrics reported, then a checkpoint (model, optimizer, epoch) written
  to checkpoint/ckpt.pt; the file is written beside it and renamed, so a snapshot never holds
  half a file. A run that finds one resumes after its epoch ("resuming after epoch N"): a
  retried attempt trains only the epochs that are left.
- The split and each epoch's shuffle come from the seed alone (the epoch's generator is seeded
  with seed + epoch), so a resumed run trains what the uninterrupted one would have.
- SIGTERM (cancel, or the worker handing the job back) stops it at the next batch: the last
  finished epoch's checkpoint is already on disk; it says so and exits 143 (128 + SIGTERM), so
  a cut-short run never reads as a finished one.
- The end writes output/model.pt: the state dict plus what is needed to use it (sizes, class
  names, the standardisation). Load it with torch.load(path) (weights_only works too).

Hyperparameters (all optional): epochs (10), batch_size (32), learning_rate (0.01), hidden (64),
validation_split (0.2), seed (1).

Outside trainyard: TRAINYARD_DATASET=data.csv python3 train.py (the folders default to
./output and ./checkpoint, metrics go to stderr when the trainyard package is missing).
"""
import csv
import json
import os
import signal
import sys
import time

import torch
from torch import nn

try:
    import trainyard
except ImportError:  # run by hand without the package: the same JSON line, on stderr
    trainyard = None


def report(**metrics):
    if trainyard is not None:
        trainyard.report(**metrics)
        return
    line = json.dumps(metrics)
    path = os.environ.get("TRAINYARD_METRICS")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
    else:
        print(line, file=sys.stderr)


stop = False


def on_sigterm(signum, frame):
    global stop
    stop = True
    print("SIGTERM: stopping after this batch", flush=True)


def load_csv(path):
    """Features (float tensor, N × F), labels (long tensor, N) and the class names. A first row
    whose feature cells are not all numbers is a header. Labels that are all integers keep
    their values as class indices; any other labels are classes in sorted order."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    if not rows:
        sys.exit(f"{path}: no rows")
    try:
        [float(c) for c in rows[0][:-1]]
    except ValueError:
        rows = rows[1:]
    features = [[float(c) for c in r[:-1]] for r in rows]
    raw = [r[-1].strip() for r in rows]
    try:
        ints = [int(float(v)) for v in raw]
        names = [str(c) for c in range(max(ints) + 1)]
        labels = ints
    except ValueError:
        names = sorted(set(raw))
        index = {n: i for i, n in enumerate(names)}
        labels = [index[v] for v in raw]
    return torch.tensor(features, dtype=torch.float32), torch.tensor(labels), names


def evaluate(model, x, y, loss_fn):
    model.eval()
    with torch.no_grad():
        logits = model(x)
        loss = loss_fn(logits, y).item()
        acc = (logits.argmax(1) == y).float().mean().item()
    model.train()
    return loss, acc


def save_atomic(obj, path):
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def main():
    signal.signal(signal.SIGTERM, on_sigterm)
    hp = json.loads(os.environ.get("TRAINYARD_HYPERPARAMETERS") or "{}")
    epochs = int(hp.get("epochs", 10))
    batch_size = int(hp.get("batch_size", 32))
    lr = float(hp.get("learning_rate", 0.01))
    hidden = int(hp.get("hidden", 64))
    val_split = float(hp.get("validation_split", 0.2))
    seed = int(hp.get("seed", 1))
    dataset = os.environ.get("TRAINYARD_DATASET")
    if not dataset:
        sys.exit("no dataset: TRAINYARD_DATASET is not set (give the job a dataset_location)")
    out_dir = os.environ.get("TRAINYARD_OUTPUT_DIR", "output")
    ckpt_dir = os.environ.get("TRAINYARD_CHECKPOINT_DIR", "checkpoint")
    os.makedirs(out_dir, exist_ok=True)
    os.makedirs(ckpt_dir, exist_ok=True)
    ckpt_path = os.path.join(ckpt_dir, "ckpt.pt")

    torch.manual_seed(seed)
    x, y, classes = load_csv(dataset)
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    n_val = int(len(x) * val_split)
    val_idx, train_idx = order[:n_val], order[n_val:]
    mean = x[train_idx].mean(0)
    std = x[train_idx].std(0).clamp_min(1e-6)
    x = (x - mean) / std
    x_train, y_train, x_val, y_val = x[train_idx], y[train_idx], x[val_idx], y[val_idx]
    print(f"{len(x_train)} training rows, {len(x_val)} validation rows, {x.shape[1]} features, "
          f"{len(classes)} classes; torch {torch.__version__}", flush=True)

    model = nn.Sequential(nn.Linear(x.shape[1], hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                          nn.ReLU(), nn.Linear(hidden, len(classes)))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    done = 0
    if os.path.exists(ckpt_path):
        state = torch.load(ckpt_path, map_location="cpu")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        done = int(state["epoch"])
        print(f"resuming after epoch {done}", flush=True)

    for epoch in range(done + 1, epochs + 1):
        t0 = time.monotonic()
        perm = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(seed + epoch))
        total, correct, seen = 0.0, 0, 0
        for i in range(0, len(perm), batch_size):
            if stop:
                print(f"stopped by SIGTERM in epoch {epoch}; the checkpoint holds epoch "
                      f"{epoch - 1}", flush=True)
                sys.exit(128 + signal.SIGTERM)
            idx = perm[i:i + batch_size]
            logits = model(x_train[idx])
            loss = loss_fn(logits, y_train[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
            correct += (logits.argmax(1) == y_train[idx]).sum().item()
            seen += len(idx)
        metrics = {"epoch": epoch, "loss": total / seen, "accuracy": correct / seen}
        if len(x_val):
            metrics["val_loss"], metrics["val_accuracy"] = evaluate(model, x_val, y_val, loss_fn)
        # Metrics first, then the checkpoint: trainyard labels a checkpoint snapshot with the
        # newest epoch reported, and a retry drops the metrics after that label; a label older
        # than the checkpoint's contents would drop an epoch that is then never trained again.
        report(**metrics)
        save_atomic({"epoch": epoch, "model": model.state_dict(),
                     "optimizer": optimizer.state_dict()}, ckpt_path)
        print(f"epoch {epoch}/{epochs} " + " ".join(
            f"{k} {v:.4f}" for k, v in metrics.items() if k != "epoch") +
            f" {time.monotonic() - t0:.2f}s", flush=True)

    save_atomic({"model": model.state_dict(), "features": int(x.shape[1]), "hidden": hidden,
                 "classes": classes, "mean": mean, "std": std}, os.path.join(out_dir, "model.pt"))
    print(f"wrote {os.path.join(out_dir, 'model.pt')}", flush=True)


if __name__ == "__main__":
    main()
