"""GET /metrics against the real server: it parses with the Prometheus text-format parser,
holds every family the operators' guide names, and its numbers follow what happened (a job
run, artifacts downloaded, requests made). Only admin and metrics tokens may scrape."""
from prometheus_client.parser import text_string_to_metric_families

from helpers import TERMINAL, job_doc, submit, wait_for


def scrape(svc, session=None):
    r = (session or svc.http).get(f"{svc.url}/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(r.text)}
    for family in families.values():  # each series once (the parser does not check)
        series = [(s.name, tuple(sorted(s.labels.items()))) for s in family.samples]
        assert len(series) == len(set(series)), family
    return families


def value(families, name, sample=None, **labels):
    family = families[name]
    for s in family.samples:
        if (sample is None or s.name == sample) and all(s.labels.get(k) == v
                                                        for k, v in labels.items()):
            return s.value
    raise AssertionError(f"no sample {sample or name} {labels} in {family.samples}")


def test_metrics_scrape_cleanly_and_follow_the_service(serve, blobs):
    svc = serve()
    before = scrape(svc)
    for name in ["trainyard_jobs", "trainyard_queue_depth", "trainyard_submit_to_running_seconds",
                 "trainyard_epoch_duration_seconds", "trainyard_workers",
                 "trainyard_http_requests", "trainyard_http_response_bytes",
                 "trainyard_dataset_bytes_fetched", "trainyard_artifact_bytes_served"]:
        assert name in before, (name, sorted(before))
    assert value(before, "trainyard_jobs", status="succeeded") == 0

    job = submit(svc, job_doc(blobs, epochs=4)).json()
    assert wait_for(svc, job["id"], TERMINAL)["status"] == "succeeded"
    model = svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts/model.safetensors")
    assert model.status_code == 200
    # requests that match no route, with two statuses: one series of bytes for them
    assert svc.http.get(f"{svc.url}/no/such/path").status_code == 404
    assert svc.http.delete(f"{svc.url}/healthz").status_code == 405
    after = scrape(svc)

    assert value(after, "trainyard_jobs", status="succeeded") == 1
    assert value(after, "trainyard_queue_depth") == 0
    assert value(after, "trainyard_submit_to_running_seconds",
                 "trainyard_submit_to_running_seconds_count") == 1
    assert value(after, "trainyard_epoch_duration_seconds",
                 "trainyard_epoch_duration_seconds_count") == 4
    buckets = [s for s in after["trainyard_epoch_duration_seconds"].samples
               if s.name.endswith("_bucket")]
    assert [s.value for s in buckets] == sorted(s.value for s in buckets)  # cumulative
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == 4
    assert value(after, "trainyard_workers", state="connected") == 1
    assert value(after, "trainyard_dataset_bytes_fetched") > 1000
    assert value(after, "trainyard_artifact_bytes_served") >= len(model.content)
    assert value(after, "trainyard_http_requests", method="POST", route="/train",
                 status="202") == 1
    assert value(after, "trainyard_http_requests", method="GET",
                 route="/jobs/{id}/artifacts/{name}", status="200") == 1
    assert value(after, "trainyard_http_requests", method="", route="", status="404") >= 1
    assert value(after, "trainyard_http_requests", method="", route="", status="405") >= 1


def test_only_admin_and_metrics_tokens_may_scrape(serve):
    svc = serve("--workers", "0")
    metrics = svc.session(svc.token("prometheus", "metrics"))
    families = scrape(svc, metrics)
    assert value(families, "trainyard_jobs", status="queued") == 0
    assert metrics.get(f"{svc.url}/jobs").status_code == 403
    user = svc.session(svc.token("ivy", "user"))
    assert user.get(f"{svc.url}/metrics").status_code == 403
    assert svc.session("ty_" + "1" * 40).get(f"{svc.url}/metrics").status_code == 401
