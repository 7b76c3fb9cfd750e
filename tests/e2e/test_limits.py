"""Size limits from the command line: an artifact over serve's --max-artifact-bytes and a
dataset over --max-dataset-bytes each fail their job with a reason that names the limit, and
the service stays healthy; bad values are refused at start."""
import subprocess

from helpers import TERMINAL, job_doc, submit, wait_for


def test_an_artifact_over_the_limit_fails_its_job_and_leaves_none_of_it(serve, blobs):
    svc = serve("--max-artifact-bytes", "4K")
    doc = job_doc(blobs, epochs=1)
    doc["model"]["layers"][0]["units"] = 512  # about 8 KiB of weights
    job = submit(svc, doc).json()
    done = wait_for(svc, job["id"], TERMINAL)
    assert done["status"] == "failed", done
    assert "413" in done["error"] and "at most 4096" in done["error"], done["error"]
    # No part of the refused upload stays; the server's own TensorBoard file of the epoch's
    # metrics is written for every job that ends, a failed one too.
    names = [a["name"] for a in
             svc.http.get(f"{svc.url}/jobs/{job['id']}/artifacts").json()["artifacts"]]
    assert len(names) == 1 and names[0].startswith("events.out.tfevents."), names
    assert list((svc.data_dir / "tmp").iterdir()) == []
    assert svc.http.get(f"{svc.url}/healthz").json()["status"] == "ok"


def test_a_dataset_over_the_limit_fails_its_job(serve, blobs):
    svc = serve("--max-dataset-bytes", "1K")
    job = submit(svc, job_doc(blobs, epochs=1)).json()
    done = wait_for(svc, job["id"], TERMINAL)
    assert done["status"] == "failed", done
    assert "1024" in done["error"], done["error"]


def test_bad_byte_counts_are_refused(trainyard_bin, tmp_path):
    for cmd in (["serve", "--data-dir", str(tmp_path / "d"), "--max-artifact-bytes", "lots"],
                ["serve", "--data-dir", str(tmp_path / "d"), "--max-artifact-bytes", "5G"],
                ["worker", "--max-dataset-bytes", "0"],
                ["train", "job.json", "--out", "o", "--max-dataset-bytes", "12Q"]):
        proc = subprocess.run([str(trainyard_bin), *cmd], capture_output=True, text=True,
                              timeout=30)
        assert proc.returncode == 2, (cmd, proc.stderr)
        assert "--max-" in proc.stderr, proc.stderr
