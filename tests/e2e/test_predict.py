"""Predictions over REST (issue 13, items 2 and 4) against a real serve with its own inference
engine on PoCL: a model trained through POST /train answers TensorFlow Serving's
:predict (row and columnar formats), :classify and :regress, and POST /jobs/{id}/predict, with
the numbers onnxruntime gives on the job's own model.onnx on the same raw rows (the graph
standardises them as the job did);
the same row answers bit for bit alone, in a batch of one request, and among 32 concurrent
requests; bad requests get 4xx answers that name the field; models of others are 404s;
`trainyard predict` prints the answer; an image model takes raw pixels and PNGs alike, resizes
them, and answers what PyTorch's Sequential from its model.safetensors answers and what
onnxruntime answers on its model.onnx fed the same pixels, of any size."""
import base64
import json
import pathlib
import struct
import subprocess
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from helpers import TERMINAL, job_doc, wait_for, write_blobs

HERE = pathlib.Path(__file__).resolve().parent
SYSTEM_PYTHON = "/usr/bin/python3"


def run(svc, http, doc):
    job = http.post(f"{svc.url}/train", json=doc)
    assert job.status_code == 202, job.text
    done = wait_for(svc, job.json()["id"], TERMINAL)
    assert done["status"] == "succeeded", done
    return done


def problem(r, status):
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"].startswith("application/problem+json")
    return r.json()


def onnx_session(svc, job_id, tmp_path):
    """An onnxruntime session on the job's model.onnx, downloaded."""
    ort = pytest.importorskip("onnxruntime", reason="the ONNX check needs onnxruntime (PyPI)")
    r = svc.http.get(f"{svc.url}/jobs/{job_id}/artifacts/model.onnx")
    assert r.status_code == 200, r.text
    path = tmp_path / f"{job_id}.onnx"
    path.write_bytes(r.content)
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def onnx_outputs(svc, job_id, x, tmp_path):
    """The job's model.onnx in onnxruntime on x, what :predict takes: raw feature rows, or
    [N, height, width, channels] pixels as stored (the graph preprocesses them as training
    did)."""
    session = onnx_session(svc, job_id, tmp_path)
    (got,) = session.run(["output"], {"input": np.asarray(x, np.float32)})
    return got


def predicted(svc, url, x):
    r = svc.http.post(url, json={"instances": np.asarray(x).tolist()})
    assert r.status_code == 200, r.text
    return np.array(r.json()["predictions"], np.float32)


def blobs_rows(blobs_folder, n, name="blobs.csv"):
    lines = (blobs_folder / name).read_text().splitlines()[1:n + 1]
    return [[float(v) for v in line.split(",")[:2]] for line in lines]


@pytest.fixture
def blobs_model(serve, blobs, data_server):
    svc = serve()
    done = run(svc, svc.http, job_doc(blobs, epochs=3, name="blobs"))
    return svc, done, blobs_rows(data_server[0], 40)


def test_predict_formats_match_onnxruntime(blobs_model, tmp_path):
    svc, done, rows = blobs_model
    url = f"{svc.url}/v1/models/blobs"
    r = svc.http.post(f"{url}:predict", json={"instances": rows})
    assert r.status_code == 200, r.text
    preds = np.array(r.json()["predictions"], np.float32)
    assert preds.shape == (40, 3)
    assert np.allclose(preds.sum(axis=1), 1, atol=1e-5)
    onnx = onnx_outputs(svc, done["id"], rows, tmp_path)  # raw rows, as :predict took them
    assert np.abs(preds - onnx).max() < 1e-5, np.abs(preds - onnx).max()

    # Every other way to ask gives the same numbers, bit for bit.
    same = [
        svc.http.post(f"{url}:predict",
                      json={"signature_name": "serving_default", "instances": rows}),
        svc.http.post(f"{url}/versions/1:predict", json={"instances": rows}),
        svc.http.post(f"{svc.url}/jobs/{done['id']}/predict", json={"instances": rows}),
        svc.http.post(f"{url}:predict",
                      json={"instances": [{"a": a, "b": b} for a, b in rows]}),
        svc.http.post(f"{url}:predict", json={"instances": [{"inputs": x} for x in rows]}),
    ]
    for s in same:
        assert s.status_code == 200, s.text
        assert s.json()["predictions"] == r.json()["predictions"]
    col = svc.http.post(f"{url}:predict", json={"inputs": rows})
    assert col.status_code == 200, col.text
    assert col.json() == {"outputs": r.json()["predictions"]}
    col = svc.http.post(f"{url}:predict",
                        json={"inputs": {"a": [x[0] for x in rows], "b": [x[1] for x in rows]}})
    assert col.json() == {"outputs": r.json()["predictions"]}

    # :classify: every class with its probability, for examples of features by name.
    cls = svc.http.post(f"{url}:classify", json={
        "context": {"b": rows[0][1]}, "examples": [{"a": rows[0][0]}, {"a": rows[1][0],
                                                                        "b": rows[1][1]}]})
    assert cls.status_code == 200, cls.text
    results = cls.json()["results"]
    assert [[label for label, _ in res] for res in results] == [["k0", "k1", "k2"]] * 2
    assert [[p for _, p in res] for res in results] == r.json()["predictions"][:2]


