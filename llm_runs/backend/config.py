"""Where and how to call an OpenAI-compatible endpoint (:class:`EndpointConfig`), the errors an
endpoint raises, and what may be shown of its address and of a command line (:func:`redact_url`,
:func:`redact_text`, :func:`redact_command`: the one redaction of secrets)."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field

from .models import embedded_model

#: Environment variables read by :meth:`EndpointConfig.from_env` (the key is read, never stored).
ENV_BASE_URL = "NORMLAB_LLM_BASE_URL"
ENV_MODEL = "NORMLAB_LLM_MODEL"
ENV_API_KEY = "NORMLAB_LLM_API_KEY"

EMBEDDED_MODEL = "SmolLM2-135M-Instruct"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class EndpointError(RuntimeError):
    """The LLM endpoint is unreachable, refuses requests, or keeps failing after retries."""


class ReaskLimitError(EndpointError):
    """``max_reasks="unbounded"`` reached :data:`~normlab.llm_runs.runner.REASK_SAFETY_LIMIT` requests
    for one decision."""


class BudgetExhausted(RuntimeError):
    """A spending cap (:attr:`EndpointConfig.budget_tokens` / ``budget_usd``) was reached: the
    request was not sent. Completed work is kept; a larger cap continues the run."""


class NotOpenAICompatible(EndpointError):
    """The server at ``base_url`` answers, but not like an OpenAI-compatible API (``GET /models``
    gave an HTML page, a 404 page or JSON of another shape): nothing was sent to it."""


#: Request-body fields that belong to the run's protocol (recorded in its settings):
#: ``extra_body`` may not override them.
PROTOCOL_FIELDS = frozenset({"model", "messages", "prompt", "max_tokens", "temperature", "top_k", "top_p", "min_p",
                             "seed", "logprobs", "top_logprobs", "n", "stop", "stream"})


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
    embedded_model : str
        Embedded server: which model it serves (``--embedded-model``; :data:`~normlab.llm_runs.backend.models.EMBEDDED_MODELS`:
        ``"smollm2"``, the default, ``"qwen2.5-coder-1.5b"``, ``"gemma3-270m"``). Only with ``base_url=None``.
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
    budget_requests : int, optional
        A cap on requests sent (``--budget 300req``), kept the same way. ``None``: no cap.
    transport : {"auto", "lean", "openai"}
        How requests travel (``--transport``): ``"lean"``, a keep-alive HTTP/1.1 client over
        asyncio streams for plain ``http://`` servers (about a tenth of the CPU per request of
        the ``openai`` client); ``"openai"``, the ``openai`` client; ``"auto"`` (default): lean
        for a plain ``http://`` URL without credentials, query or proxy, else ``openai``.
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
    embedded_model: str = "smollm2"
    embedded_threads: int | None = None
    embedded_parallel: int = 1
    embedded_ctx: int | None = None
    embedded_cache_mib: int | None = None
    embedded_slot_similarity: float = 0.0
    budget_tokens: float | None = None
    budget_usd: float | None = None
    budget_requests: int | None = None
    transport: str = "auto"

    def __post_init__(self):
        if self.transport not in ("auto", "lean", "openai"):
            raise ValueError(f"transport must be 'auto', 'lean' or 'openai'; got {self.transport!r}")
        if self.base_url is not None and not str(self.base_url).startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://; got {redact_url(str(self.base_url))!r}")
        if self.base_url is not None and not str(self.base_url).isascii():
            raise ValueError(
                f"base_url {redact_url(str(self.base_url))} holds a character outside ASCII (e.g. a fullwidth '＠' or "
                "'：'): an address is written in ASCII (a non-ASCII host in its punycode form, xn--...)")
        if self.base_url is not None and any(c in str(self.base_url) for c in "?#"):
            raise ValueError(
                f"base_url {redact_url(str(self.base_url))} carries a query or fragment: the OpenAI client appends its "
                "routes (/models, /chat/completions) after it, so no request would reach the server; give the key in "
                f"an environment variable (--api-key-env, default {ENV_API_KEY}) and the base URL without '?'")
        if self.api_key is not None and (not isinstance(self.api_key, str) or not self.api_key.strip()):
            raise ValueError("api_key must be a non-empty string or None (the key itself is never shown)")
        if self.api_key is not None:
            check_api_key(self.api_key, "api_key (--api-key)")
        for name in ("timeout", "backoff", "backoff_max"):
            if not (isinstance(getattr(self, name), (int, float)) and getattr(self, name) > 0):
                raise ValueError(f"{name} must be a positive number; got {getattr(self, name)!r}")
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0; got {self.max_retries!r}")
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ValueError(f"concurrency must be an int >= 1; got {self.concurrency!r}")
        embedded_model(self.embedded_model)  # one line naming the models when unknown
        if self.base_url is not None and self.embedded_model != "smollm2":
            raise ValueError("--embedded-model and --base-url exclude each other: the embedded model is served here, "
                             "a base URL names another server")
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
        v = self.budget_requests
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"budget_requests must be an int >= 1 or None; got {v!r}")
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

    @property
    def model_label(self) -> str:
        """The model in words, for plans and messages: ``"embedded SmolLM2-135M-Instruct"`` (the
        embedded model's reported name), else :attr:`model` or ``"the endpoint's first model"``."""
        if self.embedded:
            return "embedded " + embedded_model(self.embedded_model).alias
        return self.model or "the endpoint's first model"

    def resolve_api_key(self) -> str:
        """The key sent as ``Authorization: Bearer KEY``: :attr:`api_key`, else the variable
        :attr:`api_key_env`, else ``OPENAI_API_KEY``, else a placeholder local servers accept. A key
        holding a control character (a line break) is refused in one line naming where it came
        from (:func:`check_api_key`)."""
        if self.api_key:
            return check_api_key(self.api_key, "api_key (--api-key)")
        for var in (self.api_key_env, "OPENAI_API_KEY"):
            key = os.environ.get(var)
            if key:
                return check_api_key(key, f"the API key in ${var}")
        return "not-needed"



#: Query parameters and ``key=value`` / JSON fields whose value is a credential (compared without
#: case, ``-`` and ``_``): their values are replaced by ``***`` wherever an address or a command
#: line is shown or written. Beside these whole names, any name holding one of the words of
#: :data:`SECRET_WORDS` (``api_token``, ``access_key``, ``clientSecret``, ``x-auth-header``) is one.
SECRET_FIELDS = ("apikey", "key", "token", "accesstoken", "refreshtoken", "idtoken", "authtoken", "auth",
                 "authorization", "sig", "signature", "password", "passwd", "pwd", "secret", "clientsecret",
                 "credential", "credentials", "sessiontoken", "xapikey", "code")
#: Words that make a field or flag name a credential's wherever they stand in it (the name split at
#: ``-``, ``_``, ``.`` and lower-to-upper case changes: ``access_key`` -> ``access``, ``key``).
SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "passphrase", "pwd", "auth",
                          "authorization", "credential", "credentials", "signature", "sig", "bearer", "cookie",
                          "privatekey", "accesskey", "secretkey", "sessiontoken"})
