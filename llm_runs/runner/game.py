"""The game loop: one session of play -- each decision (sample or exact mode, re-asks, the
exact-mode cache), each run to its stop rule, every call and interaction journaled first."""

from __future__ import annotations

import asyncio
import bisect
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..backend import BudgetExhausted, EndpointError, ReaskLimitError
from .. import journal as jr
from ..journal import JOURNAL_FILE, Journal, read_journal, record_session
from .exact import choose, name_distribution
from .groups import agent_groups
from .mode import EXACT
from .prompts import PromptTemplate, parse_answer, parse_answer_authors, sha256_hex
from .settings import UNBOUNDED, GameSettings
from .state import RunState, run_setup

#: Safety limit of ``max_reasks="unbounded"``: requests per decision before the run stops.
REASK_SAFETY_LIMIT = 1000


# --- the draws of an interaction, without building a numpy Generator per interaction
# `Game.draws` needs a fresh PCG64 stream per (run, t): `SeedSequence(entropy, spawn_key=key + (run, t))`
# hashed into `PCG64` and drawn through `Generator` costs tens of microseconds of Python-level object
# construction. `_FastDraws` computes the very same numbers in plain integer arithmetic: the
# SeedSequence pool of the key's prefix (entropy, key, run) is mixed once per run and only the words
# of `t` per interaction; the PCG64 state is seeded and stepped as numpy's C code does, and the
# bounded integers (Lemire), shuffles (masked rejection) and doubles follow numpy's `distributions.c`.
# `Game._draws_numpy` is the reference; tests check that both agree bit for bit.
_M32, _M64, _M128 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF, (1 << 128) - 1
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645
_POOL = 4


def _words32(n: int) -> list:
    """numpy's `_coerce_to_uint32_array` of a non-negative int: little-endian 32-bit words."""
    if n < 0:
        raise ValueError("negative entropy")
    if n == 0:
        return [0]
    out = []
    while n:
        out.append(n & _M32)
        n >>= 32
    return out


def _hashmix(value: int, h: int) -> tuple:
    value ^= h
    h = (h * _MULT_A) & _M32
    value = (value * h) & _M32
    return value ^ (value >> 16), h


def _mix(x: int, y: int) -> int:
    r = (_MIX_L * x - _MIX_R * y) & _M32
    return r ^ (r >> 16)


def _pool_prefix(words: list) -> tuple:
    """SeedSequence's `mix_entropy` over ``words`` (at least the pool's 4): ``(pool, hash const)``;
    further words are mixed in one at a time (:func:`_pool_extend`)."""
    h = _INIT_A
    pool = []
    for w in words[:_POOL]:
        v, h = _hashmix(w, h)
        pool.append(v)
    for s in range(_POOL):
        for d in range(_POOL):
            if s != d:
                v, h = _hashmix(pool[s], h)
                pool[d] = _mix(pool[d], v)
    return _pool_extend(pool, h, words[_POOL:])


def _pool_extend(pool: list, h: int, words) -> tuple:
    pool = list(pool)
    for w in words:  # _hashmix and _mix inlined (once per interaction: the words of t)
        for d in range(_POOL):
            v = w ^ h
            h = (h * _MULT_A) & _M32
            v = (v * h) & _M32
            r = (_MIX_L * pool[d] - _MIX_R * (v ^ (v >> 16))) & _M32
            pool[d] = r ^ (r >> 16)
    return pool, h


