"""The lean HTTP transport (``llm_runs/backend/http.py``) against real local HTTP servers (the stub
server, and a raw socket server for what the stub never sends): every fault ends as it does with
the ``openai`` client (same retries, same one-line errors, keys and URL credentials never shown),
keep-alive connections are reused, chunked and close-delimited answers are read, and ``auto``
picks the lean transport only where it can serve the URL."""

from __future__ import annotations

import asyncio
import json
import socket
import threading

import pytest

from normlab.llm_runs.backend import EndpointConfig, EndpointError, LLMClient
from normlab.llm_runs.backend.http import LeanHTTP, lean_transport_for
from normlab.llm_runs.testing import StubServer

MSG = [{"role": "system", "content": "values: ['Q', 'M']"}, {"role": "assistant", "content": "{'value': '"}]
TRANSPORTS = ("lean", "openai")


def _call(url, *, transport, key=None, **cfg):
    config = EndpointConfig(base_url=url, api_key=key, transport=transport,
                            **{"max_retries": 1, "backoff": 0.01, "timeout": 2.0, **cfg})

    async def go():
        async with LLMClient(config.base_url, "stub-model", config) as c:
            assert (c._lean is not None) == (transport == "lean")
            return await c.chat(MSG, max_tokens=2, temperature=1.0, logprobs=True, top_logprobs=5)

    return asyncio.run(go())


def _outcome(stub, transport, faults, **cfg):
    stub.inject(*faults)
    try:
        r = _call(stub.base_url, transport=transport, **cfg)
    except EndpointError as exc:
        return ("error", str(exc).replace(stub.base_url, "URL"))
    return ("ok", r.attempts, [e.split(":")[0] for e in r.errors], r.top is not None)


@pytest.mark.parametrize("faults", [
    (), ("429",), ("500",), ("503",), ("drop",), ("badjson",), ("malformed",), ("nologprobs",),
    ("nanlogprobs",), ("surrogate",), ("500", "500"), ("drop", "drop"), ("badjson", "badjson"), ("501",),
])
def test_faults_end_as_with_the_openai_client(faults):
    with StubServer(["Q", "M"], retry_after=0.01) as stub:
        got = {t: _outcome(stub, t, faults) for t in TRANSPORTS}
    assert got["lean"][0] == got["openai"][0]
    if got["lean"][0] == "ok":
        assert got["lean"] == got["openai"]
    else:  # the same failure, said the same way (the client's own words)
        lean, oa = got["lean"][1], got["openai"][1]
        assert lean.split(";")[0] == oa.split(";")[0]
        assert ("HTTP 50" in lean) == ("HTTP 50" in oa) and ("malformed" in lean) == ("malformed" in oa)


@pytest.mark.slow  # 4 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_timeout_and_trickle_are_cut_with_lean():
    with StubServer(["Q", "M"], slow_seconds=3.0) as stub:
        for fault in ("slow", "trickle"):
            stub.inject(fault, fault)
            with pytest.raises(EndpointError, match="timeout after 1s"):
                _call(stub.base_url, transport="lean", timeout=1.0)


def test_client_errors_are_not_retried_and_keys_are_redacted():
    secret = "sk-test-0123456789abcdef"
    with StubServer(["Q", "M"]) as stub:
        stub.inject("echo_auth")
        n0 = stub.n_chat
        with pytest.raises(EndpointError) as info:
            _call(stub.base_url, transport="lean", key=secret)
        assert stub.n_chat == n0 + 1  # a 400 is not retried
        assert f"Bearer {secret}" in stub.auth_headers  # the key was sent...
    assert secret not in str(info.value) and "***" in str(info.value)  # ...and never shown
    assert "HTTP 400" in str(info.value)


def test_refused_connection_is_one_line():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(EndpointError) as info:
        _call(f"http://127.0.0.1:{port}/v1", transport="lean", max_retries=2)
    assert "\n" not in str(info.value) and "cannot reach" in str(info.value) and "Errno 111" in str(info.value)


def test_keep_alive_connections_are_reused():
    with StubServer(["Q", "M"]) as stub:
        accepted = []
        real = stub._httpd.get_request

        def counting():
            conn = real()
            accepted.append(conn)
            return conn

        stub._httpd.get_request = counting
        config = EndpointConfig(base_url=stub.base_url, transport="lean", concurrency=2)

        async def go():
            async with LLMClient(config.base_url, "stub-model", config) as c:
                for _ in range(40):
                    await asyncio.gather(c.chat(MSG, max_tokens=2, temperature=1.0),
                                         c.chat(MSG, max_tokens=2, temperature=1.0))

        asyncio.run(go())
    assert 1 <= len(accepted) <= 3, f"{len(accepted)} connections for 80 requests"


