"""The dashboard (web/, served at / by api/web.c), in a real headless Chromium driven by
Selenium: the token form, the live jobs table, a job page whose curves grow as the event stream
brings epochs, its log, its artifacts downloaded with the token in a header, cancelling from the
button, the workers page, why queued jobs wait; and, with plain requests, the static files' headers (CSP, ETag, 304).

Needs Debian's chromium, chromium-driver and python3-selenium (.ci/run installs them); without
them the browser tests skip and say so."""
import hashlib
import math
import pathlib
import re
import shutil
import time

import pytest
import requests
from helpers import TERMINAL, job_doc, submit, wait_for, write_blobs

ROOT = pathlib.Path(__file__).resolve().parents[2]
WEB = ROOT / "web"


def test_static_files_are_public_with_csp_and_etag(serve):
    svc = serve("--workers", "0")
    index = requests.get(f"{svc.url}/")
    assert index.status_code == 200
    assert index.headers["Content-Type"].startswith("text/html")
    csp = index.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    assert index.headers["Cache-Control"] == "no-cache"
    # No inline script for the CSP to block: every <script> has a src, and no on* handlers.
    assert all('src="' in tag for tag in re.findall(r"<script[^>]*>", index.text))
    assert not re.search(r"\son[a-z]+=", index.text)

    names = sorted(p.name for p in WEB.iterdir() if p.is_file())
    assert {"index.html", "app.js", "style.css"} <= set(names)
    # openapi.yaml names each file (schemathesis asks for exactly those): the list must be whole
    import yaml
    spec = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    param = spec["paths"]["/web/{name}"]["get"]["parameters"][0]
    assert sorted(param["schema"]["enum"]) == names, "openapi.yaml's /web/{name} list is stale"
    for name in names:  # every file of web/ is embedded, byte for byte
        r = requests.get(f"{svc.url}/web/{name}")
        assert r.status_code == 200, name
        assert r.content == (WEB / name).read_bytes(), name
        etag = f'"{hashlib.sha256(r.content).hexdigest()}"'
        assert r.headers["ETag"] == etag
        assert "Content-Security-Policy" in r.headers
        again = requests.get(f"{svc.url}/web/{name}", headers={"If-None-Match": etag})
        assert again.status_code == 304 and again.content == b""
        assert requests.get(f"{svc.url}/web/{name}",
                            headers={"If-None-Match": '"other"'}).status_code == 200
    assert requests.get(f"{svc.url}/web/app.js").headers["Content-Type"].startswith(
        "text/javascript")
    assert requests.get(f"{svc.url}/web/style.css").headers["Content-Type"].startswith("text/css")
    assert requests.head(f"{svc.url}/").status_code == 200
    missing = requests.get(f"{svc.url}/web/nope.js")
    assert missing.status_code == 404
    assert missing.headers["Content-Type"].startswith("application/problem+json")
    # The data behind the page still needs the token.
    assert requests.get(f"{svc.url}/jobs").status_code == 401


# ---- the browser ------------------------------------------------------------------------------

def find_chromium():
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture
def browser(tmp_path):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service as DriverService
    except ImportError:
        pytest.skip("python3-selenium is not installed (.ci/run installs it)")
    chromium, driver_path = find_chromium(), shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.skip("chromium and chromium-driver are not installed (.ci/run installs them)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000", f"--user-data-dir={tmp_path / 'chromium'}"):
        opts.add_argument(arg)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # for console_errors()
    opts.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                           "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=DriverService(executable_path=driver_path), options=opts)
    driver.downloads = downloads
    try:
        driver.execute_cdp_cmd("Page.setDownloadBehavior",
                               {"behavior": "allow", "downloadPath": str(downloads)})
        yield driver
    finally:
        driver.quit()


def until(what, fn, timeout=30):
    """Polls fn until it returns something true; fails naming what it waited for."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = fn()
            if last:
                return last
        except Exception as e:  # an element replaced under us: look again
            last = e
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def css(driver, selector):
    from selenium.webdriver.common.by import By
    return driver.find_elements(By.CSS_SELECTOR, selector)


def sign_in(driver, svc, token):
    driver.get(f"{svc.url}/")
    field = until("the token form", lambda: [e for e in css(driver, "#token-input")
                                             if e.is_displayed()])[0]
    field.send_keys(token)
    css(driver, "#login-form button")[0].click()


def console_errors(driver):
    """The page's console errors so far (a CSP refusal, an exception, a failed fetch)."""
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def points(driver, chart):
    found = css(driver, f"#{chart}")
    return int(found[0].get_attribute("data-points")) if found else -1


