"""The retrying client: one ``openai.AsyncOpenAI`` client with a concurrency semaphore, bounded
retries with backoff (429 honouring ``Retry-After``, 5xx, timeouts, dropped connections), token
accounting against the spending cap, and the endpoint's fingerprint for a run's manifest."""

from __future__ import annotations

import asyncio
import math
import random
import time
import warnings
from dataclasses import dataclass
from urllib.parse import urlsplit

from .config import EndpointConfig, EndpointError, NotOpenAICompatible, key_masker, redact_text, redact_url
from .embedded import EmbeddedServer
from .http import (MAX_SIDE_BYTES, AnswerRefused, HTTPConnection, HTTPOutOfStep, HTTPStatus, LeanHTTP,
                   bounded_http_client, is_loopback, lean_transport_for, loads_answer, summarise)
from .spending import SpendingCap, answer_tokens_counted, prompt_tokens_bound


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
    reservation: int | None = None  # the write-ahead budget reservation it settles (SpendingCap.on_reserve)
    #: The answer carried no ``usage`` (its token counts are 0 here): a token budget must count the
    #: request another way.
    usage_missing: bool = False


def _prompt_text(body: dict) -> str:
    """The text a request sends: its raw prompt, or its messages' contents."""
    return body.get("prompt") or "".join(str(m.get("content") or "") for m in body.get("messages", []))


def _describe(exc) -> str:
    """Innermost cause of a connection error, e.g. ``ConnectError: [Errno 111] Connection refused``."""
    if isinstance(exc, HTTPConnection):
        return str(exc)[:200]
    inner = exc
    while inner.__cause__ is not None or (inner.__context__ is not None and not inner.__suppress_context__):
        inner = inner.__cause__ or inner.__context__
    return f"{type(inner).__name__}: {str(inner)[:200]}"


def _side_json(resp, what: str):
    """A side answer's JSON (``/models``, ``/props``), parsed within :data:`MAX_SIDE_BYTES` and the
    element cap (its bytes were bounded as they arrived); ``ValueError`` when it is not JSON."""
    return loads_answer(resp.content, what, max_bytes=MAX_SIDE_BYTES)


def _model_ids(resp) -> list | None:
    """Model ids of an OpenAI-shaped ``GET /models`` answer (``{"data": [{"id": ...}, ...]}``);
    ``None`` when the answer is not JSON of that shape."""
    try:
        obj = _side_json(resp, "GET /models")
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        return None
    ids = [m.get("id") for m in obj["data"] if isinstance(m, dict)]
    if len(ids) != len(obj["data"]) or not all(isinstance(i, str) for i in ids):
        return None
    return ids


def _model_entry(resp, model) -> dict | None:
    """The ``/models`` entry of ``model`` (id, owner, created, and what else the server says about
    it), summarised for the run's manifest (:func:`~normlab.llm_runs.backend.http.summarise`:
    strings cut, entries counted past a few dozen), never the whole answer."""
    try:
        for m in _side_json(resp, "GET /models")["data"]:
            if m.get("id") == model or (model and str(m.get("id", "")).startswith(model + ":")):
                return summarise({k: v for k, v in m.items() if isinstance(v, (str, int, float, bool)) or k == "meta"})
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def _json_error(resp) -> bool:
    """True when an error answer is JSON (an API's error), not an HTML or text page."""
    try:
        _side_json(resp, "the error answer")
    except (ValueError, UnicodeDecodeError, RuntimeError):
        return False
    return True


def _refusal(exc):
    """The :class:`AnswerRefused` or :class:`HTTPOutOfStep` behind an ``openai`` client error (the
    bounded client raises them while reading an answer), or ``None``."""
    inner, seen = exc, 0
    while inner is not None and seen < 16:
        if isinstance(inner, (AnswerRefused, HTTPOutOfStep)):
            return inner
        inner = inner.__cause__ or inner.__context__
        seen += 1
    return None


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


#: Largest log-probability taken as 0 (a server's rounding of log 1); anything larger is not a
#: log-probability and the answer is refused.
LOGPROB_TOLERANCE = 1e-4
#: Most tokens one answer's ``usage`` may count (prompt or completion): more is not a count.
MAX_USAGE_TOKENS = 10**9


