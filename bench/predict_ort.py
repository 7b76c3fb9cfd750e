"""onnxruntime's own in-process figures for bench/predict.sh, on a model.onnx trainyard exported:
session.run latency on one row (p50, p99) and rows/s at batch 32, with intra_op_num_threads
(default 2) and one inter-op thread. The input is noise (N(0, 1)) in what the model takes, as
:predict does (a CSV model's [N, features]; an image model's [N, height, width, channels] at the
model's own input size, so that the graph's resize is one to one): timing does not depend on the
values, and it includes the preprocessing the graph applies.
usage: predict_ort.py MODEL.onnx [SECONDS] [THREADS]  → one JSON line"""
import json
import sys
import time

import numpy as np
import onnxruntime as ort

path = sys.argv[1]
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
threads = int(sys.argv[3]) if len(sys.argv) > 3 else 2
so = ort.SessionOptions()
so.intra_op_num_threads = threads
so.inter_op_num_threads = 1
sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
inp = sess.get_inputs()[0]
rng = np.random.default_rng(0)
# an image's height and width are symbolic: the model's own (trainyard.model's input_shape)
meta = json.loads(sess.get_modelmeta().custom_metadata_map.get("trainyard.model", "{}"))
size = dict(zip(("height", "width"), meta.get("input_shape") or []))


def batch(n):
    shape = [n if i == 0 else size.get(d, d) for i, d in enumerate(inp.shape)]
    if not all(isinstance(d, int) for d in shape):
        raise SystemExit(f"{path}: input {inp.name} has shape {inp.shape}; only the batch may vary")
    return {inp.name: rng.standard_normal(shape).astype(np.float32)}


def timed(feed, secs):
    for _ in range(20):
        sess.run(None, feed)
    lat, t_end = [], time.perf_counter() + secs
    while True:
        t0 = time.perf_counter()
        sess.run(None, feed)
        t1 = time.perf_counter()
        lat.append(t1 - t0)
        if t1 >= t_end:
            return sorted(lat)


one = timed(batch(1), seconds / 2)
b32 = timed(batch(32), seconds / 2)
pct = lambda s, p: s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))] * 1e3
print(json.dumps({"onnxruntime": ort.__version__, "threads": threads,
                  "input": [inp.name, [str(d) for d in inp.shape]],
                  "p50_ms": round(pct(one, 0.5), 4), "p99_ms": round(pct(one, 0.99), 4),
                  "batch32_rows_per_s": round(32 * len(b32) / sum(b32), 1)}))
