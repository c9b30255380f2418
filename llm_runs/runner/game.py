"""The game loop: one session of play -- each decision (sample or exact mode, re-asks, the
exact-mode cache), each run to its stop rule, every call and interaction journaled first."""

from __future__ import annotations

import asyncio
import bisect
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..backend import BudgetExhausted, EndpointError, SpendingCap
from ..exact import choose, name_distribution
from .. import journal as jr
from ..journal import JOURNAL_FILE, Journal, read_journal, record_session
from ..prompts import PromptTemplate, parse_answer, parse_answer_authors, sha256_hex
from .groups import agent_groups
from .settings import UNBOUNDED, GameSettings
from .state import RunState, run_setup

#: Safety limit of ``max_reasks="unbounded"``: requests per decision before the run stops.
REASK_SAFETY_LIMIT = 1000


class ReaskLimitError(EndpointError):
    """``max_reasks="unbounded"`` reached :data:`REASK_SAFETY_LIMIT` requests for one decision."""


def exact_cache_entries(records) -> dict:
    """``{key: top_logprobs}`` of the exact-mode distributions in journal records."""
    out = {}
    for r in jr.exact_distributions(records):
        if r.key and r.top:
            out[r.key] = r.top
    return out


def load_cache(sources) -> dict:
    """Exact-mode distributions journaled in other run or probe directories (or journal files).

    Parameters
    ----------
    sources : path or sequence of paths

    Returns
    -------
    dict
        ``{key: top_logprobs}``; keys hash the model name, the full prompt and ``top_logprobs``,
        so only identical requests are ever reused.
    """
    if sources is None:
        return {}
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    out = {}
    for src in sources:
        p = Path(src)
        f = p / JOURNAL_FILE if p.is_dir() else p
        if not f.exists():
            raise FileNotFoundError(f"cache source {src} holds no {JOURNAL_FILE}")
        out.update(exact_cache_entries(read_journal(f)))
    return out


@dataclass
class Resume:
    """What a session takes over from its journal, read in one walk (memory stays flat however
    long the journal): each run's state after its journaled interactions, the runs ended, the
    requests made, the exact-mode distributions and the spend counted against a budget."""

    setups: dict
    states: dict
    ended: dict
    n_calls: int = 0
    cache: dict = field(default_factory=dict)
    spent: tuple = (0.0, 0.0)
    next_reservation: int = 1

    @property
    def played(self) -> dict:
        """``{run: interactions replayed}``."""
        return {k: st.t for k, st in self.states.items()}


def resume(s: GameSettings, reader: jr.JournalReader, prices: dict | None = None) -> Resume:
    """Replay a journal (:func:`normlab.llm_runs.journal.replayed`, every interaction checked)
    into the state a session starts from; ``prices``: ``{group label: (input, output)}`` at which
    earlier requests count against a budget (:func:`~normlab.llm_runs.runner.group_prices`)."""
    labels, _ = agent_groups(s)
    prices = prices or {"all": (0.0, 0.0)}
    first = next(iter(prices))
    setups = {k: run_setup(s, k) for k in range(s.runs)}
    out = Resume(setups=setups, states={k: RunState(s, *setups[k]) for k in range(s.runs)}, ended={})
    spent = SpendingCap()
    reserved = jr.OpenReservations()
    for _, v in jr.replayed(reader.scan(), s.runs, n_agents=s.n_agents, names=s.names):
        reserved.see(v)
        if isinstance(v, jr.Interaction):
            out.states[v.run].apply(v.i, v.j, *v.names)
        elif isinstance(v, jr.RunEnd):
            out.ended[v.run] = v
        elif isinstance(v, jr.Call):
            out.n_calls += 1
            a = v.agent
            g = labels[a] if isinstance(a, int) and 0 <= a < len(labels) else None
            spent.add(v.prompt_tokens, v.completion_tokens, prices.get(g) or prices[first])
            if v.purpose == "exact" and v.key and v.top:
                out.cache[v.key] = v.top
        elif isinstance(v, jr.Imported):
            if v.purpose == "exact" and v.key and v.top:
                out.cache[v.key] = v.top
    # reservations never settled (requests in flight at a kill, or failed): spent in full, an upper bound
    tok, usd = reserved.total()
    out.spent = (spent.tokens + tok, spent.usd + usd)
    out.next_reservation = reserved.next_id
    return out


