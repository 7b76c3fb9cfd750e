#!/usr/bin/python3
"""HTTP server for the worker-fetch unit test.

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

The test kills it with SIGTERM when done.
"""
import http.server
import sys
import time
import urllib.parse


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

    def do_GET(self):
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
