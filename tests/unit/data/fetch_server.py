#!/usr/bin/python3
"""HTTP server for the data-fetch unit test.

Usage: fetch_server.py DIR. Binds 127.0.0.1 on a port the kernel picks, prints that port on
stdout and serves the files under DIR, plus these paths:

  /health              200 "ok", to wait for readiness
  /status/CODE         an empty response with that status
  /redirect?to=URL     302 to URL (any scheme, so the client's refusal can be tested)
  /loop                302 to itself, forever
  /ua                  the request's User-Agent as the body
  /stall               headers and 100 bytes of a 1 MB body, then nothing for 60 s
  /drip                2 KiB every 0.2 s for 60 s: fast enough for a low-speed check, slow
                       enough to trip a short total timeout
  /nolength?n=N        N bytes with no Content-Length (the body ends when the connection does)
  /etag?v=TAG          a small body with ETag "TAG" and a fixed Last-Modified; 304 when the
                       request's If-None-Match is "TAG"

Files under DIR carry Last-Modified and answer If-Modified-Since (SimpleHTTPRequestHandler).

A request signed with AWS SigV4 (Authorization: AWS4-HMAC-SHA256 ...) is answered as a small S3
would: the signature is checked against the secrets in S3_KEYS (with the session token a key
needs, if any) over the path as sent, the signed headers and x-amz-content-sha256, which must be
there and signed; then /bkt/KEY serves DIR/KEY (percent-decoded) with an ETag, 304 to a matching
If-None-Match. Failures answer S3's XML error with its code: InvalidAccessKeyId, InvalidToken,
SignatureDoesNotMatch (403), NoSuchBucket, NoSuchKey (404), MissingSecurityHeader (400).

The test kills it with SIGTERM when done.
"""
import hashlib
import hmac
import http.server
import os
import sys
import time
import urllib.parse

# access key id -> (secret, session token or None)
S3_KEYS = {"AKIDTEST": ("s3cret/Key+1", None), "ASIATEST": ("tempSecret", "tok/en+=")}


def s3_signature(secret, date, region, string_to_sign):
    key = ("AWS4" + secret).encode()
    for part in (date, region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()


class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def send_body(self, code, body, length=True):
        self.send_response(code)
        self.send_header("Content-Type", "application/octet-stream")
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def s3_error(self, status, code):
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code>"
                "<Message>test server: %s</Message></Error>" % (code, code)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_s3(self, auth):
        fields = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
        akid, date, region, service, _ = fields["Credential"].split("/")
        if akid not in S3_KEYS:
            return self.s3_error(403, "InvalidAccessKeyId")
        secret, token = S3_KEYS[akid]
        signed = fields["SignedHeaders"].split(";")
        if "x-amz-content-sha256" not in signed:
            return self.s3_error(400, "MissingSecurityHeader")
        if token is not None and (self.headers.get("x-amz-security-token") != token
                                  or "x-amz-security-token" not in signed):
            return self.s3_error(403, "InvalidToken")
        path, _, query = self.path.partition("?")
        canonical = "\n".join(
            ["GET", path, query]
            + ["%s:%s" % (h, " ".join(self.headers.get(h, "").split())) for h in signed]
            + ["", ";".join(signed), self.headers["x-amz-content-sha256"]])
        string_to_sign = "\n".join(["AWS4-HMAC-SHA256", self.headers["x-amz-date"],
                                    "/".join([date, region, service, "aws4_request"]),
                                    hashlib.sha256(canonical.encode()).hexdigest()])
        if not hmac.compare_digest(s3_signature(secret, date, region, string_to_sign),
                                   fields["Signature"]):
            return self.s3_error(403, "SignatureDoesNotMatch")
        bucket, _, key = path.lstrip("/").partition("/")
        if bucket != "bkt":
            return self.s3_error(404, "NoSuchBucket")
        file = os.path.join(self.directory, urllib.parse.unquote(key))
        if not key or not os.path.isfile(file):
            return self.s3_error(404, "NoSuchKey")
        with open(file, "rb") as f:
            body = f.read()
        tag = '"%s"' % hashlib.md5(body).hexdigest()
        if self.headers.get("If-None-Match") == tag:
            self.send_response(304)
            self.send_header("ETag", tag)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("ETag", tag)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        auth = self.headers.get("Authorization", "")
        if auth.startswith("AWS4-HMAC-SHA256 "):
            return self.do_s3(auth)
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if url.path == "/health":
            self.send_body(200, b"ok")
        elif url.path.startswith("/status/"):
            self.send_body(int(url.path.split("/")[2]), b"")
        elif url.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", query["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif url.path == "/loop":
            self.send_response(302)
            self.send_header("Location", "/loop")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif url.path == "/ua":
            self.send_body(200, self.headers.get("User-Agent", "").encode())
        elif url.path == "/stall":
            self.send_response(200)
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self.wfile.write(b"x" * 100)
            self.wfile.flush()
            time.sleep(60)
        elif url.path == "/drip":
            self.send_response(200)
            self.send_header("Content-Length", str(2048 * 300))
            self.end_headers()
            for _ in range(300):
                self.wfile.write(b"y" * 2048)
                self.wfile.flush()
                time.sleep(0.2)
        elif url.path == "/etag":
            tag = '"%s"' % query["v"][0]
            if self.headers.get("If-None-Match") == tag:
                self.send_response(304)
                self.send_header("ETag", tag)
                self.end_headers()
                return
            body = b"etag,body\n1,2\n"
            self.send_response(200)
            self.send_header("ETag", tag)
            self.send_header("Last-Modified", "Tue, 01 Jan 2030 00:00:00 GMT")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif url.path == "/nolength":
            self.send_body(200, b"z" * int(query["n"][0]), length=False)
        else:
            super().do_GET()


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients that hang up early are expected here


def main():
    handler = lambda *a, **kw: Handler(*a, directory=sys.argv[1], **kw)
    server = Server(("127.0.0.1", 0), handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