def test_model_onnx_takes_the_raw_rows_predict_takes(serve, data_server, tmp_path):
    """model.onnx stands alone: onnxruntime on the raw rows :predict takes gives :predict's
    numbers for every row. The features are far from standardised (means near 540 and -7, stds
    near 60 and 0.04), so a graph without the job's standardisation inside could not: fed the
    rows that standardise to these raw ones, the same graph answers otherwise."""
    folder, base = data_server
    write_blobs(folder, "offset-blobs.csv", scale=(30, 0.02), offset=(500, -7))
    svc = serve()
    done = run(svc, svc.http, job_doc(f"{base}/offset-blobs.csv", epochs=3, name="offset"))
    rows = np.array(blobs_rows(folder, 200, "offset-blobs.csv"), np.float32)
    preds = predicted(svc, f"{svc.url}/v1/models/offset:predict", rows)
    session = onnx_session(svc, done["id"], tmp_path)
    (onnx,) = session.run(["output"], {"input": rows})
    diff = np.abs(preds - onnx).max(axis=1)
    print(f"CSV model.onnx on raw rows vs :predict: max |difference| {diff.max():.3g} "
          f"over {len(rows)} rows")
    assert (diff < 1e-5).all(), (diff.max(), np.flatnonzero(diff >= 1e-5))

    meta = session.get_modelmeta().custom_metadata_map
    std = json.loads(meta["trainyard.standardization"])
    mean, sd = np.float32(std["mean"]), np.float32(std["std"])
    assert (np.abs(mean) > 5).all() and (np.abs(np.log(sd)) > 2).all(), std
    steps = json.loads(meta["trainyard.preprocessing"])
    assert [s["step"] for s in steps["steps"]] == ["standardization"], steps
    # What a graph without the standardisation would answer on these rows: the network on the
    # rows themselves, i.e. this graph on rows × std + mean. It is far from :predict's.
    (bare,) = session.run(["output"], {"input": rows * sd + mean})
    assert np.abs(bare - preds).max() > 0.1
    labels = [line.rsplit(",", 1)[1] for line in
              (folder / "offset-blobs.csv").read_text().splitlines()[1:201]]
    assert np.mean(preds.argmax(axis=1) == [int(k[1]) for k in labels]) > 0.9


def test_bit_identical_batched_or_alone(blobs_model):
    svc, done, rows = blobs_model
    url = f"{svc.url}/v1/models/blobs:predict"
    together = svc.http.post(url, json={"instances": rows[:32]}).json()["predictions"]
    alone = [svc.http.post(url, json={"instances": [x]}).json()["predictions"][0]
             for x in rows[:32]]
    assert alone == together

    def one(x):
        s = svc.session(svc.admin_token)
        return s.post(url, json={"instances": [x]}).json()["predictions"][0]

    for _ in range(3):  # concurrent requests batch together in the engine
        with ThreadPoolExecutor(32) as pool:
            concurrent = list(pool.map(one, rows[:32]))
        assert concurrent == together

    # GET /metrics counts them: 1 + 32 + 3 × 32 requests of 32 + 32 + 96 rows, in fewer
    # forwards than requests when any batched; one model loaded
    text = svc.http.get(f"{svc.url}/metrics").text
    series = dict(line.rsplit(" ", 1) for line in text.splitlines()
                  if line.startswith("trainyard_predict"))
    assert int(series["trainyard_predict_requests_total"]) == 129, series
    assert int(series["trainyard_predict_rows_total"]) == 160, series
    assert 5 <= int(series["trainyard_predict_forwards_total"]) <= 129, series
    assert series["trainyard_predict_models_loaded"] == "1", series
    assert int(series["trainyard_predict_loaded_bytes"]) > 0, series


