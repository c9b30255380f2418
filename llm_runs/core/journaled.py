"""Journaled LLM sessions for the CRSEC population and the SCENE sweep: the naming game's journal,
resumption, budget and dry-run machinery, for runners whose every step depends on the answers.

- :class:`RunDirectory` -- the run directory (:class:`~normlab.llm_runs.journal.DirectoryLock`,
  ``settings.json`` compared on resume, ``journal.jsonl``, ``manifest.json`` with one entry per
  session), as :func:`~normlab.llm_runs.run_game` keeps it;
- :class:`JournaledClient` -- wraps an :class:`~normlab.llm_runs.backend.LLMClient`: every
  request is keyed by the hash of what is sent (model, messages, ``max_tokens``, temperature,
  seed) and journaled (a ``call`` record) *before* its answer is returned; a request already in
  the journal is answered from it and not sent again. A runner whose randomness comes from its
  seed only thus resumes by replaying itself: a killed run rerun with the same settings pays no
  completed call twice and ends identical to an uninterrupted run (what the endpoint measured, a
  call's latency, aside). A request in flight when the process is killed is billed by the server
  and not journaled: it is asked again, and with a budget its write-ahead reservation, journaled
  before it was sent, counts it in full (:func:`journaled_budget`);
- :func:`journaled_budget` -- the budget of a run (requests, ``--budget 300req``; tokens and USD) kept by
  the client's :class:`~normlab.llm_runs.backend.SpendingCap` with the naming game's write-ahead
  reservations (:func:`normlab.llm_runs.journal.arm_budget`, every runner's), counting what
  earlier sessions journaled; :class:`RequestCap` -- the run's stop switch (a failing task halts
  new requests) and the check of a request cap's value;
- :class:`ScriptedClient` -- the same interface answered offline by a scripted responder (no
  request, no server): what ``--dry-run`` counts;
- :func:`call_context` -- the tags (``run``, ``t``, ``agent``, ``purpose``, ``scope``) a call is
  journaled with, carried by a context variable so that concurrent tasks keep their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import itertools
import json
from pathlib import Path

from .. import journal as jr
from ..backend import CallResult, SpendingCap
from ..journal import (JOURNAL_FILE, DirectoryLock, Journal, compare_settings, finish_session, read_settings,
                       record_session, write_settings)
from .estimate import BYTES_PER_TOKEN, RunEstimate

__all__ = ["CALL_CONTEXT", "call_context", "current_context", "request_key", "call_seed", "RequestCap", "Halted",
           "gather_all", "journaled_budget",
           "JournaledClient", "ScriptedClient", "RunDirectory", "replay_index", "result_of", "settings_digest",
           "spent", "make_estimate"]

#: The tags of the calls made in the current task (``run``, ``t``, ``agent``, ``purpose``, ``scope``).
CALL_CONTEXT: contextvars.ContextVar = contextvars.ContextVar("normlab_call_context", default=None)


@contextlib.contextmanager
def call_context(**tags):
    """Tag the calls made inside the block (merged with the enclosing tags)."""
    token = CALL_CONTEXT.set({**(CALL_CONTEXT.get() or {}), **tags})
    try:
        yield
    finally:
        CALL_CONTEXT.reset(token)


def current_context() -> dict:
    return dict(CALL_CONTEXT.get() or {})


def request_key(model, messages, max_tokens, temperature, seed, extra=None) -> str:
    """The hash under which a request's answer is journaled and found again."""
    blob = json.dumps([model, messages, int(max_tokens), float(temperature), seed, extra or {}],
                      ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def call_seed(base: int, scope, k: int) -> int:
    """The sampling seed of the ``k``-th call made in ``scope`` (a tuple of plain values) of a run
    whose base seed is ``base``: independent of the order in which concurrent scopes run."""
    h = hashlib.sha256(json.dumps([int(base), list(scope), int(k)], default=str).encode()).digest()
    return int.from_bytes(h[:8], "little") % (2**31 - 1)


def settings_digest(settings: dict, free=("seed", "model")) -> str:
    return hashlib.sha256(json.dumps({k: v for k, v in settings.items() if k not in free}, sort_keys=True,
                                     default=str).encode()).hexdigest()[:16]


def replay_index(records) -> dict:
    """``{request key: [Call, ...]}`` of a journal's keyed calls, in journal order."""
    out: dict = {}
    for c in jr.calls(records):
        if c.key:
            out.setdefault(c.key, []).append(c)
    return out


def result_of(call) -> CallResult:
    """The :class:`~normlab.llm_runs.backend.CallResult` a journaled call stands for (the answer
    of a live request is returned through its record too, so a replay gives the same values)."""
    return CallResult(text=call.text, top=call.top, tokens=call.tokens, finish_reason=call.finish_reason,
                      prompt_tokens=call.prompt_tokens, completion_tokens=call.completion_tokens,
                      cached_tokens=call.cached_tokens, latency=call.latency or 0.0, attempts=call.attempts,
                      errors=call.errors)


def spent(records) -> dict:
    """Requests and tokens of a journal's calls."""
    cs = jr.calls(records)
    return {"requests": len(cs), "prompt_tokens": int(sum(c.prompt_tokens for c in cs)),
            "completion_tokens": int(sum(c.completion_tokens for c in cs))}


class Halted(RuntimeError):
    """A request not sent because another task of the run failed (the run is stopping)."""


class RequestCap:
    """A run's stop switch: :meth:`halt` refuses every later request (:class:`Halted`), so a run
    stopping because one of its concurrent tasks failed lets the requests in flight finish (and be
    journaled) and sends no new one. ``max_requests`` (``None``: no cap) is checked here; the cap
    itself, at most that many requests in a run directory, earlier sessions and requests cut off
    by a kill included, is kept with the token and USD caps by the client's
    :class:`~normlab.llm_runs.backend.SpendingCap` (:func:`journaled_budget`: write-ahead)."""

    def __init__(self, max_requests: int | None = None):
        if max_requests is not None and (isinstance(max_requests, bool) or not isinstance(max_requests, int)
                                         or max_requests < 1):
            raise ValueError(f"max_requests must be an int >= 1 or None; got {max_requests!r}")
        self.max_requests = max_requests
        self.halted: BaseException | None = None

    def take(self) -> None:
        if self.halted is not None:
            raise Halted(f"not sent: the run is stopping ({type(self.halted).__name__})")

    def halt(self, exc: BaseException) -> None:
        if self.halted is None:
            self.halted = exc


async def gather_all(coros, requests: RequestCap | None = None) -> list:
    """Run ``coros`` concurrently and return their results in order; when one fails, ``requests``
    is halted (no new request is sent), the others finish what they have in flight, and the first
    error is raised -- so a run never stops with a request answered and not journaled."""
    tasks = [asyncio.ensure_future(c) for c in coros]

    def failed(t):
        if not t.cancelled() and t.exception() is not None and requests is not None:
            requests.halt(t.exception())

    for t in tasks:
        t.add_done_callback(failed)
    try:
        results = await asyncio.gather(*tasks, return_exceptions=True)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise next((e for e in errors if not isinstance(e, Halted)), errors[0])
    return results


class JournaledClient:
    """An LLM client whose requests are journaled before their answers are used, and answered from
    the journal when a resumed run asks them again (see the module docstring).

    Parameters
    ----------
    client : LLMClient
    journal : Journal
        Open for appending (its records: the calls of earlier sessions).
    replay : dict, optional
        :func:`replay_index` of the earlier records (shared by the clients of one run).
    ids : itertools.count, optional
        Call ids (shared by the clients of one run).
    requests : RequestCap, optional
    """

    def __init__(self, client, journal: Journal, *, replay: dict | None = None, ids=None,
                 requests: RequestCap | None = None):
        self.client = client
        self.journal = journal
        self.replay = replay if replay is not None else replay_index(journal.records)
        self.ids = ids if ids is not None else itertools.count(jr.count(journal.records, jr.CALL) + 1)
        self.requests = requests or RequestCap()
        self._uses: dict = {}
        self.n_sent = 0
        self.n_replayed = 0

    @property
    def model(self):
        return self.client.model

    @property
    def cap(self):
        return self.client.cap

    @property
    def config(self):
        return self.client.config

    @property
    def info(self):
        return getattr(self.client, "info", None)

    async def chat(self, messages, *, max_tokens: int, temperature: float, seed: int | None = None,
                   **kwargs) -> CallResult:
        key = request_key(self.model, messages, max_tokens, temperature, seed, kwargs)
        n = self._uses.get(key, 0)
        self._uses[key] = n + 1
        earlier = self.replay.get(key, ())
        if n < len(earlier):
            self.n_replayed += 1
            return result_of(earlier[n])
        self.requests.take()
        res = await self.client.chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed, **kwargs)
        ctx = current_context()
        ph = hashlib.sha256(json.dumps(messages, ensure_ascii=False).encode("utf-8", "surrogatepass")).hexdigest()[:16]
        rec = jr.call_record(id=next(self.ids), run=ctx.get("run"), t=ctx.get("t"), agent=ctx.get("agent"),
                             purpose=ctx.get("purpose"), key=key, prompt_hash=ph, partial="", result=res)
        self.journal.write(rec, sync=True)
        self.n_sent += 1
        return result_of(jr.Call(json.loads(json.dumps(rec))))  # as a replay will read it