def test_a_wrong_token_shows_the_servers_message(serve, browser):
    svc = serve("--workers", "0")
    sign_in(browser, svc, "ty_" + "0" * 40)
    message = until("the 401 message", lambda: css(browser, "#login-error")[0].text)
    assert "not valid" in message
    assert css(browser, "#login")[0].is_displayed()
    # The right one then opens the jobs table, and "forget token" asks again.
    css(browser, "#token-input")[0].send_keys(svc.admin_token)
    css(browser, "#login-form button")[0].click()
    until("the jobs table", lambda: css(browser, "#jobs-table"))
    assert browser.execute_script("return sessionStorage.getItem('trainyard.token')") == \
        svc.admin_token
    css(browser, "#forget")[0].click()
    until("the token form again", lambda: css(browser, "#login")[0].is_displayed())
    assert browser.execute_script("return sessionStorage.getItem('trainyard.token')") is None


def test_jobs_curves_logs_artifacts_cancel_and_workers(serve, data_server, blobs, browser):
    folder, base = data_server
    write_blobs(folder, "dash-blobs.csv", rows=20000, seed=7)
    long_doc = job_doc(f"{base}/dash-blobs.csv", epochs=200, name="long")
    long_doc["hyperparameters"]["batch_size"] = 4  # about 0.25 s an epoch
    svc = serve("--workers", "1")
    short = submit(svc, job_doc(blobs, epochs=3, name="short")).json()
    long_job = submit(svc, long_doc).json()

    sign_in(browser, svc, svc.admin_token)
    until("both jobs in the table", lambda: len(css(browser, "#jobs-body tr[data-id]")) == 2)
    assert wait_for(svc, short["id"], TERMINAL)["status"] == "succeeded"
    # The table follows without a reload.
    until("the short job shown succeeded", lambda: css(
        browser, f'#jobs-body tr[data-id="{short["id"]}"][data-status="succeeded"]'))

    # A finished job: its curves hold every epoch, its artifacts download with the token.
    css(browser, f'#jobs-body tr[data-id="{short["id"]}"] a')[0].click()
    until("the short job's three epochs", lambda: points(browser, "loss-chart") == 3)
    assert points(browser, "accuracy-chart") == 3
    rows = until("the artifacts", lambda: css(browser, "#artifacts-body tr[data-name]"))
    assert {"model.safetensors", "metrics.csv", "train.log", "job.json"} <= {
        r.get_attribute("data-name") for r in rows}
    css(browser, '#artifacts-body tr[data-name="metrics.csv"] button')[0].click()
    got = until("metrics.csv downloaded", lambda: [
        p for p in browser.downloads.glob("metrics.csv") if p.stat().st_size > 0])
    want = svc.http.get(f"{svc.url}/jobs/{short['id']}/artifacts/metrics.csv").content
    assert got[0].read_bytes() == want
    assert '"name": "short"' in css(browser, "#job-document")[0].text

    # A running job: the curve grows while we watch, the log follows.
    browser.get(f"{svc.url}/#/jobs/{long_job['id']}")
    first = until("the long job's first epochs", lambda: points(browser, "loss-chart") >= 2
                  and points(browser, "loss-chart"))
    grown = until("the curve to grow", lambda: points(browser, "loss-chart") >= first + 3
                  and points(browser, "loss-chart"))
    assert grown >= first + 3
    assert svc.http.get(f"{svc.url}/jobs/{long_job['id']}").json()["status"] == "running"
    until("log lines", lambda: "epoch" in css(browser, "#logs")[0].text)
    assert css(browser, "#job-status")[0].text.startswith("running")

    # A queued job (no GPU worker here; with one, it waits behind the long job) appears in the
    # table by itself and is cancelled from its page's button.
    queued = submit(svc, job_doc(blobs, epochs=3, name="queued",
                                 resources={"device": "gpu"})).json()
    browser.get(f"{svc.url}/#/jobs")
    until("the new job in the table", lambda: css(
        browser, f'#jobs-body tr[data-id="{queued["id"]}"]'))
    # why it waits: in a few words in the table, in a sentence on its page
    until("the reason in the table", lambda: [
        c for c in css(browser, f'#jobs-body tr[data-id="{queued["id"]}"] td.waiting')
        if c.text == "no worker can take it"])
    css(browser, f'#jobs-body tr[data-id="{queued["id"]}"] a')[0].click()
    until("the reason on its page", lambda: [
        w for w in css(browser, "#job-waiting")
        if w.text == "no connected worker can take it: it needs a GPU (resources.device: gpu)"])
    button = until("an enabled cancel button", lambda: [
        b for b in css(browser, "#cancel") if b.is_enabled()])[0]
    button.click()
    assert wait_for(svc, queued["id"], TERMINAL, timeout=10)["status"] == "cancelled"
    until("the page to show it cancelled",
          lambda: css(browser, "#job-status")[0].text == "cancelled")
    assert not css(browser, "#cancel")[0].is_enabled()

    # The running one too: the worker stops within a second and the stream says so.
    browser.get(f"{svc.url}/#/jobs/{long_job['id']}")
    until("an enabled cancel button", lambda: [
        b for b in css(browser, "#cancel") if b.is_enabled()])[0].click()
    assert wait_for(svc, long_job["id"], TERMINAL, timeout=20)["status"] == "cancelled"
    until("the page to show it cancelled",
          lambda: css(browser, "#job-status")[0].text == "cancelled")

    # Workers and devices.
    css(browser, 'a[data-nav="workers"]')[0].click()
    until("the local worker", lambda: len(css(browser, "#workers-body tr")) == 1
          and css(browser, "#workers-body td")[0].text)
    until("its device", lambda: css(browser, "#devices-body td")[0].text)