def test_bad_requests_name_the_field(blobs_model):
    svc, done, rows = blobs_model
    url = f"{svc.url}/v1/models/blobs"
    cases = [
        ({"instances": [[1.0, 2.0, 3.0]]}, "instances[0]", "2"),
        ({"instances": [[1.0, "x"]]}, "instances[0][1]", "number"),
        ({"instances": [[1.0, 2.0], [1.0]]}, "instances[1]", "2"),
        ({"instances": [{"a": 1.0}]}, "instances[0].b", "missing"),
        ({"instances": [{"a": 1.0, "b": 2.0, "c": 3.0}]}, "instances[0].c", "not a feature"),
        ({"instances": []}, "instances", "non-empty"),
        ({}, "instances", "missing"),
        ({"instances": rows, "inputs": rows}, "inputs", "not both"),
        ({"instances": rows, "signature_name": "other"}, "signature_name", "serving_default"),
        ({"instances": rows, "extra": 1}, "extra", "not a field"),
        ({"instances": [{"b64": "aGVsbG8="}]}, "instances[0]", "image"),
    ]
    for body, field, words in cases:
        p = problem(svc.http.post(f"{url}:predict", json=body), 400)
        assert [e["field"] for e in p["errors"]] == [field], (body, p)
        assert words in p["errors"][0]["message"], (body, p)
    p = problem(svc.http.post(f"{url}:regress", json={"examples": [{"a": 1, "b": 2}]}), 400)
    assert ":classify" in p["errors"][0]["message"]
    p = problem(svc.http.post(f"{url}:classify", json={"instances": rows}), 400)
    assert p["errors"][0]["field"] == "instances"
    assert "no model is named nope" in problem(
        svc.http.post(f"{svc.url}/v1/models/nope:predict", json={"instances": rows}),
        404)["detail"]
    assert "no version 9" in problem(
        svc.http.post(f"{url}/versions/9:predict", json={"instances": rows}), 404)["detail"]
    problem(svc.http.post(f"{url}/versions/x:predict", json={"instances": rows}), 400)
    problem(svc.http.post(f"{url}:predict", data="not json",
                          headers={"Content-Type": "application/json"}), 400)
    # Someone else's model does not exist for them; a token is needed at all.
    bob = svc.session(svc.token("bob", "user"))
    problem(bob.post(f"{url}:predict", json={"instances": rows}), 404)
    problem(bob.post(f"{svc.url}/jobs/{done['id']}/predict", json={"instances": rows}), 404)
    problem(svc.session("nope").post(f"{url}:predict", json={"instances": rows}), 401)


