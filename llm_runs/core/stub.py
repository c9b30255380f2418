"""A real OpenAI-compatible HTTP stub server (127.0.0.1) with fault injection, for tests and benchmarks.

:class:`StubServer` answers ``/v1/chat/completions`` (text, logprobs, top_logprobs, usage),
``/v1/completions`` (raw prompts such as the raw-llama3 / raw-llama2 wraps) and ``/v1/models`` from a simple memory-following policy parsed from the naming-game prompt, honours
prefilled assistant messages and per-request seeds, and injects 429 (with ``Retry-After``), 5xx,
slow responses, malformed answers, invalid JSON and dropped connections on demand. Scripted
stand-ins of capable models (CRSEC's, SCENE's) register themselves here (:data:`SCRIPTED`); the
public face, which knows them, is :mod:`normlab.llm_runs.testing`.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Sequence

from normlab._validate import Check, validated

FAULTS = ("ok", "429", "500", "503", "slow", "drop", "malformed", "badjson", "nologprobs",
          "trickle", "501", "echo_auth", "nanlogprobs", "surrogate")
JUNK_TOKENS = ("5", "Player", " The", "1", "{")

_PARTNER = re.compile(
    r"Player 2(?:['\"]\s*:\s*['\"]?|\s*:\s*|\s+chose action\s+)([^'\"\s.;,}]+)"
)
_OWN = re.compile(r"Player 1(?:['\"]\s*:\s*['\"]?|\s*:\s*|\s+chose action\s+)([^'\"\s.;,}]+)")
_ANSWER_OPEN = re.compile(r"^\s*\{?\s*['\"](?:value|action)['\"]\s*:\s*['\"]?(.*)$", re.S)
_LIST = re.compile(r"values: \[([^\]]*)\]")
#: The name list of the alternative templates (narrative: "between the actions Q and M."; bullet:
#: "Actions available to both players: Q and M.").
_AND_LIST = re.compile(r"(?:between the actions|Actions available to both players:) (.+?)\.\s")


def _junk_mass(value, name):
    if not 0 <= value < 1:
        raise ValueError(f"junk_mass must be in [0, 1); got {value}")
    return float(value)


def _seconds(value, name):
    return float(value)


def _fault_list(value, name):
    value = tuple(value)
    for f in value:
        if f not in FAULTS:
            raise ValueError(f"unknown fault {f!r}; allowed: {FAULTS}")
    return value


@validated
@dataclass(frozen=True)
class Faults:
    """What goes wrong with a :class:`StubServer`'s answers (its ``faults=``; the same as its keywords).

    Parameters
    ----------
    faults : sequence of str
        Faults applied to the next chat requests, one per request, in order (:data:`FAULTS`;
        ``"ok"`` = no fault).
    junk_mass : float
        Probability that the first answer token is not a name (in [0, 1)).
    latency : float
        Seconds added to every chat response.
    retry_after : float
        ``Retry-After`` seconds sent with 429 responses.
    slow_seconds : float
        Delay of a ``"slow"`` response.
    """

    faults: tuple = ()
    junk_mass: float = 0.1
    latency: float = 0.0
    retry_after: float = 0.05
    slow_seconds: float = 2.0

    _parameter_constraints = {"junk_mass": Check(_junk_mass), "latency": Check(_seconds),
                              "retry_after": Check(_seconds), "slow_seconds": Check(_seconds),
                              "faults": Check(_fault_list)}


def pieces(name: str, size: int = 3) -> list[str]:
    """The stub's tokenisation of a name: chunks of ``size`` characters (``"Alice"`` ->
    ``["Ali", "ce"]``; single letters are one token)."""
    return [name[k:k + size] for k in range(0, len(name), size)] or [name]


def history(system: str, names: Sequence[str]) -> list[tuple[str, str]]:
    """``(own, partner)`` pairs of the history in a naming-game prompt (any built-in template)."""
    pool = set(names)
    own = [m for m in _OWN.findall(system) if m in pool]
    partner = [m for m in _PARTNER.findall(system) if m in pool]
    n = min(len(own), len(partner))
    return list(zip(own[:n], partner[:n]))


def memory_policy(system: str, names: Sequence[str], *, beta: float = 1.5, bias: dict | None = None) -> dict:
    """Default stub behaviour: ``p(n) ∝ bias(n) exp(beta * sum_k w_k [partner_k == n])``.

    ``w_k = 1 + k / H`` weighs recent interactions more (``k`` from 0, oldest first); the
    memory-less distribution is ``bias`` (uniform by default). Agents thus copy their partners,
    and a population converges within tens of rounds, like the LLM populations of Flint Ashery et al. (2025).
    """
    hist = history(system, names)
    H = max(1, len(hist))
    score = {n: math.log((bias or {}).get(n, 1.0)) for n in names}
    for k, (_, partner) in enumerate(hist):
        score[partner] += beta * (1.0 + k / H)
    m = max(score.values())
    w = {n: math.exp(v - m) for n, v in score.items()}
    z = sum(w.values())
    return {n: v / z for n, v in w.items()}


class StubServer:
    """An OpenAI-compatible chat-completions server on ``127.0.0.1`` for tests and benchmarks.

    Generation samples the first answer token like llama.cpp's sampler (``top_k``, then
    ``temperature``) from the simulated next-token distribution, seeded by the request's
    ``seed`` and content, so sample-mode runs are reproducible and statistically equivalent to
    exact-mode runs on the same stub; ``top_logprobs`` report the raw distribution.

    Parameters
    ----------
    names : sequence of str, optional
        The name pool the simulated model chooses from; default: parsed from the ``values: [...]``
        list of the main template (the alternative templates need ``names``).
    policy : callable, optional
        ``policy(system_text, names) -> {name: probability}``; default :func:`memory_policy`.
    junk_mass : float
        Probability that the first answer token is not a name (``covered_mass = 1 - junk_mass``;
        in sample mode the answer is then unparseable).
    latency : float
        Seconds added to every chat response (simulated model time).
    faults : iterable of str or Faults
        Faults applied to the next chat requests, one per request, in order (see
        :data:`FAULTS`; ``"ok"`` = no fault). More can be queued with :meth:`inject`. A
        :class:`Faults` object gives these and ``junk_mass``, ``latency``, ``retry_after``,
        ``slow_seconds`` at once (the keywords are then left at their defaults).
    retry_after : float
        ``Retry-After`` seconds sent with 429 responses.
    slow_seconds : float
        Delay of a ``"slow"`` response (set it above the client's timeout to force a timeout).
    echo_prefill : bool
        Return the prefilled assistant text followed by the continuation, as llama.cpp does
        (``False``: the continuation only, as vLLM's ``continue_final_message``).
    piece_size : int
        Characters per name token (see :func:`pieces`).
    model : str
        Name listed by ``/v1/models``.
    responder : callable, optional
        ``responder(body) -> str or None``: when it returns a string, that is the answer text
        (no logprobs) -- e.g. an oracle answering meta-prompting questions. It gets the request
        body as sent (``messages`` for chat, ``prompt`` for ``/v1/completions``).
    scripted : {"crsec", "scene"}, optional
        Scripted mode: answer the prompts of a task that needs a capable model with a scripted
        stand-in of one (:mod:`normlab.llm_runs.crsec.scripted`, :mod:`normlab.llm_runs.scene.scripted`:
        rules and seeded choices, not a language model; any task registered in :data:`SCRIPTED`),
        reporting the tokens of prompts and answers (4 characters per token) in ``usage``. Replaces
        ``responder``.
    port : int
        Port on ``127.0.0.1`` (default 0: a free one).
    logprobs : bool
        ``False``: never return logprobs, whatever the request asks (a hosted API without them; the
        ``"nologprobs"`` fault does this for one request).

    Examples
    --------
    >>> with StubServer(["Q", "M"], faults=["429", "drop"]) as stub:  # doctest: +SKIP
    ...     run_game(4, 3, "Q,M", max_interactions=20, endpoint=EndpointConfig(base_url=stub.base_url))
    """

    def __init__(self, names: Sequence[str] | None = None, *, policy: Callable | None = None,
                 junk_mass: float = 0.1, latency: float = 0.0, faults=(), retry_after: float = 0.05,
                 slow_seconds: float = 2.0, echo_prefill: bool = True, piece_size: int = 3,
                 model: str = "stub-model", responder: Callable | None = None, scripted: str | None = None,
                 port: int = 0, logprobs: bool = True):
        self.names = list(names) if names is not None else None
        self.port_requested = int(port)
        self.logprobs = bool(logprobs)
        self.scripted = scripted
        if scripted is not None:
            responder = scripted_responder(scripted)
        self.policy = policy or memory_policy
        if isinstance(faults, Faults):
            if (junk_mass, latency, retry_after, slow_seconds) != (0.1, 0.0, 0.05, 2.0):
                raise TypeError("a Faults object holds junk_mass, latency, retry_after and slow_seconds; "
                                "do not give them beside it")
        else:
            faults = Faults(faults, junk_mass, latency, retry_after, slow_seconds)
        self.junk_mass = faults.junk_mass
        self.latency = faults.latency
        self.retry_after = faults.retry_after
        self.slow_seconds = faults.slow_seconds
        self.echo_prefill = bool(echo_prefill)
        self.piece_size = int(piece_size)
        self.model = model
        self.responder = responder
        self._faults = deque()
        self._stopping = False
        self._scheduled: dict = {}
        self.inject(*faults.faults)
        self._lock = threading.Lock()
        self.n_chat = 0
        self.n_faults = 0
        self.billed_tokens = 0  # prompt + completion tokens of every answer generated (what a provider bills)
        self.requests: deque = deque(maxlen=1000)
        self.auth_headers: set = set()
        self._httpd = None
        self._thread = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "StubServer":
        if self._httpd is not None:
            return self
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                # answer small requests at once (no Nagle / delayed-ACK stalls on keep-alive)
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, *args):  # silence
                pass

            def do_GET(self):
                if self.path.rstrip("/") in ("/v1/models", "/models"):
                    self._json(200, {"object": "list", "data": [{"id": stub.model, "object": "model", "owned_by": "normlab"}]})
                elif self.path.rstrip("/") in ("/health", "/v1/health"):
                    self._json(200, {"status": "ok"})
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                route = self.path.rstrip("/")
                if route not in ("/v1/chat/completions", "/chat/completions", "/v1/completions", "/completions"):
                    self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                text_route = route.endswith("/completions") and not route.endswith("chat/completions")
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    self._json(400, {"error": {"message": "invalid JSON body", "type": "invalid_request_error"}})
                    return
                auth = self.headers.get("Authorization")
                with stub._lock:
                    stub.n_chat += 1
                    stub.requests.append(body)
                    if auth:
                        stub.auth_headers.add(auth)
                    fault = stub._scheduled.pop(stub.n_chat, None)
                    if fault is None:
                        fault = stub._faults.popleft() if stub._faults else "ok"
                    if fault != "ok":
                        stub.n_faults += 1
                if stub.latency:
                    time.sleep(stub.latency)
                if fault == "429":
                    self._json(429, {"error": {"message": "rate limited (stub)", "type": "rate_limit"}},
                               headers={"Retry-After": f"{stub.retry_after:g}"})
                    return
                if fault in ("500", "503"):
                    self._json(int(fault), {"error": {"message": "server error (stub)", "type": "server_error"}})
                    return
                if fault == "drop":
                    self.close_connection = True
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                    return
                if fault == "slow":
                    time.sleep(stub.slow_seconds)
                if fault == "501":
                    self._json(501, {"error": {"message": "not implemented (stub)", "type": "not_implemented"}})
                    return
                if fault == "echo_auth":  # a careless server quoting the request's credentials
                    self._json(400, {"error": {"message": f"bad request; you sent Authorization: {auth}",
                                               "type": "invalid_request_error"}})
                    return
                if fault == "trickle":  # headers at once, then one body byte every 0.5 s, for ever
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "1000000")
                    self.end_headers()
                    try:
                        while not stub._stopping:
                            self.wfile.write(b" ")
                            self.wfile.flush()
                            time.sleep(0.5)
                    except OSError:
                        pass
                    return
                if fault == "badjson":
                    data = b'{"id": "stub", "choices": [ {not json'
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                try:
                    fn = stub.complete_text if text_route else stub.complete
                    resp = fn(body, malformed=fault == "malformed", logprobs=fault != "nologprobs" and stub.logprobs)
                except Exception as exc:  # a bug in a user policy must not hang the client
                    self._json(500, {"error": {"message": f"stub error: {exc}", "type": "server_error"}})
                    return
                usage = resp.get("usage") or {}
                with stub._lock:  # billed once generated, whether or not the client lives to read it
                    stub.billed_tokens += int(usage.get("prompt_tokens") or 0) + int(usage.get("completion_tokens") or 0)
                if fault == "nanlogprobs":
                    self._raw(200, json.dumps(resp).replace('"logprob": ', '"logprob": NaN, "_was": ').encode())
                    return
                if fault == "surrogate":
                    ch = resp["choices"][0]
                    if "message" in ch:
                        ch["message"]["content"] = "\ud83d" + (ch["message"].get("content") or "")
                    else:
                        ch["text"] = "\ud83d" + (ch.get("text") or "")
                    self._raw(200, json.dumps(resp).encode())  # ensure_ascii: sent as the escape \\ud83d
                    return
                self._json(200, resp)

            def _raw(self, code, data: bytes):
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _json(self, code, obj, headers=None):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self._headers_buffer.append(b"\r\n")
                self._headers_buffer.append(data)  # headers and body in one write
                self.wfile.write(b"".join(self._headers_buffer))
                self._headers_buffer = []

        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port_requested), Handler)
        self._httpd.daemon_threads = True
        self._httpd.handle_error = lambda request, client_address: None  # a killed client is no error
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="normlab-stub", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stopping = True
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "StubServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def inject(self, *faults: str) -> None:
        """Queue faults for the next chat requests (one per request)."""
        for f in faults:
            if f not in FAULTS:
                raise ValueError(f"unknown fault {f!r}; allowed: {FAULTS}")
            self._faults.append(f)

    def inject_at(self, request: int, fault: str) -> None:
        """Apply ``fault`` to the ``request``-th chat request (counted from 1 since start)."""
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; allowed: {FAULTS}")
        with self._lock:
            self._scheduled[int(request)] = fault

    def _usage(self, body: dict, text: str) -> dict:
        """``usage`` of a responder's answer: 1 + 1 tokens, or (scripted mode) 4 characters per token."""
        if self.scripted is None:
            return {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        chars = sum(len(str(m.get("content") or "")) for m in body.get("messages") or []) + len(str(body.get("prompt") or ""))
        pt, ct = chars // 4 + 1, len(text) // 4 + 1
        return {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}

    # ------------------------------------------------------------------ the simulated model
    def _pool(self, system: str) -> list[str]:
        if self.names is not None:
            return self.names
        m = _LIST.search(system)
        if m:
            return [x.strip().strip("'\"") for x in m.group(1).split(",")]
        m = _AND_LIST.search(system)
        if not m:
            raise ValueError("cannot find the name list in the prompt; give StubServer(names=...)")
        return [x.strip() for x in re.split(r",\s*|\s+and\s+", m.group(1)) if x.strip()]

    def next_token_probs(self, system: str, partial: str | None) -> dict:
        """Next-token distribution after the answer opening continued by ``partial``."""
        pool = self._pool(system)
        p = self.policy(system, pool)
        if partial is None or partial == "":
            out: dict = {}
            for n in pool:
                tok = pieces(n, self.piece_size)[0]
                out[tok] = out.get(tok, 0.0) + (1 - self.junk_mass) * p[n]
            for tok in JUNK_TOKENS:
                out[tok] = out.get(tok, 0.0) + self.junk_mass / len(JUNK_TOKENS)
            return out
        cons = {}
        for n in pool:
            ps, acc = pieces(n, self.piece_size), ""
            for k, piece in enumerate(ps):
                if acc == partial:
                    cons.setdefault(piece, 0.0)
                    cons[piece] += p[n]
                    break
                acc += piece
            else:
                if acc == partial:
                    cons["'"] = cons.get("'", 0.0) + p[n]
        z = sum(cons.values())
        if z == 0:
            return {tok: 1.0 / len(JUNK_TOKENS) for tok in JUNK_TOKENS}
        return {k: v / z for k, v in cons.items()}

    def complete_text(self, body: dict, *, malformed: bool = False, logprobs: bool = True) -> dict:
        """The ``/v1/completions`` response to a raw prompt (e.g. a raw-llama3 text).

        The whole prompt plays the system text; an answer opening after the last assistant
        marker (``<|end_header_id|>`` of the assistant header, or ``[/INST]``) is continued like a
        prefilled chat message. Logprobs come in the legacy completions layout (``tokens``,
        ``token_logprobs``, ``top_logprobs`` as ``[{token: logprob}]``); the prompt is not echoed.
        """
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = prompt[0] if prompt else ""
        if not isinstance(prompt, str):
            raise ValueError("completions body needs a 'prompt' string")
        if self.responder is not None:
            text = self.responder(body)
            if text is not None:
                return {"id": "cmpl-stub", "object": "text_completion", "created": int(time.time()),
                        "model": self.model, "usage": self._usage(body, text),
                        "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}]}
        tail = prompt
        for marker in ("<|start_header_id|>assistant<|end_header_id|>", "[/INST]"):
            if marker in tail:
                tail = tail.rsplit(marker, 1)[1]
        head = prompt[: len(prompt) - len(tail)]
        msgs = [{"role": "system", "content": head or prompt}]
        if tail.strip():
            msgs.append({"role": "assistant", "content": tail.lstrip()})
        chat_body = {k: v for k, v in body.items() if k not in ("prompt", "logprobs")}
        chat_body["messages"] = msgs
        n_top = body.get("logprobs")
        if n_top:
            chat_body["logprobs"] = True
            chat_body["top_logprobs"] = int(n_top)
        was, self.echo_prefill = self.echo_prefill, False
        try:
            resp = self.complete(chat_body, malformed=malformed, logprobs=logprobs, _text=True)
        finally:
            self.echo_prefill = was
        return resp

    def complete(self, body: dict, *, malformed: bool = False, logprobs: bool = True, _text: bool = False) -> dict:
        """The chat-completion response to a request body."""
        msgs = body.get("messages") or []
        if self.responder is not None:
            text = None if _text else self.responder(body)  # raw prompts: asked in complete_text
            if text is not None:
                return {"id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()),
                        "model": self.model, "usage": self._usage(body, text),
                        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                     "finish_reason": "stop", "logprobs": None}]}
        system = "\n".join(m.get("content", "") for m in msgs if m.get("role") == "system")
        user_prompt = "\n".join(m.get("content", "") for m in msgs if m.get("role") == "user")
        prefill = msgs[-1]["content"] if msgs and msgs[-1].get("role") == "assistant" else None
        partial = None
        if prefill is not None:
            m = _ANSWER_OPEN.match(prefill)
            partial = m.group(1) if m else None
        max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        seed = body.get("seed")
        h = hashlib.sha256(json.dumps([seed, msgs], sort_keys=True).encode()).digest()
        rnd = random.Random(int.from_bytes(h[:8], "little"))
        dist = self.next_token_probs(system, partial)
        if malformed:
            dist = {tok: 1.0 / len(JUNK_TOKENS) for tok in JUNK_TOKENS}
        # generate: the first token drawn like a sampler (top-k, temperature), then the answer
        toks = sorted(dist.items(), key=lambda kv: -kv[1])
        temp = float(body.get("temperature", 1.0) if body.get("temperature") is not None else 1.0)
        k = body.get("top_k")
        cand = toks[: int(k)] if k else toks
        if temp <= 0:
            first = cand[0][0]
        else:
            w = [pr ** (1.0 / temp) for _, pr in cand]
            u, acc, first = rnd.random() * sum(w), 0.0, cand[-1][0]
            for (tok, _), wk in zip(cand, w):
                acc += wk
                if u < acc:
                    first = tok
                    break
        pool = self._pool(system)
        name = None
        cur = (partial or "") + first
        for n in pool:
            if n == cur or n.startswith(cur):
                name = n
                break
        if malformed or first in JUNK_TOKENS or name is None:
            gen = ["Sure", ",", " let", " me", " think", " about", " it", "."]
        else:
            rest = name[len(cur):]
            gen = [first] + (pieces(rest, self.piece_size) if rest else []) + \
                ["';", " '", "reason", "':", " '", "history", "'}"]
        if prefill is None:
            gen = ["{'", "value", "':", " '"] + gen if not (malformed or name is None or first in JUNK_TOKENS) else gen
        gen = gen[:max_tokens]
        text = "".join(gen)
        if prefill is not None and self.echo_prefill:
            text = prefill + text
        choice = {"index": 0, "message": {"role": "assistant", "content": text},
                  "finish_reason": "length" if len(gen) >= max_tokens else "stop"}
        if body.get("logprobs") and logprobs:
            k = int(body.get("top_logprobs") or 0)
            content = []
            for pos, tok in enumerate(gen):
                lp = math.log(dist.get(tok, 1e-9)) if pos == 0 else -0.01
                entry = {"token": tok, "logprob": lp, "bytes": list(tok.encode())}
                if pos == 0 and k:
                    entry["top_logprobs"] = [{"token": t, "logprob": math.log(pr), "bytes": list(t.encode())}
                                             for t, pr in toks[:k]]
                else:
                    entry["top_logprobs"] = []
                content.append(entry)
            choice["logprobs"] = {"content": content}
        else:
            choice["logprobs"] = None
        ptok = (len(system) + len(user_prompt) + len(prefill or "")) // 4
        if _text:
            out = {"index": 0, "text": text, "finish_reason": choice["finish_reason"], "logprobs": None}
            if choice["logprobs"] is not None:
                content = choice["logprobs"]["content"]
                out["logprobs"] = {
                    "tokens": [c["token"] for c in content],
                    "token_logprobs": [c["logprob"] for c in content],
                    "top_logprobs": [{t["token"]: t["logprob"] for t in c["top_logprobs"]} or None for c in content],
                }
            return {"id": "cmpl-stub-" + h[:6].hex(), "object": "text_completion", "created": int(time.time()),
                    "model": self.model, "choices": [out],
                    "usage": {"prompt_tokens": ptok, "completion_tokens": len(gen), "total_tokens": ptok + len(gen)}}
        return {
            "id": "chatcmpl-stub-" + h[:6].hex(), "object": "chat.completion", "created": int(time.time()),
            "model": self.model, "choices": [choice],
            "usage": {"prompt_tokens": ptok, "completion_tokens": len(gen), "total_tokens": ptok + len(gen)},
        }


#: The scripted stand-ins of capable models, by task (``StubServer(scripted=...)``, ``--scripted``): each
#: stand-in's module registers its responder factory here when imported (:func:`register_scripted`).
SCRIPTED: dict[str, Callable] = {}
#: Modules that register stand-ins, imported on the first scripted use (:func:`stand_ins`); filled by
#: :mod:`normlab.llm_runs.testing`.
_STAND_IN_MODULES: list[str] = []
_LOADED: set = set()


def register_scripted(task: str, factory: Callable) -> None:
    """Make ``factory()`` (a ``responder(body) -> str``) the scripted stand-in for ``task``."""
    SCRIPTED[task] = factory


def stand_ins(modules=()) -> tuple:
    """The tasks that have a scripted stand-in, once the modules that register them are imported
    (``modules``: more of them, by dotted name)."""
    import importlib

    for name in (*modules, *_STAND_IN_MODULES):
        if name not in _LOADED:
            importlib.import_module(name)
            _LOADED.add(name)
    return tuple(sorted(SCRIPTED))


def scripted_responder(task: str) -> Callable:
    """The scripted stand-in of a capable model for ``task`` (one of :func:`stand_ins`)."""
    if task not in SCRIPTED:
        known = stand_ins()
        if task not in SCRIPTED:
            raise ValueError(f"scripted must be one of {known}; got {task!r}")
    return SCRIPTED[task]()


class StubProcess:
    """The stub server in its own process (it does not share the GIL with the runner under test,
    and survives the runner being killed)."""

    def __init__(self, *args: str):
        self.args = args
        self.proc = None
        self.base_url = None

    def __enter__(self) -> "StubProcess":
        import subprocess
        import sys

        self.proc = subprocess.Popen([sys.executable, "-m", "normlab.llm_runs.testing", *self.args],
                                     stdout=subprocess.PIPE, text=True)
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            self.proc.kill()
            raise RuntimeError("the stub server did not start")
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


class CountingProxy:
    """A real HTTP proxy on ``127.0.0.1`` in front of an OpenAI-compatible server, counting what
    the server received: the fault matrix's witness that a budget held whatever the client did
    (killed mid-request included).

    Every request is passed on as it came (method, path, body, ``Authorization``) over a
    keep-alive connection per proxy thread, and the answer passed back. Counted when passed on:
    :attr:`requests` (POSTs: completions); when answered: :attr:`tokens` (prompt + completion
    tokens of the answers' ``usage``, what the server bills, whether or not the client lived to
    read the answer). ``usage`` alters what the client gets, never what is counted: ``"omit"``
    drops the answers' ``usage`` (a server that reports none), ``"negative"`` negates it.

    Parameters
    ----------
    upstream : str
        The server's base URL (``http://127.0.0.1:PORT/v1``).
    usage : {None, "omit", "negative"}, optional
    port : int, optional
        Port on ``127.0.0.1`` (default 0: a free one).
    """

    def __init__(self, upstream: str, *, usage: str | None = None, port: int = 0):
        from urllib.parse import urlsplit

        if usage not in (None, "omit", "negative"):
            raise ValueError(f"usage must be None, 'omit' or 'negative'; got {usage!r}")
        u = urlsplit(upstream)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"upstream must be a plain http:// URL; got {upstream!r}")
        self.upstream = (u.hostname, u.port or 80)
        self.prefix = u.path.rstrip("/")
        self.usage = usage
        self.port_requested = int(port)
        self.requests = 0
        self.tokens = 0
        self._lock = threading.Lock()
        self._httpd = None

    def start(self) -> "CountingProxy":
        import http.client

        if self._httpd is not None:
            return self
        proxy = self
        local = threading.local()

        def forward(method, path, body, headers):
            for attempt in (0, 1):  # a kept-alive connection the server closed: once more on a fresh one
                conn = getattr(local, "conn", None)
                if conn is None:
                    conn = local.conn = http.client.HTTPConnection(*proxy.upstream, timeout=600)
                try:
                    conn.request(method, path, body=body, headers=headers)
                    r = conn.getresponse()
                    return r.status, r.getheaders(), r.read()
                except (http.client.HTTPException, OSError):
                    conn.close()
                    local.conn = None
                    if attempt:
                        raise

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def finish(self):  # the client's connection is over: so is this thread's to the server
                try:
                    super().finish()
                finally:
                    conn, local.conn = getattr(local, "conn", None), None
                    if conn is not None:
                        conn.close()

            def _pass(self, method):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() in ("content-type", "authorization", "accept")}
                if method == "POST":
                    with proxy._lock:
                        proxy.requests += 1
                try:
                    status, rheaders, data = forward(method, self.path, body, headers)
                except (OSError, Exception):  # the server is gone: a 502, as a real proxy answers
                    status, rheaders, data = 502, [("Content-Type", "application/json")], b'{"error": "bad gateway"}'
                data = proxy._count(method, data)
                self.send_response(status)
                for k, v in rheaders:
                    if k.lower() not in ("content-length", "transfer-encoding", "connection", "keep-alive", "date",
                                         "server"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except OSError:  # the client was killed: the answer was billed all the same
                    pass

            def do_POST(self):
                self._pass("POST")

            def do_GET(self):
                self._pass("GET")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port_requested), Handler)
        self._httpd.daemon_threads = True
        self._httpd.handle_error = lambda request, client_address: None
        threading.Thread(target=self._httpd.serve_forever, name="normlab-proxy", daemon=True).start()
        return self

    def _count(self, method: str, data: bytes) -> bytes:
        if method != "POST":
            return data
        try:
            obj = json.loads(data)
        except ValueError:
            return data
        usage = obj.get("usage") if isinstance(obj, dict) else None
        if not isinstance(usage, dict):
            return data
        billed = sum(int(v) for k in ("prompt_tokens", "completion_tokens")
                     if isinstance(v := usage.get(k), (int, float)) and math.isfinite(v))
        with self._lock:
            self.tokens += billed
        if self.usage is None:
            return data
        if self.usage == "omit":
            obj.pop("usage")
        else:
            obj["usage"] = {k: -abs(v) - 100_000 if isinstance(v, (int, float)) else v for k, v in usage.items()}
        return json.dumps(obj).encode()

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "CountingProxy":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.prefix}"
