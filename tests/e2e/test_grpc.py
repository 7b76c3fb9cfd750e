"""TensorFlow Serving's gRPC PredictionService on `serve --grpc-port` (issue 13, item 4;
predict/grpc.h), driven by TensorFlow Serving's own Python client (tensorflow-serving-api,
tests/e2e/grpc_client.py) as its users write it: GetModelMetadata to learn the signature,
Predict with tf.make_tensor_proto, a bearer token in the call's metadata, TLS with
grpc.ssl_channel_credentials. The answers must be what onnxruntime gives on the job's
model.onnx fed the same raw rows or pixels (the graph preprocesses them as training did).

The client needs tensorflow, whose numpy the main test venv (Debian's torch) must not get, so
it lives in its own venv, .venv-tf (.ci/run makes it), and runs as a subprocess; without it
these tests skip."""
import io
import json
import pathlib
import shutil
import socket
import subprocess

import numpy as np
import pytest
from helpers import job_doc, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
TF_PYTHON = ROOT / ".venv-tf" / "bin" / "python"
CLIENT = pathlib.Path(__file__).with_name("grpc_client.py")


@pytest.fixture(scope="module")
def tf_python():
    if not TF_PYTHON.exists():
        pytest.skip(".venv-tf is missing: the TensorFlow Serving client needs tensorflow-cpu and "
                    "tensorflow-serving-api in their own venv; .ci/run creates it")
    return TF_PYTHON


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def grpc_calls(tf_python, port, calls, ca=None):
    """Runs the client on calls; returns its results, one per call."""
    job = {"addr": f"127.0.0.1:{port}", "ca": str(ca) if ca else None, "calls": calls}
    proc = subprocess.run([str(tf_python), str(CLIENT)], input=json.dumps(job),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def trained(svc, session, url, name):
    """A succeeded blobs job of session's user, published as name; returns the job."""
    r = session.post(f"{svc.url}/train", json=job_doc(url, epochs=2, name=name))
    assert r.status_code == 202, r.text
    job = wait_for(svc, r.json()["id"], {"succeeded", "failed", "cancelled"})
    assert job["status"] == "succeeded", job
    return job


def onnx_outputs(svc, job, x):
    """model.onnx of the job in onnxruntime on x as Predict takes it: raw feature rows, or
    [N, H, W, C] pixels of 0..255 of any size (the graph resizes, scales and standardises)."""
    ort = pytest.importorskip("onnxruntime", reason="the ONNX check needs onnxruntime (PyPI)")
    path = svc.data_dir.parent / f"{job['id']}.onnx"
    r = svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts/model.onnx")
    assert r.status_code == 200, r.text
    path.write_bytes(r.content)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (inp,), (out,) = session.get_inputs(), session.get_outputs()
    return session.run([out.name], {inp.name: np.asarray(x, dtype=np.float32)})[0]


def test_predict_and_metadata_as_tensorflow_serving_clients_call_them(serve, blobs, tf_python):
    port = free_port()
    svc = serve("--grpc-port", str(port))
    alice_token = svc.token("alice", "user")
    bob_token = svc.token("bob", "user")
    job = trained(svc, svc.session(alice_token), blobs, "blobs-grpc")
    assert job["model"] == {"name": "blobs-grpc", "version": 1}

    # GetModelMetadata says how to call it: one input, one output, their dtypes and shapes.
    call = {"model": "blobs-grpc", "token": alice_token}
    (meta,) = grpc_calls(tf_python, port, [{"method": "metadata", **call}])
    assert meta["ok"], meta
    assert meta["type_url"] == "type.googleapis.com/tensorflow.serving.SignatureDefMap"
    assert meta["method_name"] == "tensorflow/serving/predict"
    assert meta["model_spec"] == {"name": "blobs-grpc", "version": 1,
                                  "signature_name": "serving_default"}
    (input_name, spec_in), = meta["inputs"].items()
    (output_name, spec_out), = meta["outputs"].items()
    assert (input_name, output_name) == ("inputs", "outputs")
    assert spec_in == {"dtype": "float32", "shape": [-1, 2]}
    assert spec_out == {"dtype": "float32", "shape": [-1, 3]}

    x = np.random.default_rng(5).normal(2, 2, size=(17, 2)).round(3)
    ints = x.round().astype(int)
    call["input"] = input_name
    first, pinned, doubles, int32s, int64s = grpc_calls(tf_python, port, [
        {"method": "predict", **call, "x": x.tolist()},
        {"method": "predict", **call, "version": 1, "x": x[:1].tolist()},
        {"method": "predict", **call, "x": x.tolist(), "dtype": "float64"},
        {"method": "predict", **call, "x": ints.tolist(), "dtype": "int32", "input": "rows"},
        {"method": "predict", **call, "x": ints.tolist(), "dtype": "int64"},
    ])

    # Predict gives what onnxruntime gives on model.onnx, whatever the input's dtype.
    want = onnx_outputs(svc, job, x)
    want_ints = onnx_outputs(svc, job, ints)
    for result, expect in ((first, want), (pinned, want[:1]), (doubles, want),
                           (int32s, want_ints), (int64s, want_ints)):
        assert result["ok"], result
        assert result["model_spec"] == meta["model_spec"]
        out = result["outputs"][output_name]
        assert out["dtype"] == "float32" and out["shape"] == list(expect.shape)
        assert np.abs(np.array(out["values"]) - expect).max() < 1e-5, (out, expect)

    # Each refusal has TensorFlow Serving's status code and says what was wrong.
    no_token, bad_token, bobs, unknown, no_version, wrong_shape, wrong_rank = grpc_calls(
        tf_python, port, [
            {"method": "predict", "model": "blobs-grpc", "x": x.tolist()},
            {"method": "predict", "model": "blobs-grpc", "token": "nope", "x": x.tolist()},
            {"method": "predict", "model": "blobs-grpc", "token": bob_token, "x": x.tolist()},
            {"method": "predict", **call, "model": "no-such-model", "x": x.tolist()},
            {"method": "predict", **call, "version": 2, "x": x.tolist()},
            {"method": "predict", **call, "x": np.ones((4, 3)).tolist()},
            {"method": "predict", **call, "x": [1.0, 2.0]},
        ])
    assert no_token["code"] == "UNAUTHENTICATED", no_token
    assert bad_token["code"] == "UNAUTHENTICATED", bad_token
    assert bobs["code"] == "NOT_FOUND", bobs  # as GET /v1/models: bob does not see it
    assert unknown["code"] == "NOT_FOUND", unknown
    assert no_version["code"] == "NOT_FOUND", no_version
    assert wrong_shape["code"] == "INVALID_ARGUMENT" and "inputs" in wrong_shape["details"], \
        wrong_shape
    assert wrong_rank["code"] == "INVALID_ARGUMENT" and "tensor_shape" in wrong_rank["details"], \
        wrong_rank
    assert "grpc Predict blobs-grpc" in svc.output()


def test_predict_over_tls_with_serves_certificate(serve, blobs, tf_python, tmp_path):
    if not shutil.which("openssl"):
        pytest.skip("the openssl command is needed to make the test certificate")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", "key.pem", "-out", "cert.pem"], cwd=tmp_path, check=True,
                   capture_output=True)
    port = free_port()
    svc = serve("--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem"),
                "--grpc-port", str(port))
    svc.http.verify = str(tmp_path / "cert.pem")
    svc.http.trust_env = False
    token = svc.token("carol", "user")
    carol = svc.session(token)
    carol.verify, carol.trust_env = str(tmp_path / "cert.pem"), False
    job = trained(svc, carol, blobs, "blobs-tls")
    x = [[0.1, 0.2], [4.0, 0.0], [0.0, 4.0]]
    (result,) = grpc_calls(tf_python, port, [
        {"method": "predict", "model": "blobs-tls", "token": token, "x": x}],
        ca=tmp_path / "cert.pem")
    assert result["ok"], result
    got = np.array(result["outputs"]["outputs"]["values"])
    assert np.abs(got - onnx_outputs(svc, job, x)).max() < 1e-5


