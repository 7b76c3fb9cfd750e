"""Hostile clients for the stall tests (test_stall.py) and bench/stall.py: sockets from other
loopback addresses, half-sent request bodies, /healthz probes, and the server's sockets by TCP
state. Every address here is in 127.0.0.0/8; nothing reaches another host."""
import socket
import time


def connect_from(source, port, timeout=2.0):
    """A socket from source (a 127.0.0.0/8 address) to 127.0.0.1:port; None when it is not
    taken within timeout."""
    s = socket.socket()
    try:
        s.settimeout(timeout)
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        return s
    except OSError:
        s.close()
        return None


def closed_by_server(s):
    """Whether the server has closed or reset s (what it sent meanwhile is read and dropped)."""
    s.setblocking(False)
    try:
        while s.recv(65536):
            pass
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def healthz_seconds(port, timeout=5.0):
    """Seconds a fresh connection from 127.0.0.1 takes to get GET /healthz answered 200; None
    if no such answer came within timeout."""
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            if not s.recv(64).startswith(b"HTTP/1.1 200"):
                return None
    except OSError:
        return None
    return time.monotonic() - t0


def server_sockets(port, state):
    """The server's TCP sockets on port in a state: "01" established, "08" CLOSE-WAIT (its
    client gone, the server still holding it)."""
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = [r.split() for r in open(table).read().splitlines()[1:]]
        except OSError:
            continue
        n += sum(1 for r in rows if int(r[1].rsplit(":", 1)[1], 16) == port and r[3] == state)
    return n


def half_post(token, part=0.5):
    """A POST /train's head and the first part of its announced body, as bytes."""
    body = b'{"name": "half", "dataset_url": "http://127.0.0.1:9/x.csv"}' + b" " * 4000
    head = (f"POST /train HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    return head + body[:int(len(body) * part)]


def send_and_leave(source, port, data, timeout=2.0):
    """Connects from source, sends data and hangs up; whether it all went."""
    s = connect_from(source, port, timeout)
    if s is None:
        return False
    try:
        s.sendall(data)
        return True
    except OSError:
        return False
    finally:
        s.close()
