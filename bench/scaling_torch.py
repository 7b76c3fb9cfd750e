"""The PyTorch reference for bench/scaling.sh: the same 784-128-10 MLP, data (digits.csv),
Adam and batch, as 1 process × 1 thread and as 2 processes × 1 thread under
DistributedDataParallel (gloo, the CPU backend: one allreduce of the gradients per step, in
buckets overlapped with backward), the global batch of 64 split 32 + 32 and 64 rows per process.
Prints one JSON line per run (samples/s: the median over the epochs after the first) and the
ratios. usage: scaling_torch.py DATA_DIR [EPOCHS]"""
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def load(path):
    text = open(path).read()
    rows = text.count("\n")
    flat = np.array(text.replace("\n", ",").rstrip(",").split(","), dtype=np.float32)
    data = flat.reshape(rows, -1)
    x, y = data[:, :-1], data[:, -1]
    x = (x - x.mean(0)) / np.where(x.std(0) > 0, x.std(0), 1)  # as trainyard standardises
    return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(y.astype(np.int64))


def train(rank, size, rows_per_rank, epochs, folder, port, out):
    torch.set_num_threads(1)
    torch.manual_seed(1)
    x, y = load(f"{folder}/digits.csv")
    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    if size > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=size)
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.001)
    loss_fn = torch.nn.CrossEntropyLoss()
    n, batch = len(x), rows_per_rank * size
    per_epoch = []
    for epoch in range(epochs):
        g = torch.Generator().manual_seed(epoch)
        perm = torch.randperm(n, generator=g)
        t0 = time.perf_counter()
        for start in range(0, n, batch):
            idx = perm[start:start + batch]
            lo = len(idx) * rank // size
            hi = len(idx) * (rank + 1) // size
            if hi <= lo:
                continue
            opt.zero_grad()
            loss_fn(model(x[idx[lo:hi]]), y[idx[lo:hi]]).backward()
            opt.step()
        per_epoch.append(n / (time.perf_counter() - t0))
    if rank == 0:
        out.put(per_epoch)
    if size > 1:
        dist.destroy_process_group()


def run(size, rows_per_rank, epochs, folder, port):
    q = mp.get_context("spawn").SimpleQueue()
    if size == 1:
        train(0, 1, rows_per_rank, epochs, folder, port, q)
    else:
        mp.spawn(train, args=(size, rows_per_rank, epochs, folder, port, q), nprocs=size)
    per_epoch = q.get()
    return statistics.median(per_epoch[1:]), per_epoch


def main():
    folder = sys.argv[1]
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    load1 = os.getloadavg()[0]
    one, e1 = run(1, 64, epochs, folder, 29511)
    split, e2 = run(2, 32, epochs, folder, 29512)
    weak, e3 = run(2, 64, epochs, folder, 29513)
    for name, sps, eps in (("1 process x 1 thread", one, e1),
                           ("2 processes x 1 thread, batch 64 split", split, e2),
                           ("2 processes x 1 thread, 64 rows each", weak, e3)):
        print(json.dumps({"run": "pytorch " + name, "samples_per_second": round(sps),
                          "epochs": [round(v) for v in eps], "load1": load1}))
    print(json.dumps({"summary": "pytorch DDP (gloo) 2 / 1", "torch": torch.__version__,
                      "split": round(split / one, 2), "64_each": round(weak / one, 2)}))


if __name__ == "__main__":
    main()
