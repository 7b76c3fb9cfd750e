"""A TensorFlow Serving gRPC client, as its users write one, for tests/e2e/test_grpc.py.

It runs under .venv-tf/bin/python (tensorflow-cpu and tensorflow-serving-api, whose numpy the
main test venv must not get), so the test starts it as a subprocess: the calls to make arrive
as JSON on stdin, one result per call leaves as JSON on stdout.

    {"addr": "127.0.0.1:PORT", "ca": null or a PEM file, "calls": [CALL, ...]}
    CALL: {"method": "metadata" | "predict", "model": NAME, "version": null or N,
           "token": null or TOKEN, "signature": "serving_default",
           predict only: "input": NAME or null (from GetModelMetadata), "x": nested list,
           "dtype": "float32" (numpy's name), "shape": null or a list}
    RESULT: {"ok": true, "model_spec": {...}, ...} or {"ok": false, "code": "NOT_FOUND",
            "details": "..."}; metadata adds "inputs"/"outputs" ({name: {"dtype", "shape"}})
            and "method_name"; predict adds "outputs" ({name: {"dtype", "shape", "values"}}).
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import grpc  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow_serving.apis import (get_model_metadata_pb2, predict_pb2,  # noqa: E402
                                     prediction_service_pb2_grpc)


def channel(addr, ca):
    if ca:
        with open(ca, "rb") as f:
            return grpc.secure_channel(addr, grpc.ssl_channel_credentials(f.read()))
    return grpc.insecure_channel(addr)


def model_spec_of(spec):
    return {"name": spec.name,
            "version": spec.version.value if spec.HasField("version") else None,
            "signature_name": spec.signature_name}


def shape_of(tensor_shape):
    return [d.size for d in tensor_shape.dim]


def metadata(stub, call, md):
    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = call["model"]
    if call.get("version"):
        request.model_spec.version.value = call["version"]
    request.metadata_field.append("signature_def")
    result = stub.GetModelMetadata(request, 10.0, metadata=md)
    any_ = result.metadata["signature_def"]
    signatures = get_model_metadata_pb2.SignatureDefMap()
    assert any_.Unpack(signatures), any_.type_url
    sig = signatures.signature_def[call.get("signature") or "serving_default"]
    return {"model_spec": model_spec_of(result.model_spec),
            "type_url": any_.type_url,
            "method_name": sig.method_name,
            "inputs": {k: {"dtype": tf.dtypes.as_dtype(v.dtype).name,
                           "shape": shape_of(v.tensor_shape)} for k, v in sig.inputs.items()},
            "outputs": {k: {"dtype": tf.dtypes.as_dtype(v.dtype).name,
                            "shape": shape_of(v.tensor_shape)} for k, v in sig.outputs.items()}}


def predict(stub, call, md):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = call["model"]
    if call.get("version"):
        request.model_spec.version.value = call["version"]
    request.model_spec.signature_name = call.get("signature") or "serving_default"
    x = np.asarray(call["x"], dtype=call.get("dtype") or "float32")
    shape = call.get("shape") or x.shape
    request.inputs[call.get("input") or "inputs"].CopyFrom(tf.make_tensor_proto(x, shape=shape))
    result = stub.Predict(request, 10.0, metadata=md)
    outputs = {}
    for name, tensor in result.outputs.items():
        values = tf.make_ndarray(tensor)
        outputs[name] = {"dtype": tf.dtypes.as_dtype(tensor.dtype).name,
                         "shape": list(values.shape), "values": values.tolist()}
    return {"model_spec": model_spec_of(result.model_spec), "outputs": outputs}


def main():
    job = json.load(sys.stdin)
    ch = channel(job["addr"], job.get("ca"))
    grpc.channel_ready_future(ch).result(timeout=30)  # serve may still be opening the port
    stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
    results = []
    for call in job["calls"]:
        md = [("authorization", f"Bearer {call['token']}")] if call.get("token") else None
        try:
            fn = metadata if call["method"] == "metadata" else predict
            results.append({"ok": True, **fn(stub, call, md)})
        except grpc.RpcError as e:
            results.append({"ok": False, "code": e.code().name, "details": e.details()})
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
