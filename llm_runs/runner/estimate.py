"""What a run or probe is expected to cost, computed before anything is sent (``--dry-run``)."""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import numpy as np

from ..backend import EndpointConfig
from ..core.estimate import BYTES_PER_TOKEN, RunEstimate
from .. import journal as jr
from ..journal import JOURNAL_FILE, read_journal
from .groups import group_prices, make_groups
from .orchestration import arun_game
from .progress import expected_interactions
from .prompts import PromptTemplate, load_template
from .settings import GameSettings, make_settings


def distinct_prompts(names, memory: int, orders: int | None = None) -> int:
    """Distinct prompts of one template and model: memory states of length 0..H (``sum_k
    W^(2k)``) times the name orders shown (``W!``, or ``orders``)."""
    W = len(names)
    return sum((W * W) ** k for k in range(memory + 1)) * (math.factorial(W) if orders is None else orders)


def prompt_tokens(s: GameSettings, tpl: PromptTemplate, memory_len: int) -> float:
    """Estimated tokens of a prompt with ``memory_len`` entries (half successes, half failures)."""
    a, b = s.names[0], s.names[1]
    mem = [(a, a) if k % 2 == 0 else (a, b) for k in range(memory_len)]
    p = tpl.render(mem, tuple(s.names), payoffs=s.payoffs)
    tail = p.prefill if s.prefill else None
    text = "".join(m["content"] for m in p.messages(tail)) if s.wrap == "chat" else p.text(s.wrap, tail)
    return len(text.encode("utf-8")) / BYTES_PER_TOKEN


def estimate_requests(s: GameSettings, tpl: PromptTemplate, *, requests: tuple, prompt_tokens: float,
                      what: str, prices: dict, notes=(), done=None, completion_per_request=None) -> RunEstimate:
    """A :class:`RunEstimate` from request counts ``(typical, at_most)`` (``None``: no bound)
    and the estimated prompt tokens per request."""
    per_c = completion_per_request if completion_per_request is not None else s.decision.tokens_per_request(s)
    pi = max(p[0] for p in prices.values())
    po = max(p[1] for p in prices.values())

    def tok(n, per):
        return None if n is None else n * per

    pt = (tok(requests[0], prompt_tokens), tok(requests[1], prompt_tokens))
    ct = (tok(requests[0], per_c), tok(requests[1], per_c))
    cost = tuple(None if a is None else (a * pi + b * po) / 1e6 for a, b in zip(pt, ct))
    rows = {"requests": requests, "prompt_tokens": pt, "completion_tokens": ct, "cost_usd": cost}
    notes = tuple(notes) + (
        f"tokens: each prompt rendered from the template '{tpl.name}' and counted in UTF-8 bytes / {BYTES_PER_TOKEN:g} "
        f"(about {prompt_tokens:,.0f} tokens per request); completion: {per_c} token(s) per request",
        "cost at the highest price of any group" if len(prices) > 1 else "cost = tokens x the prices above",
    )
    return RunEstimate(what=what, rows=rows, prices=prices, notes=notes, done=done)


def estimate_game(n_agents: int, memory: int, names, *, max_interactions: int, groups=None,
                  endpoint: EndpointConfig | None = None, out=None, **kwargs) -> RunEstimate:
    """Expected requests, tokens and cost of :func:`run_game` with the same arguments, computed
    from the design and the prompts; nothing is sent and nothing is written (``--dry-run``).

    Returns
    -------
    RunEstimate

    Notes
    -----
    Deciding agents make ``2 (N - K) / N`` LLM decisions per interaction (committed agents make
    none). Sample mode: one request per decision typically, ``1 + max_reasks`` at most
    (unbounded re-asks have no bound). Exact mode: at most one request per distinct prompt
    (:func:`distinct_prompts` per group model and template; single-token names assumed, a
    multi-token name adds requests). A directory holding part of the run reports what its
    journal already spent.
    """
    endpoint = endpoint if endpoint is not None else EndpointConfig.from_env()
    unknown = sorted(set(kwargs) - set(inspect.signature(arun_game).parameters))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {unknown}")
    mk = {k: v for k, v in kwargs.items() if k in inspect.signature(make_settings).parameters}
    s, tpl, _ = make_settings(n_agents, memory, names, max_interactions=max_interactions,
                              embedded=endpoint.embedded, **mk)
    stored_groups, specs = make_groups(groups, s, tpl, embedded=endpoint.embedded, n_agents=int(n_agents))
    if stored_groups:  # the groups' settings count too (their max_tokens: completion tokens per request)
        s = GameSettings(**{**s.__dict__, "groups": stored_groups})
    deciding = (s.n_agents - s.committed) / s.n_agents
    inter = (s.runs * expected_interactions(s), s.runs * s.max_interactions)
    dec = tuple(2 * deciding * x for x in inter)
    tpls = {(g.template, g.model, g.base_url): (load_template(g.template) if g.template != tpl.name else tpl)
            for g in specs} or {("run", None, None): tpl}
    ptok = float(np.mean([prompt_tokens(s, t, s.memory) for t in tpls.values()]))
    # a mode that reuses distributions asks at most once per distinct prompt (of each group's template and model)
    bound = distinct_prompts(s.names, s.memory) * len(tpls) if s.decision.uses_cache else None
    reqs = s.decision.requests(dec, bound, s.max_reasks)
    how = [s.decision.requests_note(bound, s.max_reasks, groups=len(tpls) > 1)]
    how.insert(0, f"typical: {expected_interactions(s):,.0f} interactions per run "
                  f"({'the cap' if s.stop in ('max', 'flip') else '12 N: 9 population rounds plus the 3N streak'}); "
                  f"at most: the cap of {s.max_interactions:,}")
    prices = group_prices(s, endpoint, specs)
    model = endpoint.model_label
    what = (f"{s.runs} run(s) x up to {s.max_interactions:,} interactions, N = {s.n_agents} "
            f"({s.n_agents - s.committed} deciding), H = {s.memory}, names {','.join(s.names)}, {s.mode} mode, "
            f"{model}" + (f", {len(specs)} groups" if specs else ""))
    done = None
    if out is not None and (Path(out) / JOURNAL_FILE).exists():
        recs = read_journal(Path(out) / JOURNAL_FILE)
        calls = jr.calls(recs)
        done = {"interactions": jr.count(recs, jr.INTERACTION), "requests": len(calls),
                "tokens": int(sum(r.prompt_tokens + r.completion_tokens for r in calls))}
    rows = {"interactions": inter, "llm_decisions": dec}
    est = estimate_requests(s, tpl, requests=reqs, prompt_tokens=ptok, what=what, prices=prices, notes=how, done=done)
    return RunEstimate(what=est.what, rows={**rows, **est.rows}, prices=est.prices, notes=est.notes, done=done)
