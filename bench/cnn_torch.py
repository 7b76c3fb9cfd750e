"""The seed CNN in PyTorch 2.x on the CPU, one epoch, for bench/cnn.sh.

The same model, data and optimiser as bench/cnn_tf.py: nn.Sequential(Conv2d(3, 32, 3), ReLU,
MaxPool2d(2), Flatten, Linear(32·31·31, 10)), Adam (lr 0.001, eps 1e-7 as Keras), cross-entropy
on the logits (softmax + log-loss, as Keras's softmax output with sparse categorical
cross-entropy), batch 32, shuffled. Images are resized per batch inside the epoch (bilinear,
align_corners=False, no antialias: TensorFlow's resize) from the uint8 set and scaled to [0, 1],
which is what TensorFlow's first epoch does as its cache fills. Model and batches in
channels_last (NHWC) memory format, which PyTorch's oneDNN convolutions on the CPU prefer: 1.5×
faster than NCHW here (38 vs 60 ms a batch). torch.set_num_threads(2). Under load, PyTorch's
OpenMP threads spin-wait and run at half speed or worse (bench/cnn.sh sets
OMP_WAIT_POLICY=passive unless told otherwise: 92 vs 206 ms a batch NCHW at load average 4; on a
quiet machine the policy should not matter).

usage: python cnn_torch.py DATA.tar.gz [--threads 2] [--epochs 1]
Prints one JSON line: epoch_s (the first epoch), train_s (all epochs), load_s, total_s (process
start to exit, imports included), loss, accuracy (training, last epoch), test_accuracy."""
import time

T_START = time.perf_counter()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import cifar_bin  # noqa: E402


def batch(x_u8, idx):
    x = x_u8[idx].permute(0, 3, 1, 2).float().div_(255.0)
    x = F.interpolate(x, size=(64, 64), mode="bilinear", align_corners=False)
    return x.contiguous(memory_format=torch.channels_last)


def main():
    a = cifar_bin.args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)

    t0 = time.perf_counter()
    xtr, ytr, xte, yte = (torch.from_numpy(v) for v in cifar_bin.load(a.data))
    load_s = time.perf_counter() - t0

    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
        torch.nn.Linear(32 * 31 * 31, 10)).to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=0.001, eps=1e-7)
    n = len(ytr)
    epochs = []
    t_train = time.perf_counter()
    for _ in range(a.epochs):
        t0 = time.perf_counter()
        model.train()
        perm = torch.randperm(n)
        loss_sum, correct = 0.0, 0
        for s in range(0, n, 32):
            idx = perm[s:s + 32]
            x, y = batch(xtr, idx), ytr[idx]
            opt.zero_grad(set_to_none=True)
            out = model(x)
            loss = F.cross_entropy(out, y)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(idx)
            correct += int((out.argmax(1) == y).sum())
        epochs.append(time.perf_counter() - t0)
    train_s = time.perf_counter() - t_train

    model.eval()
    right = 0
    with torch.no_grad():
        for s in range(0, len(yte), 256):
            idx = torch.arange(s, min(s + 256, len(yte)))
            right += int((model(batch(xte, idx)).argmax(1) == yte[idx]).sum())
    print(json.dumps({
        "framework": "torch", "version": torch.__version__, "threads": torch.get_num_threads(),
        "images": n, "epoch_s": round(epochs[0], 3), "train_s": round(train_s, 3),
        "load_s": round(load_s, 3), "loss": round(loss_sum / n, 4),
        "accuracy": round(correct / n, 4), "test_accuracy": round(right / len(yte), 4),
        "total_s": round(time.perf_counter() - T_START, 3)}))


if __name__ == "__main__":
    main()