def test_a_backed_off_job_and_a_capped_tokens_job_say_why_they_wait(serve, blobs, browser):
    """A job whose worker was killed waits out its back-off, and a job of a token at its
    max_running waits for its token's running job: the table says each in a few words, the
    job's page in a sentence with its retry time."""
    import os
    import signal
    svc = serve("--workers", "1", "--retry-backoff-seconds", "600")
    lost = submit(svc, job_doc(blobs, epochs=50000, name="lost")).json()
    assert wait_for(svc, lost["id"], ("running", *TERMINAL))["status"] == "running"
    pid = int(re.search(r"local worker 0 started \(pid (\d+)", svc.output()).group(1))
    os.kill(pid, signal.SIGKILL)
    assert wait_for(svc, lost["id"], ("queued",), timeout=15)["retry_at"]
    made = svc.http.post(f"{svc.url}/tokens", json={"name": "capped", "role": "user",
                                                    "max_running": 1})
    assert made.status_code == 201, made.text
    user = svc.session(made.json()["token"])
    first = user.post(f"{svc.url}/train", json=job_doc(blobs, epochs=50000, name="first")).json()
    # the restarted worker takes it: the lost job's back-off holds that one back
    assert wait_for(svc, first["id"], ("running", *TERMINAL), timeout=60)["status"] == "running"
    held = user.post(f"{svc.url}/train", json=job_doc(blobs, name="held")).json()
    assert held["waiting"]["reason"] == "token_cap", held["waiting"]

    sign_in(browser, svc, svc.admin_token)
    for job, words in ((lost, "retry backing off"), (held, "token's cap reached")):
        until(f"{job['name']}'s reason in the table", lambda: [
            c for c in css(browser, f'#jobs-body tr[data-id="{job["id"]}"] td.waiting')
            if c.text == words])
    css(browser, f'#jobs-body tr[data-id="{lost["id"]}"] a')[0].click()
    until("the back-off on its page", lambda: [
        w for w in css(browser, "#job-waiting")
        if re.fullmatch(r"its attempt 1 was lost: retrying in \d+ s \(the back-off after a "
                        r"lost attempt\)", w.text)])
    assert css(browser, "#job-retry-at")[0].text not in ("", "—")
    assert console_errors(browser) == []
    for job in (lost, first, held):
        svc.http.post(f"{svc.url}/jobs/{job['id']}/cancel")


