"""The PyTorch side of bench/train.sh: the same model, data, optimizer and epochs as the
trainyard job, on the CPU with every core. Prints JSON: load, train and total seconds, the
torch version and its thread count.
usage: torch_train.py linear|wide|digits DATA_DIR"""
import json
import sys
import time

t_start = time.perf_counter()
import numpy as np  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(torch.get_num_threads() if torch.get_num_threads() > 1 else 2)
torch.manual_seed(0)
name, folder = sys.argv[1], sys.argv[2]


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
t_load = time.perf_counter() - t0

t0 = time.perf_counter()
if name == "linear":
    model = torch.nn.Linear(x.shape[1], 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    target = y[:, None]
    for _ in range(1000):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
elif name == "wide":
    model = torch.nn.Sequential(torch.nn.Linear(10, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    target = y[:, None]
    for _ in range(100):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        opt.step()
else:
    model = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=0.001)
    target = y.long()
    perm = torch.randperm(x.shape[0])
    for i in range(0, x.shape[0], 64):
        idx = perm[i:i + 64]
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[idx]), target[idx])
        loss.backward()
        opt.step()
t_train = time.perf_counter() - t0
print(json.dumps({"load_s": t_load, "train_s": t_train, "loss": loss.item(),
                  "total_s": time.perf_counter() - t_start, "threads": torch.get_num_threads(),
                  "version": torch.__version__}))
