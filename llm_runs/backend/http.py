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

#: Largest response body read (a larger one is refused as malformed), whichever transport carries
#: it: checked before a byte is held (a declared length, a chunk's declared size) and as it arrives.
MAX_BODY_BYTES = 64 * 2**20
#: Largest side answer read (``GET /models``, ``GET /props``): what the manifest keeps of them is a
#: summary (:func:`summarise`), never the whole answer.
MAX_SIDE_BYTES = 16 * 2**20
#: Most JSON elements (values in arrays, members of objects) an answer may hold: counted before it
#: is parsed (a 64 MB answer of empty arrays would otherwise take GBs as Python lists). A
#: chat completion with 20 top logprobs for 64 tokens holds about 5 000.
MAX_ANSWER_ELEMENTS = 1_000_000
#: Longest chunk-size line and most trailer lines of a chunked answer.
_MAX_CHUNK_LINE = 4096
_MAX_TRAILERS = 64
_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")


class HTTPOutOfStep(Exception):
    """The server sent an answer to a request that was not sent (more answers than requests on a
    connection): every later answer would be given to the next prompt. Never retried."""


def loads_answer(payload, what: str = "the answer", *, max_bytes: int = MAX_BODY_BYTES,
                 max_elements: int = MAX_ANSWER_ELEMENTS):
    """Parse a server's JSON answer with its size and element count bounded before parsing and its
    depth bounded while parsing; every refusal is a ``ValueError`` blaming the answer (the client
    counts it a malformed response: retried, then one line naming the endpoint).

    Parameters
    ----------
    payload : bytes or str
    what : str
        How messages name it.
    max_bytes, max_elements : int
        :data:`MAX_BODY_BYTES`, :data:`MAX_ANSWER_ELEMENTS` by default.
    """
    if len(payload) > max_bytes:
        raise ValueError(f"{what} is {len(payload):,} bytes, more than the {max_bytes:,} allowed")
    if isinstance(payload, str):
        payload = payload.encode("utf-8", "surrogatepass")
    # an upper bound on the elements (separators and openers, strings included), at memchr speed
    n = payload.count(b",") + payload.count(b"[") + payload.count(b"{")
    if n > max_elements:
        raise ValueError(f"{what} holds more than {max_elements:,} JSON elements; refused")
    try:
        return json.loads(payload.decode("utf-8"))
    except RecursionError:
        raise ValueError(f"{what} nests too deeply to be parsed (a server's answer, not your input)") from None


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
            stray = _stray(reader)
            if stray:  # bytes arrived while no request was out: an answer to a request not sent
                self._drop(writer)
                raise HTTPOutOfStep(f"the server sent an answer to a request not sent ({stray!r}...)")
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
        if status >= 300:  # an error, or a redirect: never followed (the prompt would go elsewhere)
            raise HTTPStatus(status, headers, payload)
        return status, headers, payload

    async def _read_head(self, reader) -> tuple[str, int, dict]:
        """The status line and headers of the next answer: ``(version, status, headers)``."""
        try:
            block = await reader.readuntil(b"\r\n\r\n")  # status line and headers at once
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                raise ConnectionError("the server closed the connection without answering") from None
            raise ConnectionError("the server closed the connection inside the headers") from None
        except asyncio.LimitOverrunError:
            raise ValueError("the answer's headers are too long") from None
        text = block.decode("latin-1").lstrip("\r\n")  # empty lines before a status line are ignored
        first, _, rest = text.partition("\r\n")
        parts = first.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit() or len(parts[1]) != 3:
            raise ValueError(f"not an HTTP answer: {first[:80]!r}")
        headers = {k.strip().lower(): v.strip() for k, v in _HEADER.findall(rest)}
        return parts[0], int(parts[1]), headers

    async def _response(self, reader) -> tuple[int, dict, bytes, bool]:
        while True:
            version, status, headers = await self._read_head(reader)
            if 100 <= status < 200:
                if status == 101:
                    raise ValueError("the server switched protocols (HTTP 101) though asked for none")
                continue  # 100 Continue, 103 Early Hints: informational, the answer follows
            break
        if headers.get("transfer-encoding", "").lower() == "chunked":
            payload = await self._chunked(reader)
        elif "content-length" in headers:
            text = headers["content-length"]
            if not text.isdigit():
                raise ValueError(f"malformed Content-Length {text[:40]!r}")
            n = int(text)
            if n > MAX_BODY_BYTES:
                raise ValueError(f"answer of {n} bytes (more than {MAX_BODY_BYTES})")
            payload = await reader.readexactly(n)
        elif status in (204, 304):
            payload = b""
        else:  # the body ends with the connection: read to its end, bounded
            out = bytearray()
            while True:
                piece = await reader.read(2**16)
                if not piece:
                    break
                out += piece
                if len(out) > MAX_BODY_BYTES:
                    raise ValueError(f"answer of more than {MAX_BODY_BYTES} bytes")
            return status, headers, bytes(out), False
        keep = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if keep:
            stray = _stray(reader)
            if stray:  # more than the answer came back: it answers no request of ours
                raise HTTPOutOfStep(f"the server sent more than one answer to one request ({stray!r}...)")
        return status, headers, payload, keep

    async def _chunked(self, reader) -> bytes:
        """A chunked body, each chunk's declared size checked against what may still be read
        before any of it is (a chunk declared 8 GB is refused at once, not buffered)."""
        out = bytearray()
        while True:
            line = await reader.readline()
            if not line.endswith(b"\n"):
                raise ConnectionError("the server closed the connection inside a chunked answer")
            if len(line) > _MAX_CHUNK_LINE:
                raise ValueError("a chunk-size line of the answer is too long")
            field = line.split(b";")[0].strip()
            if not _HEX.fullmatch(field):
                raise ValueError(f"malformed chunk size {field[:20]!r} in the answer")
            size = int(field, 16)
            if size == 0:
                for _ in range(_MAX_TRAILERS):
                    if (await reader.readline()) in (b"\r\n", b"\n", b""):
                        return bytes(out)
                raise ValueError("too many trailer lines after a chunked answer")
            if len(out) + size > MAX_BODY_BYTES:
                raise ValueError(f"answer of more than {MAX_BODY_BYTES} bytes (a chunk of {size:,} bytes declared)")
            out += await reader.readexactly(size)
            if await reader.readexactly(2) != b"\r\n":
                raise ValueError("malformed chunk in the answer (no CRLF after its data)")

    async def aclose(self) -> None:
        for w in list(self._open):
            self._drop(w)
        self._idle.clear()


