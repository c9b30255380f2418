"""What a run or probe is expected to cost, computed before anything is sent (``--dry-run``)."""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..backend import EndpointConfig
from .. import journal as jr
from ..journal import JOURNAL_FILE, read_journal
from ..prompts import PromptTemplate, load_template
from .groups import group_prices, make_groups
from .orchestration import arun_game
from .progress import expected_interactions
from .settings import UNBOUNDED, GameSettings, make_settings

#: UTF-8 bytes per token assumed by :class:`RunEstimate`. SmolLM2's tokenizer makes 3.37 bytes
#: per token of README's main job's prompts (23 203 tokens reported for 66 requests, chat
#: template included); 3.0 errs on the high side for other byte-level BPE tokenizers.
BYTES_PER_TOKEN = 3.0


@dataclass(frozen=True)
class RunEstimate:
    """What a run or probe is expected to cost, computed before anything is sent (``--dry-run``).

    Two columns: ``typical`` (runs that stop after :func:`expected_interactions`, valid answers
    without re-asks) and ``at_most`` (every run to its cap, every re-ask used; in exact mode at
    most one request per distinct prompt). Tokens are estimated from the prompts themselves:
    each prompt is rendered from the template at the memory lengths the design visits, and its
    UTF-8 bytes are divided by :data:`BYTES_PER_TOKEN`; completion tokens are ``max_tokens``
    per request (1 in exact mode). An estimate, not a measurement: tokenizers differ by about
    20 %, and exact-mode populations that converge visit far fewer memory states than the
    bound (README's main job: 66 requests of at most 170).
    """

    what: str
    rows: dict
    prices: dict
    notes: tuple = ()
    done: dict | None = None

    def to_frame(self) -> pd.DataFrame:
        """One row per quantity: ``quantity``, ``typical``, ``at_most``."""
        return pd.DataFrame([{"quantity": k, "typical": v[0], "at_most": v[1]} for k, v in self.rows.items()])

    def to_dict(self) -> dict:
        return {"estimate": self.what, "nothing_sent": True,
                **{k: {"typical": v[0], "at_most": v[1]} for k, v in self.rows.items()},
                "prices_usd_per_million": self.prices, "already_done": self.done, "how": list(self.notes)}

    def __str__(self) -> str:
        def fmt(k, v):
            if v is None:
                return "no bound"
            return f"{v:,.4f}" if k == "cost_usd" else f"{v:,.0f}"

        lines = [f"estimate (nothing was sent): {self.what}", f"  {'':<20}{'typical':>14}{'at most':>14}"]
        for k, (a, b) in self.rows.items():
            lines.append(f"  {k.replace('_', ' '):<20}{fmt(k, a):>14}{fmt(k, b):>14}")
        lines.append("  prices (USD per million prompt / completion tokens): "
                     + "; ".join(f"{g}: {p[0]:g} / {p[1]:g}" for g, p in self.prices.items()))
        if self.done:
            lines.append("  already done in this directory: " + ", ".join(f"{k} {v:,}" if isinstance(v, int) else
                                                                       f"{k} {v}" for k, v in self.done.items()))
        lines += [f"  - {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        (rt, rm), (ct, cm) = self.rows["requests"], self.rows["cost_usd"]
        most = "no bound" if rm is None else f"{rm:,.0f}"
        cost = "no bound" if cm is None else f"${cm:,.4f}"
        return f"RunEstimate(requests ~{rt:,.0f} (at most {most}), cost ~${ct:,.4f} (at most {cost}))"

    def _repr_html_(self) -> str:
        return f"<pre>{self.__str__()}</pre>"

    @classmethod
    def _contract_example(cls) -> "RunEstimate":
        """A ten-request estimate at no cost, literal numbers (``tests/test_contracts.py``)."""
        return cls(what="a toy probe", rows={"requests": (8.0, 10.0), "prompt_tokens": (800.0, 1000.0),
                                             "completion_tokens": (8.0, 10.0), "cost_usd": (0.0, 0.0)},
                   prices={"all": (0.0, 0.0)}, notes=("literal numbers",))


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
    per_c = completion_per_request if completion_per_request is not None else (1 if s.mode == "exact" else s.max_tokens)
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
    deciding = (s.n_agents - s.committed) / s.n_agents
    inter = (s.runs * expected_interactions(s), s.runs * s.max_interactions)
    dec = tuple(2 * deciding * x for x in inter)
    tpls = {(g.template, g.model, g.base_url): (load_template(g.template) if g.template != tpl.name else tpl)
            for g in specs} or {("run", None, None): tpl}
    ptok = float(np.mean([prompt_tokens(s, t, s.memory) for t in tpls.values()]))
    if s.mode == "exact":
        bound = distinct_prompts(s.names, s.memory) * len(tpls)
        reqs = (min(dec[0], bound), min(dec[1], bound))
        how = [f"exact mode: at most one request per distinct prompt ({bound:,} = memory states x name orders"
               f"{' x group templates/models' if len(tpls) > 1 else ''}); converging populations need far fewer"]
    else:
        extra = None if s.max_reasks == UNBOUNDED else 1 + int(s.max_reasks)
        reqs = (dec[0], None if extra is None else dec[1] * extra)
        how = ["sample mode: one request per decision; at most " + (f"{extra} (re-asks)" if extra else
                                                                      "no bound (re-asks until a name appears)")]
    how.insert(0, f"typical: {expected_interactions(s):,.0f} interactions per run "
                  f"({'the cap' if s.stop in ('max', 'flip') else '12 N: 9 population rounds plus the 3N streak'}); "
                  f"at most: the cap of {s.max_interactions:,}")
    prices = group_prices(s, endpoint, specs)
    model = "embedded SmolLM2-135M-Instruct" if endpoint.embedded else (endpoint.model or "the endpoint's first model")
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
