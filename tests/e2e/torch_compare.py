"""Run by tests/e2e/test_images.py under Debian's /usr/bin/python3 (which has python3-torch but
not the project's virtual environment): builds the nn.Sequential that a trainyard
model.safetensors names in its metadata, loads the file with load_state_dict(strict=True),
runs it on images and compares its outputs with `trainyard train --val-outputs`.

usage: torch_compare.py MODEL.safetensors IMAGES.npy VAL_OUTPUTS.npy
IMAGES.npy: [N, H, W, C] as the dataset holds them (before resize and scaling): uint8 pixels,
which the model's input divides by 255, or float32 ones, taken as they are. The resize,
scaling and standardisation are done here by hand, as docs/API.md shows (model.safetensors'
Sequential takes preprocessed input; model.onnx, which takes the pixels, does them inside).
Prints one JSON object: max_diff (largest absolute difference of the outputs), agree (fraction
of rows with the same argmax), modules (the Sequential's text).
"""
import json
import struct
import sys

import numpy as np
import torch
from torch import nn

DTYPES = {"F32": np.float32, "I64": np.int64}


def read_safetensors(path):
    """The file's tensors (as torch tensors) and metadata, read with the format's own rules."""
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors = {}
    for name, t in header.items():
        begin, end = t["data_offsets"]
        arr = np.frombuffer(data[begin:end], dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
        tensors[name] = torch.from_numpy(arr.copy())
    return tensors, meta


def main(model_path, images_path, outputs_path):
    tensors, meta = read_safetensors(model_path)
    net = eval(meta["trainyard.pytorch"], {"nn": nn})
    net.load_state_dict(tensors, strict=True)
    net.eval()
    h, w, _ = json.loads(meta["trainyard.model"])["input_shape"]
    pixels = np.load(images_path)
    x = torch.from_numpy(pixels).permute(0, 3, 1, 2).float()
    if x.shape[2:] != (h, w):
        x = nn.functional.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)
    if pixels.dtype == np.uint8:
        x = x / 255
    std = json.loads(meta["trainyard.standardization"])
    if std:
        mean = torch.tensor(std["mean"]).view(1, -1, 1, 1)
        sd = torch.tensor(std["std"]).view(1, -1, 1, 1)
        x = (x - mean) / sd
    with torch.no_grad():
        out = net(x).numpy()
    ours = np.load(outputs_path)
    print(json.dumps({"max_diff": float(np.abs(out - ours).max()),
                      "agree": float(np.mean(out.argmax(1) == ours.argmax(1))),
                      "modules": meta["trainyard.pytorch"]}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