def test_a_script_jobs_own_metrics_get_curves(serve, browser):
    """A script reports metrics under names of its own: each gets a curve (X and val_X share
    one), beside the loss curve. The test plays a script worker over HTTP."""
    import gzip
    import io
    import tarfile
    svc = serve("--workers", "0")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("train.py")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"1\n"))
    r = svc.http.post(f"{svc.url}/code", data=gzip.compress(buf.getvalue()),
                      headers={"Content-Type": "application/gzip"})
    assert r.status_code == 201, r.text
    job = submit(svc, {"name": "scripted", "training_script": "train.py",
                       "code": r.json()["code"]}).json()
    worker = svc.session(svc.token("box", "worker"))
    w = worker.post(f"{svc.url}/workers", json={
        "name": "box", "scripts": True,
        "devices": [{"index": 0, "name": "cpu0", "type": "cpu"}]}).json()
    assert worker.post(f"{svc.url}/workers/{w['id']}/lease",
                       params={"wait": 0}).status_code == 200
    epochs = [{"epoch": e, "loss": 1.0 / e, "top5": 0.5 + e / 10, "val_top5": 0.4 + e / 10,
               "lr": 0.1 / e} for e in (1, 2, 3)]
    r = worker.post(f"{svc.url}/workers/{w['id']}/jobs/{job['id']}/heartbeat",
                    json={"phase": "training", "epochs": epochs})
    assert r.status_code == 200, r.text

    sign_in(browser, svc, svc.admin_token)
    browser.get(f"{svc.url}/#/jobs/{job['id']}")
    until("the loss curve's three epochs", lambda: points(browser, "loss-chart") == 3)
    figures = until("the script's curves", lambda: {
        f.get_attribute("data-metric"): f for f in css(browser, "figure[data-metric]")
        if f.get_attribute("data-metric")} if len(css(browser, "figure[data-metric]")) == 2
        else None)
    assert set(figures) == {"top5", "lr"}
    for f in figures.values():
        canvas = f.find_elements("css selector", "canvas")[0]
        assert canvas.get_attribute("data-points") == "3"
    assert "val_top5 0.7" in figures["top5"].find_elements(
        "css selector", "canvas")[0].get_attribute("aria-label")

    # Compare draws them too, on an axis of their own per name.
    browser.get(f"{svc.url}/#compare={job['id']}")
    top5 = until("the compare view's top5 curves", lambda: css(
        browser, 'figure[data-metric="top5"] polyline.series'))
    assert {p.get_attribute("data-metric") for p in top5} == {"top5", "val_top5"}
    assert all(p.get_attribute("data-points") == "3" for p in top5)
    assert console_errors(browser) == []


# ---- side by side and sweeps --------------------------------------------------------------------

def series(driver, chart):
    """{(job, metric): polyline} of an overlay chart (one <polyline> per job and metric)."""
    return {(p.get_attribute("data-job"), p.get_attribute("data-metric")): p
            for p in css(driver, f"#{chart} polyline.series")}


def ticks(driver, chart):
    return [t.text for t in css(driver, f"#{chart} text.tick.y")]


