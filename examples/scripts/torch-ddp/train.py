"""An MLP on a CSV (label in the last column) trained by several processes at once with
PyTorch's DistributedDataParallel over gloo, written as it would be for `torchrun`: the process
group comes from the environment (init_method "env://": MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE), and LOCAL_RANK says which of this machine's devices is this process's.

trainyard starts one copy of this script per replica ("distribution": {"replicas": N}) and
sets those variables as torchrun does. Every rank reads the whole file and takes its share of
each global batch (rows rank, rank + N, ...); DDP averages the gradients, so N ranks train the
model one process would (up to the order of float additions). Rank 0 alone reports metrics and
saves output/model.pt; trainyard labels every rank's log lines.

Hyperparameters (all optional): epochs (5), batch_size (64, the global batch), learning_rate
(0.05), hidden (64), seed (1).

Outside trainyard: `TRAINYARD_DATASET=data.csv torchrun --nproc-per-node 2 train.py`, or
`python3 train.py` alone (no MASTER_ADDR: one process, no process group)."""
import csv
import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

try:
    import trainyard
except ImportError:  # by hand without the package
    trainyard = None


def load_csv(path):
    """Features (float, N × F, standardised) and labels (long, N); a header row is skipped."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if r]
    try:
        [float(c) for c in rows[0]]
    except ValueError:
        rows = rows[1:]
    x = torch.tensor([[float(c) for c in r[:-1]] for r in rows], dtype=torch.float32)
    y = torch.tensor([int(float(r[-1])) for r in rows], dtype=torch.long)
    x = (x - x.mean(0)) / x.std(0).clamp_min(1e-6)
    return x, y


def main():
    hp = json.loads(os.environ.get("TRAINYARD_HYPERPARAMETERS") or "{}")
    dataset = os.environ.get("TRAINYARD_DATASET")
    if not dataset:
        sys.exit("no dataset: TRAINYARD_DATASET is not set (give the job a dataset_location)")
    group = "MASTER_ADDR" in os.environ
    if group:
        dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank() if group else 0
    world = dist.get_world_size() if group else 1
    print(f"rank {rank} of {world} (local rank {os.environ.get('LOCAL_RANK', '0')}); "
          f"torch {torch.__version__}", flush=True)

    torch.manual_seed(int(hp.get("seed", 1)))
    x, y = load_csv(dataset)
    classes = int(y.max()) + 1
    hidden = int(hp.get("hidden", 64))
    model = nn.Sequential(nn.Linear(x.shape[1], hidden), nn.ReLU(), nn.Linear(hidden, classes))
    net = nn.parallel.DistributedDataParallel(model) if group else model
    opt = torch.optim.SGD(net.parameters(), lr=float(hp.get("learning_rate", 0.05)))
    batch = int(hp.get("batch_size", 64))
    for epoch in range(1, int(hp.get("epochs", 5)) + 1):
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(epoch))
        totals = torch.zeros(2)  # summed loss, correct rows: of this rank's rows
        for start in range(0, len(x), batch):
            rows = order[start:start + batch]
            mine = rows[rank::world]
            out = net(x[mine])
            per_row = nn.functional.cross_entropy(out, y[mine], reduction="none")
            # DDP averages gradients over the ranks: scaled so the result is the global batch's
            # mean, whatever each rank's share
            loss = per_row.sum() * world / len(rows)
            opt.zero_grad()
            loss.backward()
            opt.step()
            totals += torch.tensor([per_row.sum().item(),
                                    (out.argmax(1) == y[mine]).sum().item()])
        if group:
            dist.all_reduce(totals)
        metrics = {"loss": totals[0].item() / len(x), "accuracy": totals[1].item() / len(x)}
        print(f"epoch {epoch}: loss={metrics['loss']:.6f} accuracy={metrics['accuracy']:.6f}",
              flush=True)
        if rank == 0 and trainyard is not None:
            trainyard.report(epoch=epoch, **metrics)
    if rank == 0:
        out_dir = os.environ.get("TRAINYARD_OUTPUT_DIR", "output")
        os.makedirs(out_dir, exist_ok=True)
        torch.save({"state_dict": model.state_dict(), "features": x.shape[1],
                    "classes": classes, "hidden": hidden}, os.path.join(out_dir, "model.pt"))
        print(f"wrote {out_dir}/model.pt", flush=True)
    if group:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
