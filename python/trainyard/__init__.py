"""trainyard: the Python side of trainyard, in one module and the standard library only.

For a training script that trainyard runs (a script job), it reads what the worker puts in the
script's environment:

    import trainyard
    hp = trainyard.hyperparameters()              # the job's "hyperparameters" object
    data = trainyard.dataset_path()               # the fetched dataset, or None
    for epoch in range(1, hp.get("epochs", 10) + 1):
        ...
        trainyard.report(epoch=epoch, loss=loss, val_accuracy=acc)
    model.save(os.path.join(trainyard.output_dir(), "model.keras"))

report() appends one JSON line to $TRAINYARD_METRICS, which the worker reads as it grows; the
metrics land in the job's metrics API, its event stream, the dashboard and metrics.csv. Outside
trainyard (no $TRAINYARD_METRICS) the line goes to stderr instead, and the folder helpers fall
back to ./output and ./checkpoint, so the same script runs by hand. KerasCallback() reports
every epoch of `model.fit`. stop_requested() says when the worker asks the script to end
early (the job's early_stopping, or a stop request): save the output and exit 0.

For users, a client of the API (what `trainyard submit` does):

    client = trainyard.Client("http://127.0.0.1:8080", token)   # or $TRAINYARD_URL/_TOKEN
    job = client.submit({"name": "mlp", "training_script": "train.py"}, code="my-project/")
    job.wait()                      # raises JobFailed with the job's error when it fails
    print(job.metrics()[-1])
    job.download("model.keras")     # checked against the listed sha256

Errors of the API raise ApiError(status, problem) naming the fields the server named.

This file is also what the worker writes into each script job's folder for `import trainyard`
inside the sandbox, so it must stay one module with no dependencies.
"""

import gzip
import hashlib
import io
import json
import math
import numbers
import os
import re
import ssl
import stat
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

__version__ = "0.1.0"
__all__ = ["report", "output_dir", "checkpoint_dir", "dataset_path", "hyperparameters",
           "stop_requested", "KerasCallback", "Client", "Job", "ApiError", "JobFailed"]

# ---------------------------------------------------------------------------------------------
# For scripts

_METRIC_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:/-]{0,63}$")
_MAX_METRICS = 64
_last_epoch = 0


def _env(name):
    value = os.environ.get(name)
    return value if value else None


def _number(name, value):
    """value as a JSON number, or None for null (NaN and infinities too: JSON has none)."""
    item = getattr(value, "item", None)
    if callable(item):  # numpy scalars, 0-d arrays and one-element tensors
        value = item()
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"trainyard.report: {name} must be a number, not {type(value).__name__}")
    if isinstance(value, numbers.Integral):
        return int(value)
    value = float(value)
    return value if math.isfinite(value) else None


def report(epoch=None, **metrics):
    """Reports one epoch's metrics: report(epoch=3, loss=0.41, val_accuracy=0.88).

    epoch counts from 1; without it, the epoch after the last one reported. Values are numbers
    (numpy scalars and one-element tensors are converted with .item(); None, NaN and infinities
    become null). Names are 1 to 64 of letters, digits and _ . : / -, starting with a letter;
    at most 64 of them. Returns the dict written."""
    global _last_epoch
    if epoch is None:
        epoch = _last_epoch + 1
    item = getattr(epoch, "item", None)
    if callable(item):
        epoch = item()
    if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral) or epoch < 1:
        raise ValueError(f"trainyard.report: epoch must be an integer >= 1, not {epoch!r}")
    if len(metrics) > _MAX_METRICS:
        raise ValueError(f"trainyard.report: at most {_MAX_METRICS} metrics, not {len(metrics)}")
    line = {"epoch": int(epoch)}
    for name, value in metrics.items():
        if name == "histograms":  # the heartbeat's weight histograms (docs/API.md)
            raise ValueError("trainyard.report: the name 'histograms' is reserved")
        if not _METRIC_NAME.match(name):
            raise ValueError(f"trainyard.report: {name!r} is not a metric name (1 to 64 of "
                             "letters, digits and _ . : / -, starting with a letter)")
        line[name] = _number(name, value)
    text = json.dumps(line, separators=(",", ":"), allow_nan=False) + "\n"
    path = _env("TRAINYARD_METRICS")
    if path is None:
        sys.stderr.write("trainyard metrics: " + text)
        sys.stderr.flush()
    else:
        with open(path, "a", encoding="utf-8") as f:  # one write of a whole line, flushed
            f.write(text)
            f.flush()
    _last_epoch = int(epoch)
    return line


def _folder(var, fallback):
    path = _env(var) or os.path.abspath(fallback)
    os.makedirs(path, exist_ok=True)
    return path


def output_dir():
    """$TRAINYARD_OUTPUT_DIR: everything in it becomes an artifact of the job at the end.
    Outside trainyard ./output (made when missing)."""
    return _folder("TRAINYARD_OUTPUT_DIR", "output")


