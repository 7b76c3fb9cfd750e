"""Sweeps end to end (issue 15's done-means): a random search of 16 trials with ASHA on a
dataset the test makes beats its base job on held-out data the sweep never saw, and stops weak
trials early, so that it trains fewer epochs than 16 trials of all their epochs would; its
leaderboard agrees with the trials' own metrics and TensorBoard files; trials are ordinary jobs (GET /jobs?sweep=, a
trial cancelled alone); cancelling a sweep cancels the rest; bad sweep documents are 400s that
name the field; a sweep carries on after kill -9 of serve; its webhooks arrive signed. The real
serve with local workers on PoCL, real SQLite, a webhook receiver on loopback.

The task: two features in [-1, 1]², the class a ring crossed with the quadrants' sign, which a
network of 4 units trained at a learning rate of 3e-4 for 9 epochs cannot learn and one of 32
units at 1e-2 learns well. 24,000 rows, so that an epoch lasts long enough (tens of ms) for a
rung's decision to reach a trial before it finished."""
import json
import subprocess
import time

import numpy as np
import pytest

from helpers import TERMINAL, submit, until, wait_for

MAX_EPOCHS = 9


def make_rows(rng, n):
    x = rng.uniform(-1, 1, (n, 2))
    ring = np.sqrt((x ** 2).sum(1)) < 0.6
    y = ring ^ (x[:, 0] * x[:, 1] > 0)
    return x, y.astype(int)


def write_csv(path, x, y):
    lines = ["a,b,y"] + [f"{p:.4f},{q:.4f},c{c}" for (p, q), c in zip(x, y)]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def task(data_server):
    folder, base = data_server
    rng = np.random.default_rng(15)
    write_csv(folder / "sweep_train.csv", *make_rows(rng, 24000))
    held_x, held_y = make_rows(rng, 2000)  # never served: the sweep cannot see it
    return f"{base}/sweep_train.csv", held_x, held_y


def base_job(url, epochs=MAX_EPOCHS, name="ring"):
    return {"name": name, "dataset_url": url,
            "model": {"layers": [{"type": "dense", "units": 4, "activation": "relu"}]},
            "hyperparameters": {"epochs": epochs, "batch_size": 32, "learning_rate": 0.0003,
                                "validation_split": 0.2, "seed": 1}}


def held_out_accuracy(svc, job_id, x, y):
    """Accuracy of the job's model on the held-out rows, through POST /jobs/{id}/predict. The
    classes are c0 and c1, in sorted order."""
    r = svc.http.post(f"{svc.url}/jobs/{job_id}/predict", json={"instances": x.tolist()})
    assert r.status_code == 200, r.text
    p = np.array(r.json()["predictions"])
    return float((p.argmax(1) == y).mean())


def best_of(epochs, metric, mode):
    vals = [e[metric] for e in epochs if e.get(metric) is not None]
    if not vals:
        return None
    return min(vals) if mode == "min" else max(vals)