class _FastDraws:
    """numpy's PCG64 stream of ``SeedSequence(entropy, spawn_key=key + (run, t))``, with the
    Generator methods the game draws from (same values, same order)."""

    __slots__ = ("state", "inc", "has32", "u32")

    def __init__(self, pool: list):
        # SeedSequence.generate_state(4, uint64): eight 32-bit words from the cycled pool
        h = _INIT_B
        w = []
        for p in pool + pool:
            v = p ^ h
            h = (h * _MULT_B) & _M32
            v = (v * h) & _M32
            w.append(v ^ (v >> 16))
        seed = (w[0] | w[1] << 32) << 64 | (w[2] | w[3] << 32)  # PCG_128BIT_CONSTANT(val[0], val[1])
        initseq = (w[4] | w[5] << 32) << 64 | (w[6] | w[7] << 32)
        inc = ((initseq << 1) | 1) & _M128  # pcg_setseq_128_srandom_r
        state = inc  # step from state 0
        state = (((state + seed) & _M128) * _PCG_MULT + inc) & _M128
        self.state, self.inc, self.has32, self.u32 = state, inc, False, 0

    def next64(self) -> int:
        s = self.state = (self.state * _PCG_MULT + self.inc) & _M128
        x = ((s >> 64) ^ s) & _M64
        r = s >> 122
        return ((x >> r) | (x << ((-r) & 63))) & _M64

    def next32(self) -> int:
        if self.has32:
            self.has32 = False
            return self.u32
        n = self.next64()
        self.has32, self.u32 = True, n >> 32
        return n & _M32

    def below(self, n: int) -> int:
        """``Generator.integers(n)`` (int64, Lemire's method on 32-bit draws), ``2 <= n < 2**32``."""
        if n == 1:
            return 0
        m = self.next32() * n
        left = m & _M32
        if left < n:
            threshold = (0x100000000 - n) % n
            while left < threshold:
                m = self.next32() * n
                left = m & _M32
        return m >> 32

    def permutation(self, w: int) -> tuple:
        """``Generator.permutation(w)`` (Fisher-Yates from the end, masked rejection), ``w < 2**32``."""
        a = list(range(w))
        for i in range(w - 1, 0, -1):
            mask = i
            for sh in (1, 2, 4, 8, 16):
                mask |= mask >> sh
            while (j := self.next32() & mask) > i:
                pass
            a[i], a[j] = a[j], a[i]
        return tuple(a)

    def random(self) -> float:
        return (self.next64() >> 11) * (1.0 / 9007199254740992.0)


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
    budget: jr.BudgetBook = field(default_factory=jr.BudgetBook)

    @property
    def spent(self) -> tuple:
        """``(tokens, usd)`` counted against a budget (:class:`~normlab.llm_runs.journal.BudgetBook`)."""
        t = self.budget.total()
        return (t["tokens"], t["usd"])

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
    def price(call):
        a = call.agent
        g = labels[a] if isinstance(a, int) and 0 <= a < len(labels) else None
        return prices.get(g) or prices[first]

    # what the journal counts against a budget: its requests, and every reservation never settled
    # (a request in flight at a kill, or failed) in full (journal.BudgetBook, every runner's)
    book = out.budget = jr.BudgetBook(price)
    for _, v in jr.replayed(reader.scan(), s.runs, n_agents=s.n_agents, names=s.names):
        book.see(v)
        if isinstance(v, jr.Interaction):
            out.states[v.run].apply(v.i, v.j, *v.names)
        elif isinstance(v, jr.RunEnd):
            out.ended[v.run] = v
        elif isinstance(v, jr.Call):
            out.n_calls += 1
            if v.purpose == "exact" and v.key and v.top:
                out.cache[v.key] = v.top
        elif isinstance(v, jr.Imported):
            if v.purpose == "exact" and v.key and v.top:
                out.cache[v.key] = v.top
    for k, end in out.ended.items():  # a run's end must follow all of its interactions
        if end.n != out.states[k].t:
            raise jr.JournalDamaged(
                f"{getattr(reader, 'path', None) or 'the journal'}: run {k} ended after {end.n} interactions but the "
                f"journal holds {out.states[k].t} of them in order (it was edited or damaged); restore the journal, "
                "or move the directory aside and start again")
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
    """One session of play: decisions (``decide``: :meth:`_decide_exact` or :meth:`_decide_sample`,
    the rule of the settings' mode, bound when the session starts), runs (:meth:`play`), the journal.

    ``groups`` (mixed populations) is a list of ``(Agents, first agent, size)``; by default
    every agent uses ``tpl``, ``client`` and the run's sampler. Also used by the probes (one
    agent, ``decide`` only).
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
        self._prefix: dict = {}  # run -> SeedSequence pool after (entropy, key, run)
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
        # what earlier sessions spent counts against a cap, and every request's reservation is journaled
        # before it is sent (write-ahead: journal.arm_budget, every runner's)
        jr.arm_budget([g.client.cap for g in self.groups], journal, start.budget)
        # one decision: agent ``agent`` of ``run`` at interaction ``t`` with ``memory``, seeing the names
        # in ``order``, its uniform ``u`` and sampling ``seed`` (a Decision); the mode's rule is bound
        # here, once per session, not chosen per decision
        self.decide = self._decide_exact if s.decision is EXACT else self._decide_sample
        self.write_manifest()

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
                       budget={"tokens": cap.budget_tokens, "usd": cap.budget_usd,
                               **({"requests": cap.budget_requests} if cap.budget_requests is not None else {})},
                       spent_before={"tokens": cap.tokens, "usd": cap.usd} if cap.active else None)

    def setup(self, run: int) -> tuple[set, dict | None]:
        """Committed ids and initial memories of ``run`` (:func:`run_setup`, cached)."""
        if run not in self._setups:
            self._setups[run] = run_setup(self.s, run)
        return self._setups[run]

    # --- randomness: every interaction's draws come from (run seed, run, t) only
    def draws(self, run: int, t: int):
        """``(i, j, (order_i, order_j), (u_i, u_j), (seed_i, seed_j))`` of interaction ``t`` of ``run``:
        the numbers of :meth:`_draws_numpy`, computed by :class:`_FastDraws` (bit for bit the same)."""
        N = self.s.n_agents
        if not 2 <= N <= _M32 or t < 0:
            return self._draws_numpy(run, t)
        pre = self._prefix.get(run)
        if pre is None:
            if len(self._prefix) > 64:
                self._prefix.clear()
            key = tuple(self.ss.spawn_key) + (run,)
            words = _words32(int(self.ss.entropy))
            words += [0] * (_POOL - len(words))
            for k in key:
                words += _words32(int(k))
            pre = self._prefix[run] = _pool_prefix(words)
        g = _FastDraws(_pool_extend(pre[0], pre[1], _words32(t))[0])
        i = g.below(N)
        if self.nbrs is None:
            j = g.below(N - 1)
            j += j >= i
        else:
            row = self.nbrs[i]
            j = int(row[g.below(len(row))])
        W = len(self.names)
        oi = g.permutation(W)
        oj = g.permutation(W)
        if self.s.name_order == "shared":
            oj = oi
        u = (g.random(), g.random())
        seeds = (g.below(2**31 - 1), g.below(2**31 - 1))
        return i, j, (oi, oj), u, seeds

    def _draws_numpy(self, run: int, t: int):
        """The reference draws: a numpy Generator seeded from (run seed, run, t)."""
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
                    f"{client.base_url} returned no top_logprobs: exact mode reads next-token logprobs and needs an "
                    "endpoint that returns them (llama.cpp, vLLM, the embedded models); sample mode needs none -- "
                    "answers are generated and parsed (llm-run, llm-probe, tip and demo take --mode sample; the demo "
                    "then estimates the strategy table from sampled answers); predict --probe needs logprobs"
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

    async def _decide_exact(self, run, t, agent, memory, order, u, seed) -> jr.Decision:
        """Exact mode's :meth:`decide`: the next-token distribution over the names (cached per
        prompt), the sampler applied locally, a name drawn with the interaction's uniform ``u``."""
        s = self.s
        if agent in self.setup(run)[0]:
            return jr.committed_decision(s.committed_name)
        g = self.agents(agent)
        r = self._render(g, memory, order)
        ctx = {"run": run, "t": t, "agent": agent, "calls": 0, "latency": 0.0, "prompt_tokens": 0,
               "completion_tokens": 0}
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

    async def _decide_sample(self, run, t, agent, memory, order, u, seed) -> jr.Decision:
        """Sample mode's :meth:`decide`: generate with the per-call ``seed``, parse, re-ask up to
        ``max_reasks`` times (``"unbounded"``: up to :data:`REASK_SAFETY_LIMIT` requests)."""
        s = self.s
        if agent in self.setup(run)[0]:
            return jr.committed_decision(s.committed_name)
        g = self.agents(agent)
        r = self._render(g, memory, order)
        ctx = {"run": run, "t": t, "agent": agent, "calls": 0, "latency": 0.0, "prompt_tokens": 0,
               "completion_tokens": 0}
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