def checkpoint_dir():
    """$TRAINYARD_CHECKPOINT_DIR: uploaded as it changes and handed back to the next attempt of
    the job, so a script that finds something in it can resume. Outside trainyard
    ./checkpoint (made when missing)."""
    return _folder("TRAINYARD_CHECKPOINT_DIR", "checkpoint")


def dataset_path():
    """$TRAINYARD_DATASET: the job's dataset, already fetched, or None when the job has none."""
    return _env("TRAINYARD_DATASET")


def hyperparameters():
    """The job's "hyperparameters" object ($TRAINYARD_HYPERPARAMETERS) as a dict; {} outside
    trainyard."""
    text = _env("TRAINYARD_HYPERPARAMETERS")
    if text is None:
        return {}
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("TRAINYARD_HYPERPARAMETERS is not a JSON object")
    return value


def stop_requested():
    """Why the worker asks the script to end after the epoch it is in (the job's early_stopping
    triggered on the reported metrics, or someone stopped the job: POST /jobs/{id}/stop), or
    None. A script that sees it saves its output and exits 0: the job succeeds with that
    stop_reason. The worker writes the reason to $TRAINYARD_STOP_FILE; None outside trainyard."""
    path = _env("TRAINYARD_STOP_FILE")
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return f.read() or "stop requested"
    except FileNotFoundError:
        return None


_keras_callback_class = None


def KerasCallback(*args, **kwargs):
    """A keras.callbacks.Callback that reports each epoch of `model.fit` (epoch + 1, with every
    value in logs) and ends the fit when the worker asks (stop_requested()). keras is imported
    on the first call, not with this module."""
    global _keras_callback_class
    if _keras_callback_class is None:
        try:
            import keras
        except ImportError:
            from tensorflow import keras

        class _TrainyardCallback(keras.callbacks.Callback):
            def on_epoch_end(self, epoch, logs=None):
                report(epoch=epoch + 1, **dict(logs or {}))
                if stop_requested() is not None:
                    self.model.stop_training = True

        _TrainyardCallback.__name__ = _TrainyardCallback.__qualname__ = "KerasCallback"
        _keras_callback_class = _TrainyardCallback
    return _keras_callback_class(*args, **kwargs)


# ---------------------------------------------------------------------------------------------
# For users: the API client

TERMINAL = ("succeeded", "failed", "cancelled")


class ApiError(Exception):
    """An error answer of the API: status (the HTTP status) and problem (its problem+json as a
    dict: title, detail, errors [{field, message}])."""

    def __init__(self, status, problem):
        self.status = status
        self.problem = problem if isinstance(problem, dict) else {"detail": str(problem)}
        super().__init__(self._text())

    def _text(self):
        p = self.problem
        head = f"HTTP {self.status}"
        if p.get("title"):
            head += f" {p['title']}"
        parts = [f"{e.get('field') or 'body'}: {e.get('message', '')}"
                 for e in p.get("errors") or [] if isinstance(e, dict)]
        if not parts and p.get("detail"):
            parts = [p["detail"]]
        return head + (": " + "; ".join(parts) if parts else "")


class JobFailed(Exception):
    """A job that ended failed: job is its final document, error its error."""

    def __init__(self, job):
        self.job = job
        self.error = job.get("error") or "(no error given)"
        super().__init__(f"job {job.get('id')} failed: {self.error}")


def pack(folder):
    """The .tar.gz of folder as bytes, the same bytes for the same contents: entries sorted by
    path, mtime 0, owner 0, modes 0755 (directories, and files with the owner's exec bit) or
    0644; symlinks kept as links; other kinds of file left out."""
    root = os.path.abspath(folder)
    if not os.path.isdir(root):
        raise NotADirectoryError(f"{folder} is not a folder")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        todo = sorted(os.listdir(root))
        while todo:
            rel = todo.pop(0)
            path = os.path.join(root, rel)
            st = os.lstat(path)
            info = tarfile.TarInfo(rel)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if stat.S_ISLNK(st.st_mode):
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, os.readlink(path), 0o777
                tar.addfile(info)
            elif stat.S_ISDIR(st.st_mode):
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
                todo = sorted(todo + [rel + "/" + n for n in os.listdir(path)])
            elif stat.S_ISREG(st.st_mode):
                info.mode = 0o755 if st.st_mode & stat.S_IXUSR else 0o644
                info.size = st.st_size
                with open(path, "rb") as f:
                    tar.addfile(info, f)
    return gzip.compress(buf.getvalue(), compresslevel=9, mtime=0)


