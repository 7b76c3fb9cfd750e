"""serve --retain-days end to end: finished jobs older than the cutoff go with their rows and
files, jobs marked keep (in the document, or by PATCH /jobs/{id}) stay, recent ones stay.

Jobs are made old the way an operator's database would be: serve is stopped and finished_at is
rewritten in the SQLite file, then serve starts again with --retain-days."""
import sqlite3
import time

from helpers import job_doc, submit, until, wait_for

DAY_MS = 24 * 3600 * 1000
CHILD_TABLES = ("job_events", "metrics", "logs", "artifacts", "deliveries")


def rows_of(svc, seq):
    with sqlite3.connect(svc.db_path) as db:
        return {t: db.execute(f"SELECT count(*) FROM {t} WHERE job_seq = ?", (seq,)).fetchone()[0]
                for t in CHILD_TABLES}


def test_retain_days(serve, blobs):
    svc = serve()
    user = svc.session(svc.token("carol", "user"))
    other = svc.session(svc.token("dave", "user"))
    ids = {}
    for name, extra in [("old", {"delete_checkpoint": False,
                                 "notify": [{"url": "http://127.0.0.1:9/x"}]}),
                        ("kept", {"keep": True}), ("patched", {}), ("unpatched", {}),
                        ("recent", {})]:
        r = user.post(f"{svc.url}/train", json=job_doc(blobs, epochs=1, name=name, **extra))
        assert r.status_code == 202, r.text
        ids[name] = r.json()["id"]
    for job_id in ids.values():
        wait_for(svc, job_id, {"succeeded"})

    # PATCH: owners (and admins) only; keep alone; a boolean
    url = f"{svc.url}/jobs/{ids['patched']}"
    assert other.patch(url, json={"keep": True}).status_code == 404
    r = user.patch(url, json={"keep": "yes"})
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "keep", r.text
    r = user.patch(url, json={"name": "x", "keep": True})
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "name", r.text
    r = user.patch(url, json={"keep": True})
    assert r.status_code == 200 and r.json()["id"] == ids["patched"], r.text
    assert r.json()["keep"] is True
    assert user.get(f"{svc.url}/jobs/{ids['kept']}").json()["keep"] is True  # the document's
    u = f"{svc.url}/jobs/{ids['unpatched']}"
    assert svc.http.patch(u, json={"keep": True}).status_code == 200  # an admin may
    assert user.patch(u, json={"keep": False}).status_code == 200

    artifacts = svc.data_dir / "artifacts"
    with sqlite3.connect(svc.db_path) as db:
        seqs = dict(db.execute("SELECT id, seq FROM jobs").fetchall())
    old_seq = seqs[ids["old"]]
    assert (artifacts / ids["old"] / "checkpoint.safetensors").exists()
    assert rows_of(svc, old_seq)["metrics"] == 1 and rows_of(svc, old_seq)["deliveries"] == 1

    svc.proc.terminate()
    svc.proc.wait(timeout=30)
    ten_days_ago = int(time.time() * 1000) - 10 * DAY_MS
    with sqlite3.connect(svc.db_path) as db:
        for name in ("old", "kept", "patched", "unpatched"):
            db.execute("UPDATE jobs SET finished_at = ? WHERE id = ?", (ten_days_ago, ids[name]))
    svc.args = svc.args + ("--retain-days", "7")
    svc.restart()

    # A pass deletes each job's row, then its folder, and logs once it is through: wait for the
    # log line, not the 404s, or the folders may be read between a row and its folder.
    gone = {"old", "unpatched"}
    until(lambda: "retention: 2 finished job(s) older than 7 day(s) removed" in svc.output(), 20,
          "the retention pass to end")
    for name in gone:
        assert svc.http.get(f"{svc.url}/jobs/{ids[name]}").status_code == 404, name
    for name in set(ids) - gone:
        assert svc.http.get(f"{svc.url}/jobs/{ids[name]}").status_code == 200, name
        assert (artifacts / ids[name]).is_dir(), name
    for name in gone:
        assert not (artifacts / ids[name]).exists(), name
        assert set(rows_of(svc, seqs[ids[name]]).values()) == {0}, name

    # a job marked keep is released by PATCH keep false, and goes on the next pass
    assert user.patch(f"{svc.url}/jobs/{ids['kept']}", json={"keep": False}).status_code == 200
    until(lambda: svc.http.get(f"{svc.url}/jobs/{ids['kept']}").status_code == 404, 10,
          "the released job to go")
    assert svc.http.get(f"{svc.url}/jobs/{ids['patched']}").status_code == 200