def test_compare_overlays_curves_and_marks_what_differs(serve, blobs, browser):
    """Two jobs picked in the table open #compare: their loss and accuracy curves on one pair of
    axes each, a log scale for loss, and the documents' leaves with the differences marked."""
    svc = serve("--workers", "1")
    slow = job_doc(blobs, epochs=3, name="lr-small")
    fast = job_doc(blobs, epochs=3, name="lr-big")
    fast["hyperparameters"]["learning_rate"] = 0.05
    fast["model"]["layers"][0]["activation"] = "tanh"
    a, b = (submit(svc, d).json()["id"] for d in (slow, fast))
    for j in (a, b):
        assert wait_for(svc, j, TERMINAL)["status"] == "succeeded"
    metrics = {j: svc.http.get(f"{svc.url}/jobs/{j}/metrics").json()["epochs"] for j in (a, b)}

    sign_in(browser, svc, svc.admin_token)
    until("both jobs in the table", lambda: len(css(browser, "#jobs-body tr[data-id]")) == 2)
    assert not css(browser, "#compare")[0].is_enabled()  # one pick is not a comparison
    for j in (a, b):
        until("a pick box", lambda: css(browser, f'input[data-pick="{j}"]'))[0].click()
    # The picks survive the table's next polls.
    time.sleep(1.6)
    assert all(css(browser, f'input[data-pick="{j}"]')[0].is_selected() for j in (a, b))
    css(browser, "#compare")[0].click()
    until("the compare route", lambda: "#compare=" in browser.current_url)
    assert set(browser.current_url.split("#compare=")[1].split(",")) == {a, b}

    lines = until("four loss curves", lambda: len(series(browser, "compare-loss")) == 4
                  and series(browser, "compare-loss"))
    assert set(lines) == {(j, m) for j in (a, b) for m in ("loss", "val_loss")}
    assert all(p.get_attribute("data-points") == "3" for p in lines.values())
    # One pair of axes holds both jobs: its range covers every value of each.
    chart = css(browser, "#compare-loss")[0]
    values = [e[k] for j in (a, b) for e in metrics[j] for k in ("loss", "val_loss")]
    assert float(chart.get_attribute("data-y-min")) <= min(values)
    assert float(chart.get_attribute("data-y-max")) >= max(values)
    # Each job has its own colour, the same for its two curves, and a legend entry.
    colors = {j: {lines[(j, m)].get_attribute("stroke") for m in ("loss", "val_loss")}
              for j in (a, b)}
    assert len(colors[a]) == len(colors[b]) == 1 and colors[a] != colors[b]
    legend = css(browser, "#compare-legend li")
    assert [li.get_attribute("data-job") for li in legend] == [a, b]
    assert "lr-small" in legend[0].text and "lr-big" in legend[1].text
    acc = series(browser, "compare-accuracy")
    assert set(acc) == {(j, m) for j in (a, b) for m in ("accuracy", "val_accuracy")}

    # The log toggle redraws the loss axis with powers of ten.
    before_ticks = ticks(browser, "compare-loss")
    before_points = lines[(a, "loss")].get_attribute("points")
    css(browser, "label[for=compare-loss-log]")[0].click()
    until("the log scale", lambda: chart.get_attribute("data-scale") == "log")
    after = ticks(browser, "compare-loss")
    assert after != before_ticks
    assert all(float(t) > 0 and abs(math.log10(float(t)) - round(math.log10(float(t)))) < 1e-9
               for t in after), after
    assert series(browser, "compare-loss")[(a, "loss")].get_attribute("points") != before_points
    css(browser, "label[for=compare-loss-log]")[0].click()
    until("linear again", lambda: chart.get_attribute("data-scale") == "linear")
    assert ticks(browser, "compare-loss") == before_ticks

    # The documents' leaves: what differs is marked, what is equal is not.
    rows = {r.get_attribute("data-key"): r for r in css(browser, "#hp-body tr")}
    for key in ("hyperparameters.learning_rate", "model.layers[0].activation", "name"):
        assert rows[key].get_attribute("data-differs") == "true", key
        assert "differs" in rows[key].get_attribute("class")
    for key in ("hyperparameters.batch_size", "hyperparameters.epochs", "model.layers[0].units",
                "dataset_url"):
        assert rows[key].get_attribute("data-differs") == "false", key
        assert "differs" not in (rows[key].get_attribute("class") or "")
    cells = [td.text for td in rows["hyperparameters.learning_rate"].find_elements(
        "css selector", "td")]
    assert cells == ["0.01", "0.05"]
    css(browser, "label[for=hp-only-diff]")[0].click()
    until("equal rows hidden", lambda: not rows["hyperparameters.batch_size"].is_displayed())
    assert rows["hyperparameters.learning_rate"].is_displayed()

    # The route is a link: opened afresh, it draws the same.
    browser.get(f"{svc.url}/#compare={b},{a}")
    browser.refresh()
    until("the curves again", lambda: len(series(browser, "compare-loss")) == 4)
    assert [li.get_attribute("data-job") for li in css(browser, "#compare-legend li")] == [b, a]
    assert console_errors(browser) == []


