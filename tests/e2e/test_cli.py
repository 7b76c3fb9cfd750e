"""The command-line client end to end: the real `trainyard` binary (submit, status, list, logs,
cancel, download, workers, devices --remote) against the real server, in text and --json, with
the exit statuses its --help promises. Every run's stderr is checked for sanitizer reports, so
the suite also means something under an ASan build (TRAINYARD_BIN=build-asan/trainyard)."""
import json
import os
import pty
import re
import select
import signal
import subprocess
import time

from conftest import BIN, sanitizer_reports
from helpers import job_doc, wait_for
from test_tls import pki, serve_tls  # noqa: F401 (pki is a fixture)

CLIENT_COMMANDS = ["submit", "status", "list", "logs", "cancel", "download", "workers"]


def cli(svc, *args, env=None, timeout=300, check_rc=None, stdin=None):
    """Runs `trainyard ARGS` against svc; returns the CompletedProcess."""
    proc = subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=timeout,
                          env=env if env is not None else svc.env(), input=stdin)
    report = sanitizer_reports(proc.stderr)
    assert report is None, f"trainyard {args[0]} reported:\n{report}"
    if check_rc is not None:
        assert proc.returncode == check_rc, (proc.returncode, proc.stdout, proc.stderr)
    return proc


def write_job(tmp_path, doc, name="job.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def epoch_lines(text):
    return re.findall(r"^epoch (\d+)/(\d+) loss [0-9.]+ acc [0-9.]+ val_loss [0-9.]+ "
                      r"val_acc [0-9.]+ [0-9.]+s$", text, re.M)


def test_help_lists_every_command_and_each_explains_itself(trainyard_bin):
    top = subprocess.run([str(BIN), "--help"], capture_output=True, text=True)
    assert top.returncode == 0
    for cmd in CLIENT_COMMANDS + ["serve", "train", "devices", "worker", "token"]:
        assert re.search(rf"^  {cmd} +\S", top.stdout, re.M), cmd
        out = subprocess.run([str(BIN), cmd, "--help"], capture_output=True, text=True)
        assert out.returncode == 0, (cmd, out.stderr)
        assert out.stdout.startswith(f"usage: trainyard {cmd}"), (cmd, out.stdout)
    for cmd in CLIENT_COMMANDS:
        out = subprocess.run([str(BIN), cmd, "--help"], capture_output=True, text=True).stdout
        assert "--server URL" in out and "--json" in out and "3 no answer" in out, cmd
    remote = subprocess.run([str(BIN), "devices", "--remote", "--help"], capture_output=True,
                            text=True)
    assert remote.returncode == 0 and "server's live workers" in remote.stdout
    bad = subprocess.run([str(BIN), "list", "--bogus"], capture_output=True, text=True)
    assert bad.returncode == 2 and "unknown option '--bogus'" in bad.stderr
    missing = subprocess.run([str(BIN), "status"], capture_output=True, text=True)
    assert missing.returncode == 2 and "its ID" in missing.stderr


def test_submit_follow_logs_and_download(serve, blobs, tmp_path):
    svc = serve()
    job = write_job(tmp_path, job_doc(blobs, epochs=5))
    run = cli(svc, "submit", job, "--follow", check_rc=0)
    assert "\r" not in run.stdout  # not a terminal: plain lines
    assert [int(e) for e, total in epoch_lines(run.stdout)] == [1, 2, 3, 4, 5], run.stdout
    assert re.search(r"^status: +succeeded$", run.stdout, re.M), run.stdout
    assert re.search(r"^attempts: +1 of 3$", run.stdout, re.M)
    assert re.search(r"^final: +epoch 5/5 loss", run.stdout, re.M)
    artifacts = re.search(r"^artifacts: (.*)$", run.stdout, re.M).group(1).split(", ")
    assert "model.safetensors" in artifacts and "metrics.csv" in artifacts
    jid = re.search(r"^job: +([0-9a-f]+) \(blobs\)$", run.stdout, re.M).group(1)

    # --json: one object at the end, the job as the API has it.
    again = cli(svc, "submit", job, "--follow", "--json", check_rc=0)
    doc = json.loads(again.stdout)
    assert doc["job"]["status"] == "succeeded"
    assert [e["epoch"] for e in doc["epochs"]] == [1, 2, 3, 4, 5]
    assert {a["name"] for a in doc["artifacts"]} >= {"model.safetensors", "train.log"}
    assert svc.http.get(f"{svc.url}/jobs/{doc['job']['id']}").json() == doc["job"]

    # logs: text, --json, and -f of a finished job, all the API's lines.
    api_log = svc.http.get(f"{svc.url}/jobs/{jid}/logs").text
    assert cli(svc, "logs", jid, check_rc=0).stdout == api_log
    assert cli(svc, "logs", jid, "-f", check_rc=0).stdout == api_log
    lines = [json.loads(x) for x in cli(svc, "logs", jid, "--json", check_rc=0).stdout.splitlines()]
    assert lines == api_log.splitlines()

    # download: the whole file, then a resume from half of it, then a corrupt .part.
    model = svc.http.get(f"{svc.url}/jobs/{jid}/artifacts/model.safetensors").content
    out_dir = tmp_path / "dl"
    out_dir.mkdir()
    first = cli(svc, "download", jid, "-o", str(out_dir), check_rc=0)
    assert (out_dir / "model.safetensors").read_bytes() == model
    assert "verified" in first.stdout and "resumed" not in first.stdout
    target = tmp_path / "m.safetensors"
    part = tmp_path / "m.safetensors.part"
    half = len(model) // 2
    part.write_bytes(model[:half])
    resumed = json.loads(cli(svc, "download", jid, "model.safetensors", "-o", str(target),
                             "--json", check_rc=0).stdout)
    assert resumed["resumed_from"] == half and resumed["size"] == len(model)
    assert target.read_bytes() == model and not part.exists()
    other = cli(svc, "download", jid, "metrics.csv", "-o", str(tmp_path / "m.csv"), check_rc=0)
    assert (tmp_path / "m.csv").read_bytes() == \
        svc.http.get(f"{svc.url}/jobs/{jid}/artifacts/metrics.csv").content, other.stdout

    # A .part whose bytes are not the artifact's start is not resumed from: it is fetched whole.
    part.write_bytes(bytes([model[0] ^ 0xFF]) + model[1:half])
    again = cli(svc, "download", jid, "-o", str(target), check_rc=0)
    assert "downloading it whole" in again.stderr and "resumed" not in again.stdout
    assert target.read_bytes() == model and not part.exists()

    missing = cli(svc, "download", jid, "nope.bin", check_rc=1)
    assert "has no artifact nope.bin" in missing.stderr and "model.safetensors" in missing.stderr


def test_failed_job_exits_1(serve, blobs, tmp_path):
    svc = serve()
    job = write_job(tmp_path, job_doc(blobs.replace("blobs.csv", "missing.csv")))
    run = cli(svc, "submit", job, "--follow", check_rc=1)
    assert re.search(r"^status: +failed$", run.stdout, re.M), run.stdout
    assert re.search(r"^error: +.*404", run.stdout, re.M), run.stdout
    assert "artifacts:" not in run.stdout
    # An invalid document is a usage error naming the field.
    bad = write_job(tmp_path, {"dataset_url": blobs, "hyperparameters": {"epochs": 0}}, "bad.json")
    out = cli(svc, "submit", bad, check_rc=2)
    assert "hyperparameters.epochs" in out.stderr


def test_status_list_cancel_in_text_and_json(serve, blobs, tmp_path):
    svc = serve("--workers", "0")  # nothing runs: jobs stay queued
    ids = {}
    for name in ("first", "second", "third"):
        out = cli(svc, "submit", write_job(tmp_path, job_doc(blobs, name=name)), check_rc=0)
        ids[name] = out.stdout.strip()
        assert re.fullmatch(r"[0-9a-f]{32}", ids[name]), out.stdout

    jid = ids["first"]
    api_job = svc.http.get(f"{svc.url}/jobs/{jid}").json()
    assert json.loads(cli(svc, "status", jid, "--json", check_rc=0).stdout) == api_job
    text = cli(svc, "status", jid, check_rc=0).stdout
    assert re.search(rf"^id: +{jid}$", text, re.M) and re.search(r"^status: +queued$", text, re.M)

    listed = json.loads(cli(svc, "list", "--json", check_rc=0).stdout)
    assert listed == svc.http.get(f"{svc.url}/jobs").json()
    assert [j["id"] for j in listed["jobs"]] == [ids["third"], ids["second"], ids["first"]]
    table = cli(svc, "list", check_rc=0).stdout.splitlines()
    assert table[0].split()[:3] == ["ID", "STATUS", "ATTEMPT"]
    assert [row.split()[0] for row in table[1:]] == [ids["third"], ids["second"], ids["first"]]
    one = json.loads(cli(svc, "list", "--name", "second", "--json", check_rc=0).stdout)
    assert [j["id"] for j in one["jobs"]] == [ids["second"]]
    page = json.loads(cli(svc, "list", "--limit", "2", "--json", check_rc=0).stdout)
    assert len(page["jobs"]) == 2 and page["next_cursor"]
    rest = json.loads(cli(svc, "list", "--cursor", page["next_cursor"], "--json",
                          check_rc=0).stdout)
    assert [j["id"] for j in rest["jobs"]] == [ids["first"]]

    assert cli(svc, "cancel", jid, check_rc=0).stdout == f"job {jid} cancelled\n"
    again = cli(svc, "cancel", jid, check_rc=1)
    assert "409" in again.stderr
    cancelled = json.loads(cli(svc, "cancel", ids["second"], "--json", check_rc=0).stdout)
    assert cancelled["status"] == "cancelled"
    rows = cli(svc, "list", "--status", "cancelled", check_rc=0).stdout.splitlines()[1:]
    assert sorted(r.split()[0] for r in rows) == sorted([ids["first"], ids["second"]])
    assert cli(svc, "list", "--status", "bogus").returncode == 1
    # Following a cancelled job ends at once with exit status 1.
    follow = cli(svc, "status", jid, "--follow", check_rc=1)
    assert re.search(r"^status: +cancelled$", follow.stdout, re.M)

    # Ctrl-C ends a follow cleanly with 130; the job is left alone.
    watch = subprocess.Popen([str(BIN), "logs", ids["third"], "-f"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=svc.env())
    time.sleep(1.5)
    watch.send_signal(signal.SIGINT)
    _, stderr = watch.communicate(timeout=30)
    assert sanitizer_reports(stderr) is None, stderr
    assert watch.returncode == 130 and "interrupted" in stderr, (watch.returncode, stderr)
    assert svc.http.get(f"{svc.url}/jobs/{ids['third']}").json()["status"] == "queued"

    # A retried submit with the same key is the same job.
    job = write_job(tmp_path, job_doc(blobs, name="keyed"))
    a = cli(svc, "submit", job, "--idempotency-key", "k-1", check_rc=0).stdout
    b = cli(svc, "submit", job, "--idempotency-key", "k-1", check_rc=0).stdout
    assert a == b
    # The job document may come on stdin.
    piped = cli(svc, "submit", "-", stdin=json.dumps(job_doc(blobs, name="piped")), check_rc=0)
    assert svc.http.get(f"{svc.url}/jobs/{piped.stdout.strip()}").json()["name"] == "piped"


def test_logs_follow_a_running_job(serve, blobs, tmp_path):
    svc = serve()
    out = cli(svc, "submit", write_job(tmp_path, job_doc(blobs, epochs=300)), check_rc=0)
    jid = out.stdout.strip()
    follow = subprocess.Popen([str(BIN), "logs", jid, "-f"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=svc.env())
    stdout, stderr = follow.communicate(timeout=300)
    assert sanitizer_reports(stderr) is None, stderr
    assert follow.returncode == 0, stderr
    assert wait_for(svc, jid, {"succeeded"}, timeout=10)
    assert stdout == svc.http.get(f"{svc.url}/jobs/{jid}/logs").text


def test_a_user_sees_only_their_own_jobs(serve, blobs, tmp_path):
    svc = serve("--workers", "0")
    alice = svc.env(TRAINYARD_TOKEN=svc.token("alice", "user"))
    job = write_job(tmp_path, job_doc(blobs, name="alices"))
    mine = cli(svc, "submit", job, env=alice, check_rc=0).stdout.strip()
    admins = cli(svc, "submit", write_job(tmp_path, job_doc(blobs, name="admins"), "a.json"),
                 check_rc=0).stdout.strip()
    seen = json.loads(cli(svc, "list", "--json", env=alice, check_rc=0).stdout)
    assert [j["id"] for j in seen["jobs"]] == [mine]
    everyone = json.loads(cli(svc, "list", "--json", check_rc=0).stdout)
    assert {j["id"] for j in everyone["jobs"]} == {mine, admins}
    other = cli(svc, "status", admins, env=alice, check_rc=1)
    assert "404" in other.stderr and admins in other.stderr
    assert cli(svc, "cancel", admins, env=alice, check_rc=1)


def test_workers_and_remote_devices(serve):
    svc = serve("--workers", "1")
    deadline = time.time() + 60
    while not svc.http.get(f"{svc.url}/workers").json()["workers"] and time.time() < deadline:
        time.sleep(0.1)
    workers = json.loads(cli(svc, "workers", "--json", check_rc=0).stdout)
    assert workers == svc.http.get(f"{svc.url}/workers").json()
    table = cli(svc, "workers", check_rc=0).stdout.splitlines()
    assert table[0].split()[:2] == ["ID", "STATUS"]
    assert table[1].split()[0] == workers["workers"][0]["id"]
    devices = json.loads(cli(svc, "devices", "--remote", "--json", check_rc=0).stdout)
    assert devices == svc.http.get(f"{svc.url}/devices").json() and devices["devices"]
    rows = cli(svc, "devices", "--server", svc.url, check_rc=0).stdout.splitlines()
    assert rows[0].split()[0] == "WORKER" and rows[1].split()[0] == workers["workers"][0]["id"]
    # Without --remote or --server, devices stays local even with TRAINYARD_URL set.
    local = json.loads(cli(svc, "devices", "--json", check_rc=0).stdout)
    assert "driver_version" in local["devices"][0]


def test_unreachable_server_and_bad_tokens(serve, tmp_path):
    svc = serve("--workers", "0")
    down = cli(svc, "list", "--server", "http://127.0.0.1:1", check_rc=3)
    assert "cannot reach the server" in down.stderr and "--server URL" in down.stderr
    env = svc.env(TRAINYARD_URL="http://127.0.0.1:1")
    job = write_job(tmp_path, {"dataset_url": "http://x/y.csv", "hyperparameters": {}})
    assert cli(svc, "submit", job, env=env, check_rc=3)
    assert cli(svc, "download", "abc", env=env, check_rc=3)
    wrong = cli(svc, "list", "--token", "ty_" + "0" * 40, check_rc=1)
    assert "401" in wrong.stderr and "TRAINYARD_TOKEN" in wrong.stderr
    env = {k: v for k, v in svc.env().items() if k != "TRAINYARD_TOKEN"}
    none = cli(svc, "list", env=env, check_rc=2)
    assert "no token" in none.stderr
    assert "no job has the id" in cli(svc, "status", "nope", check_rc=1).stderr


def test_follow_on_a_terminal_draws_one_line_in_place(serve, blobs, tmp_path):
    svc = serve()
    job = write_job(tmp_path, job_doc(blobs, epochs=5))
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(str(BIN), [str(BIN), "submit", job, "--follow"], svc.env())
    out = b""
    deadline = time.time() + 300
    while time.time() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = out.decode()
    assert sanitizer_reports(text) is None, text
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "\r[####################] epoch 5/5" in text, text
    assert not epoch_lines(text.replace("\r\n", "\n"))  # no plain epoch lines on a terminal
    assert "status:    succeeded" in text


def test_https_with_a_private_ca(serve, pki):
    svc = serve_tls(serve, pki, "--workers", "0")
    env = svc.env()
    env.pop("TRAINYARD_CA", None)
    refused = cli(svc, "list", env=env, check_rc=3)
    assert "certificate failed verification" in refused.stderr and "--ca FILE" in refused.stderr
    assert cli(svc, "list", "--ca", str(pki["ca"]), env=env, check_rc=0).stdout.startswith("ID")
    assert cli(svc, "list", env={**env, "TRAINYARD_CA": str(pki["ca"])}, check_rc=0)