class Client:
    """The trainyard API at url (default $TRAINYARD_URL) with token (default $TRAINYARD_TOKEN);
    ca: a PEM bundle that verifies an https server (default $TRAINYARD_CA, else the system's)."""

    def __init__(self, url=None, token=None, ca=None, timeout=60):
        url = url or _env("TRAINYARD_URL")
        if not url:
            raise ValueError("no server: give Client(url) or set TRAINYARD_URL")
        self.url = url.rstrip("/")
        self.token = token or _env("TRAINYARD_TOKEN")
        self.timeout = timeout
        ca = ca or _env("TRAINYARD_CA")
        self._ssl = ssl.create_default_context(cafile=ca) if ca else None

    def request(self, method, path, body=None, content_type=None, raw=False):
        """One API call; the parsed JSON answer (the response itself, open, when raw). Raises
        ApiError for an error status."""
        headers = {"Accept": "application/json, */*"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if body is not None and not isinstance(body, (bytes, bytearray)):
            body = json.dumps(body).encode()
            content_type = content_type or "application/json"
        if content_type:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.url + path, data=body, headers=headers, method=method)
        try:
            resp = urllib.request.urlopen(req, timeout=self.timeout, context=self._ssl)
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", "replace")
            try:
                problem = json.loads(text)
            except ValueError:
                problem = {"detail": text.strip() or e.reason}
            raise ApiError(e.code, problem) from None
        if raw:
            return resp
        with resp:
            data = resp.read()
        if "json" in resp.headers.get("Content-Type", ""):
            return json.loads(data)
        return data.decode("utf-8", "replace")

    def upload_code(self, folder):
        """Packs folder (pack()) and uploads it with POST /code; returns the answer
        ({"code": "sha256:...", "bytes", "files", "unpacked_bytes"})."""
        return self.request("POST", "/code", pack(folder), "application/gzip")

    def submit(self, doc, code=None):
        """Submits the job document doc (a dict, not changed) and returns its Job. With code (a
        folder), the folder is packed and uploaded first and the job names it as its code."""
        doc = dict(doc)
        if code is not None:
            doc["code"] = self.upload_code(code)["code"]
        return Job(self, self.request("POST", "/train", doc))

    def job(self, job_id):
        """The Job with this id."""
        return Job(self, self.request("GET", "/jobs/" + urllib.parse.quote(job_id, safe="")))


class Job:
    """A submitted job: id, and data (its last fetched document)."""

    def __init__(self, client, data):
        self.client = client
        self.data = data
        self.id = data.get("id") or data.get("job_id")

    def __repr__(self):
        return f"<trainyard.Job {self.id} {self.data.get('status')}>"

    def _path(self, tail=""):
        return "/jobs/" + urllib.parse.quote(self.id, safe="") + tail

    def refresh(self):
        """Fetches the job again; returns its document."""
        self.data = self.client.request("GET", self._path())
        return self.data

    @property
    def status(self):
        """The job's status now (queued, running, succeeded, failed, cancelled): fetched."""
        return self.refresh()["status"]

    def wait(self, timeout=None, poll=1.0):
        """Waits until the job ends and returns its final document: raises JobFailed when it
        failed, TimeoutError after timeout seconds (None: no limit)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            data = self.refresh()
            if data["status"] == "failed":
                raise JobFailed(data)
            if data["status"] in TERMINAL:
                return data
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {self.id} is still {data['status']} after {timeout}s")
            time.sleep(poll if deadline is None else max(0, min(poll, deadline - time.monotonic())))

    def metrics(self):
        """The metrics of each finished epoch: a list of dicts with epoch and the values."""
        return self.client.request("GET", self._path("/metrics"))["epochs"]

    def logs(self):
        """The job's log so far, as text."""
        return self.client.request("GET", self._path("/logs"))

    def artifacts(self):
        """The job's artifacts: a list of {name, size, sha256}."""
        return self.client.request("GET", self._path("/artifacts"))["artifacts"]

    def download(self, name, path=None):
        """Downloads artifact name to path (default ./name; a folder: name in it) and returns the
        path, after checking its SHA-256 against the listed one (ValueError when it differs)."""
        listed = {a["name"]: a for a in self.artifacts()}
        if name not in listed:
            raise ApiError(404, {"title": "Not Found",
                                 "detail": f"job {self.id} has no artifact {name!r}"})
        path = path or name
        if os.path.isdir(path):
            path = os.path.join(path, name)
        folder = os.path.dirname(os.path.abspath(path))
        digest = hashlib.sha256()
        fd, tmp = tempfile.mkstemp(prefix=".trainyard-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as out, self.client.request(
                    "GET", self._path("/artifacts/" + urllib.parse.quote(name, safe="")),
                    raw=True) as resp:
                while True:
                    chunk = resp.read(1 << 16)
                    if not chunk:
                        break
                    digest.update(chunk)
                    out.write(chunk)
            if digest.hexdigest() != listed[name]["sha256"]:
                raise ValueError(f"{name}: downloaded sha256 {digest.hexdigest()} is not the "
                                 f"listed {listed[name]['sha256']}")
            os.replace(tmp, path)
            tmp = None
        finally:
            if tmp is not None:
                os.unlink(tmp)
        return path

    def cancel(self):
        """Cancels the job (a running one stops within a second); returns its document."""
        self.data = self.client.request("POST", self._path("/cancel"))
        return self.data
