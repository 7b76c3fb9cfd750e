"""Models and versions (issue 13, item 1) against a real serve: each succeeded job publishes
the next version of its name, GET /v1/models/{name} answers TensorFlow Serving's model status,
GET /models lists names with their versions and source jobs, a user sees only the versions of
its own jobs, a failed job publishes nothing, and DELETE of a job retires its version (END)."""
from helpers import TERMINAL, job_doc, submit, wait_for


def run(svc, http, doc):
    job = http.post(f"{svc.url}/train", json=doc)
    assert job.status_code == 202, job.text
    done = wait_for(svc, job.json()["id"], TERMINAL)
    return done


def problem(r, status):
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"].startswith("application/problem+json")
    return r.json()


def test_versions_status_visibility_and_retire(serve, blobs):
    svc = serve()
    alice = svc.session(svc.token("alice", "user"))
    bob = svc.session(svc.token("bob", "user"))
    doc = job_doc(blobs, epochs=1, name="blobs-model")
    first = run(svc, alice, doc)
    second = run(svc, alice, doc)
    assert first["status"] == second["status"] == "succeeded", (first, second)
    assert first["model"] == {"name": "blobs-model", "version": 1}
    assert second["model"] == {"name": "blobs-model", "version": 2}

    # A failed job of the same name publishes nothing.
    failed = run(svc, alice, {**doc, "dataset_url": blobs.replace("blobs.csv", "missing.csv")})
    assert failed["status"] == "failed" and "model" not in failed

    status = alice.get(f"{svc.url}/v1/models/blobs-model")
    assert status.status_code == 200, status.text
    ok = {"error_code": "OK", "error_message": ""}
    assert status.json() == {"model_version_status": [
        {"version": "2", "state": "AVAILABLE", "status": ok},
        {"version": "1", "state": "AVAILABLE", "status": ok}]}
    one = alice.get(f"{svc.url}/v1/models/blobs-model/versions/1").json()
    assert one == {"model_version_status": [{"version": "1", "state": "AVAILABLE", "status": ok}]}
    assert "version 3" in problem(alice.get(f"{svc.url}/v1/models/blobs-model/versions/3"),
                                  404)["detail"]
    assert "no model is named nope" in problem(alice.get(f"{svc.url}/v1/models/nope"),
                                               404)["detail"]

    listing = alice.get(f"{svc.url}/models").json()
    assert listing["next_cursor"] is None
    [model] = listing["models"]
    assert model["name"] == "blobs-model" and model["latest"] == 2
    assert [(v["version"], v["job_id"], v["state"]) for v in model["versions"]] == [
        (2, second["id"], "available"), (1, first["id"], "available")]

    # Bob sees nothing of Alice's; his own job of that name is the next version, his alone.
    problem(bob.get(f"{svc.url}/v1/models/blobs-model"), 404)
    assert bob.get(f"{svc.url}/models").json()["models"] == []
    bobs = run(svc, bob, doc)
    assert bobs["model"] == {"name": "blobs-model", "version": 3}
    mine = bob.get(f"{svc.url}/v1/models/blobs-model").json()["model_version_status"]
    assert [v["version"] for v in mine] == ["3"]
    problem(bob.get(f"{svc.url}/v1/models/blobs-model/versions/1"), 404)
    admin = svc.http.get(f"{svc.url}/v1/models/blobs-model").json()["model_version_status"]
    assert [v["version"] for v in admin] == ["3", "2", "1"]

    # DELETE retires the version: the row stays (END), its number is not handed out again.
    assert alice.delete(f"{svc.url}/jobs/{second['id']}").status_code == 204
    status = alice.get(f"{svc.url}/v1/models/blobs-model").json()["model_version_status"]
    assert [(v["version"], v["state"]) for v in status] == [("2", "END"), ("1", "AVAILABLE")]
    model = alice.get(f"{svc.url}/models").json()["models"][0]
    assert model["latest"] == 1
    assert model["versions"][0]["state"] == "retired" and model["versions"][0]["retired_at"]
    third = run(svc, alice, doc)
    assert third["model"] == {"name": "blobs-model", "version": 4}


def test_models_page_by_name(serve, blobs):
    svc = serve()
    for name in ("a", "b", "c"):
        done = wait_for(svc, submit(svc, job_doc(blobs, epochs=1, name=name)).json()["id"],
                        TERMINAL)
        assert done["status"] == "succeeded", done
    page = svc.http.get(f"{svc.url}/models", params={"limit": 2}).json()
    assert [m["name"] for m in page["models"]] == ["a", "b"] and page["next_cursor"]
    rest = svc.http.get(f"{svc.url}/models",
                        params={"limit": 2, "cursor": page["next_cursor"]}).json()
    assert [m["name"] for m in rest["models"]] == ["c"] and rest["next_cursor"] is None
