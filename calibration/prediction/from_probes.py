"""Predict an LLM population from single-agent probes alone.

Each decision of an LLM agent depends only on its prompt, and the prompt only on the agent's
memory state and the name order it is shown. So for a memory-``H`` game the population *is* the
Markov chain of the per-state decision distribution, and an exact-logprob probe of every state
(:func:`normlab.llm_runs.strategy_table`, ``sum_k W^(2k)`` states x ``W!`` orders: 1 365 x 2
calls for ``W = 2, H = 5``) turns a model into its complete strategy table without a single
population run. :func:`probe_predict` does that, builds the table *with* its uncertainty
(:class:`ProbeFit`), and plays draws of it in :func:`normlab.calibration.predict`.

What a probe-only table does not know, and how the draws carry it
------------------------------------------------------------------
Endpoint jitter
    The same prompt sent twice can come back with slightly different logprobs (batching, the
    prompt cache). :func:`probe_predict` re-asks ``jitter_states`` random (state, order)
    prompts without the cache and takes the standard deviation of the logprob differences of
    the sampler's top tokens over sqrt(2) as ``jitter_sd``; each draw multiplies every name's
    mass by ``exp(jitter_sd * z)``, ``z ~ N(0, 1)`` independently per (state, order, name).
Uncovered probability mass
    At the answer position part of the mass is on tokens that are no pool name ("100", "The").
    Exact mode renormalises over the names, which is what a population that re-asks until a
    pool name appears (the paper's protocol) does. The part of the uncovered mass on tokens
    that *start* like a name and continue alphanumerically ("FJ", "Fl") -- answers whose
    reading depends on the parser and the continuation -- is moved to that name in a share
    ``a ~ Uniform(0, 1)`` per (draw, state): ``mass' = mass + a * name_like``.
Name order
    A population shows every decision a uniformly drawn order, so the decision distribution is
    the *average* of the per-order tables (``order_mixing="average"``, exact). The spread over
    orders is reported per state; ``order_mixing="dirichlet"`` mixes the per-order tables with
    ``Dirichlet(1)`` weights per draw instead (a sensitivity bound for protocols that do not
    shuffle uniformly, e.g. a shared order per interaction, which correlates the two
    decisions).
Invalid answers under a re-ask cap
    With at most ``R`` re-asks a decision stays invalid with probability
    ``mean_o (1 - C_o(s))^(R + 1)`` (``C_o``: covered mass of order ``o``), and such an
    interaction is a failed no-op (:mod:`normlab.theory.invalid_answers`).
    :meth:`ProbeFit.sample_protocol` gives the draws of that chain.

Intervals
---------
The summary reports, like ``normlab calibrate``, the interval over table draws of what an
experiment of the paper's size would report (40 convergence runs per draw; the published
critical-mass rule on 10 runs per committed count), and beside it (``underlying``) the same
quantities from many runs per draw, whose interval is the table's uncertainty alone.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1, Fig. S8
(strategy tables), Table S6 (next-token probabilities of the conventions), Figs. 1-3,
Tables S2-S3, Methods.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import math
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from normlab._display import elapsed_bar, plotting, error_bars
from normlab._rng import as_generator, spawn
from normlab._validate import check_int
from normlab.llm_runs import (BudgetExhausted, EndpointConfig, enumerate_states, load_template, open_endpoint,
                              strategy_table)
from normlab.llm_runs.runner.exact import name_normaliser, sampler_probs
from normlab.llm_runs import journal
from normlab.llm_runs.journal import JOURNAL_FILE, read_journal, read_settings
from normlab.llm_runs.core.sync import run_sync
from normlab.schema import parse_memory_state, validate_names
from normlab.theory import StrategyTable
from normlab.theory.strategies import n_states
from normlab.user_files import read_user_json, write_user_text

from ..fit.inputs import _state_tables, state_labels
from ..fit.posterior import _jsonable, table_shape
from .api import predict
from .settings import ORDER_MIXING, ProbeSettings
from .summary import calibration_summary

__all__ = ["ProbeFit", "ProbeCost", "ProbePrediction", "probe_cost", "probe_fit", "probe_predict", "run_probe_prediction",
           "ProbeSettings", "ORDER_MIXING"]

#: Characters per prompt token of the cost estimate (SmolLM2's tokenizer on the main template:
#: 3.6 for the states of H <= 1, 3.2 for H <= 4, whose history lines are denser; the estimate is
#: good to about 10 %).
CHARS_PER_TOKEN = 3.3
#: Runs per draw of the ``underlying`` prediction (its interval is the table's uncertainty).
UNDERLYING_RUNS = 400


# ----------------------------------------------------------------------------- cost
@dataclass(frozen=True)
class ProbeCost:
    """What probing every memory state costs, before it starts.

    Attributes
    ----------
    states, orders : int
        Memory states up to ``H`` and name orders per state.
    calls : int
        Exact-mode requests: one per (state, order) for names of a single token; names of several
        tokens need more (one per distinct prefix), so this is a lower bound.
    cached : int
        (state, order) prompts already answered in ``out`` or the ``cache`` directories.
    prompt_tokens : int
        Estimated prompt tokens of the calls still to make (characters / 3.3, about +-10 %).
    completion_tokens : int
        One per call.
    """

    states: int
    orders: int
    calls: int
    cached: int
    prompt_tokens: int
    completion_tokens: int

    @property
    def to_make(self) -> int:
        return self.calls - self.cached

    def line(self) -> str:
        """One line for the terminal."""
        return (f"probing {self.states} memory states x {self.orders} name orders = {self.calls} exact calls "
                f"(at least: names of several tokens need more), {self.cached} already cached, "
                f"{self.to_make} to make: ~{self.prompt_tokens:,} prompt tokens, {self.to_make:,} completion tokens")

    def to_dict(self) -> dict:
        return {"states": self.states, "orders": self.orders, "calls": self.calls, "cached": self.cached,
                "to_make": self.to_make, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens}


def _journal_files(sources):
    out = []
    for src in sources or []:
        p = Path(src)
        f = p / JOURNAL_FILE if p.is_dir() else p
        if f.exists():
            out.append(f)
    return out


def _exact_prompt_hashes(sources) -> set:
    """Prompt hashes whose first-token distribution (exact mode) is journaled in ``sources``."""
    out = set()
    for f in _journal_files(sources):
        out.update(journal.first_token_tops(read_journal(f)))
    return out


def _check_sources(cache):
    if cache is None:
        return []
    if isinstance(cache, (str, Path)):
        cache = [cache]
    for c in cache:
        p = Path(c)
        if not p.exists():
            raise FileNotFoundError(f"cache source {c} does not exist")
    return list(cache)


def probe_cost(names, memory: int, *, template="main", payoffs=(100, -50), out=None, cache=None) -> ProbeCost:
    """Cost of an exact probe of every memory state up to ``memory`` in every name order.

    Parameters
    ----------
    names : str or sequence of str
    memory : int
    template : str or PromptTemplate, optional
    payoffs : (float, float), optional
    out, cache : path or sequence of paths, optional
        Directories whose journals already hold answers (counted as ``cached``).

    Returns
    -------
    ProbeCost
    """
    names = validate_names(names)
    memory = check_int(memory, "memory", 1)
    tpl = load_template(template)
    states = enumerate_states(names, memory)
    orders = list(itertools.permutations(names))
    have = _exact_prompt_hashes(_check_sources(cache) + ([out] if out is not None else []))
    cached, chars = 0, 0
    for st in states:
        mem = parse_memory_state(st)
        for o in orders:
            pr = tpl.render(mem, o, payoffs=payoffs)
            if pr.hash in have:
                cached += 1
            else:
                chars += sum(len(m["content"]) for m in pr.messages(pr.prefill))
    calls = len(states) * len(orders)
    return ProbeCost(states=len(states), orders=len(orders), calls=calls, cached=cached,
                     prompt_tokens=int(round(chars / CHARS_PER_TOKEN)), completion_tokens=calls - cached)


# ----------------------------------------------------------------------------- the table with uncertainty
@dataclass(frozen=True)
class ProbeFit:
    """A strategy table measured by exact probes, with its uncertainty (draws like a
    :class:`~normlab.calibration.StrategyFit`).

    Attributes
    ----------
    names : tuple of str
    memory : int
    orders : tuple of str
        The name orders probed (comma-joined as shown).
    mass : numpy.ndarray, shape (S, O, W)
        Probability of each name at the answer position under the sampler (temperature, top-k),
        per state (stable encoding of :mod:`normlab.theory.strategies`) and order; its sum over
        names is the covered mass ``C``.
    name_like : numpy.ndarray, shape (S, O, W)
        Uncovered mass on first tokens that start like the name and continue alphanumerically.
    jitter_sd : float
        Standard deviation of the endpoint's logprob jitter (0 if not measured).
    order_mixing : {"average", "dirichlet"}
    approx : numpy.ndarray, shape (S, O)
        A normalising constant or a branch was approximated (see
        :func:`normlab.llm_runs.runner.exact.name_distribution`).
    meta : dict
        Model, template, sampler, probe directory, cost.

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1, Fig. S8, Table S6.
    """

    names: tuple
    memory: int
    orders: tuple
    mass: np.ndarray
    name_like: np.ndarray
    jitter_sd: float = 0.0
    order_mixing: str = "average"
    approx: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), bool))
    meta: dict = field(default_factory=dict)

    kind = "probe"

    def __post_init__(self):
        W = len(self.names)
        S = n_states(W, int(self.memory))
        m = np.asarray(self.mass, float)
        nl = np.asarray(self.name_like, float)
        if m.ndim != 3 or m.shape[0] != S or m.shape[2] != W or m.shape[1] != len(self.orders) or m.shape[1] < 1:
            raise ValueError(f"mass must have shape (states={S}, orders={len(self.orders)}, names={W}); got {m.shape}")
        if nl.shape != m.shape:
            raise ValueError(f"name_like must have the shape of mass {m.shape}; got {nl.shape}")
        if not (np.isfinite(m).all() and (m >= 0).all() and (m.sum(axis=2) <= 1 + 1e-6).all()):
            raise ValueError("mass must hold probabilities >= 0 summing to at most 1 per state and order")
        if not (np.isfinite(nl).all() and (nl >= 0).all() and (m.sum(axis=2) + nl.sum(axis=2) <= 1 + 1e-6).all()):
            raise ValueError("name_like must hold probabilities >= 0 with mass + name_like <= 1")
        if not (isinstance(self.jitter_sd, (int, float)) and math.isfinite(self.jitter_sd) and self.jitter_sd >= 0):
            raise ValueError(f"jitter_sd must be a finite number >= 0; got {self.jitter_sd!r}")
        if self.order_mixing not in ORDER_MIXING:
            raise ValueError(f"order_mixing must be one of {ORDER_MIXING}; got {self.order_mixing!r}")
        ap = np.asarray(self.approx, bool)
        if ap.size == 0:
            ap = np.zeros(m.shape[:2], bool)
        if ap.shape != m.shape[:2]:
            raise ValueError(f"approx must have shape {m.shape[:2]}; got {ap.shape}")
        for a in (m, nl, ap):
            a.setflags(write=False)
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "memory", int(self.memory))
        object.__setattr__(self, "orders", tuple(self.orders))
        object.__setattr__(self, "mass", m)
        object.__setattr__(self, "name_like", nl)
        object.__setattr__(self, "approx", ap)
        object.__setattr__(self, "jitter_sd", float(self.jitter_sd))

    # ----------------------------------------------------------------- views
    @property
    def n_states(self) -> int:
        return self.mass.shape[0]

    @property
    def covered(self) -> np.ndarray:
        """Covered mass ``C[s, o]``."""
        return self.mass.sum(axis=2)

    @property
    def uncovered_states(self) -> np.ndarray:
        """States where no order put any mass on a pool name (their row is uniform with full
        uncertainty in the draws)."""
        return (self.mass.sum(axis=2) + self.name_like.sum(axis=2) <= 0).all(axis=1)

    def per_order(self) -> np.ndarray:
        """``p[s, o, w]``: the renormalised name distribution per state and order (uniform where
        no name was covered)."""
        m = np.asarray(self.mass)
        c = m.sum(axis=2, keepdims=True)
        W = m.shape[2]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(c > 0, m / np.where(c > 0, c, 1.0), 1.0 / W)

    def _combine(self, mass, weights, max_reasks):
        """Tables (and invalid probabilities) from masses ``(D, S, O, W)`` and order weights ``(D, O)``."""
        D, S, O, W = mass.shape
        c = np.minimum(mass.sum(axis=3), 1.0)  # (D, S, O)
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(c[..., None] > 0, mass / np.where(c > 0, mass.sum(axis=3), 1.0)[..., None], np.nan)
        has = c > 0
        wts = weights[:, None, :] * has  # orders without any name mass do not answer
        if max_reasks is None:  # re-ask until a pool name: the renormalised distribution per order
            tw = wts.sum(axis=2, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                tab = np.nansum(np.nan_to_num(p) * (wts / np.where(tw > 0, tw, 1.0))[..., None], axis=2)
            invalid = np.where(tw[..., 0] > 0, 0.0, 1.0)
        else:
            keep = 1.0 - (1.0 - c) ** (int(max_reasks) + 1)  # P(valid within R + 1 attempts) per order
            pv = np.nan_to_num(p) * (weights[:, None, :] * keep)[..., None]
            valid = pv.sum(axis=(2, 3))
            invalid = 1.0 - valid
            with np.errstate(invalid="ignore", divide="ignore"):
                tab = pv.sum(axis=2) / np.where(valid > 0, valid, 1.0)[..., None]
        empty = tab.sum(axis=2) <= 0
        tab[empty] = 1.0 / W
        return tab, np.clip(invalid, 0.0, 1.0)

    def _draw_masses(self, n_draws: int, g, reask_until_valid: bool = True):
        S, O, W = self.mass.shape
        m = np.broadcast_to(self.mass, (n_draws, S, O, W)).copy()
        if self.jitter_sd > 0:
            m *= np.exp(self.jitter_sd * g.standard_normal(m.shape))
        a = g.random((n_draws, S, 1, 1))
        m += a * self.name_like
        c = m.sum(axis=3, keepdims=True)
        m = np.where(c > 1.0, m / np.maximum(c, 1.0), m)
        unc = self.uncovered_states
        if unc.any() and reask_until_valid:  # no name ever covered: anything goes (capped: always invalid)
            m[:, unc] = g.dirichlet(np.ones(W), size=(n_draws, int(unc.sum()), O))
        if self.order_mixing == "average":
            w = np.full((n_draws, O), 1.0 / O)
        else:
            w = g.dirichlet(np.ones(O), size=n_draws)
        return m, w

    def sample_tables(self, n_draws: int, *, rng=None) -> np.ndarray:
        """Draws of the table of a population that re-asks until a pool name appears.

        Parameters
        ----------
        n_draws : int
        rng : None, int, SeedSequence or Generator, optional

        Returns
        -------
        numpy.ndarray, shape (n_draws, S, W)
        """
        tab, _ = self.sample_protocol(n_draws, max_reasks=None, rng=rng)
        return tab

    def sample_protocol(self, n_draws: int, *, max_reasks=None, rng=None) -> tuple[np.ndarray, np.ndarray]:
        """Draws of the decision distribution under a re-ask policy.

        Parameters
        ----------
        n_draws : int
        max_reasks : int or None
            ``None`` (or ``"unbounded"``): re-ask until a pool name appears (the renormalised
            table, invalid probability 0). An int ``R``: at most ``R`` re-asks; then
            ``invalid[s] = sum_o w_o (1 - C_o)^(R + 1)`` and the table is the distribution of
            the valid answers.
        rng : optional

        Returns
        -------
        (numpy.ndarray, numpy.ndarray)
            Tables ``(n_draws, S, W)`` and invalid probabilities ``(n_draws, S)``.
        """
        if isinstance(n_draws, bool) or not isinstance(n_draws, (int, np.integer)) or n_draws < 1:
            raise ValueError(f"n_draws must be an int >= 1; got {n_draws!r}")
        R = _check_reasks(max_reasks)
        m, w = self._draw_masses(int(n_draws), as_generator(rng), R is None)
        return self._combine(m, w, R)

    def tables(self, n_draws: int, *, rng=None) -> list:
        """Draws as :class:`~normlab.theory.strategies.StrategyTable` objects (for
        :func:`normlab.calibration.predict`)."""
        return [StrategyTable(t, memory=self.memory, names=self.names) for t in self.sample_tables(n_draws, rng=rng)]

    def mean_table(self):
        """The order-averaged renormalised table (no jitter, no name-like mass): what an
        exact-mode population plays.

        Returns
        -------
        normlab.theory.strategies.StrategyTable
        """
        O = len(self.orders)
        tab, _ = self._combine(self.mass[None], np.full((1, O), 1.0 / O), None)
        return StrategyTable(tab[0], memory=self.memory, names=self.names)

    def invalid_probability(self, max_reasks) -> np.ndarray:
        """Per state, the probability that a decision stays invalid after ``max_reasks`` re-asks
        (point estimate: order average, no jitter, name-like mass uncovered)."""
        R = _check_reasks(max_reasks)
        O = len(self.orders)
        _, inv = self._combine(self.mass[None], np.full((1, O), 1.0 / O), R)
        return inv[0]

    # ----------------------------------------------------------------- tidy output
    def state_labels(self) -> list:
        return state_labels(self.names, self.memory)

    def to_frame(self, *, n_draws: int = 400, level: float = 0.95, rng=0) -> pd.DataFrame:
        """One row per (memory state, name).

        Columns: ``state``, ``memory_state``, ``memory_len``, ``name``, ``p`` (the order
        average), ``low``, ``high`` (interval over ``n_draws`` draws), ``p_min_order``,
        ``p_max_order`` (spread over the name orders), ``covered_mass`` (mean over orders),
        ``name_like_mass``, ``invalid_reask2`` (probability that a decision stays invalid after
        normlab's default 2 re-asks), ``approx``.
        """
        S, O, W = self.mass.shape
        d = self.sample_tables(n_draws, rng=rng)
        a = (1 - level) / 2
        lo, hi = np.quantile(d, [a, 1 - a], axis=0)
        po = self.per_order()
        _, lens = _state_tables(W, self.memory)
        return pd.DataFrame({
            "state": np.repeat(np.arange(S), W),
            "memory_state": np.repeat(np.asarray(self.state_labels(), dtype=object), W),
            "memory_len": np.repeat(lens, W),
            "name": np.tile(np.asarray(self.names, dtype=object), S),
            "p": self.mean_table().table.reshape(-1),
            "low": lo.reshape(-1), "high": hi.reshape(-1),
            "p_min_order": po.min(axis=1).reshape(-1), "p_max_order": po.max(axis=1).reshape(-1),
            "covered_mass": np.repeat(self.covered.mean(axis=1), W),
            "name_like_mass": self.name_like.mean(axis=1).reshape(-1),
            "invalid_reask2": np.repeat(self.invalid_probability(2), W),
            "approx": np.repeat(self.approx.any(axis=1), W),
        })

    def diagnostics(self) -> dict:
        """The table's uncertainty in numbers: orders, jitter, covered and name-like mass, order
        spread, approximated distributions, states without any name."""
        c = self.covered
        po = self.per_order()
        spread = (po.max(axis=1) - po.min(axis=1)).max(axis=1)
        return {
            "orders": len(self.orders),
            "jitter_sd": self.jitter_sd,
            "order_mixing": self.order_mixing,
            "covered_mass_mean": float(c.mean()),
            "covered_mass_min": float(c.min()),
            "name_like_mass_max": float(self.name_like.sum(axis=2).max()),
            "order_spread_max": float(spread.max()),
            "order_spread_mean": float(spread.mean()),
            "approx_share": float(self.approx.mean()),
            "uncovered_states": int(self.uncovered_states.sum()),
        }

    def summary(self) -> dict:
        """The keys of :meth:`StrategyFit.summary` (what ``normlab calibrate --json`` reads; no
        sampler, so ``diagnostics`` is empty -- see :meth:`diagnostics`)."""
        return {
            "kind": self.kind,
            "names": list(self.names),
            "memory": self.memory,
            "decisions": None,
            "states_observed": int(self.n_states - self.uncovered_states.sum()),
            "states_total": int(self.n_states),
            "draws": None,
            "decay": None,
            "diagnostics": {},
            "meta": dict(self.meta),
        }

    def __repr__(self) -> str:
        s = self.diagnostics()
        return (f"ProbeFit({','.join(self.names)}, H={self.memory}, {self.n_states} states x {len(self.orders)} orders, "
                f"covered mass {s['covered_mass_mean']:.2f} (min {s['covered_mass_min']:.3f}), "
                f"order spread <= {s['order_spread_max']:.3f}, jitter sd {self.jitter_sd:.2g})")

    def _repr_html_(self) -> str:
        f = self.to_frame(n_draws=200)
        f = f[f["name"] == self.names[0]].drop(columns=["state", "name"])
        return (f"<p><b>{self!r}</b></p><p>p({self.names[0]} | state); interval over draws:</p>"
                + f.head(40).to_html(index=False, float_format=lambda v: f"{v:.3f}")
                + ("<p>(first 40 states; <code>to_frame()</code> has all)</p>" if len(f) > 40 else ""))

    # ----------------------------------------------------------------- serialisation
    def to_dict(self) -> dict:
        return {"format": "normlab.calibration.ProbeFit", "version": 1, "names": list(self.names),
                "memory": self.memory, "orders": list(self.orders), "mass": np.round(self.mass, 12).tolist(),
                "name_like": np.round(self.name_like, 12).tolist(), "jitter_sd": self.jitter_sd,
                "order_mixing": self.order_mixing, "approx": self.approx.tolist(), "meta": _jsonable(self.meta)}

    @classmethod
    def from_dict(cls, d: dict) -> "ProbeFit":
        if not isinstance(d, dict) or d.get("format") != "normlab.calibration.ProbeFit":
            raise ValueError("not a normlab ProbeFit document (missing format tag)")
        names, memory = table_shape(d.get("names"), d.get("memory"), "a ProbeFit")
        return cls(names=names, memory=memory, orders=tuple(d["orders"]),
                   mass=np.asarray(d["mass"], float), name_like=np.asarray(d["name_like"], float),
                   jitter_sd=float(d.get("jitter_sd", 0.0)), order_mixing=d.get("order_mixing", "average"),
                   approx=np.asarray(d.get("approx", []), bool), meta=d.get("meta", {}))

    def to_json(self, path) -> Path:
        return write_user_text(path, json.dumps(self.to_dict(), separators=(",", ":")))

    @classmethod
    def from_json(cls, path) -> "ProbeFit":
        """Read a table written by :meth:`to_json` (a regular file, size and depth capped)."""
        return cls.from_dict(read_user_json(path, str(path)))

    @classmethod
    def _contract_example(cls) -> "ProbeFit":
        """An exact probe of two names and memory one in both name orders, literal masses
        (``tests/umbrella/test_contracts.py``)."""
        p_b = np.array([0.5, 0.2, 0.6, 0.4, 0.9])
        mass = np.stack([np.stack([0.9 * (1 - p_b), 0.9 * p_b], axis=1)] * 2, axis=1)  # (5 states, 2 orders, 2 names)
        return cls(names=("A", "B"), memory=1, orders=("A,B", "B,A"), mass=mass, name_like=np.zeros(mass.shape),
                   meta={"model": "stub-model"})


def _check_reasks(max_reasks):
    if max_reasks is None or (isinstance(max_reasks, str) and max_reasks.strip().lower() == "unbounded"):
        return None
    if isinstance(max_reasks, bool) or not isinstance(max_reasks, (int, np.integer)) or not 0 <= max_reasks <= 100:
        raise ValueError(f"max_reasks must be None/'unbounded' or an int in 0..100; got {max_reasks!r}")
    return int(max_reasks)


# ----------------------------------------------------------------------------- from a probe directory
def _name_like(top, names, temperature, top_k, case_sensitive) -> np.ndarray:
    """Mass (under the sampler) of first tokens that start with a name and continue alphanumerically."""
    norm = name_normaliser(names, case_sensitive)
    nn = [norm(n) for n in names]
    out = np.zeros(len(names))
    dist, _ = sampler_probs(top, temperature, top_k)
    for tok, p in dist:
        s = norm(tok.lstrip())
        for w, n in enumerate(nn):
            if len(s) > len(n) and s.startswith(n) and s[len(n)].isalnum() and not any(m.startswith(s) for m in nn):
                out[w] += p
                break
    return out


def probe_fit(directory, *, jitter_sd: float = 0.0, order_mixing: str = "average") -> ProbeFit:
    """A :class:`ProbeFit` from the directory of an exact :func:`normlab.llm_runs.strategy_table`
    probe (its ``settings.json`` and journal).

    Parameters
    ----------
    directory : path
    jitter_sd : float, optional
        Logprob jitter of the endpoint (see :func:`probe_predict`, which measures it).
    order_mixing : {"average", "dirichlet"}, optional

    Returns
    -------
    ProbeFit
    """
    d = Path(directory)
    st = read_settings(d) if d.is_dir() else None
    if st is None:
        raise ValueError(f"{directory} holds no normlab probe (settings.json missing)")
    s = st["settings"]
    if s.get("probe") != "strategy" or s.get("mode") != "exact":
        raise ValueError(f"{directory} holds a {s.get('probe')} probe in {s.get('mode')} mode; an exact strategy-table "
                         "probe is needed (normlab llm-probe strategy --mode exact)")
    names, H = tuple(s["names"]), int(s["memory"])
    W = len(names)
    orders = list(itertools.permutations(range(W)))
    if s.get("orders") != "all":
        orders = orders[: int(s["orders"])]
    labels = state_labels(names, H)
    idx = {lab: k for k, lab in enumerate(labels)}
    S, O = n_states(W, H), len(orders)
    recs = read_journal(d / JOURNAL_FILE)
    tops = journal.first_token_tops(recs)
    mass = np.full((S, O, W), np.nan)
    nl = np.zeros((S, O, W))
    approx = np.zeros((S, O), bool)
    for a in journal.probe_answers(recs):
        state, _, oi = a.key.rpartition("|")
        if state not in idx or not oi.isdigit() or int(oi) >= O:
            continue
        sd, k, o = a.decision, idx[state], int(oi)
        cov = float(sd.covered_mass or 0.0)
        p = sd.probs
        mass[k, o] = np.asarray(p, float) * cov if p is not None else 0.0
        approx[k, o] = bool(sd.p_approx)
        top = tops.get(sd.prompt_hash)
        if top is not None:
            nl[k, o] = _name_like(top, names, float(s["temperature"]), s["top_k"], bool(s["case_sensitive"]))
    missing = np.isnan(mass).any(axis=(1, 2))
    if missing.any():
        raise ValueError(f"{directory}: {int(missing.sum())} of {S} memory states (x orders) are not probed yet; "
                         "run the probe to the end (it resumes)")
    nl = np.minimum(nl, np.clip(1.0 - mass.sum(axis=2, keepdims=True), 0.0, 1.0))
    meta = {"model": s.get("model"), "template": s.get("template"), "temperature": s.get("temperature"),
            "top_k": s.get("top_k"), "top_logprobs": s.get("top_logprobs"), "multi_token": s.get("multi_token"),
            "wrap": s.get("wrap"), "probe_directory": str(d), "source": {"n_runs": None}}
    shown = tuple(",".join(names[i] for i in o) for o in orders)
    return ProbeFit(names=names, memory=H, orders=shown, mass=mass, name_like=nl, jitter_sd=jitter_sd,
                    order_mixing=order_mixing, approx=approx, meta=meta)


# ----------------------------------------------------------------------------- endpoint jitter
async def _ajitter(directory, endpoint, n_states: int, rng) -> dict:
    """Re-ask ``n_states`` random (state, order) prompts of a probe directory without the cache and
    compare the top logprobs with the journaled ones."""
    d = Path(directory)
    s = read_settings(d)["settings"]
    tpl = load_template(s["template"])
    recs = read_journal(d / JOURNAL_FILE)
    tops = journal.first_token_tops(recs)
    jobs = [(a.key.rpartition("|")[0], a.decision.names_shown, a.decision.prompt_hash)
            for a in journal.probe_answers(recs) if a.decision.prompt_hash in tops]
    g = as_generator(rng)
    pick = [jobs[int(k)] for k in g.choice(len(jobs), size=min(int(n_states), len(jobs)), replace=False)] if jobs else []
    diffs = []

    async def ask(client, state, shown, ph):
        prompt = tpl.render(parse_memory_state(state), tuple(shown.split(",")), payoffs=tuple(s["payoffs"]))
        if s["wrap"] == "chat":
            res = await client.chat(prompt.messages(prompt.prefill), max_tokens=1, temperature=1.0, logprobs=True,
                                    top_logprobs=int(s["top_logprobs"]))
        else:
            res = await client.complete(prompt.text(s["wrap"], prompt.prefill), max_tokens=1, temperature=1.0,
                                        logprobs=True, top_logprobs=int(s["top_logprobs"]))
        old = {str(t): float(lp) for t, lp in tops[ph]}
        new = {str(t): float(lp) for t, lp in (res.top or [])}
        k = int(s["top_k"] or 10)
        return [new[t] - old[t] for t in sorted(old, key=lambda x: -old[x])[:k] if t in new]

    # sent concurrently, as populations send theirs to a remote server: two sequences sharing a
    # batch is the main source of the jitter. normlab's runs and probes now ask the embedded
    # server one request at a time, so for it this is an upper bound (the intervals are wider
    # than its runs need, never narrower)
    async with open_endpoint(endpoint) as client:
        for dd in await asyncio.gather(*(ask(client, *job) for job in pick)):
            diffs += dd
    diffs = np.asarray(diffs, float)
    sd = float(np.sqrt(np.mean(diffs**2) / 2.0)) if diffs.size else 0.0
    return {"prompts": len(pick), "tokens_compared": int(diffs.size), "jitter_sd": sd,
            "max_abs_diff": float(np.abs(diffs).max()) if diffs.size else 0.0}


def measure_jitter(directory, *, endpoint=None, n_states: int = 16, rng=None) -> dict:
    """Endpoint jitter: re-ask ``n_states`` prompts of an exact probe without the cache.

    Returns
    -------
    dict
        ``prompts``, ``tokens_compared`` (top-k tokens present in both answers),
        ``jitter_sd`` (root mean square logprob difference / sqrt(2): the sd of one call's
        logprob), ``max_abs_diff``.
    """
    if endpoint is None:
        endpoint = EndpointConfig.from_env()
    return run_sync(lambda: _ajitter(directory, endpoint, n_states, rng))


# ----------------------------------------------------------------------------- the prediction
@dataclass(frozen=True)
class ProbePrediction:
    """A population predicted from probes alone.

    Attributes
    ----------
    fit : ProbeFit
    prediction : normlab.calibration.Prediction
        Intervals over table draws of what an experiment of the paper's size would report.
    underlying : normlab.calibration.Prediction or None
        The same with :data:`UNDERLYING_RUNS` runs per draw: the interval is the table's
        uncertainty alone.
    cost : dict
        ``estimate`` (:class:`ProbeCost` before the probe) and what it took: ``llm_calls``,
        ``cache_hits`` (prompts answered from the journal or a cache), ``prompt_tokens``,
        ``completion_tokens``, ``probe_seconds``, ``predict_seconds``, ``jitter``.
    settings : dict

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, Tables S2-S3.
    """

    fit: ProbeFit
    prediction: object
    underlying: object = None
    cost: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """The ``normlab predict --probe --json`` object: the schema of ``normlab calibrate
        --json`` (built by the same code) plus ``success_curve`` (mean and interval per round,
        until the mean reaches 0.999), ``underlying`` and ``probe`` (cost, table uncertainty)."""
        out = calibration_summary(self.fit, self.prediction,
                                  {"llm": self.fit.meta.get("model"), "source": self.settings.get("source"),
                                   "fit_on": None, "asymmetry": None, "seconds": self.settings.get("seconds")},
                                  observed={})
        out["fit"]["decisions"] = None
        sc = self.prediction.success_curve()
        done = sc.loc[sc["mean"] >= 0.999, "round"]
        last = int(done.min()) + 5 if len(done) else len(sc)
        out["success_curve"] = [{"round": int(r["round"]), "mean": float(r["mean"]), "low": float(r["low"]),
                                 "high": float(r["high"])} for _, r in sc[sc["round"] <= last].iterrows()]
        out["underlying"] = _underlying_summary(self.underlying)
        out["probe"] = {"cost": _jsonable(self.cost), "table": self.fit.diagnostics(),
                        "settings": _jsonable(self.settings)}
        return out

    def to_frame(self) -> pd.DataFrame:
        """Headline quantities, long: ``quantity``, ``key``, ``estimate``, ``low``, ``high``,
        ``interval`` (``experiment``: what a paper-size experiment would report; ``underlying``)."""
        a = self.prediction.to_frame().assign(interval="experiment")
        if self.underlying is None:
            return a
        b = self.underlying.to_frame().assign(interval="underlying")
        b = b[b["quantity"] != "critical_mass"]  # the published rule is an experiment-size reading
        return pd.concat([a, b], ignore_index=True)

    def __repr__(self) -> str:
        p = self.prediction
        pc = p.p_consensus()
        r = p.rounds_to_95()
        return (f"ProbePrediction({self.fit.meta.get('model')}, {','.join(p.names)}, H={p.memory}, N={p.n_agents}: "
                + ", ".join(f"P({k})={v:.2f}" for k, v in pc.items())
                + f", rounds to 0.95 {r['estimate']:.3g} [{r['low']:.3g}, {r['high']:.3g}])")

    def _repr_html_(self) -> str:
        return f"<p><b>{self!r}</b></p>" + self.to_frame().to_html(index=False, float_format=lambda v: f"{v:.3g}")

    @plotting
    def plot(self, ax=None):
        """Predicted success curve (band: experiment interval; dashed: underlying) and, beside it,
        the probed ``p(first name | state)`` with its order spread."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(1, 2, figsize=(10, 3.6))
        ax0, ax1 = (ax if np.ndim(ax) else (ax, None))
        sc = self.prediction.success_curve()
        ax0.fill_between(sc["round"], sc["low"], sc["high"], alpha=0.25, color="C0", label="paper-size experiment")
        ax0.plot(sc["round"], sc["mean"], color="C0", label="predicted mean")
        if self.underlying is not None:
            su = self.underlying.success_curve()
            ax0.plot(su["round"], su["low"], "--", color="C0", lw=0.8, label="underlying interval")
            ax0.plot(su["round"], su["high"], "--", color="C0", lw=0.8)
        ax0.axhline(0.95, color="0.6", lw=0.8)
        done = sc.loc[sc["mean"] >= 0.995, "round"]
        last = int(done.min()) if len(done) else len(sc)
        ax0.set(xlim=(1, min(len(sc), max(10, int(1.5 * last)))), xlabel="population round", ylabel="success rate",
                title=f"N = {self.prediction.n_agents}, H = {self.prediction.memory} (probe only)")
        ax0.legend(fontsize=8, frameon=False)
        if ax1 is not None:
            f = self.fit.to_frame(n_draws=200)
            f = f[f["name"] == self.fit.names[0]].reset_index(drop=True)
            x = np.arange(len(f))
            ax1.vlines(x, f["p_min_order"], f["p_max_order"], color="0.6", lw=1, label="spread over name orders")
            ax1.errorbar(x, f["p"], yerr=error_bars(f["p"], f["low"], f["high"]), fmt="o", ms=2.5, color="C3",
                         lw=0.8, label="order average (interval over draws)")
            ax1.set(xlabel="memory state (stable order)", ylabel=f"p({self.fit.names[0]} | state)", ylim=(-0.02, 1.02))
            ax1.legend(fontsize=8, frameon=False)
        ax0.figure.tight_layout()
        return ax

    @classmethod
    def _contract_example(cls) -> "ProbePrediction":
        """:meth:`ProbeFit._contract_example` with :meth:`Prediction._contract_example` as both the
        experiment and the underlying reading (``tests/umbrella/test_contracts.py``)."""
        from .result import Prediction

        pred = Prediction._contract_example()
        return cls(fit=ProbeFit._contract_example(), prediction=pred, underlying=pred, cost={"llm_calls": 10},
                   settings={"source": "toy probe"})


def _underlying_summary(pred) -> dict | None:
    if pred is None:
        return None
    s = pred.summary()
    out = {"runs_per_draw": pred.settings.get("n_runs_consensus"), "draws": s["draws"],
           "p_consensus": s["p_consensus"], "p_consensus_interval": s["p_consensus_interval"],
           "rounds_to_95": s["rounds_to_95"], "consensus_rounds": s["consensus_rounds"],
           "critical_mass_per_run": {k: v["per_run"] for k, v in s["critical_mass"].items()}}
    return _jsonable(out)


def probe_predict(names, memory: int, *, n_agents: int, endpoint=None, out=None, cache=None, template="main",
                  n_draws: int = 200, jitter_states: int = 16, order_mixing: str = "average",
                  n_runs_consensus: int = 40, n_runs_flip: int = 16, within_rounds: int = 30,
                  max_rounds: int = 200, max_round: int | None = None, strength: bool = True,
                  underlying: bool = True, progress: bool = True, announce: bool | None = None, rng=None,
                  **sampling) -> ProbePrediction:
    """Probe every memory state of a model exactly and predict its population.

    Parameters
    ----------
    names : str or sequence of str
        Name pool, e.g. ``"F,J"``.
    memory : int
        Memory length ``H`` (states of length ``0..H`` are probed: ``sum_k W^(2k)``).
    n_agents : int
        Population size ``N`` of the prediction.
    endpoint : EndpointConfig, optional
        Default: the environment, else the embedded SmolLM2 server.
    out : path, optional
        Probe directory: every answer is journaled there and a rerun resumes (and reuses) it.
        Without it a temporary directory is used and nothing is kept.
    cache : path or sequence of paths, optional
        Run or probe directories whose exact-mode answers are reused (e.g. a probe at a larger H).
    template : str, optional
    n_draws : int, optional
        Table draws of the prediction.
    jitter_states : int, optional
        Prompts re-asked without the cache to measure the endpoint's logprob jitter (0: assume
        none).
    order_mixing : {"average", "dirichlet"}, optional
        See :class:`ProbeFit`.
    n_runs_consensus, n_runs_flip, within_rounds, max_rounds, max_round, strength
        As in :func:`normlab.calibration.predict` (the paper's experiment sizes by default).
    underlying : bool, optional
        Also predict with :data:`UNDERLYING_RUNS` runs per draw (the table's own uncertainty).
    progress : bool, optional
        Progress bars (stderr).
    announce : bool, optional
        Print the cost estimate (calls, tokens, cached) on stderr before probing (default: as
        ``progress``).
    rng : optional
        Seed of the probe's journal, of the jitter prompts and of the draws and simulations.
    **sampling
        Sampler settings of the probe as in :func:`normlab.llm_runs.strategy_table`
        (``temperature``, ``top_k``, ``top_logprobs``, ``multi_token``, ``wrap``, ``payoffs``...).

    Returns
    -------
    ProbePrediction

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1, Fig. S8, Figs. 1-3,
    Tables S2-S3.
    """
    settings = ProbeSettings(n_agents=n_agents, memory=memory, n_draws=n_draws, jitter_states=jitter_states,
                             order_mixing=order_mixing, underlying=underlying, template=template,
                             n_runs_consensus=n_runs_consensus, n_runs_flip=n_runs_flip, within_rounds=within_rounds,
                             max_rounds=max_rounds, max_round=max_round, strength=strength)  # before any request
    return run_probe_prediction(names, settings, endpoint=endpoint, out=out, cache=cache, progress=progress,
                                announce=announce, rng=rng, **sampling)


def run_probe_prediction(names, settings: ProbeSettings, *, endpoint=None, out=None, cache=None, progress: bool = True,
                         announce: bool | None = None, rng=None, **sampling) -> ProbePrediction:
    """The engine of :func:`probe_predict`, its settings in one :class:`ProbeSettings`.

    Parameters
    ----------
    names : str or sequence of str
    settings : ProbeSettings
    endpoint, out, cache, progress, announce, rng, **sampling
        As for :func:`probe_predict`.

    Returns
    -------
    ProbePrediction
    """
    t_start = time.perf_counter()
    if not isinstance(settings, ProbeSettings):
        raise TypeError(f"settings must be a ProbeSettings; got {type(settings).__name__}")
    s = settings
    N, H, D, js, order_mixing, template = s.n_agents, s.memory, s.n_draws, s.jitter_states, s.order_mixing, s.template
    n_runs_flip, underlying = s.n_runs_flip, s.underlying
    if endpoint is None:
        endpoint = EndpointConfig.from_env()
    if not isinstance(endpoint, EndpointConfig):
        raise TypeError(f"endpoint must be an EndpointConfig or None; got {type(endpoint).__name__}")
    if "mode" in sampling or "orders" in sampling:
        raise TypeError("probe_predict always probes in exact mode, every name order")
    cache = _check_sources(cache)
    if out is not None and Path(out).exists() and not Path(out).is_dir():
        raise ValueError(f"--out {out} exists and is not a directory")
    est = probe_cost(names, H, template=template, payoffs=sampling.get("payoffs", (100, -50)), out=out, cache=cache)
    if progress if announce is None else announce:
        print(f"normlab predict: {est.line()}", file=sys.stderr, flush=True)
    seeds = spawn(rng, 4)
    t_seeds, p_seeds = seeds[2].spawn(2), seeds[3].spawn(2)
    tmp = tempfile.TemporaryDirectory(prefix="normlab-probe-") if out is None else None
    directory = Path(tmp.name) / "probe" if tmp is not None else Path(out)
    try:
        t0 = time.perf_counter()
        # exact answers do not depend on the seed; a directory keeps the seed it was started with
        resumed = directory.is_dir() and read_settings(directory) is not None
        before = _usage(directory) if resumed else None
        probe = strategy_table(names, H, mode="exact", orders="all", template=template, endpoint=endpoint,
                               out=directory, cache=cache or None, progress=progress,
                               rng=None if resumed else seeds[0], **sampling)
        t_probe = time.perf_counter() - t0
        usage = _usage(directory, before)
        jit = {"prompts": 0, "tokens_compared": 0, "jitter_sd": 0.0, "max_abs_diff": 0.0}
        if js:  # one --budget over the probe and these re-asks: what the probe journaled counts
            jit = measure_jitter(directory, endpoint=_budget_left(endpoint, usage), n_states=js, rng=seeds[1])
        fit = probe_fit(directory, jitter_sd=jit["jitter_sd"], order_mixing=order_mixing)
    finally:
        if tmp is not None:
            tmp.cleanup()
    if out is None:
        fit = dataclasses.replace(fit, meta={**fit.meta, "probe_directory": None})
    pk = dict(n_agents=N, within_rounds=s.within_rounds, max_rounds=s.max_rounds, max_round=s.max_round,
              strength=s.strength)
    t1 = time.perf_counter()
    with elapsed_bar(f"predicting ({D} table draws)", enabled=progress):
        pred = predict(fit.tables(D, rng=t_seeds[0]), n_draws=D, n_runs_consensus=s.n_runs_consensus,
                       n_runs_flip=n_runs_flip, rng=p_seeds[0], **pk)
        und = None
        if underlying:
            Du = min(D, 50)
            und = predict(fit.tables(Du, rng=t_seeds[1]), n_draws=Du, n_runs_consensus=UNDERLYING_RUNS,
                          n_runs_flip=4 * n_runs_flip, rng=p_seeds[1], **{**pk, "strength": False})
    t_pred = time.perf_counter() - t1
    pred = dataclasses.replace(pred, fit_summary=fit.summary())
    cost = {"estimate": est.to_dict(), **usage, "llm_calls": probe.llm_calls, "probe_seconds": round(t_probe, 2),
            "predict_seconds": round(t_pred, 2), "jitter": jit}
    settings = {"source": f"exact probe of {probe.model}" + (f" in {out}" if out is not None else ""),
                "n_draws": D, "order_mixing": order_mixing, "jitter_states": js, "template": str(template),
                "seconds": round(time.perf_counter() - t_start, 2), "underlying_runs": UNDERLYING_RUNS if underlying else None}
    return ProbePrediction(fit=fit, prediction=pred, underlying=und, cost=cost, settings=settings)


def _budget_left(endpoint, usage: dict):
    """``endpoint`` with its caps less what the probe's directory has spent (``usage``: :func:`_usage`);
    a cap already reached is :class:`~normlab.llm_runs.BudgetExhausted`."""
    if endpoint.budget_tokens is None and endpoint.budget_usd is None:
        return endpoint
    tok = usage["prompt_tokens"] + usage["completion_tokens"]
    usd = (usage["prompt_tokens"] * endpoint.price_input + usage["completion_tokens"] * endpoint.price_output) / 1e6
    kw = {}
    if endpoint.budget_tokens is not None:
        kw["budget_tokens"] = endpoint.budget_tokens - tok
    if endpoint.budget_usd is not None:
        kw["budget_usd"] = endpoint.budget_usd - usd
    if any(v <= 0 for v in kw.values()):
        raise BudgetExhausted(f"budget reached: the probe spent {tok:,} tokens (${usd:.4f}); the endpoint-jitter "
                              "requests (--jitter-states) need more")
    return dataclasses.replace(endpoint, **kw)


def _usage(directory, before: dict | None = None) -> dict:
    """Prompts, requests, reuse and tokens journaled in a probe directory (``*_now``: since
    ``before``, the usage when this invocation started)."""
    f = Path(directory) / JOURNAL_FILE
    recs = read_journal(f) if f.exists() else []
    requests = journal.calls(recs)
    probes = journal.probe_answers(recs)
    b = before or {"decisions": 0, "requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
    new = probes[b["decisions"]:]
    out = {"decisions": len(probes), "requests": len(requests),
           "prompt_tokens": int(sum(c.prompt_tokens for c in requests)),
           "completion_tokens": int(sum(c.completion_tokens for c in requests)),
           "imported": journal.count(recs, journal.IMPORTED)}
    out["requests_now"] = out["requests"] - b["requests"]
    out["prompt_tokens_now"] = out["prompt_tokens"] - b["prompt_tokens"]
    # prompts answered without a request now: probed in an earlier invocation, or from a cache
    out["cache_hits"] = int(b["decisions"] + sum(1 for a in new if a.decision.cache_hit))
    return out
