"""The PyTorch side of bench/train.sh and bench/gpu.sh: the same model, data, optimizer and
epochs as the trainyard job, on the CPU with every core, or on a CUDA device with the data
resident there (DEVICE cuda; the clock stops after a synchronize). Prints JSON: load, train and
total seconds, the torch version, its thread count and the device.
usage: torch_train.py linear|wide|digits DATA_DIR [cpu|cuda]"""
import json
import sys
import time

t_start = time.perf_counter()
import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(torch.get_num_threads() if torch.get_num_threads() > 1 else 2)
torch.manual_seed(0)
name, folder = sys.argv[1], sys.argv[2]
dev = torch.device(sys.argv[3] if len(sys.argv) > 3 else "cpu")


def sync():
    if dev.type == "cuda":
        torch.cuda.synchronize()


def load(path):
    text = open(path).read()
    rows = text.count("\n")
    flat = np.array(text.replace("\n", ",").rstrip(",").split(","), dtype=np.float32)
    data = flat.reshape(rows, -1)
    x, y = data[:, :-1], data[:, -1]
    x = (x - x.mean(0)) / np.where(x.std(0) > 0, x.std(0), 1)  # as trainyard standardises
    return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(y.copy())


t0 = time.perf_counter()
x, y = load(f"{folder}/{name}.csv")
x, y = x.to(dev), y.to(dev)
sync()
t_load = time.perf_counter() - t0

t0 = time.perf_counter()
if name == "linear":
    model = torch.nn.Linear(x.shape[1], 1).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    target = y[:, None]
    for _ in range(1000):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
elif name == "wide":
    model = torch.nn.Sequential(torch.nn.Linear(10, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 1)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    target = y[:, None]
    for _ in range(100):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
else:
    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=0.001)
    target = y.long()
    perm = torch.randperm(x.shape[0], device=dev)
    for i in range(0, x.shape[0], 64):
        idx = perm[i:i + 64]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[idx]), target[idx])
        loss.backward()
        opt.step()
sync()
t_train = time.perf_counter() - t0
print(json.dumps({"load_s": t_load, "train_s": t_train, "loss": loss.item(),
                  "total_s": time.perf_counter() - t_start, "threads": torch.get_num_threads(),
                  "version": torch.__version__, "device": str(dev)}))
