"""End-to-end tests of s3:// datasets (data/fetch.h) against a real S3 server: moto (PyPI
`moto[server]`) in server mode on a loopback port, with signature checking on.

How moto checks signatures here: moto authenticates nothing until INITIAL_NO_AUTH_ACTION_COUNT
requests have been served (infinite by default). The fixture sets the world up while that is so
(an IAM user whose policy allows s3:GetObject and s3:ListBucket on the bucket, its access key,
the bucket and a CSV of several MB, put with boto3), then POSTs 0 to /moto-api/reset-auth: from
then on every request must carry a SigV4 signature that moto recomputes with the IAM key's
secret (SignatureDoesNotMatch otherwise; InvalidAccessKeyId for an unknown key) and the user's
policy must allow the action (AccessDenied otherwise). The fixture checks that a request with
a wrong secret is refused before any test runs, so these tests cannot pass with checking off.

serve gets --s3-endpoint and --s3-region, and the credentials through AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY in its environment, which its local workers inherit. `trainyard train`
takes the flags too, or AWS_ENDPOINT_URL_S3 and AWS_REGION, and temporary credentials from STS
AssumeRole (a role the user may assume) with their AWS_SESSION_TOKEN."""
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import requests

from helpers import TERMINAL, job_doc, submit, wait_for

boto3 = pytest.importorskip(
    "boto3", reason="boto3 is not installed: pip install boto3 'moto[server]' (.ci/run does)")
pytest.importorskip(
    "moto.server", reason="moto is not installed: pip install 'moto[server]' (.ci/run does)")
from botocore.exceptions import ClientError  # noqa: E402 (after the skip)

