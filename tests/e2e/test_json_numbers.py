"""Reals in every JSON the service and `trainyard train` write print as the shortest text that
reads back to the same double: `"beta1":0.9` and `"epsilon":1e-7`, not jansson's "%.17g"
`0.90000000000000002` and `9.9999999999999995e-8`; integral reals keep their ".0"."""
import json
import re
import struct

from conftest import sanitizer_reports
from helpers import job_doc, submit, wait_for

LONG_FORM = re.compile(r"\d\.\d*0000000000\d|\d\.\d*9999999999\d")


def safetensors_metadata(raw):
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n])["__metadata__"]


def numbers_doc(url):
    doc = job_doc(url, epochs=2)
    doc["hyperparameters"].update({"optimizer": "adam", "beta1": 0.9, "beta2": 0.999,
                                   "epsilon": 1e-7, "learning_rate": 1.0,
                                   "validation_split": 0.1})
    doc["model"]["layers"].append({"type": "dropout", "rate": 0.1})
    return doc


def check_text(text, sep=":"):
    assert f'"beta1"{sep}0.9,' in text, text
    assert f'"epsilon"{sep}1e-7' in text, text
    assert f'"learning_rate"{sep}1.0,' in text, text
    assert f'"validation_split"{sep}0.1' in text, text
    assert f'"rate"{sep}0.1' in text, text
    assert not LONG_FORM.search(text), LONG_FORM.search(text)


def test_service_answers_and_artifacts_print_shortest_reals(serve, blobs):
    svc = serve()
    r = submit(svc, numbers_doc(blobs))
    check_text(r.text)
    jid = r.json()["id"]
    job = wait_for(svc, jid, {"succeeded", "failed"})
    assert job["status"] == "succeeded", job
    hp = job["document"]["hyperparameters"]
    assert hp["beta1"] == 0.9 and hp["epsilon"] == 1e-7 and isinstance(hp["learning_rate"], float)
    check_text(svc.http.get(f"{svc.url}/jobs/{jid}").text)
    check_text(svc.http.get(f"{svc.url}/jobs?limit=5").text)
    check_text(svc.http.get(f"{svc.url}/jobs/{jid}/artifacts/job.json").text, sep=": ")
    model = svc.http.get(f"{svc.url}/jobs/{jid}/artifacts/model.safetensors").content
    meta = safetensors_metadata(model)
    check_text(meta["trainyard.job"])
    assert '"rate":0.1' in meta["trainyard.model"], meta["trainyard.model"]
    # The metrics come from float arithmetic: whatever their digits, they read back exactly.
    epochs = svc.http.get(f"{svc.url}/jobs/{jid}/metrics").json()["epochs"]
    assert len(epochs) == 2 and all(isinstance(m["loss"], float) for m in epochs)


def test_train_writes_shortest_reals(train, blobs):
    proc, out = train(numbers_doc(blobs))
    assert proc.returncode == 0, proc.stderr
    assert sanitizer_reports(proc.stderr) is None, proc.stderr
    check_text((out / "job.json").read_text(), sep=": ")
    meta = safetensors_metadata((out / "model.safetensors").read_bytes())
    check_text(meta["trainyard.job"])
    std = json.loads(meta["trainyard.standardization"])
    # float32 statistics print as their own shortest decimal (at most 9 digits).
    for v in std["mean"] + std["std"]:
        digits = re.sub(r"e.*$", "", repr(v)).replace(".", "").replace("-", "").strip("0")
        assert len(digits) <= 9, v