class ScriptedClient:
    """The interface of :class:`~normlab.llm_runs.backend.LLMClient` answered offline by
    ``responder(body) -> str`` (no request, no server): the requests a run would make of a model
    that answers like the responder, counted with their tokens (UTF-8 bytes /
    :data:`~normlab.llm_runs.core.estimate.BYTES_PER_TOKEN`). Used by ``--dry-run``."""

    def __init__(self, responder, model: str = "scripted"):
        self.responder = responder
        self.model = model
        self.cap = SpendingCap()
        self.config = None
        self.info = {"base_url": None, "model": model, "scripted": True}
        self.n_requests = 0
        self.prompt_tokens = 0.0
        self.completion_tokens = 0.0
        self.max_completion_tokens = 0.0

    async def chat(self, messages, *, max_tokens: int, temperature: float, seed: int | None = None,
                   **kwargs) -> CallResult:
        body = {"model": self.model, "messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                "seed": seed}
        text = self.responder(body)
        text = "" if text is None else str(text)
        pt = sum(len(str(m.get("content") or "").encode()) for m in messages) / BYTES_PER_TOKEN
        ct = min(float(max_tokens), max(1.0, len(text.encode()) / BYTES_PER_TOKEN))
        self.n_requests += 1
        self.prompt_tokens += pt
        self.completion_tokens += ct
        self.max_completion_tokens += max_tokens
        await asyncio.sleep(0)
        return CallResult(text=text, top=None, tokens=None, finish_reason="stop", prompt_tokens=int(pt),
                          completion_tokens=int(ct), cached_tokens=0, latency=0.0, attempts=1, errors=[])


class RunDirectory:
    """A CRSEC or SCENE run directory: locked while in use, ``settings.json`` written once and
    compared on every later session (different settings are refused before any work), the
    journal, and ``manifest.json`` (one entry per session).

    Parameters
    ----------
    out : path or None
        ``None``: an in-memory journal, nothing written.
    kind : str
        ``"crsec run"`` or ``"scene run"`` (the manifest's ``kind``).
    settings : dict
        Plain JSON values; ``seed`` and ``model`` are filled in by :meth:`begin`.
    """

    def __init__(self, out, kind: str, settings: dict, *, fsync_interval: float | None = 1.0):
        self.directory = Path(out) if out is not None else None
        self.kind = kind
        self.settings = {"kind": kind, **settings}
        self.fsync_interval = fsync_interval
        self.stored = None
        self._lock = None
        self.journal: Journal | None = None

    def __enter__(self) -> "RunDirectory":
        d = self.directory
        if d is not None:
            if d.exists() and not d.is_dir():
                raise ValueError(f"--out {d} exists and is not a directory")
            self._lock = DirectoryLock(d).__enter__()
            try:
                self.stored = read_settings(d)
                if self.stored is None:
                    jr.check_new_run_dir(d, "normlab run")
                if self.stored is not None:
                    st = self.stored["settings"]
                    if st.get("kind") != self.kind:
                        raise ValueError(f"{d} holds a {st.get('kind') or 'naming-game'} run, not a {self.kind}; use "
                                         "another --out directory")
                    diffs = compare_settings(st, self.settings, ("seed", "model"))
                    if diffs:
                        raise ValueError(f"{d} holds a {self.kind} with different settings ({'; '.join(diffs[:3])}"
                                         f"{' ...' if len(diffs) > 3 else ''}); resume it with the same settings or "
                                         "use another --out directory")
            except BaseException:
                self._lock.__exit__(None, None, None)
                raise
        self.journal = Journal(d / JOURNAL_FILE if d is not None else None, fsync_interval=self.fsync_interval,
                               fingerprint=self.stored["hash"] if self.stored is not None else None)
        return self

    @property
    def seed(self):
        """The stored seed (``[entropy, *spawn_key]``) of a resumed run, else ``None``."""
        return None if self.stored is None else self.stored["settings"].get("seed")

    @property
    def model(self):
        return None if self.stored is None else self.stored["settings"].get("model")

    def begin(self, *, seed, model, endpoints: list, budget: dict | None = None) -> None:
        """Write the settings (first session), open the journal, record the session."""
        if self.directory is not None:
            if self.stored is None:
                full = {**self.settings, "seed": list(seed), "model": model}
                write_settings(self.directory, full, settings_digest(full))
                self.stored = {"settings": full, "hash": settings_digest(full)}
                self.journal.fingerprint = self.stored["hash"]
            elif self.model is not None and model is not None and model != self.model:
                raise ValueError(f"{self.directory} was run with model {self.model!r} but the endpoint serves "
                                 f"{model!r}; resume it with the same model or use another --out directory")
            done = spent(self.journal.records)
            record_session(self.directory, endpoints=endpoints, budget=budget,
                           spent_before=done if done["requests"] else None)
        self.journal.open()

    def finish(self, outcome: str, *, tables: dict | None = None, totals: dict | None = None) -> None:
        if self.directory is not None and self.stored is not None:
            with contextlib.suppress(OSError):
                finish_session(self.directory, outcome=outcome, tables=tables, totals=totals)

    @contextlib.contextmanager
    def unfinished(self):
        """Record in the manifest how a session that stops inside the block ended
        (:func:`~normlab.llm_runs.journal.session_outcome`) and let the error go on; a block
        that ends normally records nothing (the caller finishes with its tables)."""
        try:
            yield
        except BaseException as exc:
            self.finish(jr.session_outcome(exc))
            raise

    def __exit__(self, *exc) -> None:
        if self.journal is not None:
            self.journal.close()
        if self._lock is not None:
            self._lock.__exit__(*exc)
            self._lock = None


def journaled_budget(clients, journal: Journal, max_requests: int | None = None) -> None:
    """The budget of a run whose requests go through ``clients`` (one cap for all: the first
    client's prices count the journaled requests): its cap on requests (``max_requests``), what
    earlier sessions journaled counted against it (request records, and every reservation never
    settled in full), and a reservation journaled before each request
    (:func:`normlab.llm_runs.journal.arm_budget`, every runner's)."""
    clients = [c for c in clients if getattr(c, "cap", None) is not None]
    if not clients:
        return
    book = jr.BudgetBook(getattr(clients[0], "prices", (0.0, 0.0))).read(journal.records)
    jr.arm_budget([c.cap for c in clients], journal, book, budget_requests=max_requests)


def make_estimate(what: str, *, requests: tuple, prompt_tokens: tuple, completion_tokens: tuple, prices: tuple,
                  notes=(), done=None) -> RunEstimate:
    """A :class:`~normlab.llm_runs.core.estimate.RunEstimate` (``typical``, ``at_most`` pairs; ``None``:
    no bound) priced at ``prices`` (USD per million prompt / completion tokens)."""
    pi, po = prices
    cost = tuple(None if a is None or b is None else (a * pi + b * po) / 1e6
                 for a, b in zip(prompt_tokens, completion_tokens))
    rows = {"requests": tuple(requests), "prompt_tokens": tuple(prompt_tokens),
            "completion_tokens": tuple(completion_tokens), "cost_usd": cost}
    return RunEstimate(what=what, rows=rows, prices={"all": (pi, po)}, notes=tuple(notes), done=done)