BUCKET = "trainyard-data"
KEY = "sets/blobs big.csv"  # a space: the key is percent-encoded in the URL
URL = f"s3://{BUCKET}/sets/blobs%20big.csv"
REGION = "eu-west-1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def big_csv(rows=200_000, seed=5):
    """About 4 MB: three well-separated classes (features a, b; label kind)."""
    rng = np.random.default_rng(seed)
    centers = np.array([[0, 0], [4, 0], [0, 4]])
    label = rng.integers(0, 3, rows)
    x = centers[label] + rng.normal(0, 0.6, (rows, 2))
    lines = ["a,b,kind"] + [f"{p:.5f},{q:.5f},k{c}" for (p, q), c in zip(x, label)]
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    """A moto server with the bucket and object above and signature checking on; yields
    (endpoint, access key id, secret)."""
    port = free_port()
    log = open(tmp_path_factory.mktemp("moto") / "moto.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "inf"})
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 30
        while True:
            try:
                requests.get(f"{endpoint}/moto-api/", timeout=1)
                break
            except requests.ConnectionError:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto did not start")
                time.sleep(0.1)
        setup = dict(endpoint_url=endpoint, region_name=REGION, aws_access_key_id="setup",
                     aws_secret_access_key="setup")
        iam = boto3.client("iam", **setup)
        iam.create_user(UserName="trainyard-worker")
        iam.put_user_policy(UserName="trainyard-worker", PolicyName="read-datasets",
                            PolicyDocument=json.dumps({
                                "Version": "2012-10-17",
                                "Statement": [{"Effect": "Allow",
                                               "Action": ["s3:GetObject", "s3:ListBucket"],
                                               "Resource": [f"arn:aws:s3:::{BUCKET}",
                                                            f"arn:aws:s3:::{BUCKET}/*"]},
                                              {"Effect": "Allow", "Action": "sts:AssumeRole",
                                               "Resource": "*"}]}))
        key = iam.create_access_key(UserName="trainyard-worker")["AccessKey"]
        user_arn = iam.get_user(UserName="trainyard-worker")["User"]["Arn"]
        iam.create_role(RoleName="dataset-reader", AssumeRolePolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": user_arn},
                           "Action": "sts:AssumeRole"}]}))
        iam.put_role_policy(RoleName="dataset-reader", PolicyName="read", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:GetObject",
                           "Resource": f"arn:aws:s3:::{BUCKET}/*"}]}))
        s3 = boto3.client("s3", **setup)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        s3.put_object(Bucket=BUCKET, Key=KEY, Body=big_csv())
        s3.create_bucket(Bucket="someone-else",
                         CreateBucketConfiguration={"LocationConstraint": REGION})
        s3.put_object(Bucket="someone-else", Key="x.csv", Body=b"a,b,kind\n1,2,k0\n")
        r = requests.post(f"{endpoint}/moto-api/reset-auth", data=b"0")
        assert r.status_code == 200, r.text

        # signature checking is on: a wrong secret is refused, the right one reads
        bad = boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                           aws_access_key_id=key["AccessKeyId"], aws_secret_access_key="nope")
        with pytest.raises(ClientError) as refused:
            bad.head_object(Bucket=BUCKET, Key=KEY)
        assert refused.value.response["Error"]["Code"] in ("403", "SignatureDoesNotMatch")
        good = boto3.client("s3", endpoint_url=endpoint, region_name=REGION,
                            aws_access_key_id=key["AccessKeyId"],
                            aws_secret_access_key=key["SecretAccessKey"])
        assert good.head_object(Bucket=BUCKET, Key=KEY)["ContentLength"] > 3_000_000
        yield endpoint, key["AccessKeyId"], key["SecretAccessKey"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        log.close()


def s3_serve(serve, monkeypatch, moto, name, secret=None):
    """serve with the S3 flags and the worker's credentials in its environment; no
    --dataset-allow: the endpoint (loopback) is trusted because the operator named it."""
    endpoint, key_id, real_secret = moto
    for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION",
                "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret or real_secret)
    return serve("--s3-endpoint", endpoint, "--s3-region", REGION, "--workers", "1", name=name,
                 allow_loopback=False)


def run_job(svc, url, **extra):
    job = submit(svc, job_doc(url, epochs=1, **extra)).json()
    done = wait_for(svc, job["id"], TERMINAL, timeout=300)
    log = svc.http.get(f"{svc.url}/jobs/{job['id']}/logs").text
    return done, log


def test_s3_dataset_trains_through_serve_and_is_cached(trainyard_bin, serve, monkeypatch, moto):
    svc = s3_serve(serve, monkeypatch, moto, "ok")
    done, log = run_job(svc, URL)
    assert done["status"] == "succeeded", (done, log[-2000:])
    assert "bytes fetched" in log and "dataset from cache" not in log, log
    assert int(log.split(" bytes fetched")[0].split()[-1]) > 3_000_000, log
    # the second job revalidates the cached copy with S3's ETag (a signed conditional GET)
    done, log = run_job(svc, URL)
    assert done["status"] == "succeeded", (done, log[-2000:])
    assert "dataset from cache" in log and "answered 304" in log, log


def test_wrong_secret_fails_the_job_naming_the_s3_error(trainyard_bin, serve, monkeypatch, moto):
    secret = "wrong-secret-do-not-show"
    svc = s3_serve(serve, monkeypatch, moto, "wrong", secret=secret)
    done, log = run_job(svc, URL)
    assert done["status"] == "failed", done
    assert "SignatureDoesNotMatch" in done["error"], done
    assert URL in done["error"], done
    for text in (done["error"], log, svc.output()):
        assert secret not in text


def test_missing_key_and_other_bucket(trainyard_bin, serve, monkeypatch, moto):
    svc = s3_serve(serve, monkeypatch, moto, "missing")
    done, _ = run_job(svc, f"s3://{BUCKET}/sets/nothing-here.csv")
    assert done["status"] == "failed" and "NoSuchKey" in done["error"], done
    # the policy allows only the one bucket
    done, _ = run_job(svc, "s3://someone-else/x.csv")
    assert done["status"] == "failed" and "AccessDenied" in done["error"], done


def test_train_reads_s3_with_its_flags(train, monkeypatch, moto):
    endpoint, key_id, secret = moto
    for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION",
                "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    proc, out = train(job_doc(URL, epochs=1), extra=("--s3-endpoint", endpoint, "--s3-region",
                                                      REGION))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (out / "model.safetensors").exists()
    # a region that is no region name is bad usage at once
    proc, _ = train(job_doc(URL, epochs=1), out_name="region",
                    extra=("--s3-endpoint", endpoint, "--s3-region", "eu west"))
    assert proc.returncode == 2 and "not a region name" in proc.stderr, proc.stderr
    # no credentials: the message says what to set
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    proc, _ = train(job_doc(URL, epochs=1), out_name="nocreds",
                    extra=("--s3-endpoint", endpoint, "--s3-region", REGION))
    assert proc.returncode == 1 and "set AWS_ACCESS_KEY_ID" in proc.stderr, proc.stderr


def test_temporary_credentials_send_their_session_token(train, monkeypatch, moto):
    """Credentials from STS AssumeRole: the session token goes along as x-amz-security-token
    (moto refuses the assumed role's key without the right one)."""
    endpoint, key_id, secret = moto
    sts = boto3.client("sts", endpoint_url=endpoint, region_name=REGION,
                       aws_access_key_id=key_id, aws_secret_access_key=secret)
    creds = sts.assume_role(RoleArn="arn:aws:iam::123456789012:role/dataset-reader",
                            RoleSessionName="worker")["Credentials"]
    for var in ("AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
    monkeypatch.setenv("AWS_REGION", REGION)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", creds["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", creds["SecretAccessKey"])
    monkeypatch.setenv("AWS_SESSION_TOKEN", creds["SessionToken"])
    proc, out = train(job_doc(URL, epochs=1), out_name="sts")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    monkeypatch.setenv("AWS_SESSION_TOKEN", creds["SessionToken"][:-4] + "AAAA")
    proc, _ = train(job_doc(URL, epochs=1), out_name="sts-bad")
    assert proc.returncode == 1 and "InvalidToken" in proc.stderr, proc.stderr