#: Command-line flags whose value is a credential (``--api-key KEY``, ``--token=T``; compared without
#: case, ``-`` and ``_``). ``--api-key-env NAME`` names a variable and is kept.
SECRET_FLAGS = ("apikey", "key", "token", "accesstoken", "authtoken", "auth", "password", "passwd", "secret",
                "clientsecret", "credential", "credentials", "bearer", "apitoken", "accesskey", "secretkey",
                "privatekey", "passphrase", "sessiontoken", "refreshtoken", "idtoken")
#: Credentials recognised by their form alone, wherever they stand (a comment, a description, a
#: message): the keys and tokens of the common providers and a bearer token.
SECRET_TOKEN = re.compile(
    r"(\bsk-[A-Za-z0-9_\-]{12,}|\bhf_[A-Za-z0-9]{16,}|\bgh[pousr]_[A-Za-z0-9]{16,}|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bAIza[0-9A-Za-z_\-]{20,}|\bxox[abprs]-[A-Za-z0-9-]{10,}|\bAKIA[0-9A-Z]{16}"
    r"|\bBearer\s+[A-Za-z0-9._~+/=\-]{8,})")
_MASK = "***"
_FIELD = r"[A-Za-z][A-Za-z0-9_.-]*"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_AUTHORITY_END = re.compile(r"[/?#\r\n]")
_QUERY = re.compile(r"([?&;])(" + _FIELD + r")=([^&;#\s'\"]*)")
_JSON_FIELD = re.compile(r"(['\"])(" + _FIELD + r")\1(\s*:\s*)(?:(['\"])((?:\\.|(?!\4).)*)\4|(-?[0-9][0-9.eE+-]*))")
_BEARER = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+", re.I)
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _secret(name: str, table, words: bool = True) -> bool:
    """A field or flag name that holds a credential: a whole name of ``table`` (compared without
    case, ``-``, ``_`` and ``.``) or, with ``words``, a name holding a word of :data:`SECRET_WORDS`."""
    flat = name.lower().replace("-", "").replace("_", "").replace(".", "")
    if flat in table:
        return True
    if not words or flat.endswith("env"):  # --api-key-env, api_key_env: the NAME of a variable
        return False
    words = [w.lower() for w in _WORDS.findall(name)]
    pairs = {a + b for a, b in zip(words, words[1:])}
    return any(w in SECRET_WORDS for w in words) or bool(pairs & SECRET_WORDS)


def _fold(text: str) -> str:
    """Compatibility forms folded before anything is parsed (NFKC: a fullwidth ``＠`` or ``：`` is
    ``@`` or ``:`` to a URL parser, so it is to the redaction too)."""
    if text.isascii():
        return text
    import unicodedata

    return unicodedata.normalize("NFKC", text)