def test_sweep_with_asha_beats_its_base(serve, task, tmp_path):
    url, held_x, held_y = task
    t0 = time.time()
    svc = serve("--workers", "4")
    base = submit(svc, base_job(url)).json()
    sweep_doc = {
        "name": "ring-search", "base": base_job(url),
        "parameters": {"hyperparameters.learning_rate": {"type": "log_uniform", "min": 1e-4,
                                                         "max": 3e-2},
                       "model.layers[0].units": {"type": "choice", "values": [4, 16, 32]}},
        "algorithm": "random", "seed": 7, "metric": {"name": "val_loss", "mode": "min"},
        "max_trials": 16, "max_concurrent": 4,
        "asha": {"min_epochs": 1, "reduction_factor": 3}}
    r = svc.http.post(f"{svc.url}/sweeps", json=sweep_doc)
    assert r.status_code == 201, r.text
    sweep = r.json()
    assert r.headers["Location"] == f"/sweeps/{sweep['id']}"
    assert sweep["status"] == "running" and sweep["document"]["max_trials"] == 16
    sid = sweep["id"]

    def concurrency_ok():
        s = svc.http.get(f"{svc.url}/sweeps/{sid}").json()
        assert s["trials"]["queued"] + s["trials"]["running"] <= 4
        return s if s["status"] != "running" else None
    sweep = until(concurrency_ok, 240, "the sweep to end")
    base = wait_for(svc, base["id"], TERMINAL)
    assert base["status"] == "succeeded"
    assert sweep["status"] == "succeeded", sweep
    assert sweep["trials"]["created"] == 16 and sweep["trials"]["succeeded"] >= 1

    # trials are jobs: in GET /jobs?sweep=, named <sweep>-<n>, with the sampled parameters
    jobs = svc.http.get(f"{svc.url}/jobs", params={"sweep": sid, "limit": 100}).json()["jobs"]
    assert sorted(j["name"] for j in jobs) == sorted(f"ring-search-{n}" for n in range(1, 17))
    assert len(svc.http.get(f"{svc.url}/jobs", params={"limit": 100}).json()["jobs"]) == 17
    board = sweep["leaderboard"]
    assert {e["job_id"] for e in board} == {j["id"] for j in jobs}
    by_id = {j["id"]: j for j in jobs}
    for e in board:
        doc = by_id[e["job_id"]]["document"]
        assert e["parameters"] == {
            "hyperparameters.learning_rate": doc["hyperparameters"]["learning_rate"],
            "model.layers[0].units": doc["model"]["layers"][0]["units"]}
        assert 1e-4 <= e["parameters"]["hyperparameters.learning_rate"] <= 3e-2

    # the leaderboard agrees with each trial's own metrics, best first
    total = 0
    curves = {}
    for rank, e in enumerate(board, 1):
        epochs = svc.http.get(f"{svc.url}/jobs/{e['job_id']}/metrics").json()["epochs"]
        curves[e["job_id"]] = epochs
        total += len(epochs)
        assert e["rank"] == rank and e["epochs_run"] == len(epochs)
        assert e["value"] == pytest.approx(best_of(epochs, "val_loss", "min"), rel=1e-6)
        assert [x["val_loss"] for x in epochs if x["epoch"] == e["epoch"]] == \
            [pytest.approx(e["value"], rel=1e-6)]
    values = [e["value"] for e in board if e["value"] is not None]
    assert values == sorted(values) and len(values) >= 15  # a failed trial may have none: last
    assert all(e["value"] is None for e in board[len(values):])
    assert sweep["epochs_total"] == total

    # ... and so do the trials' TensorBoard files, laid out by the CLI for one --logdir: each
    # run's val_loss per epoch is the curve above (TensorBoard keeps float32), its best the
    # leaderboard's value
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    runs = tmp_path / "runs"
    out = subprocess.run([str(svc.binary), "download", "--tensorboard", str(runs)] +
                         [e["job_id"] for e in board], env=svc.env(), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for e in board:
        [run] = runs.glob(f"ring-search-*-{e['job_id'][:8]}")
        acc = EventAccumulator(str(run))
        acc.Reload()
        got = [(x.step, x.value) for x in acc.Scalars("val_loss")]
        assert got == [(m["epoch"], pytest.approx(np.float32(m["val_loss"]), rel=1e-6))
                       for m in curves[e["job_id"]]]
        if e["value"] is not None:
            assert min(v for _, v in got) == pytest.approx(np.float32(e["value"]), rel=1e-6)

    # ASHA stopped weak trials early: fewer epochs than 16 trials of all their epochs
    assert total < 16 * MAX_EPOCHS, total
    stopped = [e for e in board if e["stop_reason"]]
    assert stopped and sweep["trials"]["stopped_early"] == len(stopped)
    for e in stopped:
        assert "ASHA" in e["stop_reason"] and e["epochs_run"] < MAX_EPOCHS
        assert by_id[e["job_id"]]["status"] == "succeeded"
    assert sum(e["epochs_run"] == MAX_EPOCHS for e in board) < 16

    # the best trial beats the base job on data neither saw
    best = sweep["best"]
    assert best["job_id"] == board[0]["job_id"] and best["value"] == board[0]["value"]
    base_acc = held_out_accuracy(svc, base["id"], held_x, held_y)
    best_acc = held_out_accuracy(svc, best["job_id"], held_x, held_y)
    assert best_acc > base_acc + 0.1, (best_acc, base_acc)
    assert best_acc > 0.85

    # the CLI shows the same leaderboard
    out = subprocess.run([str(svc.binary), "sweep", "status", sid], env=svc.env(),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert best["job_id"] in out.stdout and "succeeded" in out.stdout
    listed = subprocess.run([str(svc.binary), "sweep", "list", "--json"], env=svc.env(),
                            capture_output=True, text=True, timeout=30)
    assert listed.returncode == 0 and sid in listed.stdout
    print(f"sweep: {total} epochs of {16 * MAX_EPOCHS}, held-out accuracy {best_acc:.3f} vs "
          f"base {base_acc:.3f}, {time.time() - t0:.1f}s")


def test_trial_cancelled_alone_then_the_sweep(serve, task, tmp_path):
    url, _, _ = task
    svc = serve("--workers", "2")
    doc = {"name": "long", "base": base_job(url, epochs=400),
           "parameters": {"hyperparameters.batch_size": {"type": "choice", "values": [32, 64]}},
           "algorithm": "grid", "max_trials": 6, "max_concurrent": 2,
           "metric": {"name": "loss"}}
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(doc))
    out = subprocess.run([str(svc.binary), "sweep", "submit", str(path)], env=svc.env(),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    sid = out.stdout.strip()
    assert svc.http.get(f"{svc.url}/sweeps/{sid}").json()["document"]["metric"] == \
        {"name": "loss", "mode": "min"}

    def trials():
        return svc.http.get(f"{svc.url}/jobs", params={"sweep": sid}).json()["jobs"]
    first = until(lambda: [j for j in trials() if j["name"] == "long-1"], 30, "trial 1")[0]
    r = svc.http.post(f"{svc.url}/jobs/{first['id']}/cancel")
    assert r.status_code == 200
    wait_for(svc, first["id"], {"cancelled"})
    # a trial cancelled alone: the sweep goes on, and its slot goes to the grid's last point
    until(lambda: len(trials()) == 2 and all(j["name"] != "long-1" or j["status"] == "cancelled"
                                             for j in trials()) and
          svc.http.get(f"{svc.url}/sweeps/{sid}").json()["status"] == "running", 30,
          "the grid's two trials")
    s = svc.http.get(f"{svc.url}/sweeps/{sid}").json()
    assert s["trials"]["created"] == 2 and s["trials"]["cancelled"] == 1
    # the grid has two points: 6 was the cap, not a count
    assert s["document"]["max_trials"] == 6

    out = subprocess.run([str(svc.binary), "sweep", "cancel", sid, "--json"], env=svc.env(),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    cancelled = json.loads(out.stdout)
    assert cancelled["status"] == "cancelled" and cancelled["finished_at"]
    for j in trials():
        assert wait_for(svc, j["id"], TERMINAL, timeout=60)["status"] == "cancelled"
    time.sleep(0.5)  # the controller makes nothing for a cancelled sweep
    assert len(trials()) == 2
    again = svc.http.post(f"{svc.url}/sweeps/{sid}/cancel")
    assert again.status_code == 409
    lst = svc.http.get(f"{svc.url}/sweeps").json()
    assert [x["id"] for x in lst["sweeps"]] == [sid] and "leaderboard" not in lst["sweeps"][0]

    # ownership: another user's token sees no such sweep
    user = svc.session(svc.token("someone", "user"))
    assert user.get(f"{svc.url}/sweeps/{sid}").status_code == 404
    assert user.post(f"{svc.url}/sweeps/{sid}/cancel").status_code == 404
    assert user.get(f"{svc.url}/sweeps").json()["sweeps"] == []
    assert user.get(f"{svc.url}/jobs", params={"sweep": sid}).json()["jobs"] == []

    # the CLI: an invalid document is exit 2 with the field named
    doc["max_concurrent"] = 0
    path.write_text(json.dumps(doc))
    out = subprocess.run([str(svc.binary), "sweep", "submit", str(path)], env=svc.env(),
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "max_concurrent" in out.stderr, out


@pytest.mark.parametrize("change, field", [
    (lambda d: d["parameters"]["hyperparameters.learning_rate"].update(min=0),
     'parameters["hyperparameters.learning_rate"].min'),
    (lambda d: d["parameters"]["hyperparameters.learning_rate"].update(type="normal"),
     'parameters["hyperparameters.learning_rate"].type'),
    (lambda d: d["parameters"].update({"model.layers[3].units": {"type": "choice",
                                                                  "values": [8]}}),
     'parameters["model.layers[3].units"]'),
    (lambda d: d["parameters"].update({"hyperparameters.batch_size": {
        "type": "int_uniform", "min": 0, "max": 8}}),
     'parameters["hyperparameters.batch_size"]'),
    (lambda d: d.update(algorithm="grid"), 'parameters["hyperparameters.learning_rate"].type'),
    (lambda d: d.update(algorithm="grid", parameters={"model.layers[0].units": {
        "type": "choice", "values": list(range(1, 21))}}, max_trials=16), "max_trials"),
    (lambda d: d.update(max_trials=0), "max_trials"),
    (lambda d: d.update(max_trials=1001), "max_trials"),
    (lambda d: d.update(max_concurrent=0), "max_concurrent"),
    (lambda d: d.update(metric={"name": "val_loss", "mode": "lowest"}), "metric.mode"),
    (lambda d: d.update(metric={"name": "f1"}), "metric.name"),
    (lambda d: d["base"]["hyperparameters"].update(validation_split=0), "metric.name"),
    (lambda d: d.update(asha={"min_epochs": 1, "reduction_factor": 1}),
     "asha.reduction_factor"),
    (lambda d: d.update(asha={"min_epochs": 9, "reduction_factor": 3}), "asha.min_epochs"),
    (lambda d: d["parameters"].update({"hyperparameters.epochs": {
        "type": "int_uniform", "min": 2, "max": 9}}), 'parameters["hyperparameters.epochs"]'),
    (lambda d: d["base"]["hyperparameters"].update(epochs=0), "base.hyperparameters.epochs"),
    (lambda d: d.pop("base"), "base"),
    (lambda d: d.update(colour="blue"), "colour"),
    (lambda d: d.update(notify=[{"url": "ftp://hooks.example.com/x"}]), "notify[0].url"),
    (lambda d: d.update(name="x" * 121), "name"),
])
def test_bad_sweep_documents_name_the_field(serve, change, field, bad_sweep_service):
    svc = bad_sweep_service
    doc = {"name": "bad", "base": base_job("http://127.0.0.1:9/none.csv"),
           "parameters": {"hyperparameters.learning_rate": {"type": "log_uniform", "min": 1e-4,
                                                            "max": 1e-1}},
           "max_trials": 4, "metric": {"name": "val_loss", "mode": "min"},
           "asha": {"min_epochs": 1, "reduction_factor": 3}}
    change(doc)
    r = svc.http.post(f"{svc.url}/sweeps", json=doc)
    assert r.status_code == 400, r.text
    assert r.headers["Content-Type"].startswith("application/problem+json")
    assert field in [e["field"] for e in r.json()["errors"]], r.json()
    assert svc.http.get(f"{svc.url}/sweeps").json()["sweeps"] == []


@pytest.fixture(scope="module")
def bad_sweep_service(trainyard_bin, tmp_path_factory):
    from conftest import Service
    svc = Service(trainyard_bin, tmp_path_factory.mktemp("bad") / "data", ["--workers", "0"])
    yield svc
    svc.stop()


def test_sweep_carries_on_after_serve_is_killed(serve, task):
    """kill -9 of serve in the middle of a sweep: the restarted serve's controller finds the
    sweep in the database and finishes it, with each trial made once."""
    url, _, _ = task
    svc = serve("--workers", "2", "--lease-seconds", "2")
    doc = {"name": "again", "base": base_job(url, epochs=12),
           "parameters": {"hyperparameters.learning_rate": {"type": "log_uniform", "min": 1e-3,
                                                            "max": 1e-2}},
           "max_trials": 5, "max_concurrent": 2, "metric": {"name": "val_loss"},
           "asha": {"min_epochs": 2, "reduction_factor": 2}}
    r = svc.http.post(f"{svc.url}/sweeps", json=doc)
    assert r.status_code == 201, r.text
    sid = r.json()["id"]

    def started():
        s = svc.http.get(f"{svc.url}/sweeps/{sid}").json()
        return s["trials"]["running"] >= 1 and s["epochs_total"] >= 1
    until(started, 60, "a trial's first epoch")
    svc.proc.kill()
    svc.proc.wait()
    svc.restart()
    s = until(lambda: (lambda s: s if s["status"] != "running" else None)(
        svc.http.get(f"{svc.url}/sweeps/{sid}").json()), 120, "the sweep to end")
    assert s["status"] == "succeeded", s
    jobs = svc.http.get(f"{svc.url}/jobs", params={"sweep": sid}).json()["jobs"]
    assert sorted(j["name"] for j in jobs) == [f"again-{n}" for n in range(1, 6)]
    assert s["trials"]["created"] == 5 and s["document"]["max_trials"] == 5
    assert all(j["status"] in TERMINAL for j in jobs)


def test_sweep_webhooks(serve, task):
    """A sweep's own notify: sweep.running when it is stored, sweep.succeeded with its best
    trial when it ends, sweep.cancelled for a cancel; signed with the owner's secret. Webhook
    URLs the host rules refuse, the sweep's or its trials', are a 400 naming the field."""
    from test_notify import Receiver, check_signature
    url, _, _ = task
    receiver = Receiver()
    try:
        svc = serve("--workers", "2", "--notify-backoff-ms", "200")
        admin = next(t["id"] for t in svc.http.get(f"{svc.url}/tokens").json()["tokens"]
                     if t["role"] == "admin")
        secret = svc.http.post(f"{svc.url}/tokens/{admin}/webhook-secret").json()["secret"]
        doc = {"name": "hooked", "base": base_job(url, epochs=3), "algorithm": "grid",
               "parameters": {"model.layers[0].units": {"type": "choice", "values": [4, 16]}},
               "max_concurrent": 2, "metric": {"name": "val_loss"},
               "notify": [{"url": receiver.url + "/s", "events": ["running", "succeeded"]}]}
        r = svc.http.post(f"{svc.url}/sweeps", json=doc)
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        posts = until(lambda: receiver.at("/s") if len(receiver.at("/s")) >= 2 else None, 120,
                      "sweep.running and sweep.succeeded")
        bodies = [check_signature(p, secret) for p in posts]
        assert [b["event"] for b in bodies] == ["sweep.running", "sweep.succeeded"]
        done = svc.http.get(f"{svc.url}/sweeps/{sid}").json()
        assert bodies[0]["sweep"]["id"] == sid and bodies[0]["sweep"]["status"] == "running"
        end = bodies[1]["sweep"]
        assert end["status"] == "succeeded" and end["trials"]["succeeded"] == 2
        assert end["best"]["job_id"] == done["best"]["job_id"]
        assert end["best"]["value"] == pytest.approx(done["best"]["value"])

        doc.update(name="hooked-cancel", base=base_job(url, epochs=400),
                   notify=[{"url": receiver.url + "/c", "events": ["cancelled"]}])
        sid = svc.http.post(f"{svc.url}/sweeps", json=doc).json()["id"]
        assert svc.http.post(f"{svc.url}/sweeps/{sid}/cancel").status_code == 200
        post = until(lambda: receiver.at("/c"), 30, "sweep.cancelled")[0]
        assert check_signature(post, secret)["sweep"]["status"] == "cancelled"
        time.sleep(0.5)
        assert len(receiver.at("/c")) == 1 and len(receiver.at("/s")) == 2

        for where in ("notify", "base"):
            bad = dict(doc, notify=[])
            hook = [{"url": "http://10.1.2.3/hook"}]
            if where == "notify":
                bad["notify"] = hook
            else:
                bad["base"] = dict(doc["base"], notify=hook)
            r = svc.http.post(f"{svc.url}/sweeps", json=bad)
            assert r.status_code == 400, r.text
            field = "notify[0].url" if where == "notify" else "base.notify[0].url"
            assert field in [e["field"] for e in r.json()["errors"]], r.json()
    finally:
        receiver.close()
