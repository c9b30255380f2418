"""A lean HTTP/1.1 transport for the JSON requests of a run to a plain ``http://`` server (a local
inference server, the embedded one, the stub): keep-alive connections over asyncio streams, one
per request in flight. It costs about 0.1 ms of CPU a request where the ``openai`` client's
stack (httpx, httpcore, anyio, pydantic) costs about 1.4 ms, which made one runner process the
bottleneck of a fast server (issue 23). ``https://`` endpoints, URLs with credentials and hosts
reached through a proxy (``HTTP_PROXY`` and friends) keep the ``openai`` client
(:func:`lean_transport_for`). Errors come out as :class:`HTTPStatus` (an HTTP error answer) or
:class:`HTTPConnection` (nothing usable came back); :class:`~normlab.llm_runs.backend.LLMClient`
turns both into its retries and messages, as it does the ``openai`` client's.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
from urllib.parse import urlsplit

_ENCODE = json.JSONEncoder(ensure_ascii=False).encode

_HEADER = re.compile(r"([^:\r\n]+):([^\r\n]*)")

#: Largest response body read (a larger one is refused as malformed).
MAX_BODY_BYTES = 64 * 2**20


class HTTPStatus(Exception):
    """The server answered with an error status: ``status``, ``headers`` (lower-case names) and
    the body as the ``openai`` client shows it (``Error code: 400 - {...}``)."""

    def __init__(self, status: int, headers, body: bytes = b"", *, message: str | None = None):
        self.status, self.headers = status, headers
        if message is None:
            try:
                shown = repr(json.loads(body))
            except ValueError:
                shown = body.decode("utf-8", "replace")
            message = f"Error code: {status} - {shown}"
        super().__init__(message)


class HTTPConnection(Exception):
    """No usable answer: the connection could not be made (``refused``), or broke."""

    def __init__(self, message: str, refused: bool = False):
        super().__init__(message)
        self.refused = refused


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def lean_transport_for(base_url: str) -> bool:
    """True when :class:`LeanHTTP` can serve ``base_url``: plain ``http://``, no credentials,
    query or fragment in the URL, and no proxy configured for its host in the environment. A
    loopback host (the embedded server, a local inference server) is never sent to a proxy: the
    proxy's own loopback is another machine's (with HTTP_PROXY set and no NO_PROXY, the embedded
    model could not be reached)."""
    import urllib.request

    u = urlsplit(base_url)
    if u.scheme != "http" or u.username or u.password or u.query or u.fragment or not u.hostname:
        return False
    if is_loopback(u.hostname):
        return True
    proxies = urllib.request.getproxies_environment()
    if ("http" in proxies or "all" in proxies) and not urllib.request.proxy_bypass_environment(u.hostname, proxies):
        return False
    return True


class LeanHTTP:
    """JSON POSTs over keep-alive HTTP/1.1 connections to one ``http://`` server.

    Parameters
    ----------
    base_url : str
        e.g. ``http://127.0.0.1:8000/v1`` (routes are appended to its path).
    headers : dict
        Sent with every request (``Authorization``).
    """

    def __init__(self, base_url: str, headers: dict | None = None):
        u = urlsplit(base_url)
        self.host, self.port = u.hostname, u.port or 80
        self.prefix = u.path.rstrip("/")
        host = u.hostname if u.port is None else f"{u.hostname}:{u.port}"
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._head = (f"Host: {host}\r\nContent-Type: application/json\r\nAccept: application/json\r\n"
                      f"User-Agent: normlab\r\n{extra}").encode("latin-1")
        self._idle: list = []
        self._open: set = set()

    async def _connect(self):
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port, limit=2**20)
        except ConnectionRefusedError as exc:
            raise HTTPConnection(f"ConnectError: {exc}", refused=True) from None
        except OSError as exc:
            raise HTTPConnection(f"ConnectError: {exc}") from None
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._open.add(writer)
        return reader, writer

    def _drop(self, writer) -> None:
        self._open.discard(writer)
        writer.close()

    async def post(self, route: str, body: dict) -> tuple[int, dict, bytes]:
        """POST ``body`` as JSON to ``route``; ``(status, headers, body bytes)`` of a success.

        Raises :class:`HTTPStatus` for an error status, :class:`HTTPConnection` when the
        connection fails or breaks, ``ValueError`` for an answer that is not HTTP."""
        data = _ENCODE(body).encode("utf-8")
        head = b"POST %s%s HTTP/1.1\r\n%sContent-Length: %d\r\n\r\n" % (self.prefix.encode(), route.encode(),
                                                                          self._head, len(data))
        conn = None
        while self._idle:  # a kept-alive connection the server has not closed meanwhile
            reader, writer = self._idle.pop()
            if writer.is_closing() or reader.at_eof():
                self._drop(writer)
                continue
            conn = reader, writer
            break
        if conn is None:
            conn = await self._connect()
        reader, writer = conn
        keep = False
        try:
            writer.write(head + data)
            status, headers, payload, keep = await self._response(reader)
        except (OSError, asyncio.IncompleteReadError, ConnectionError) as exc:
            raise HTTPConnection(f"{type(exc).__name__}: {exc}") from None
        finally:  # a request cut short (timeout, cancellation, error) leaves its connection unusable
            if keep:
                self._idle.append((reader, writer))
            else:
                self._drop(writer)
        if status >= 400:
            raise HTTPStatus(status, headers, payload)
        return status, headers, payload

    async def _response(self, reader) -> tuple[int, dict, bytes, bool]:
        try:
            block = await reader.readuntil(b"\r\n\r\n")  # status line and headers at once
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                raise ConnectionError("the server closed the connection without answering") from None
            raise ConnectionError("the server closed the connection inside the headers") from None
        except asyncio.LimitOverrunError:
            raise ValueError("the answer's headers are too long") from None
        text = block.decode("latin-1")
        first, _, rest = text.partition("\r\n")
        parts = first.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise ValueError(f"not an HTTP answer: {first[:80]!r}")
        status = int(parts[1])
        headers = {k.strip().lower(): v.strip() for k, v in _HEADER.findall(rest)}
        if headers.get("transfer-encoding", "").lower() == "chunked":
            payload = await self._chunked(reader)
        elif "content-length" in headers:
            n = int(headers["content-length"])
            if n > MAX_BODY_BYTES:
                raise ValueError(f"answer of {n} bytes (more than {MAX_BODY_BYTES})")
            payload = await reader.readexactly(n)
        else:  # the body ends with the connection
            payload = await reader.read(MAX_BODY_BYTES + 1)
            if len(payload) > MAX_BODY_BYTES:
                raise ValueError(f"answer of more than {MAX_BODY_BYTES} bytes")
            return status, headers, payload, False
        keep = parts[0] == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        return status, headers, payload, keep

    async def _chunked(self, reader) -> bytes:
        out = bytearray()
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(out)
            out += await reader.readexactly(size)
            if len(out) > MAX_BODY_BYTES:
                raise ValueError(f"answer of more than {MAX_BODY_BYTES} bytes")
            await reader.readexactly(2)

    async def aclose(self) -> None:
        for w in list(self._open):
            self._drop(w)
        self._idle.clear()
