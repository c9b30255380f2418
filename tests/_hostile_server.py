"""A small real HTTP server on 127.0.0.1 for the integrity tests (issue 29): it answers each request
with whatever bytes a test writes -- two answers for one request, a redirect, a chunk declared 8 GB,
an answer in pieces -- so the clients meet what a hostile or broken server sends. Loopback only."""

from __future__ import annotations

import json
import socket
import threading
import time


def _answer(text="Q", usage=None, logprobs=None) -> dict:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    if logprobs is not None:
        choice["logprobs"] = {"content": [{"token": text, "logprob": logprobs[0],
                                           "top_logprobs": [{"token": t, "logprob": v}
                                                            for t, v in zip(("Q", "M"), logprobs)]}]}
    out = {"id": "x", "object": "chat.completion", "choices": [choice]}
    if usage is not False:
        out["usage"] = usage or {"prompt_tokens": 3, "completion_tokens": 1}
    return out


def http(body, status="200 OK", headers=(), raw_body=False) -> bytes:
    """One whole HTTP/1.1 answer with a Content-Length."""
    data = body if raw_body else json.dumps(body).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in headers)
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{head}Content-Length: {len(data)}\r\n\r\n"
            .encode() + data)


class HostileServer:
    """A real HTTP server on 127.0.0.1 that answers each request with ``reply(method, path, body,
    n)`` (``n``: the request's number on this server, from 0): bytes sent whole, or a list of byte
    strings sent one after the other with ``pause`` seconds between them; the connection is closed
    after the answer when ``close`` is set, else kept alive. Each connection is served by its own thread;
    :meth:`stop` ends the thread before closing the socket."""

    def __init__(self, reply, *, close=False, pause=0.2):
        self.reply, self.close, self.pause = reply, close, pause
        self.requests: list = []
        self._threads: list = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(target=self._serve_one, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve_one(self, conn):
        with conn:
            conn.settimeout(0.05)
            try:
                self._handle(conn)
            except OSError:
                pass

    def _recv(self, conn) -> bytes:
        while not self._stop.is_set():
            try:
                return conn.recv(65536)
            except TimeoutError:
                continue
        return b""

    def _handle(self, conn):
        buf = b""
        while not self._stop.is_set():
            while b"\r\n\r\n" not in buf:
                chunk = self._recv(conn)
                if not chunk:
                    return
                buf += chunk
            head, _, rest = buf.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split()[:2]
            n = next((int(h.split(":")[1]) for h in lines[1:] if h.lower().startswith("content-length")), 0)
            while len(rest) < n:
                chunk = self._recv(conn)
                if not chunk:
                    return
                rest += chunk
            body, buf = rest[:n], rest[n:]
            with self._lock:
                self.requests.append((method, path, json.loads(body) if body else None))
                n_request = len(self.requests) - 1
            out = self.reply(method, path, body, n_request)
            conn.settimeout(30)  # a large answer takes more than one poll to send
            for i, piece in enumerate(out if isinstance(out, list) else [out]):
                if i:
                    time.sleep(self.pause)
                conn.sendall(piece)
            conn.settimeout(0.05)
            if self.close:
                return

    def stop(self):
        self._stop.set()
        self.thread.join(timeout=10)
        for t in self._threads:
            t.join(timeout=10)
        self.sock.close()