def test_cli_predict(blobs_model, trainyard_bin, tmp_path):
    svc, done, rows = blobs_model
    req = tmp_path / "rows.json"
    req.write_text(json.dumps(rows[:5]))  # a bare list is the instances
    want = svc.http.post(f"{svc.url}/v1/models/blobs:predict",
                         json={"instances": rows[:5]}).json()
    for args in (["blobs", str(req)], [done["id"], str(req)], ["blobs", "--version", "1", "-"]):
        proc = subprocess.run([str(trainyard_bin), "predict", *args], env=svc.env(),
                              input=req.read_text(), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout) == want
    proc = subprocess.run([str(trainyard_bin), "predict", "blobs", str(req), "--classify"],
                          env=svc.env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "instances" in proc.stderr, proc.stderr
    proc = subprocess.run([str(trainyard_bin), "predict", "nope", str(req)], env=svc.env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "no model is named nope" in proc.stderr, proc.stderr


def png(image):
    """A minimal 8-bit RGB PNG of image (h × w × 3 uint8)."""
    h, w, _ = image.shape
    raw = b"".join(b"\x00" + image[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def test_image_model_takes_pixels_and_pngs(serve, data_server, tmp_path):
    from test_images import cifar_records, make_images, tar_gz
    folder, base = data_server
    rng = np.random.default_rng(5)
    train_x, train_y = make_images(600, rng)
    test_x, _ = make_images(16, rng)
    (folder / "predict-cifar.tar.gz").write_bytes(tar_gz({
        "cifar-10-batches-bin/data_batch_1.bin": cifar_records(train_x, train_y)}))
    svc = serve()
    done = run(svc, svc.http, {
        "name": "squares", "dataset_url": f"{base}/predict-cifar.tar.gz",
        "dataset": {"format": "cifar10", "resize": [40, 40], "scale": "standardize"},
        "model": {"input_shape": [40, 40, 3],
                  "layers": [{"type": "conv2d", "filters": 8, "kernel_size": 3,
                              "activation": "relu"},
                             {"type": "maxpool2d", "pool_size": 2},
                             {"type": "flatten"},
                             {"type": "dense", "units": 10, "activation": "softmax"}]},
        "hyperparameters": {"epochs": 1, "batch_size": 32, "optimizer": "adam"}})
    url = f"{svc.url}/v1/models/squares:predict"
    r = svc.http.post(url, json={"instances": test_x.tolist()})
    assert r.status_code == 200, r.text
    preds = np.array(r.json()["predictions"], np.float32)
    assert preds.shape == (16, 10)
    # model.onnx takes the same 0-255 pixels of any size, h × w × c, and resizes (32×32, 64×64
    # and 23×45 to 40×40), scales and standardises them inside, as :predict does
    big = np.repeat(np.repeat(test_x[:3], 2, axis=1), 2, axis=2)
    odd = rng.integers(0, 256, (3, 23, 45, 3)).astype(np.uint8)
    session, worst = onnx_session(svc, done["id"], tmp_path), 0.0
    for images in (test_x, big, odd):
        (onnx,) = session.run(["output"], {"input": images.astype(np.float32)})
        worst = max(worst, np.abs(predicted(svc, url, images) - onnx).max())
    print(f"image model.onnx on raw pixels vs :predict: max |difference| {worst:.3g}")
    assert worst < 1e-5, worst
    # PyTorch's Sequential from model.safetensors on the same 32×32 images (resized to 40×40
    # by interpolate, scaled, standardised)
    if subprocess.run([SYSTEM_PYTHON, "-c", "import torch"], capture_output=True).returncode:
        pytest.skip("PyTorch comparison: /usr/bin/python3 has no torch (apt-get install -y "
                    "python3-torch)")
    model = tmp_path / "model.safetensors"
    model.write_bytes(svc.http.get(
        f"{svc.url}/jobs/{done['id']}/artifacts/model.safetensors").content)
    np.save(tmp_path / "images.npy", test_x)
    np.save(tmp_path / "ours.npy", preds)
    proc = subprocess.run([SYSTEM_PYTHON, str(HERE / "torch_compare.py"), str(model),
                           str(tmp_path / "images.npy"), str(tmp_path / "ours.npy")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    torch_diff = json.loads(proc.stdout)
    assert torch_diff["max_diff"] < 1e-4 and torch_diff["agree"] == 1.0, torch_diff
    b64 = [{"b64": base64.b64encode(png(img)).decode()} for img in test_x[:4]]
    r2 = svc.http.post(url, json={"instances": b64})
    assert r2.status_code == 200, r2.text
    assert r2.json()["predictions"] == r.json()["predictions"][:4]
    # A wrong channel count is a 400.
    p = problem(svc.http.post(url, json={"instances": [test_x[0, :, :, :2].tolist()]}), 400)
    assert p["errors"][0]["field"] == "instances[0]" and "3" in p["errors"][0]["message"]
    cls = svc.http.post(f"{svc.url}/v1/models/squares:classify",
                        json={"examples": [{"inputs": test_x[0].tolist()}]})
    assert cls.status_code == 200, cls.text
    assert [label for label, _ in cls.json()["results"][0]] == [str(i) for i in range(10)]


def test_plain_bodies_read_as_any_other(blobs_model):
    """The plainest body, {"instances": [lists of numbers]}, is read by a fast path of its own:
    its answers equal the general reader's (forced here by a signature_name), number forms and
    whitespace included, and whatever it does not take falls to the general reader's errors."""
    svc, done, rows = blobs_model
    url = f"{svc.url}/v1/models/blobs:predict"
    headers = {"Content-Type": "application/json"}
    plain = ['{"instances":[[1,2],[-0,0.5],[1e0,-2.5E-1],[0.0,100]]}',
             ' {\n "instances" : [ [ 1 , 2 ] ,[-0, 0.50],[1.0e+0 ,-0.25],[0,1e2]] } \n']
    general = {"signature_name": "serving_default",
               "instances": [[1, 2], [0, 0.5], [1, -0.25], [0, 100]]}
    want = svc.http.post(url, json=general)
    assert want.status_code == 200, want.text
    for body in plain:
        got = svc.http.post(url, data=body, headers=headers)
        assert got.status_code == 200, (body, got.text)
        assert got.json() == want.json(), body
    for body, status in [('{"instances": [[1, 2]], "instances": [[1, 2]]}', 400),
                         ('{"instances": [[1, 2]]} x', 400), ('{"instances": [[01, 2]]}', 400),
                         ('{"instances": [[1, 2], [3]]}', 400), ('{"instances": [[1, 2e999]]}', 400),
                         ('{"instances": [[1, 123456789012345678901234567890]]}', 400)]:
        r = svc.http.post(url, data=body, headers=headers)
        assert r.status_code == status, (body, r.text)
        assert r.headers["Content-Type"].startswith("application/problem+json")
    r = svc.http.post(url, data='{"instances": [[1, 2]]}', headers={"Content-Type": "text/plain"})
    assert r.status_code == 415, r.text