class _RawServer:
    """Answers every request with ``reply(body) -> bytes`` (the whole HTTP answer) and closes the
    connection when ``close`` is set.

    :meth:`stop` ends the serving thread *before* it closes the listening socket. A thread left
    blocked in (or about to enter) ``accept`` on a socket closed under it holds on to a stale file
    descriptor number; once a later test's server reuses that number, the stale thread accepts
    that server's connections and answers them with this server's ``reply`` (the intermittent
    "same seed, different results" of the fault matrix under load).
    """

    POLL = 0.05  # seconds between checks of the stop flag

    def __init__(self, reply, close=False):
        self.reply, self.close = reply, close
        self._stop = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(self.POLL)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(self.POLL)
                self._handle(conn)

    def _recv(self, conn) -> bytes:
        """The next bytes from ``conn``; ``b""`` at its end or when the server stops."""
        while not self._stop.is_set():
            try:
                return conn.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return b""
        return b""

    def _handle(self, conn):
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                chunk = self._recv(conn)
                if not chunk:
                    return
                buf += chunk
            head, _, rest = buf.partition(b"\r\n\r\n")
            n = int([h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0])
            while len(rest) < n:
                chunk = self._recv(conn)
                if not chunk:
                    return
                rest += chunk
            body, buf = json.loads(rest[:n]), rest[n:]
            conn.sendall(self.reply(body))
            if self.close:
                return

    def stop(self):
        self._stop.set()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive(), "the raw server's thread did not stop"
        self.sock.close()  # only now: no thread can use its descriptor number any more


def _answer(text="Q"):
    return {"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


def test_chunked_and_close_delimited_answers_are_read():
    def chunked(body):
        data = json.dumps(_answer()).encode()
        parts = [data[:10], data[10:]]
        out = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        for p in parts:
            out += b"%x\r\n%s\r\n" % (len(p), p)
        return out + b"0\r\n\r\n"

    def close_delimited(body):
        return b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + json.dumps(_answer("M")).encode()

    for reply, close, text in ((chunked, False, "Q"), (close_delimited, True, "M")):
        srv = _RawServer(reply, close=close)
        try:
            for _ in range(3):  # a second request after a close-delimited answer opens a new connection
                assert _call(srv.url, transport="lean").text == text
        finally:
            srv.stop()


def test_raw_server_stop_leaves_no_thread_behind_its_socket():
    """Regression (issue 23, the flaky fault matrix): a raw server's thread left blocked in
    ``accept`` after :meth:`_RawServer.stop` kept its port listening and could later accept -- through
    a reused descriptor number -- the connections of another test's stub server, answering that
    test's requests with its own canned answer. Stopped, the thread is gone and the port refuses."""
    srv = _RawServer(lambda body: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    port = int(srv.url.rsplit(":", 1)[1].split("/")[0])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:  # one exchange, then back to accept
        c.sendall(b"POST /v1/x HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
        assert c.recv(100).startswith(b"HTTP/1.1 200")
    srv.stop()
    assert not srv.thread.is_alive()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_not_http_and_oversized_answers_are_malformed():
    srv = _RawServer(lambda body: b"SSH-2.0-OpenSSH\r\n\r\n", close=True)
    try:
        with pytest.raises(EndpointError, match="malformed response: not an HTTP answer"):
            _call(srv.url, transport="lean")
    finally:
        srv.stop()
    srv = _RawServer(lambda body: b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n", close=True)
    try:
        with pytest.raises(EndpointError, match="malformed response: answer of 99999999999 bytes"):
            _call(srv.url, transport="lean")
    finally:
        srv.stop()


def test_auto_picks_lean_only_where_it_can(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(var, raising=False)
    assert lean_transport_for("http://127.0.0.1:8000/v1")
    assert not lean_transport_for("https://api.openai.com/v1")
    assert not lean_transport_for("http://alice:pw@127.0.0.1:8000/v1")
    assert not lean_transport_for("http://127.0.0.1:8000/v1?api_key=x")
    monkeypatch.setenv("http_proxy", "http://proxy:3128")
    assert not lean_transport_for("http://10.0.0.5:8000/v1")
    for loopback in ("127.0.0.1", "127.1.2.3", "localhost", "[::1]"):  # never through a proxy
        assert lean_transport_for(f"http://{loopback}:8000/v1")
    monkeypatch.setenv("no_proxy", "10.0.0.5")
    assert lean_transport_for("http://10.0.0.5:8000/v1")
    with pytest.raises(ValueError, match="transport must be"):
        EndpointConfig(base_url="http://127.0.0.1:1/v1", transport="curl")


def test_lean_http_posts_to_the_url_path():
    seen = []

    def reply(body):
        seen.append(body)
        data = json.dumps(_answer()).encode()
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data)

    srv = _RawServer(reply)
    try:
        async def go():
            h = LeanHTTP(srv.url, {"Authorization": "Bearer x"})
            try:
                status, headers, payload = await h.post("/chat/completions", {"a": "\u00e9"})
            finally:
                await h.aclose()
            return status, json.loads(payload)

        status, obj = asyncio.run(go())
    finally:
        srv.stop()
    assert status == 200 and obj["choices"][0]["message"]["content"] == "Q" and seen == [{"a": "\u00e9"}]