def test_sweep_page_shows_the_leaderboard_and_every_trials_curve(serve, blobs, browser):
    """A small grid sweep, finished: the sweeps list links to its page, whose leaderboard is in
    the API's order (best first) and whose chart has one curve of the sweep's metric per trial,
    as long as the trial ran."""
    svc = serve("--workers", "1")
    base = job_doc(blobs, epochs=3, name="base")
    r = svc.http.post(f"{svc.url}/sweeps", json={
        "name": "lr", "base": base, "algorithm": "grid",
        "parameters": {"hyperparameters.learning_rate": {"type": "choice",
                                                         "values": [0.001, 0.01, 0.1]}},
        "metric": {"name": "val_loss", "mode": "min"}, "max_trials": 3, "max_concurrent": 1})
    assert r.status_code == 201, r.text
    sweep_id = r.json()["id"]
    deadline = time.time() + 60
    while (sweep := svc.http.get(f"{svc.url}/sweeps/{sweep_id}").json())["status"] == "running":
        assert time.time() < deadline, sweep
        time.sleep(0.1)
    assert sweep["status"] == "succeeded", sweep
    board = sweep["leaderboard"]
    assert len(board) == 3

    sign_in(browser, svc, svc.admin_token)
    until("the jobs table", lambda: css(browser, "#jobs-table"))
    css(browser, 'a[data-nav="sweeps"]')[0].click()
    link = until("the sweep in the list", lambda: css(
        browser, f'#sweeps-body tr[data-id="{sweep_id}"] a'))
    link[0].click()
    until("the sweep route", lambda: browser.current_url.endswith(f"#sweep={sweep_id}"))
    rows = until("three leaderboard rows", lambda: len(css(browser, "#leaderboard-body tr")) == 3
                 and css(browser, "#leaderboard-body tr"))
    assert [row.get_attribute("data-job") for row in rows] == [e["job_id"] for e in board]
    assert [row.get_attribute("data-rank") for row in rows] == ["1", "2", "3"]
    assert [row.find_elements("css selector", "td.trial a")[0].text for row in rows] == \
        [e["name"] for e in board]
    shown = [float(row.find_elements("css selector", "td[data-value]")[0]
                   .get_attribute("data-value")) for row in rows]
    assert shown == sorted(shown) and shown == [e["value"] for e in board]
    assert "best" in rows[0].get_attribute("class")
    assert "learning_rate" in css(browser, "#leaderboard thead")[0].text
    assert until("the status", lambda: css(browser, "#sweep-status")[0].text) == "succeeded"

    curves = until("one curve per trial", lambda: len(series(browser, "sweep-chart")) == 3
                   and series(browser, "sweep-chart"))
    assert set(curves) == {(e["job_id"], "val_loss") for e in board}
    for e in board:
        assert curves[(e["job_id"], "val_loss")].get_attribute("data-points") == \
            str(e["epochs_run"])
    assert len({p.get_attribute("stroke") for p in curves.values()}) == 3
    # The best three side by side, one click away.
    css(browser, "#sweep-compare")[0].click()
    until("the compare view of the best", lambda: len(series(browser, "compare-loss")) == 6)

    # A running sweep (its trial waits for a GPU; with one, it runs long) is cancelled from
    # its page.
    waiting = dict(base, hyperparameters=dict(base["hyperparameters"], epochs=200),
                   resources={"device": "gpu"})
    r = svc.http.post(f"{svc.url}/sweeps", json={
        "name": "waiting", "base": waiting, "algorithm": "grid",
        "parameters": {"hyperparameters.learning_rate": {"type": "choice", "values": [0.01]}},
        "metric": {"name": "val_loss", "mode": "min"}, "max_trials": 1, "max_concurrent": 1})
    assert r.status_code == 201, r.text
    other = r.json()["id"]
    browser.get(f"{svc.url}/#sweep={other}")
    until("an enabled cancel button", lambda: [
        b for b in css(browser, "#sweep-cancel") if b.is_enabled()])[0].click()
    until("the page to show it cancelled",
          lambda: css(browser, "#sweep-status")[0].text == "cancelled")
    assert svc.http.get(f"{svc.url}/sweeps/{other}").json()["status"] == "cancelled"
    assert not css(browser, "#sweep-cancel")[0].is_enabled()
    assert console_errors(browser) == []