def _mask_userinfo(text: str) -> str:
    """Every address's userinfo masked, by structure: after ``scheme://``, the authority runs to the
    first ``/``, ``?``, ``#`` or line end; everything before its LAST ``@`` is userinfo (a password
    may hold ``'``, spaces, ``:`` and ``@``), replaced by ``***``."""
    out, pos = [], 0
    for m in _SCHEME.finditer(text):
        if m.start() < pos:
            continue
        start = m.end()
        end_m = _AUTHORITY_END.search(text, start)
        end = end_m.start() if end_m else len(text)
        at = text.rfind("@", start, end)
        if at < 0:
            continue
        out.append(text[pos:start])
        out.append(_MASK)
        pos = at  # the "@host..." part stays
    out.append(text[pos:])
    return "".join(out)


def redact_url(url: str) -> str:
    """Credentials inside an endpoint's address hidden, for messages, reports and manifests (the
    one redaction of a URL): ``https://user:secret@host/v1`` -> ``https://***@host/v1``,
    ``...?api_key=K&sig=S`` -> ``...?api_key=***&sig=***`` (every name of :data:`SECRET_FIELDS`).

    By structure, not by pattern: fullwidth and other compatibility forms are folded first (NFKC:
    ``＠`` is ``@``), then each address's userinfo -- everything before the last ``@`` of its
    authority, whatever it holds (``'``, spaces, several ``@``) -- is masked.

    Works on any text that holds addresses (an error message, a command line), so every writer
    passes what it shows through here or through :func:`redact_command`.
    """
    text = _mask_userinfo(_fold(str(url)))
    return _QUERY.sub(lambda m: f"{m[1]}{m[2]}={_MASK}" if _secret(m[2], SECRET_FIELDS) and m[3] else m[0], text)


def _json_field(m) -> str:
    if not _secret(m[2], SECRET_FIELDS):
        return m[0]
    if m[4] is not None:
        return f"{m[1]}{m[2]}{m[1]}{m[3]}{m[4]}{_MASK}{m[4]}"
    return f"{m[1]}{m[2]}{m[1]}{m[3]}\"{_MASK}\""


def redact_text(text: str) -> str:
    """:func:`redact_url` plus the credentials a message can quote outside an address: JSON fields
    whose name is a credential's (``"api_key": "..."``, ``"access_key": 123``, e.g. inside
    ``--extra-body``), ``Authorization: Bearer ...`` values, and the keys and tokens recognised by
    their form (:data:`SECRET_TOKEN`: ``sk-...``, ``ghp_...``, ``hf_...``)."""
    text = redact_url(text)
    text = _JSON_FIELD.sub(_json_field, text)
    text = _BEARER.sub(lambda m: f"{m[1]} {_MASK}", text)
    return SECRET_TOKEN.sub(_MASK, text)


def key_masker(key: str | None):
    """A function masking ``key`` in a text wherever it appears, whole or in part and in any case
    (a server may echo it back lower-cased, or with characters masked: ``sk-abc...xyz*``): every run
    of key-like characters sharing 8 characters in a row with the key (the whole key when shorter)
    becomes ``***``. ``None`` for no key (or the placeholder a local server gets)."""
    if not key or key == "not-needed" or len(key) < 4:
        return None
    low = key.lower()
    width = min(8, len(low))
    grams = {low[i:i + width] for i in range(len(low) - width + 1)}
    runs = re.compile(r"[A-Za-z0-9_\-.~+/=*%:]{" + str(width) + ",}")

    def mask(text: str) -> str:
        if not text:
            return text

        def one(m):
            r = m[0].lower()
            return _MASK if any(r[i:i + width] in grams for i in range(len(r) - width + 1)) else m[0]
        return runs.sub(one, text)
    return mask


def check_api_key(key: str, where: str = "the API key") -> str:
    """``key`` when it can travel in an HTTP header: a control character (CR, LF, NUL, tab: e.g.
    the newline a file ends with) is refused in one line that does not show the key."""
    bad = next((c for c in key if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        label = {"\r": "a carriage return (CR)", "\n": "a line feed (LF)", "\t": "a tab", "\0": "a NUL"}.get(
            bad, f"the control character U+{ord(bad):04X}")
        raise ValueError(f"{where} holds {label}: an HTTP header cannot carry it (a key read from a file often ends "
                         "with a newline); set the key again without it")
    if not key.isascii():
        raise ValueError(f"{where} holds a non-ASCII character: an HTTP header cannot carry it; check the key")
    return key


def redact_command(argv) -> list[str]:
    """A command line as it may be recorded or printed (the one redaction of a command line, beside
    :func:`redact_url`): every argument through :func:`redact_text`, and the value of every
    credential flag (:data:`SECRET_FLAGS`: ``--api-key KEY``, ``--token=T``) replaced by ``***``.

    Parameters
    ----------
    argv : sequence of str
        e.g. ``sys.argv``.

    Returns
    -------
    list of str
        The same arguments, credentials masked.
    """
    out, mask_next = [], False
    for arg in map(str, argv):
        if mask_next:
            out.append(_MASK)
            mask_next = False
            continue
        flag, eq, value = arg.partition("=")
        if arg.startswith("-") and _secret(flag.lstrip("-"), SECRET_FLAGS, words=False):
            if eq:
                out.append(f"{flag}={_MASK}")
            else:
                out.append(arg)
                mask_next = True
            continue
        out.append(redact_text(arg))
    return out