def _stray(reader) -> bytes:
    """The first bytes already received on a connection beyond the answers read (empty lines
    aside, which HTTP lets a client ignore): what a server sent that no request asked for."""
    buf = getattr(reader, "_buffer", None)  # asyncio.StreamReader's received, unread bytes
    if not buf:
        return b""
    head = bytes(buf[:64])
    if head.strip(b"\r\n"):
        return head[:24]
    if not bytes(buf).strip(b"\r\n"):
        del buf[:]  # empty lines only
        return b""
    return bytes(buf).lstrip(b"\r\n")[:24]


# ------------------------------------------------------------------ the openai transport's HTTP
class AnswerRefused(ValueError):
    """An answer the ``openai`` transport refused while reading it (too large, compressed with an
    encoding normlab does not read): a malformed response."""


def _h11_connection(stream, hops: int = 8):
    """The HTTP/1.1 connection object (httpcore's) behind an ``httpx`` response stream, or ``None``
    (HTTP/2, a proxy tunnel, another httpcore): walks the wrappers' ``_stream``,
    ``_httpcore_stream`` and ``_connection`` attributes."""
    obj = stream
    for _ in range(hops):
        if obj is None:
            return None
        if hasattr(obj, "_h11_state"):
            return obj
        obj = next((getattr(obj, a) for a in ("_stream", "_httpcore_stream", "_connection") if hasattr(obj, a)), None)
    return None