def test_an_image_model_takes_8_bit_pixels_and_resizes(serve, data_server, tf_python):
    """An image model: its signature is [-1, h, w, c]; uint8 pixels (and the same values as
    float32) give onnxruntime's outputs on model.onnx fed the same pixels; images of another
    size are resized bilinearly first, as model.onnx resizes them and close to PyTorch's
    interpolate."""
    folder, base = data_server
    rng = np.random.default_rng(2)
    y = rng.integers(0, 3, 240)
    x = np.clip(rng.normal(60, 30, (240, 8, 8, 3)) + (y[:, None, None, None] == np.arange(3))
                * 120, 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    np.savez(buf, x_train=x, y_train=y)
    (folder / "grpc-images.npz").write_bytes(buf.getvalue())
    port = free_port()
    svc = serve("--grpc-port", str(port))
    token = svc.token("dana", "user")
    r = svc.session(token).post(f"{svc.url}/train", json={
        "name": "colours", "dataset_url": f"{base}/grpc-images.npz",
        "dataset": {"format": "npz", "scale": "standardize"},
        "model": {"input_shape": [8, 8, 3],
                  "layers": [{"type": "conv2d", "filters": 4, "kernel_size": 3,
                              "activation": "relu"},
                             {"type": "flatten"},
                             {"type": "dense", "units": 3, "activation": "softmax"}]},
        "hyperparameters": {"epochs": 2, "validation_split": 0.2}})
    assert r.status_code == 202, r.text
    job = wait_for(svc, r.json()["id"], {"succeeded", "failed", "cancelled"})
    assert job["status"] == "succeeded", job

    probe = x[:5]
    big = np.clip(rng.normal(100, 50, (2, 12, 10, 3)), 0, 255).astype(np.uint8)
    call = {"model": "colours", "token": token}
    meta, pixels, floats, resized = grpc_calls(tf_python, port, [
        {"method": "metadata", **call},
        {"method": "predict", **call, "x": probe.tolist(), "dtype": "uint8"},
        {"method": "predict", **call, "x": probe.tolist(), "dtype": "float32"},
        {"method": "predict", **call, "x": big.tolist(), "dtype": "uint8"},
    ])
    assert meta["inputs"] == {"inputs": {"dtype": "float32", "shape": [-1, 8, 8, 3]}}
    assert meta["outputs"] == {"outputs": {"dtype": "float32", "shape": [-1, 3]}}
    want = onnx_outputs(svc, job, probe)
    for result in (pixels, floats):
        assert result["ok"], result
        got = np.array(result["outputs"]["outputs"]["values"])
        assert np.abs(got - want).max() < 1e-5, (got, want)

    assert resized["ok"], resized
    got = np.array(resized["outputs"]["outputs"]["values"])
    assert np.abs(got - onnx_outputs(svc, job, big)).max() < 1e-5
    torch = pytest.importorskip("torch", reason="the resize check needs PyTorch (python3-torch)")
    small = torch.nn.functional.interpolate(
        torch.from_numpy(big.astype(np.float32)).permute(0, 3, 1, 2), size=(8, 8),
        mode="bilinear", align_corners=False).permute(0, 2, 3, 1).numpy()
    assert np.abs(got - onnx_outputs(svc, job, small)).max() < 1e-5