def _logprob(v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ValueError(f"logprob {str(v)[:40]!r} is not a number")
    x = float(v)
    if math.isnan(x) or x > LOGPROB_TOLERANCE:
        raise ValueError(f"logprob {str(v)[:40]}: not a log-probability (log p <= 0)")
    return min(x, 0.0)


def _count(usage: dict, key: str) -> int:
    """One token count of an answer's ``usage``: a whole number in [0, :data:`MAX_USAGE_TOKENS`]
    (``ValueError`` otherwise: ``1e400``, ``-5``, ``"many"``, ``2.5``)."""
    v = usage.get(key)
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (isinstance(v, float) and not math.isfinite(v)) \
            or v < 0 or v > MAX_USAGE_TOKENS or v != int(v):
        raise ValueError(f"usage.{key} = {str(v)[:40]} is not a token count (a whole number from 0 to "
                         f"{MAX_USAGE_TOKENS:,})")
    return int(v)


#: How requests travel: ``"lean"`` (:class:`~normlab.llm_runs.backend.http.LeanHTTP`, plain
#: ``http://`` only), ``"openai"`` (the ``openai`` client), ``"auto"`` (lean where it can serve the
#: URL: :func:`~normlab.llm_runs.backend.http.lean_transport_for`).
TRANSPORTS = ("auto", "lean", "openai")


class LLMClient:
    """One ``openai.AsyncOpenAI`` client with a semaphore, bounded retries and accounting.

    Parameters
    ----------
    base_url, model : str
    config : EndpointConfig
        Timeouts, retries, concurrency, extra body fields, prices.
    transport : {"auto", "lean", "openai"}, optional
        Default ``config.transport``. How the completions travel (:data:`TRANSPORTS`): by default a plain ``http://`` server
        (local inference servers, the embedded one) gets the lean HTTP/1.1 transport, ~0.1 ms of
        CPU a request instead of ~1.4 ms; ``https://``, credentials in the URL or a proxy keep
        the ``openai`` client. The model list, errors, retries and accounting are the same.

    Notes
    -----
    The ``openai`` client's own retries are disabled so that every attempt is counted and a
    ``Retry-After`` header is honoured exactly. Non-retryable HTTP errors (400, 401, 403, 404,
    422) raise :class:`EndpointError` at once.
    """

    def __init__(self, base_url: str, model: str | None, config: EndpointConfig, *, transport: str | None = None):
        transport = config.transport if transport is None else transport
        if transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {TRANSPORTS}; got {transport!r}")
        self.transport = transport
        self._lean: LeanHTTP | None = None
        self.base_url = base_url.rstrip("/")
        self.shown_url = redact_url(self.base_url)
        self.model = model
        self.config = config
        self._client = None
        self._http = None  # the bounded httpx client of the openai transport and the side requests
        self._sem: asyncio.Semaphore | None = None
        self._mask = None  # masks the API key in anything shown or written (config.key_masker)
        self._warned: set = set()
        self.n_requests = 0
        self.n_attempts = 0
        self.n_errors = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self._ok_once = False
        self._largest_prompt = 0  # the budget's estimate of a request's prompt
        self.cap = SpendingCap(config.budget_tokens, config.budget_usd, config.budget_requests)
        self.model_entry: dict | None = None
        self.info: dict | None = None  # endpoint fingerprint, filled by open_endpoint

    async def __aenter__(self) -> "LLMClient":
        import openai

        key = self.config.resolve_api_key()  # a key with a line break: one line, before anything is sent
        # the embedded or a local server: never a proxy; every answer bounded, no redirect followed
        self._http = bounded_http_client(trust_env=not is_loopback(urlsplit(self.base_url).hostname or ""))
        self._client = openai.AsyncOpenAI(
            base_url=self.base_url, api_key=key,
            timeout=self.config.timeout, max_retries=0, http_client=self._http,
        )
        self._sem = asyncio.Semaphore(self.config.concurrency)
        if self.transport == "lean" and not self.base_url.startswith("http://"):
            raise ValueError(f"transport 'lean' serves plain http:// URLs only; got {self.shown_url}")
        if self.transport == "lean" or (self.transport == "auto" and lean_transport_for(self.base_url)):
            self._lean = LeanHTTP(self.base_url, {"Authorization": f"Bearer {key}"})
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._lean is not None:
            lean, self._lean = self._lean, None
            await lean.aclose()
        if self._client is not None:
            client, self._client = self._client, None
            try:
                await client.close()
            except Exception:  # pragma: no cover - closing must never mask the real error
                pass

    def _redact(self, text: str) -> str:
        """Remove the API key (a server may echo the Authorization header in an error body, in any
        case or partly masked: :func:`~normlab.llm_runs.backend.config.key_masker`) and credentials
        inside the base URL from a message."""
        mask = self._key_mask()
        if mask is not None:
            text = mask(text)
        return redact_text(text.replace(self.base_url, self.shown_url))

    def _key_mask(self):
        if self._mask is None:
            try:
                self._mask = key_masker(self.config.resolve_api_key()) or (lambda t: t)
            except ValueError:  # a key that cannot be sent: nothing of it was
                self._mask = lambda t: t
        return self._mask

    def _warn_once(self, what: str, message: str) -> None:
        if what not in self._warned:
            self._warned.add(what)
            warnings.warn(self._redact(message), RuntimeWarning, stacklevel=3)

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
        except (AnswerRefused, HTTPOutOfStep) as exc:  # the bounded client's refusals, raised as they are
            raise self._error(f"{self.base_url}/models: {exc}") from None
        except openai.APIConnectionError as exc:
            refused = _refusal(exc)
            if refused is not None:
                raise self._error(f"{self.base_url}/models: {refused}") from None
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
            The exact text to continue (:meth:`normlab.llm_runs.runner.prompts.Prompt.text`).
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
        if not self.cap.active:
            return self._counted(body, await self._attempts(route, body, parse))
        reserved = await self.cap.acquire(self._upper_tokens(body), float(body.get("max_tokens") or 0), self.prices)
        try:
            # write-ahead: the reservation reaches the journal before the request is sent
            rid = self.cap.write_ahead(*reserved, self.prices)
            res = await self._attempts(route, body, parse)
            res.reservation = rid
            return self._counted(body, res)
        finally:
            self.cap.release(reserved, self.prices)

    def _counted(self, body: dict, res: CallResult) -> CallResult:
        """An answer without ``usage``: its tokens counted from the prompt and the answer
        (:func:`~normlab.llm_runs.backend.spending.prompt_tokens_bound`,
        :func:`~normlab.llm_runs.backend.spending.answer_tokens_counted`), against the budget and
        in the accounts, so a budget in tokens still holds (said once per client)."""
        if not res.usage_missing:
            return res
        pt, ct = prompt_tokens_bound(_prompt_text(body)), answer_tokens_counted(res.text)
        self._warn_once("usage", f"{self.shown_url} reports no token usage; tokens are counted from the text instead "
                                 "(half its characters, more than a tokenizer makes of English)")
        res.prompt_tokens, res.completion_tokens = pt, ct
        self.prompt_tokens += pt
        self.completion_tokens += ct
        self.cap.add(pt, ct, self.prices)
        return res

    async def _send(self, route: str, body: dict):
        """One attempt: the answer's JSON, or :class:`HTTPStatus`, :class:`HTTPConnection`,
        ``TimeoutError`` or ``ValueError`` (malformed), whichever transport carries it."""
        if self._lean is not None:
            _, _, payload = await self._lean.post(route, body)
            return loads_answer(payload)
        import httpx2
        import openai

        try:  # the raw answer (its bytes bounded as they arrived), parsed here within the element cap
            resp = await self._client.post(route, body=body, cast_to=httpx2.Response)
        except openai.APIStatusError as exc:
            raise HTTPStatus(exc.status_code, exc.response.headers, message=str(exc)) from None
        except openai.APITimeoutError:
            raise TimeoutError() from None
        except openai.APIConnectionError as exc:
            refused = _refusal(exc)
            if isinstance(refused, HTTPOutOfStep):
                raise refused from None
            if refused is not None:
                raise ValueError(str(refused)) from None
            raise HTTPConnection(_describe(exc), refused=_refused(exc)) from None
        except openai.APIResponseValidationError as exc:
            raise ValueError(str(exc)) from None
        return loads_answer(resp.content)

    async def _attempts(self, route: str, body: dict, parse) -> CallResult:
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
                    # the whole request within `timeout` (a client's own timeout is per read:
                    # a server trickling bytes would keep a request alive for ever)
                    async with asyncio.timeout(self.config.timeout):
                        resp = await self._send(route, body)
                except HTTPOutOfStep as exc:
                    self.n_errors += 1
                    raise self._error(
                        f"{self.base_url}{route}: {exc}: the server's answers are out of step with the requests "
                        "(each later answer would be given to the next prompt); refused"
                    ) from None
                except HTTPStatus as exc:
                    if 300 <= exc.status < 400:
                        self.n_errors += 1
                        where = redact_url(str((exc.headers or {}).get("location", "")))[:120] or "another address"
                        raise self._error(
                            f"{self.base_url}{route} answered HTTP {exc.status}, a redirect to {where}: normlab does not "
                            "follow redirects (the prompt would be sent again, elsewhere); give the final address as "
                            "--base-url"
                        ) from None
                    if exc.status == 429:
                        wait = _retry_after(exc.headers)
                        capped = wait == RETRY_AFTER_CAP and "capped" or ""
                        errors.append(f"HTTP 429 (rate limit){'; retry after %.3gs' % wait if wait is not None else ''}"
                                      f"{' (Retry-After capped at %gs)' % RETRY_AFTER_CAP if capped else ''}")
                    elif exc.status == 501:
                        self.n_errors += 1
                        raise self._error(
                            f"{self.base_url}{route} answered HTTP 501 (not implemented): the server is not "
                            "OpenAI-compatible or lacks this route (raw wraps need /completions; try --wrap chat)"
                        ) from None
                    elif exc.status in (408, 409) or exc.status >= 500:
                        wait = _retry_after(exc.headers)
                        errors.append(f"HTTP {exc.status}")
                    else:
                        self.n_errors += 1
                        raise self._error(
                            f"HTTP {exc.status} from {self.base_url}{route}: {str(exc)[:300]}"
                        ) from None
                except TimeoutError:
                    errors.append(f"timeout after {self.config.timeout:g}s")
                except HTTPConnection as exc:
                    errors.append(f"connection error: {str(exc)[:160]}")
                    if not self._ok_once and attempt >= 1 and exc.refused:
                        self.n_errors += 1
                        raise self._down(exc) from None
                except ValueError as exc:
                    errors.append(self._redact(f"malformed response: {str(exc)[:120]}"))
                else:
                    latency = time.perf_counter() - t0
                    try:
                        return parse(resp, latency=time.perf_counter() - t_start, attempts=attempt + 1,
                                     errors=errors, call_latency=latency)
                    except (AttributeError, IndexError, KeyError, TypeError, ValueError, OverflowError) as exc:
                        if "not a log-probability" in str(exc):
                            self._warn_once("logprob", f"{self.shown_url}{route} sent a {str(exc)[:80]}; answers "
                                                       "holding one are refused (retried, then the request fails)")
                        errors.append(self._redact(f"malformed response: {type(exc).__name__}: {str(exc)[:100]}"))
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
        usage = resp.get("usage")
        missing = not isinstance(usage, dict) or ("prompt_tokens" not in usage and "completion_tokens" not in usage)
        if usage is not None and not isinstance(usage, dict):
            raise ValueError(f"usage is a {type(usage).__name__}, not an object")
        usage = usage or {}
        pt = _count(usage, "prompt_tokens")
        ct = _count(usage, "completion_tokens")
        details = usage.get("prompt_tokens_details")
        cached = _count(details, "cached_tokens") if isinstance(details, dict) else 0
        self.prompt_tokens += pt
        self.completion_tokens += ct
        self._largest_prompt = max(self._largest_prompt, pt)
        self.cap.add(pt, ct, self.prices)
        self._ok_once = True
        text = _clean_text(text)
        if text:
            text = self._key_mask()(text)  # a server echoing the key in an answer: not into the journal
        if top is not None:
            top = [(_clean_text(t), v) for t, v in top]
        return CallResult(text=text, top=top, tokens=tokens, finish_reason=choice.get("finish_reason"),
                          prompt_tokens=pt, completion_tokens=ct, cached_tokens=cached,
                          latency=latency, attempts=attempts, errors=list(errors), usage_missing=missing)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """USD cost of the given token counts at the configured prices."""
        return (prompt_tokens * self.config.price_input + completion_tokens * self.config.price_output) / 1e6

    # --- spending caps (see SpendingCap)
    def _upper_tokens(self, body: dict) -> float:
        """The prompt tokens a request holds against a budget (and its write-ahead reservation):
        the larger of the largest prompt answered so far and
        :func:`~normlab.llm_runs.backend.spending.prompt_tokens_bound` of its text."""
        return float(max(self._largest_prompt, prompt_tokens_bound(_prompt_text(body))))

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
            settings = props.get("default_generation_settings")
            flat["n_ctx"] = settings.get("n_ctx") if isinstance(settings, dict) else None
            out["server_props"] = _redacted(summarise({k: flat.get(k) for k in keep if flat.get(k) is not None},
                                                      depth=1), self._redact)
        if out["models_entry"] is not None:
            out["models_entry"] = _redacted(out["models_entry"], self._redact)
        if server is not None:
            out["embedded"] = server.describe()
        return out

    async def _props(self) -> dict | None:
        """``GET /props`` of a llama.cpp server (next to ``/v1``), or ``None``; read by the bounded
        client (:data:`MAX_SIDE_BYTES`, no redirect), parsed within the element cap."""
        root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        try:
            r = await self._http.get(root + "/props", timeout=5.0)
            if r.status_code != 200:
                return None
            obj = _side_json(r, "GET /props")
        except Exception:  # best effort: any failure (too large, not JSON, down) means "no props"
            return None
        return obj if isinstance(obj, dict) else None



def _redacted(value, redact):
    """``value`` (a summarised side answer) with ``redact`` applied to every string in it."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(str(k)): _redacted(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted(v, redact) for v in value]
    return value