def bounded_http_client(*, trust_env: bool = True, **kwargs):
    """The ``httpx`` client the ``openai`` transport (and the side requests, ``/props``) travel by:
    redirects never followed (a ``307`` to another host would re-send the prompt there), answers
    asked uncompressed and every answer's bytes bounded as they arrive (:data:`MAX_BODY_BYTES`;
    ``/models`` and ``/props``: :data:`MAX_SIDE_BYTES`; a gzip or deflate answer sent anyway is
    inflated within the same bound), and an answer followed by bytes no request asked for refused
    (:class:`HTTPOutOfStep`) with its connection closed, so that it cannot become the next prompt's
    answer."""
    import zlib

    import httpx2
    import openai

    class _Bounded(httpx2.AsyncByteStream):
        def __init__(self, inner, cap: int, decoder, what: str):
            self._inner, self._cap, self._decoder, self._what = inner, cap, decoder, what

        def _too_large(self):
            return AnswerRefused(f"{self._what} is more than {self._cap:,} bytes; refused")

        async def __aiter__(self):
            n = 0
            async for chunk in self._inner:
                if self._decoder is not None:
                    data, chunk = chunk, b""
                    while data:
                        try:
                            part = self._decoder.decompress(data, self._cap - n + 1)
                        except zlib.error as exc:
                            raise AnswerRefused(f"{self._what}: a compressed answer that does not inflate ({exc})") \
                                from None
                        n += len(part)
                        if n > self._cap:
                            raise self._too_large()
                        if part:
                            yield part
                        data = self._decoder.unconsumed_tail
                    continue
                n += len(chunk)
                if n > self._cap:
                    raise self._too_large()
                yield chunk
            conn = _h11_connection(self._inner)
            state = getattr(conn, "_h11_state", None)
            trailing = bytes(getattr(state, "trailing_data", (b"", False))[0]) if state is not None else b""
            if trailing.strip(b"\r\n"):
                await conn.aclose()  # never reused: the stray bytes would answer the next request
                raise HTTPOutOfStep(f"the server sent more than one answer to one request ({trailing[:24]!r}...)")

        async def aclose(self):
            await self._inner.aclose()

    async def on_response(response):
        path = response.request.url.path.rstrip("/")
        side = path.endswith(("/models", "/props"))
        cap = MAX_SIDE_BYTES if side else MAX_BODY_BYTES
        what = f"the answer to {response.request.method} {path.rsplit('/', 1)[-1] or '/'}"
        length = response.headers.get("content-length", "").strip()
        if length.isdigit() and int(length) > cap:
            raise AnswerRefused(f"{what} declares {int(length):,} bytes, more than the {cap:,} allowed; refused")
        enc = response.headers.get("content-encoding", "").strip().lower()
        decoder = None
        if enc in ("gzip", "x-gzip", "deflate"):
            decoder = zlib.decompressobj(wbits=47)  # gzip or zlib framing, inflated within the bound
            del response.headers["content-encoding"]
        elif enc not in ("", "identity"):
            raise AnswerRefused(f"{what} is compressed with {enc[:20]!r}, which normlab does not read (it asks for "
                                "uncompressed answers)")
        response.stream = _Bounded(response.stream, cap, decoder, what)

    kwargs.setdefault("headers", {})["Accept-Encoding"] = "identity"
    return openai.DefaultAsyncHttpxClient(trust_env=trust_env, follow_redirects=False,
                                          event_hooks={"response": [on_response]}, **kwargs)


def summarise(value, *, depth: int = 2, items: int = 24, text: int = 200):
    """A side answer (a ``/models`` entry, ``/props``) as a manifest keeps it: scalars, strings cut at
    ``text`` characters, at most ``items`` entries per object or list (a count of the rest), nested
    at most ``depth`` levels (deeper: the kind and size)."""
    if isinstance(value, str):
        return value if len(value) <= text else value[:text] + f"... ({len(value):,} characters)"
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, dict):
        if depth <= 0:
            return f"<object of {len(value):,} entries>"
        out = {}
        for i, (k, v) in enumerate(value.items()):
            if i == items:
                out["..."] = f"{len(value) - items:,} more entries"
                break
            out[summarise(str(k), text=64)] = summarise(v, depth=depth - 1, items=items, text=text)
        return out
    if isinstance(value, list):
        if depth <= 0:
            return f"<list of {len(value):,} items>"
        out = [summarise(v, depth=depth - 1, items=items, text=text) for v in value[:items]]
        if len(value) > items:
            out.append(f"... {len(value) - items:,} more items")
        return out
    return summarise(str(value), text=text)