#: Rendered prompts and parsed answers a session keeps, up to this many of each (then it starts afresh).
CACHE_ENTRIES = 8192


class _Rendered:
    """A prompt rendered for a session: the prompt, the names as shown, its hash, what a sample
    request sends, and the exact-mode request keys by partial name."""

    __slots__ = ("prompt", "shown", "shown_text", "hash", "payload", "keys")

    def __init__(self, prompt, shown, shown_text, hash, payload):
        self.prompt, self.shown, self.shown_text, self.hash, self.payload = prompt, shown, shown_text, hash, payload
        self.keys: dict = {}


@dataclass
class Agents:
    """What the decisions of one group of agents use: template, client and sampler."""

    label: str
    tpl: PromptTemplate
    client: object
    temperature: float
    top_k: int | None
    top_p: float | None
    min_p: float | None
    max_tokens: int


class Game:
    """One session of play: decisions (:meth:`decide`), runs (:meth:`play`), the journal.

    ``groups`` (mixed populations) is a list of ``(Agents, first agent, size)``; by default
    every agent uses ``tpl``, ``client`` and the run's sampler. Also used by the probes (one
    agent, :meth:`decide` only).
    """

    def __init__(self, s: GameSettings, tpl: PromptTemplate, nbrs, client, journal: Journal, pbar=None,
                 imported: dict | None = None, groups: list | None = None, start: Resume | None = None):
        self.s, self.tpl, self.nbrs, self.client, self.journal, self.pbar = s, tpl, nbrs, client, journal, pbar
        self.names = s.names
        self.inflight: dict[str, asyncio.Future] = {}
        self.ss = s.seed_sequence()
        self.imported = imported or {}
        self._rendered: dict = {}
        self._parsed: dict = {}
        if not groups:
            groups = [(Agents("all", tpl, client, s.temperature, s.top_k, s.top_p, s.min_p, s.max_tokens),
                       0, s.n_agents)]
        self.groups = [g for g, _, _ in groups]
        # group of an agent from the groups' ranges (no array of N entries): -1 for injected committed agents
        self._firsts = [first for _, first, _ in groups]
        self._ranges = [(first, first + size) for _, first, size in groups]
        self.stopped: str | None = None  # "budget" when a spending cap stopped the session
        if start is None:  # a journal held in memory (the probes)
            start = resume(s, jr.JournalReader(records=journal.records),
                           {g.label: g.client.prices for g in self.groups})
        self._setups: dict[int, tuple] = dict(start.setups)
        self.n_calls = start.n_calls
        self.cache: dict[str, list] = dict(start.cache)
        # what earlier sessions spent counts against a cap (a rerun with a larger cap continues)
        caps = {id(g.client.cap): g.client.cap for g in self.groups}
        self._next_reservation = start.next_reservation
        for c in caps.values():
            if c.active:
                c.tokens, c.usd = start.spent
                if journal.path is not None:  # write-ahead reservations (SpendingCap)
                    c.on_reserve = self._reserve
        self.write_manifest()

    def _reserve(self, tokens: float, usd: float) -> int:
        """Journal a budget reservation before its request is sent (write-ahead); its id."""
        rid = self._next_reservation
        self._next_reservation += 1
        self.journal.write(jr.reserve_record(id=rid, tokens=math.ceil(tokens), usd=math.ceil(usd * 1e9) / 1e9))
        return rid

    def group_index(self, agent: int) -> int:
        k = bisect.bisect_right(self._firsts, agent) - 1
        return k if k >= 0 and self._ranges[k][0] <= agent < self._ranges[k][1] else -1

    def agents(self, agent: int) -> Agents:
        return self.groups[max(self.group_index(agent), 0)]

    def write_manifest(self) -> None:
        """Record this session in the directory's manifest (a file-backed journal only)."""
        if self.journal.path is None:
            return
        endpoints = []
        for g in self.groups:
            info = getattr(g.client, "info", None) or {"base_url": getattr(g.client, "shown_url", None),
                                                        "model": getattr(g.client, "model", None)}
            endpoints.append({"group": g.label, **info, "price_input": g.client.config.price_input,
                              "price_output": g.client.config.price_output})
        cap = self.groups[0].client.cap
        record_session(self.journal.path.parent, endpoints=endpoints,
                       budget={"tokens": cap.budget_tokens, "usd": cap.budget_usd},
                       spent_before={"tokens": cap.tokens, "usd": cap.usd} if cap.active else None)

    def setup(self, run: int) -> tuple[set, dict | None]:
        """Committed ids and initial memories of ``run`` (:func:`run_setup`, cached)."""
        if run not in self._setups:
            self._setups[run] = run_setup(self.s, run)
        return self._setups[run]

    # --- randomness: every interaction's draws come from (run seed, run, t) only
    def draws(self, run: int, t: int):
        g = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
            self.ss.entropy, spawn_key=tuple(self.ss.spawn_key) + (run, t))))
        N, W = self.s.n_agents, len(self.names)
        i = int(g.integers(N))
        if self.nbrs is None:
            j = int(g.integers(N - 1))
            j += j >= i
        else:
            row = self.nbrs[i]
            j = int(row[int(g.integers(len(row)))])
        orders = (g.permutation(W), g.permutation(W))
        if self.s.name_order == "shared":  # one shuffle per interaction (the authors' simulate_CM)
            orders = (orders[0], orders[0])
        u = g.random(2)
        seeds = g.integers(0, 2**31 - 1, size=2)
        return i, j, orders, u, seeds

    def _log_call(self, run, t, agent, purpose, r, partial, key, res) -> None:
        self.n_calls += 1
        self.journal.write(jr.call_record(id=self.n_calls, run=run, t=t, agent=agent, purpose=purpose, key=key,
                                          prompt_hash=r.hash, partial=partial, result=res))

    async def _top(self, r, partial, ctx, client=None) -> list:
        client = client or self.client
        prompt = r.prompt
        ck = (partial, client.model)
        msgs, key = r.keys.get(ck) or (None, None)
        if key is None:
            if self.s.wrap == "chat":
                msgs = prompt.messages(prompt.prefill + partial)
            else:
                msgs = prompt.text(self.s.wrap, prompt.prefill + partial)
            key = sha256_hex(json.dumps([client.model, msgs, self.s.top_logprobs], ensure_ascii=False), 32)
            r.keys[ck] = (msgs, key)
        if key in self.cache:
            return self.cache[key]
        if key in self.imported:  # reused from another directory: copied here, so this run is self-contained
            top = self.imported[key]
            self.journal.write(jr.imported_record(key=key, top=top, prompt_hash=r.hash, partial=partial,
                                                  run=ctx["run"], t=ctx["t"]))
            self.cache[key] = top
            return top
        if key in self.inflight:
            return await asyncio.shield(self.inflight[key])
        fut = asyncio.get_running_loop().create_future()
        self.inflight[key] = fut
        try:
            res = None
            for _ in range(3):  # a response without logprobs is a transport glitch: ask again
                if self.s.wrap == "chat":
                    res = await client.chat(msgs, max_tokens=1, temperature=1.0, logprobs=True,
                                            top_logprobs=self.s.top_logprobs)
                else:
                    res = await client.complete(msgs, max_tokens=1, temperature=1.0, logprobs=True,
                                                top_logprobs=self.s.top_logprobs)
                ctx["calls"] += 1
                ctx["latency"] += res.latency
                ctx["prompt_tokens"] += res.prompt_tokens
                ctx["completion_tokens"] += res.completion_tokens
                self._log_call(ctx["run"], ctx["t"], ctx["agent"], "exact", r, partial,
                               key if res.top else None, res)
                if res.top:
                    break
            if not res.top:
                raise EndpointError(
                    f"{client.base_url} returned no top_logprobs; exact mode needs an endpoint that "
                    "supports logprobs/top_logprobs (llama.cpp, vLLM, ...); use --mode sample otherwise"
                )
            self.cache[key] = res.top
            fut.set_result(res.top)
            return res.top
        except BaseException as exc:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # mark retrieved
            raise
        finally:
            self.inflight.pop(key, None)

    def _render(self, g: Agents, memory, order) -> "_Rendered":
        """The prompt of an agent of group ``g`` with ``memory`` seeing the names in ``order``,
        rendered once per session (the distinct prompts of a run are few: memory states x orders)."""
        try:
            key = (id(g.tpl), tuple(memory), tuple(int(k) for k in order))
            hit = self._rendered.get(key)
        except TypeError:  # an unhashable memory: render without keeping it
            key, hit = None, None
        if hit is not None:
            return hit
        s = self.s
        shown = tuple(self.names[k] for k in order)
        prompt = g.tpl.render(list(memory), shown, payoffs=s.payoffs)
        tail = prompt.prefill if s.prefill else None
        payload = prompt.messages(tail) if s.wrap == "chat" else prompt.text(s.wrap, tail)
        r = _Rendered(prompt, shown, ",".join(shown), prompt.hash, payload)
        if key is not None:
            if len(self._rendered) >= CACHE_ENTRIES:
                self._rendered.clear()
            self._rendered[key] = r
        return r

    def _parse(self, g: Agents, r: "_Rendered", text):
        """The name in an answer (:func:`parse_answer` or the authors' rule), kept per session."""
        s = self.s
        key = (id(g.tpl), r.shown if s.parse == "authors" else None, text)
        hit = self._parsed.get(key)
        if hit is not None:
            return hit
        prompt = r.prompt
        if s.parse == "authors":
            full = text
            if s.prefill and text is not None and not text.lstrip().startswith(prompt.prefill.strip()):
                full = prompt.prefill + text
            parsed = parse_answer_authors(full, r.shown)
        else:
            parsed = parse_answer(text, self.names, answer_key=g.tpl.answer_key,
                                  prefill=prompt.prefill if s.prefill else None, case_sensitive=s.case_sensitive)
        if len(self._parsed) >= CACHE_ENTRIES:
            self._parsed.clear()
        self._parsed[key] = parsed
        return parsed

    async def decide(self, run, t, agent, memory, order, u, seed) -> jr.Decision:
        s = self.s
        if agent in self.setup(run)[0]:
            return jr.committed_decision(s.committed_name)
        g = self.agents(agent)
        r = self._render(g, memory, order)
        prompt, shown = r.prompt, r.shown
        ctx = {"run": run, "t": t, "agent": agent, "calls": 0, "latency": 0.0, "prompt_tokens": 0,
               "completion_tokens": 0}
        if s.mode == "exact":
            nd = await name_distribution(
                self.names, lambda partial: self._top(r, partial, ctx, g.client), temperature=g.temperature,
                top_k=g.top_k, multi_token=s.multi_token, case_sensitive=s.case_sensitive,
            )
            name = p_name = None
            if nd.probs is None:
                reason = "no pool name among the top-logprob tokens"
            else:
                k = choose(nd.probs, float(u))
                name, reason, p_name = self.names[k], None, nd.probs[k]
            return jr.exact_decision(
                shown=r.shown_text, prompt_hash=r.hash,
                probs=None if nd.probs is None else [round(x, 12) for x in nd.probs], covered_mass=nd.covered_mass,
                approx=nd.approx, name=name, invalid_reason=reason, p_name=p_name, calls=ctx["calls"],
                latency=ctx["latency"], prompt_tokens=ctx["prompt_tokens"], completion_tokens=ctx["completion_tokens"])
        else:
            name, reason, text = None, None, None
            unbounded = s.max_reasks == UNBOUNDED
            limit = REASK_SAFETY_LIMIT if unbounded else s.max_reasks + 1
            sampler = dict(max_tokens=g.max_tokens, temperature=g.temperature, top_k=g.top_k, top_p=g.top_p,
                           min_p=g.min_p, logprobs=True)
            attempt = 0
            send = g.client.chat if s.wrap == "chat" else g.client.complete
            for attempt in range(limit):
                res = await send(r.payload, seed=int(seed) + attempt, **sampler)
                ctx["calls"] += 1
                ctx["latency"] += res.latency
                ctx["prompt_tokens"] += res.prompt_tokens
                ctx["completion_tokens"] += res.completion_tokens
                self._log_call(run, t, agent, "sample", r, "", None, res)
                text = res.text
                parsed = self._parse(g, r, text)
                name, reason = parsed.name, parsed.reason
                if name is not None:
                    break
            if name is None and unbounded:
                raise ReaskLimitError(
                    f"run {run}, interaction {t}, agent {agent}: no pool name in {REASK_SAFETY_LIMIT} answers "
                    f"(last: {str(text)[:80]!r}); --reask unbounded stops at this safety limit "
                    f"(normlab.llm_runs.runner.REASK_SAFETY_LIMIT) instead of looping forever -- check the template, "
                    "--wrap and --max-tokens, or use an integer --reask cap"
                )
            return jr.sample_decision(
                shown=r.shown_text, prompt_hash=r.hash, name=name,
                invalid_reason=None if name is not None else f"{reason} (after {attempt + 1} attempts)", text=text,
                reasks=attempt, calls=ctx["calls"], latency=ctx["latency"], prompt_tokens=ctx["prompt_tokens"],
                completion_tokens=ctx["completion_tokens"])

    async def play(self, run: int, replay, ended: bool) -> None:
        """Play run ``run`` to its stop rule from its state after the journaled interactions
        (a :class:`RunState`, from :func:`resume`; or the interactions to replay, a list of
        :class:`~normlab.llm_runs.journal.Interaction`); ``ended``: the run is finished already."""
        if isinstance(replay, RunState):
            st = replay
        else:
            st = RunState(self.s, *self.setup(run))
            for rec in replay:
                st.apply(rec.i, rec.j, *rec.names)
        if ended:
            return
        if st.reason is None:
            while True:
                t = st.t
                i, j, (oi, oj), u, seeds = self.draws(run, t)
                mi, mj = tuple(st.mem[i]), tuple(st.mem[j])
                # both sides finish (a call made is journaled) before an error or a cap stops the run;
                # j's decision runs as a task beside i's, which runs in this one (one task less
                # than a gather: the same requests, sent in the same order)
                tj = asyncio.ensure_future(self.decide(run, t, j, mj, oj, u[1], seeds[1]))
                try:
                    si = await self.decide(run, t, i, mi, oi, u[0], seeds[0])
                except asyncio.CancelledError:
                    tj.cancel()
                    raise
                except Exception as exc:
                    si = exc
                try:
                    sj = await tj
                except Exception as exc:
                    sj = exc
                sides = (si, sj)
                errors = [x for x in sides if isinstance(x, BaseException)]
                if errors:
                    fatal = [x for x in errors if not isinstance(x, BudgetExhausted)]
                    if not fatal:  # a spending cap: stop here, resumable (no "end" record)
                        self.stopped = "budget"
                        return
                    exc = fatal[0]
                    if isinstance(exc, EndpointError):
                        self.journal.write(jr.run_error_record(run, t, str(exc)[:500]), sync=True)
                    raise exc
                si, sj = sides
                self.journal.write(jr.interaction_record(run, t, i, j, (si, sj)), sync=True)
                st.apply(i, j, si.name, sj.name)
                if self.pbar is not None:
                    self.pbar.step(run, self.n_calls)
                if st.reason is not None:
                    break
        if self.pbar is not None:
            self.pbar.end(run, st.t)
        self.journal.write(jr.run_end_record(run, st.t, st.reason), sync=True)
