"""Probes of Flint Ashery et al. (2025): individual bias, neutral name pools, strategy tables and meta-prompting.

Each probe prompts single agents with chosen memories (no population), in ``exact`` mode
(next-token distributions, cached per prompt) or ``sample`` mode (generations, counted with
Clopper-Pearson intervals), and returns a frozen result with a tidy ``to_frame()``. With ``out``
the probe journals every call and answer there and resumes from it when run again.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import re
import string
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from normlab._display import (fmt, html_card, legend_outside, load_result, new_axes, plain, plotting, save_result,
                              short_repr)
from normlab._rng import as_generator, as_seed_sequence
from normlab._validate import check_int
from normlab.schema import GameLog, memory_state_string, parse_memory_state, relabel_state, validate_names

from .backend import EndpointConfig, open_endpoint
from .journal import JOURNAL_FILE, Journal, read_settings, write_settings
from .prompts import load_meta_template, load_template, parse_answer
from .runner import (REASK_SAFETY_LIMIT, UNBOUNDED, GameSettings, ReaskLimitError, _compare, _Game, _seed_list,
                     check_reasks, load_cache, longest_prompt_bytes, make_settings)

ALPHABET = string.digits + string.ascii_letters


def clopper_pearson(count, n, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Exact (Clopper-Pearson) binomial confidence interval, vectorised; NaN where ``n == 0``."""
    from scipy.stats import beta

    count = np.asarray(count, dtype=float)
    n = np.asarray(n, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(count > 0, beta.ppf(alpha / 2, count, n - count + 1), 0.0)
        hi = np.where(count < n, beta.ppf(1 - alpha / 2, count + 1, n - count), 1.0)
    bad = n <= 0
    lo = np.where(bad, np.nan, lo)
    hi = np.where(bad, np.nan, hi)
    return lo, hi


def enumerate_states(names: Sequence[str], memory: int) -> list[str]:
    """Every memory state of length 0..``memory`` over the pool (schema strings, oldest first).

    There are ``sum_k W^(2k)`` states (1365 for W = 2, H = 5), ordered by length, then by the
    pool order of the entries.

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1; Fig. S8.
    """
    names = validate_names(names)
    pairs = [(a, b) for a in names for b in names]
    out = []
    for k in range(memory + 1):
        for combo in itertools.product(pairs, repeat=k):
            out.append(memory_state_string(combo))
    return out


def _mirror_map(names: Sequence[str]) -> dict:
    """The relabelling reversing the pool (``Q <-> M`` for ``W = 2``)."""
    return dict(zip(names, reversed(names)))


# ----------------------------------------------------------------------------- shared session
class _Probe:
    """One endpoint session, journal and decision cache for a probe."""

    def __init__(self, kind: str, settings: GameSettings, tpl, endpoint, out, progress, rng, extra: dict,
                 cache=None):
        self.kind, self.s, self.tpl, self.endpoint = kind, settings, tpl, endpoint
        self.imported = load_cache(cache)
        self.directory = Path(out) if out is not None else None
        self.progress = progress
        self.extra = extra
        self.requested_seed = None if rng is None else _seed_list(as_seed_sequence(rng))
        self.done: dict[str, dict] = {}

    def _check_dir(self):
        d = self.directory
        if d is None:
            return None
        from normlab._validate import check_out_dir

        check_out_dir(d)
        stored = read_settings(d) if d.exists() else None
        if stored is None and d.exists() and any(d.iterdir()):
            raise ValueError(f"output directory {d} is not empty and holds no normlab probe; choose another")
        if stored is not None:
            req = {**self.s.to_dict(), "probe": self.kind, **self.extra}
            free = ["model", "seed"]
            if self.requested_seed is not None:
                req["seed"] = list(self.requested_seed)
                free.remove("seed")
            if self.endpoint.model is not None:
                req["model"] = self.endpoint.model
                free.remove("model")
            diffs = _compare(stored["settings"], req, free)
            if diffs:
                raise ValueError(f"{d} holds a probe with different settings ({'; '.join(diffs)}); use another directory")
            st = stored["settings"]
            self.s = GameSettings(**{**self.s.__dict__, "seed": tuple(st["seed"]), "model": st["model"]})
        return stored

    async def __aenter__(self):
        stored = self._check_dir()
        self.journal = Journal(self.directory / JOURNAL_FILE if self.directory else None)
        for r in self.journal.records:
            if r.get("ev") == "probe":
                self.done[r["key"]] = r["side"]
        # the game's own prompts (bias, strategy, neutral): the embedded server's KV cache is sized to them
        # (the embedded server answers one request at a time, EndpointConfig.embedded_parallel)
        self._ep = open_endpoint(self.endpoint, prompt_bytes=longest_prompt_bytes(self.s, self.tpl),
                                 max_new_tokens=1 if self.s.mode == "exact" else self.s.max_tokens)
        self.client = await self._ep.__aenter__()
        try:
            if stored is not None and self.s.model != self.client.model:
                raise ValueError(f"{self.directory} was probed with model {self.s.model!r}; the endpoint serves {self.client.model!r}")
            if stored is None:
                seed = self.requested_seed or _seed_list(np.random.SeedSequence())
                self.s = GameSettings(**{**self.s.__dict__, "seed": tuple(seed), "model": self.client.model})
                if self.directory is not None:
                    write_settings(self.directory, {**self.s.to_dict(), "probe": self.kind, **self.extra}, self.s.digest)
            self.game = _Game(self.s, self.tpl, None, self.client, self.journal.open(), imported=self.imported)
            self.ss = self.s.seed_sequence()
        except BaseException:
            await self._ep.__aexit__(None, None, None)
            raise
        self.t0 = time.perf_counter()
        return self

    async def __aexit__(self, *exc):
        self.journal.close()
        await self._ep.__aexit__(*exc)

    @property
    def llm_calls(self) -> int:
        return sum(1 for r in self.journal.records if r.get("ev") == "call")

    def draws(self, index: int):
        g = np.random.Generator(np.random.PCG64(np.random.SeedSequence(
            self.ss.entropy, spawn_key=tuple(self.ss.spawn_key) + (index,))))
        order = g.permutation(len(self.s.names))
        return order, float(g.random()), int(g.integers(0, 2**31 - 1))

    async def decide(self, key: str, index: int, memory, order=None) -> dict:
        """One decision (cached by ``key`` in the journal); ``order`` overrides the drawn one."""
        if key in self.done:
            return self.done[key]
        o, u, seed = self.draws(index)
        if order is not None:
            o = order
        side = await self.game.decide(0, index, 0, memory, o, u, seed)
        side["order"] = [int(x) for x in o]
        self.journal.write({"ev": "probe", "key": key, "side": side}, sync=True)
        self.done[key] = side
        return side

    async def run_all(self, jobs, desc: str):
        """Run ``(key, index, memory, order)`` jobs concurrently (bounded by the client)."""
        pbar = None
        if self.progress:
            from tqdm.auto import tqdm

            pbar = tqdm(total=len(jobs), desc=desc, leave=False, dynamic_ncols=True)

        async def one(job):
            side = await self.decide(*job)
            if pbar is not None:
                pbar.update(1)
            return side

        try:
            # the semaphore lives in the client; gather in slices to keep memory flat
            out = []
            step = max(8, 4 * self.endpoint.concurrency)
            for k in range(0, len(jobs), step):
                out.extend(await asyncio.gather(*(one(j) for j in jobs[k:k + step])))
            return out
        finally:
            if pbar is not None:
                pbar.close()


def ordered_prompt_text(tpl, s, memory, order) -> str:
    """The text of a probe prompt (``order``: indices of the names shown; ``None``: as listed),
    used only to order requests so that prompts sharing a prefix are asked one after another."""
    shown = list(s.names) if order is None else [s.names[k] for k in order]
    p = tpl.render(list(memory), shown, payoffs=s.payoffs)
    return "".join(m["content"] for m in p.messages(None))


def _settings(names, memory, mode, template, kw, embedded):
    return make_settings(
        2, memory, names, max_interactions=1, runs=1, mode=mode, template=template,
        payoffs=kw.pop("payoffs", (100, -50)), temperature=kw.pop("temperature", 0.5),
        top_k=kw.pop("top_k", 10), max_tokens=kw.pop("max_tokens", 6), top_logprobs=kw.pop("top_logprobs", 20),
        max_reasks=kw.pop("max_reasks", 2), prefill=kw.pop("prefill", None),
        multi_token=kw.pop("multi_token", "expand"), case_sensitive=kw.pop("case_sensitive", False),
        embedded=embedded, wrap=kw.pop("wrap", "chat"), top_p=kw.pop("top_p", 1.0), min_p=kw.pop("min_p", 0.0),
        parse=kw.pop("parse", "normlab"),
    )


def _endpoint(endpoint):
    if endpoint is None:
        endpoint = EndpointConfig.from_env()
    if not isinstance(endpoint, EndpointConfig):
        raise TypeError(f"endpoint must be an EndpointConfig or None; got {type(endpoint).__name__}")
    return endpoint


def _unknown(kw):
    if kw:
        raise TypeError(f"unexpected keyword argument(s) {sorted(kw)}")


# ----------------------------------------------------------------------------- individual bias
def bootstrap_p(counts, *, n_boot: int = 10_000, fraction: float = 0.7, null: float = 0.5, rng=None) -> float:
    """One-tailed bootstrap p of Table S5 (the authors' ``one_tailed_test``).

    The ``n = c0 + c1`` answers are resampled with replacement ``n_boot`` times in subsamples of
    ``int(fraction * n)``; with ``m = c1 / n`` the observed share of the *second* name, the p-value
    is the share of bootstrap means ``<= m`` when ``m < null`` and ``>= m`` otherwise (so it does
    not depend on which name is second). A large p means "insufficient evidence that the model's
    underlying bias is more extreme than observed" (Table S5, p-double-dagger).

    Parameters
    ----------
    counts : sequence of 2 ints
        Answers per name ``(c0, c1)``.
    n_boot : int
        Bootstrap samples (10 000 in the paper).
    fraction : float
        Subsample size as a share of ``n`` (0.7 in the paper).
    null : float
        Share that decides the tail (0.5).
    rng : None, int, SeedSequence or Generator
        The authors seeded NumPy's global generator with 42; normlab takes a seed here. Each
        subsample mean is drawn as ``Binomial(int(fraction * n), m) / int(fraction * n)``, the
        exact distribution of the mean of a with-replacement subsample.

    Returns
    -------
    float

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table S5. AI-norms code
    (MIT): ``analyse_individual_bias.py`` and ``data-era/bias.ipynb`` (``bootstrap``,
    ``one_tailed_test``).
    """
    c = list(counts) if not isinstance(counts, np.ndarray) else counts.tolist()
    if len(c) != 2 or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 0 for x in c):
        raise ValueError(f"counts must be two ints >= 0 (answers per name); got {counts!r}")
    n = int(c[0]) + int(c[1])
    if n == 0:
        raise ValueError("counts must hold at least one answer")
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 1:
        raise ValueError(f"n_boot must be an int >= 1; got {n_boot!r}")
    if not (isinstance(fraction, (int, float)) and 0 < fraction <= 1):
        raise ValueError(f"fraction must be in (0, 1]; got {fraction!r}")
    m_size = int(fraction * n)
    if m_size < 1:
        raise ValueError(f"int(fraction * n) = {m_size}: too few answers ({n}) for a subsample")
    obs = c[1] / n
    g = as_generator(rng)
    means = g.binomial(m_size, obs, size=int(n_boot)) / m_size
    tail = means <= obs if obs < null else means >= obs
    return float(np.sum(tail) / len(means))


@dataclass(frozen=True)
class BiasResult:
    """Individual bias: ``trials`` decisions of agents with empty memory.

    Attributes
    ----------
    names : tuple of str
    counts : tuple of int
        Valid decisions per name.
    invalid : int
    trials : int
    test : str
        ``"binomial"`` (two-sided exact test of ``p = 1/2``, W = 2) or ``"chi2"`` (uniform, W > 2).
    statistic, p_value : float
        Test statistic (the first name's count for the binomial test) and p-value.
    exact_p : tuple of float or None
        Exact mode: the model's distribution averaged over the decisions (i.e. over the name
        orders shown); ``None`` in sample mode.
    covered_mass : float
        Exact mode: mean probability mass of the pool names before renormalising (NaN in sample).
    jsd : float
        Jensen-Shannon distance (base 2) of ``exact_p`` (exact mode) or of the observed shares
        (sample mode) from the uniform distribution.
    mode, model : str
    llm_calls : int
    bootstrap_p : float
        Table S5's one-tailed bootstrap p (:func:`bootstrap_p`, 10 000 subsamples of 70 %;
        W = 2 only, else NaN).

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Materials and Methods,
    Measuring Individual Bias; Fig. 2B (left), Figs. S4A, S5; Table S1.
    """

    names: tuple
    counts: tuple
    invalid: int
    trials: int
    test: str
    statistic: float
    p_value: float
    exact_p: tuple | None
    covered_mass: float
    jsd: float
    mode: str
    model: str
    llm_calls: int
    decisions: pd.DataFrame | None = None
    bootstrap_p: float = float("nan")

    @property
    def n_valid(self) -> int:
        return int(sum(self.counts))

    def to_frame(self) -> pd.DataFrame:
        """One row per name: ``name``, ``count``, ``n``, ``share``, ``ci_low``, ``ci_high``
        (Clopper-Pearson 95%), ``p_exact`` (NaN in sample mode), ``p_value``, ``jsd``, ``model``."""
        n = self.n_valid
        lo, hi = clopper_pearson(self.counts, [n] * len(self.counts))
        return pd.DataFrame({
            "name": list(self.names), "count": list(self.counts), "n": n,
            "share": [c / n if n else np.nan for c in self.counts], "ci_low": lo, "ci_high": hi,
            "p_exact": list(self.exact_p) if self.exact_p is not None else np.nan,
            "test": self.test, "p_value": self.p_value, "bootstrap_p": self.bootstrap_p, "jsd": self.jsd,
            "mode": self.mode, "model": self.model,
        })

    def summary(self) -> dict:
        """Counts, shares, the neutrality test and the JSD as plain Python values."""
        n = self.n_valid
        return plain({"model": self.model, "mode": self.mode, "names": list(self.names), "trials": self.trials,
                      "valid": n, "invalid": self.invalid, "counts": dict(zip(self.names, self.counts)),
                      "shares": {nm: (c / n if n else None) for nm, c in zip(self.names, self.counts)},
                      "exact_p": None if self.exact_p is None else dict(zip(self.names, self.exact_p)),
                      "test": self.test, "p_value": _none_nan(self.p_value), "bootstrap_p": _none_nan(self.bootstrap_p),
                      "jsd": _none_nan(self.jsd), "covered_mass": _none_nan(self.covered_mass),
                      "llm_calls": self.llm_calls})

    def __repr__(self) -> str:
        n = self.n_valid
        shares = ", ".join(f"{nm} {c / n:.2f}" if n else f"{nm} -" for nm, c in zip(self.names, self.counts))
        return short_repr("BiasResult", self.model, f"{self.mode} mode", f"{self.trials} trials ({self.invalid} invalid)",
                          f"shares {shares}", f"{self.test} p = {fmt(self.p_value)}", f"JSD = {fmt(self.jsd)}")

    def _repr_html_(self) -> str:
        f = self.to_frame()
        rows = [(f"share of {r['name']}", r["share"], (r["ci_low"], r["ci_high"]),
                 f"{int(r['count'])}/{int(r['n'])}" + ("" if self.exact_p is None else f"; exact p = {r['p_exact']:.3f}"))
                for _, r in f.iterrows()]
        rows += [(f"{self.test} test of neutrality, p", self.p_value), ("JSD from uniform (base 2)", self.jsd)]
        if np.isfinite(self.bootstrap_p):
            rows.append(("bootstrap p (Table S5)", self.bootstrap_p))
        return html_card("BiasResult", rows, subtitle=f"individual bias, {self.model}, {self.mode} mode",
                         settings={"trials": self.trials, "invalid": self.invalid, "LLM calls": self.llm_calls},
                         note="Clopper-Pearson intervals; .plot() draws the shares against 1/W.")

    @plotting
    def plot(self, *, ax=None):
        """Share of each name among valid first moves, Clopper-Pearson 95% intervals, the
        model's exact probabilities (exact mode) and the neutral share ``1/W``.

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 2B (left), Fig. S5.
        """
        f = self.to_frame()
        ax = new_axes(ax, (max(3.0, 0.7 * len(f) + 1.6) + 2.6, 3.6))
        x = np.arange(len(f))
        ax.bar(x, f["share"], color="C0", alpha=0.75, label="share of valid answers")
        ax.errorbar(x, f["share"], yerr=[f["share"] - f["ci_low"], f["ci_high"] - f["share"]], fmt="none",
                    ecolor="0.2", capsize=4, lw=1, label="95% CI")
        if self.exact_p is not None:
            ax.plot(x, f["p_exact"], "D", color="C3", ms=6, label="model probability (exact)")
        ax.axhline(1.0 / len(f), color="0.4", ls="--", lw=1, label="neutral (1/W)")
        ax.set_xticks(x, [str(n) for n in f["name"]])
        ax.set(ylim=(0, 1.02), ylabel="P(name | empty memory)",
               title=f"{self.model}: {self.test} p = {fmt(self.p_value)}, JSD = {fmt(self.jsd)}")
        ax.title.set_fontsize(9)
        legend_outside(ax)
        return ax

    def to_log(self) -> GameLog:
        """The decisions as a :class:`~normlab.schema.GameLog` of kind ``probe`` (one row per trial;
        ``partner = -1``)."""
        d = self.decisions
        rows = {
            "run": 0, "t": d["trial"].to_numpy(), "round": d["trial"].to_numpy(), "agent": 0, "partner": -1,
            "name": d["name"].to_numpy(), "partner_name": None, "valid": d["name"].notna().to_numpy(),
            "success": False, "committed": False, "memory_state": "", "memory_len": 0,
            "names_shown": d["names_shown"].to_numpy(), "p_name": d["p_name"].to_numpy(),
        }
        runs = {"run": [0], "model": [self.model], "kind": ["probe"], "names": [",".join(self.names)],
                "n_agents": [1], "memory": [1], "committed_count": [0], "committed_name": [None],
                "initial": ["empty"], "n_interactions": [self.trials], "consensus": [None], "source_file": [None]}
        return GameLog(pd.DataFrame(rows), pd.DataFrame(runs))


def _bias_stats(names, counts, exact_p):
    from scipy.spatial.distance import jensenshannon
    from scipy.stats import binomtest, chisquare

    n = int(sum(counts))
    W = len(names)
    if n == 0:
        test, stat, p = ("binomial" if W == 2 else "chi2"), np.nan, np.nan
    elif W == 2:
        test, stat, p = "binomial", float(counts[0]), float(binomtest(int(counts[0]), n, 0.5).pvalue)
    else:
        r = chisquare(counts)
        test, stat, p = "chi2", float(r.statistic), float(r.pvalue)
    dist = np.asarray(exact_p, float) if exact_p is not None else (np.asarray(counts, float) / n if n else None)
    jsd = float(jensenshannon(dist, np.full(W, 1.0 / W), base=2)) if dist is not None else np.nan
    return test, stat, p, jsd


async def aindividual_bias(names, *, trials: int = 100, mode: str = "exact", template="main",
                           endpoint: EndpointConfig | None = None, out=None, progress: bool = True,
                           rng=None, **kw) -> BiasResult:
    """Coroutine version of :func:`individual_bias`."""
    endpoint = _endpoint(endpoint)
    if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 1:
        raise ValueError(f"trials must be an int >= 1; got {trials!r}")
    cache = kw.pop("cache", None)
    s, tpl, _ = _settings(names, 1, mode, template, kw, endpoint.embedded)
    _unknown(kw)
    async with _Probe("bias", s, tpl, endpoint, out, progress, rng, {"trials": int(trials)}, cache) as pr:
        sides = await pr.run_all([(f"bias|{k}", k, (), None) for k in range(trials)], "individual bias")
        calls = pr.llm_calls
        model = pr.s.model
    names_t = pr.s.names
    counts = tuple(int(sum(1 for x in sides if x.get("name") == n)) for n in names_t)
    invalid = sum(1 for x in sides if x.get("name") is None)
    exact_p, cov = None, np.nan
    if pr.s.mode == "exact":
        ps = [x["p"] for x in sides if x.get("p") is not None]
        exact_p = tuple(np.mean(ps, axis=0)) if ps else None
        cov = float(np.mean([x.get("cov", 0.0) for x in sides]))
    test, stat, p, jsd = _bias_stats(names_t, counts, exact_p)
    boot = np.nan
    if len(names_t) == 2 and sum(counts) and int(0.7 * sum(counts)) >= 1:
        entropy, *key = pr.s.seed
        boot = bootstrap_p(counts, rng=np.random.SeedSequence(int(entropy), spawn_key=tuple(key) + (int(trials), 1)))
    dec = pd.DataFrame({
        "trial": np.arange(trials), "name": [x.get("name") for x in sides],
        "names_shown": [x.get("shown") for x in sides],
        "p_name": [x.get("pn", np.nan) if x.get("pn") is not None else np.nan for x in sides],
        "covered_mass": [x.get("cov", np.nan) if x.get("cov") is not None else np.nan for x in sides],
        "invalid_reason": [x.get("inv") for x in sides], "raw_text": [x.get("text") for x in sides],
    })
    return BiasResult(names=names_t, counts=counts, invalid=int(invalid), trials=int(trials), test=test,
                      statistic=stat, p_value=p, exact_p=exact_p, covered_mass=cov, jsd=jsd, mode=pr.s.mode,
                      model=model, llm_calls=calls, decisions=dec, bootstrap_p=boot)


def individual_bias(names, *, trials: int = 100, mode: str = "exact", template="main",
                    endpoint: EndpointConfig | None = None, out=None, progress: bool = True, rng=None,
                    **kw) -> BiasResult:
    """Measure the individual bias of agents with empty memory (interaction 1).

    Parameters
    ----------
    names : str or sequence of str
        Name pool.
    trials : int
        Decisions ``T``, each with an independently shuffled name order.
    mode : {"exact", "sample"}
        ``"exact"``: each decision reads the next-token distribution over the names (cached
        per order: at most ``W!`` requests) and samples locally; ``exact_p`` is the average
        distribution. ``"sample"``: ``T`` generations.
    template : str or PromptTemplate
    endpoint : EndpointConfig, optional
        Default: environment, else the embedded SmolLM2 server.
    out : path, optional
        Journal directory (resumable).
    progress : bool
    rng : seed, optional
    **kw
        Sampling settings as in :func:`normlab.llm_runs.run_game` (``temperature``, ``top_k``,
        ``max_tokens``, ``top_logprobs``, ``max_reasks``, ``prefill``, ``multi_token``,
        ``case_sensitive``, ``payoffs``) and ``cache`` (directories whose exact-mode
        distributions are reused).

    Returns
    -------
    BiasResult
        Counts, exact binomial test (W = 2) or chi-squared test (W > 2) of neutrality, the
        Jensen-Shannon distance from uniform, and (W = 2) Table S5's one-tailed bootstrap p
        (seeded from the probe's seed).

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Materials and Methods,
    Measuring Individual Bias; Fig. 2B; Figs. S4, S5; Tables S1, S5.
    """
    from ._sync import run_sync

    return run_sync(lambda: aindividual_bias(names, trials=trials, mode=mode, template=template,
                                             endpoint=endpoint, out=out, progress=progress, rng=rng, **kw))


# ----------------------------------------------------------------------------- neutral names
@dataclass(frozen=True)
class NeutralSearch:
    """Search for a neutral pool of random names (JSD from uniform below a threshold).

    Attributes
    ----------
    names : tuple of str or None
        The first accepted pool (``None`` if none was found).
    threshold : float
    candidates : pandas.DataFrame
        One row per pool tried: ``pool`` (comma-joined), ``jsd``, ``p_first`` (probability of the
        pool's first name), ``covered_mass``, ``accepted``.
    llm_calls : int

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Supplementary Text,
    Alternative Prompts and Effect of Fine-Tuning (JSD < 0.005); Figs. S11, S12; Table S6.
    """

    names: tuple | None
    threshold: float
    candidates: pd.DataFrame
    llm_calls: int

    def to_frame(self) -> pd.DataFrame:
        return self.candidates.copy()

    def summary(self) -> dict:
        """The accepted pool, the threshold and the JSD of every pool tried (plain Python)."""
        c = self.candidates
        return plain({"names": None if self.names is None else list(self.names), "threshold": self.threshold,
                      "pools_tried": len(c), "llm_calls": self.llm_calls,
                      "best_jsd": float(c["jsd"].min()) if len(c) else None,
                      "jsd": {str(p): float(j) for p, j in zip(c.get("pool", []), c.get("jsd", []))}})

    def __repr__(self) -> str:
        c = self.candidates
        found = f"found {','.join(self.names)}" if self.names is not None else "no neutral pool"
        best = f"best JSD {c['jsd'].min():.4f}" if len(c) else None
        return short_repr("NeutralSearch", found, f"threshold {self.threshold:g}", f"{len(c)} pools tried", best,
                          f"{self.llm_calls} LLM calls")

    def _repr_html_(self) -> str:
        rows = [(str(r["pool"]), r["jsd"], None, "accepted" if r.get("accepted") else "")
                for _, r in self.candidates.iterrows()]
        return html_card("NeutralSearch", rows, level=None,
                         subtitle=("found " + ",".join(self.names)) if self.names else "no neutral pool found",
                         settings={"threshold (JSD)": self.threshold, "LLM calls": self.llm_calls},
                         note="value = Jensen-Shannon distance from uniform; .plot() draws it per pool.")

    @plotting
    def plot(self, *, ax=None):
        """JSD from uniform of every pool tried, with the acceptance threshold.

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. S11, S12 (JSD < 0.005).
        """
        c = self.candidates
        ax = new_axes(ax, (max(4.0, 0.45 * len(c) + 2.5), 3.6))
        x = np.arange(len(c))
        acc = c["accepted"].astype(bool).to_numpy() if "accepted" in c else np.zeros(len(c), bool)
        ax.scatter(x[~acc], c["jsd"].to_numpy()[~acc], color="C0", label="rejected")
        ax.scatter(x[acc], c["jsd"].to_numpy()[acc], color="C2", marker="*", s=120, label="accepted")
        ax.axhline(self.threshold, color="C3", ls="--", lw=1, label=f"threshold {self.threshold:g}")
        ax.set_xticks(x, [str(p) for p in c["pool"]], rotation=90, fontsize=7, family="monospace")
        ax.set(ylabel="JSD from uniform (base 2)", xlabel="pool tried", yscale="log" if len(c) and
               (c["jsd"] > 0).all() else "linear")
        legend_outside(ax)
        return ax


def _none_nan(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


#: Most memory states a strategy-table probe asks about (W = 2: H <= 8, as the calibration's tables).
MAX_TABLE_STATES = 200_000


def check_table_size(n_names: int, memory: int) -> int:
    """The number of memory states of lengths ``0..memory`` over ``n_names`` names; a
    ``ValueError`` when a strategy table would exceed :data:`MAX_TABLE_STATES` (a probe of that
    size would enumerate for minutes before its first request)."""
    n, k = 0, 0
    while k <= memory:
        n += (n_names * n_names) ** k
        if n > MAX_TABLE_STATES:
            raise ValueError(f"a strategy table of {n_names} names up to memory H = {memory} has more than "
                             f"{MAX_TABLE_STATES:,} memory states; lower --memory (W = 2: at most 8)")
        k += 1
    return n


def random_names(n_names: int = 2, length: int = 6, *, alphabet: str = ALPHABET, rng=None) -> tuple:
    """A pool of distinct random strings (digits, lower- and upper-case letters by default)."""
    n_names = check_int(n_names, "n_names", low=2)
    length = check_int(length, "length", low=1)
    if len(set(alphabet)) ** length < n_names:
        raise ValueError(f"only {len(set(alphabet)) ** length} distinct names of length {length}; "
                         f"cannot draw {n_names}")
    g = np.random.default_rng(as_seed_sequence(rng)) if not isinstance(rng, np.random.Generator) else rng
    out: list[str] = []
    while len(out) < n_names:
        s = "".join(alphabet[int(k)] for k in g.integers(len(alphabet), size=length))
        if s not in out:
            out.append(s)
    return tuple(out)


def find_neutral_names(*, n_names: int = 2, length: int = 6, threshold: float = 0.005, max_pools: int = 20,
                       template="main", endpoint: EndpointConfig | None = None, progress: bool = True,
                       rng=None, **kw) -> NeutralSearch:
    """Draw random name pools until one is neutral for empty-memory agents (exact mode).

    For each candidate pool the exact next-token distribution is averaged over all name orders
    (``W!``, at most 24 random orders for larger pools) and its Jensen-Shannon distance (base
    2) from uniform is compared with ``threshold``.

    Parameters
    ----------
    n_names, length : int
        Pool size ``W`` and characters per name (6 in Flint Ashery et al. 2025).
    threshold : float
        Maximum JSD from uniform (0.005 in Flint Ashery et al. 2025).
    max_pools : int
        Pools tried at most.
    template, endpoint, progress, rng, **kw
        As in :func:`individual_bias`.

    Returns
    -------
    NeutralSearch

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Supplementary Text,
    Alternative Prompts; Effect of Fine-Tuning; Figs. S11, S12.
    """
    from ._sync import run_sync

    if not (isinstance(threshold, (int, float)) and threshold > 0):
        raise ValueError(f"threshold must be > 0; got {threshold!r}")
    if not isinstance(max_pools, int) or max_pools < 1:
        raise ValueError(f"max_pools must be an int >= 1; got {max_pools!r}")
    random_names(n_names, length, rng=0)  # n_names >= 2 and length >= 1, before any work
    endpoint = _endpoint(endpoint)
    ss = as_seed_sequence(rng)
    name_rng, run_rng = ss.spawn(2)
    g = np.random.default_rng(name_rng)
    pools = [random_names(n_names, length, rng=g) for _ in range(max_pools)]
    n_orders = math.factorial(n_names)

    async def main():
        rows, calls, found = [], 0, None
        for pool in pools:
            orders = list(itertools.permutations(range(n_names))) if n_orders <= 24 else None
            k = len(orders) if orders is not None else 24
            s, tpl, _ = _settings(pool, 1, "exact", template, dict(kw), endpoint.embedded)
            async with _Probe("neutral", s, tpl, endpoint, None, progress, run_rng, {}) as pr:
                sides = await pr.run_all(
                    [(f"o{i}", i, (), None if orders is None else np.array(orders[i])) for i in range(k)],
                    f"neutral? {','.join(pool)}")
                calls += pr.llm_calls
            ps = [x["p"] for x in sides if x.get("p") is not None]
            p = np.mean(ps, axis=0) if ps else None
            _, _, _, jsd = _bias_stats(pool, [0] * n_names, p) if p is not None else (None, None, None, np.nan)
            ok = bool(p is not None and jsd < threshold)
            rows.append({"pool": ",".join(pool), "jsd": jsd, "p_first": float(p[0]) if p is not None else np.nan,
                         "covered_mass": float(np.mean([x.get("cov", 0.0) for x in sides])), "accepted": ok})
            if ok:
                found = pool
                break
        return NeutralSearch(names=found, threshold=float(threshold), candidates=pd.DataFrame(rows), llm_calls=calls)

    _unknown({k: v for k, v in kw.items() if k not in (
        "payoffs", "temperature", "top_k", "max_tokens", "top_logprobs", "max_reasks", "prefill",
        "multi_token", "case_sensitive", "wrap", "top_p", "min_p", "parse")})
    return run_sync(main)


# ----------------------------------------------------------------------------- strategy table
@dataclass(frozen=True)
class StrategyProbe:
    """``p(name | memory state)`` for every memory state up to ``H`` (W = 2: Table 1, Fig. S8).

    Attributes
    ----------
    names : tuple of str
    memory : int
    mode : str
        ``"exact"`` or ``"sample"``.
    table : pandas.DataFrame
        One row per (``memory_state``, ``name``) -- see :meth:`to_frame`.
    by_order_table : pandas.DataFrame
        Exact mode: one row per (state, name order shown, name); empty in sample mode.
    model : str
    llm_calls : int

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1; Supplementary
    Text, Statistical Tests for Table 1, Characterizing Relative Strength; Fig. S8; Tables S5, S6.
    """

    names: tuple
    memory: int
    mode: str
    table: pd.DataFrame
    by_order_table: pd.DataFrame
    model: str
    llm_calls: int

    def to_frame(self) -> pd.DataFrame:
        """Tidy table, one row per (memory state, name).

        Columns: ``memory_state`` (schema string), ``memory_len``, ``name``, ``p`` (exact: the
        model's probability averaged over the name orders probed; sample: ``count / n``),
        ``covered_mass`` (exact; NaN in sample mode), ``n_orders``, ``count``, ``n``
        (sample: valid answers; exact: NA), ``n_invalid``, ``ci_low``, ``ci_high``
        (Clopper-Pearson 95%, sample mode), ``mirror_state``, ``mirror_name`` (the state and
        name with the pool relabelled in reverse, ``Q <-> M``), ``mode``, ``model``.
        """
        return self.table.copy()

    def by_order(self) -> pd.DataFrame:
        """Exact mode: one row per (state, ``order`` shown, name) before averaging over orders."""
        return self.by_order_table.copy()

    def symmetry(self) -> pd.DataFrame:
        """``p(name | state)`` next to ``p(mirror_name | mirror_state)`` and their difference (a
        label-symmetric model has ``diff == 0``; the paper's strong/weak conventions do not)."""
        t = self.table[["memory_state", "name", "p", "mirror_state", "mirror_name"]]
        m = t.rename(columns={"memory_state": "mirror_state", "name": "mirror_name", "p": "p_mirror",
                              "mirror_state": "_ms", "mirror_name": "_mn"})[["mirror_state", "mirror_name", "p_mirror"]]
        out = t.merge(m, on=["mirror_state", "mirror_name"], how="left")
        out["diff"] = out["p"] - out["p_mirror"]
        return out

    def to_strategy_table(self, *, default=None):
        """The probed probabilities as a :class:`normlab.theory.StrategyTable`, ready for
        :func:`normlab.theory.strategy_game` (states left unprobed are filled from ``default``,
        a theory strategy, or must not exist)."""
        from normlab.theory import StrategyTable

        df = self.table[["memory_state", "name", "p"]].dropna(subset=["p"])
        return StrategyTable.from_frame(df, memory=self.memory, names=self.names, default=default)

    # ------------------------------------------------------------------ display, save / load
    def summary(self) -> dict:
        """What was probed and the headline probabilities, as plain Python values: p(name | empty
        memory), the largest relabelling asymmetry, the mean covered mass (exact mode)."""
        t = self.table
        first = t[t["memory_len"] == 0].set_index("name")["p"]
        sym = self.symmetry()["diff"].abs()
        return plain({"model": self.model, "mode": self.mode, "names": list(self.names), "memory": self.memory,
                      "states": int(t["memory_state"].nunique()), "llm_calls": self.llm_calls,
                      "p_empty_memory": {str(k): _none_nan(float(v)) for k, v in first.items()},
                      "max_asymmetry": _none_nan(float(sym.max())) if len(sym) else None,
                      "mean_covered_mass": _none_nan(float(t["covered_mass"].mean())) if self.mode == "exact" else None,
                      "invalid": int(t.drop_duplicates("memory_state")["n_invalid"].fillna(0).sum())})

    def __repr__(self) -> str:
        s = self.summary()
        first = ", ".join(f"p({k})={fmt(v)}" for k, v in s["p_empty_memory"].items())
        return short_repr("StrategyProbe", self.model, f"{self.mode} mode", f"names {','.join(self.names)}",
                          f"H={self.memory}", f"{s['states']} states", f"empty memory: {first}",
                          f"max asymmetry {fmt(s['max_asymmetry'])}", f"{self.llm_calls} LLM calls")

    def _repr_html_(self) -> str:
        s = self.summary()
        t = self.table
        rows = []
        for L in range(self.memory + 1):  # one row per memory length and name: mean p, range over states
            sub = t[t["memory_len"] == L]
            for nm, g in sub.groupby("name", sort=False):
                rows.append((f"p({nm}), memory length {L}", float(g["p"].mean()),
                             f"{fmt(g['p'].min())} .. {fmt(g['p'].max())}", f"mean (range) over {len(g)} states"))
        rows.append(("largest |p(n|s) - p(mirror n|mirror s)|", s["max_asymmetry"]))
        if s["mean_covered_mass"] is not None:
            rows.append(("mean covered probability mass", s["mean_covered_mass"]))
        return html_card("StrategyProbe", rows, level=None,
                         subtitle=f"p(name | memory) of {self.model}, {self.mode} mode, H = {self.memory}",
                         settings={"states": s["states"], "LLM calls": self.llm_calls, "invalid": s["invalid"]},
                         note=".plot() draws the heat map (kind='symmetry': p against its relabelled mirror); "
                              ".to_frame() gives every state; .save(path) keeps it.")

    @plotting
    def plot(self, kind: str = "heatmap", *, name: str | None = None, memory_len: int | None = None, ax=None):
        """The probed strategy: a heat map of p(name | memory) over own and partner histories
        (Fig. S8), or each p(name | state) against its relabelled mirror (Table 1).

        Parameters
        ----------
        kind : {"heatmap", "symmetry"}, optional
        name : str, optional
            Heat map: the name coloured (default the last).
        memory_len : int, optional
            Heat map: memory length shown (default ``H``).
        ax : matplotlib Axes, optional

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1, Fig. S8.
        """
        if kind == "heatmap":
            from normlab.theory import StrategyTable
            from normlab.theory.strategies import n_states

            W = len(self.names)
            missing = set(self.table.loc[self.table["p"].isna(), "memory_state"])
            uniform = StrategyTable(np.full((n_states(W, self.memory), W), 1.0 / W), memory=self.memory,
                                    names=self.names)
            tab = self.to_strategy_table(default=uniform)
            unseen = np.array([tab.state_label(k) in missing for k in range(tab.table.shape[0])])
            ax = tab.plot(name=name, memory_len=memory_len, unseen=unseen if unseen.any() else None, ax=ax)
            ax.set_title(f"{self.model}: " + ax.get_title(), fontsize=9)
            return ax
        if kind != "symmetry":
            raise ValueError(f"kind must be 'heatmap' or 'symmetry'; got {kind!r}")
        sym = self.symmetry().dropna(subset=["p", "p_mirror"])
        sym = sym[sym["memory_state"] != sym["mirror_state"]]
        ax = new_axes(ax, (6.4, 4.6))
        lens = self.table.drop_duplicates("memory_state").set_index("memory_state")["memory_len"]
        sym = sym.assign(memory_len=sym["memory_state"].map(lens))
        for k, (L, g) in enumerate(sym.groupby("memory_len")):
            ax.scatter(g["p_mirror"], g["p"], s=18, alpha=0.7, color=f"C{k}", label=f"memory length {L}")
        ax.plot([0, 1], [0, 1], color="0.4", lw=1, ls="--", label="symmetric")
        ax.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel="p(mirror name | relabelled state)",
               ylabel="p(name | state)", title=f"{self.model}: relabelling symmetry")
        ax.title.set_fontsize(9)
        legend_outside(ax)
        return ax

    def save(self, path) -> Path:
        """Write the probe to the folder ``path`` (``result.json``, ``table.parquet``,
        ``by_order.parquet``); read it back with :meth:`load` or ``normlab.load``."""
        meta = {"names": list(self.names), "memory": self.memory, "mode": self.mode, "model": self.model,
                "llm_calls": self.llm_calls}
        return save_result(path, type(self), meta, {"table": self.table, "by_order": self.by_order_table})

    @classmethod
    def load(cls, path) -> "StrategyProbe":
        """Read a probe written by :meth:`save`."""
        meta, t = load_result(path, cls)
        return cls(names=tuple(meta["names"]), memory=int(meta["memory"]), mode=meta["mode"], table=t["table"],
                   by_order_table=t["by_order"], model=meta["model"], llm_calls=int(meta["llm_calls"]))


async def astrategy_table(names, memory: int, *, mode: str = "exact", samples: int = 20, orders="all",
                          template="main", endpoint: EndpointConfig | None = None, out=None,
                          progress: bool = True, rng=None, **kw) -> StrategyProbe:
    """Coroutine version of :func:`strategy_table`."""
    endpoint = _endpoint(endpoint)
    cache = kw.pop("cache", None)
    s, tpl, _ = _settings(names, memory, mode, template, kw, endpoint.embedded)
    _unknown(kw)
    W = len(s.names)
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 1:
        raise ValueError(f"samples must be an int >= 1; got {samples!r}")
    all_orders = list(itertools.permutations(range(W)))
    if orders == "all":
        order_list = all_orders
    elif isinstance(orders, (int, np.integer)) and not isinstance(orders, bool) and 1 <= orders:
        order_list = all_orders[: int(orders)]
    else:
        raise ValueError(f"orders must be 'all' or an int >= 1; got {orders!r}")
    check_table_size(W, s.memory)
    states = enumerate_states(s.names, s.memory)
    jobs = []
    if s.mode == "exact":
        for si, st in enumerate(states):
            mem = tuple(parse_memory_state(st))
            for oi, o in enumerate(order_list):
                jobs.append((f"{st}|{oi}", si * len(order_list) + oi, mem, np.array(o)))
    else:
        for si, st in enumerate(states):
            mem = tuple(parse_memory_state(st))
            for k in range(samples):
                jobs.append((f"{st}|s{k}", si * samples + k, mem, None))
    extra = {"orders": orders if orders == "all" else int(orders), "samples": int(samples)}
    # ask in the order of the prompts' text (a depth-first walk of their prefix tree): each prompt
    # follows the one it shares most with, which a bounded prompt cache still holds
    first = [ordered_prompt_text(tpl, s, m, o) for _, _, m, o in jobs]
    perm = sorted(range(len(jobs)), key=first.__getitem__)
    async with _Probe("strategy", s, tpl, endpoint, out, progress, rng, extra, cache) as pr:
        done = await pr.run_all([jobs[i] for i in perm], f"strategy table H={s.memory}")
        calls, model = pr.llm_calls, pr.s.model
    sides = [None] * len(jobs)
    for i, side in zip(perm, done):
        sides[i] = side
    mirror = _mirror_map(s.names)
    rows, order_rows = [], []
    per_state = len(order_list) if s.mode == "exact" else samples
    for si, st in enumerate(states):
        chunk = sides[si * per_state:(si + 1) * per_state]
        ln = len(parse_memory_state(st))
        if s.mode == "exact":
            ps = [x["p"] for x in chunk if x.get("p") is not None]
            covs = [x.get("cov", 0.0) for x in chunk]
            pm = np.mean(ps, axis=0) if ps else np.full(W, np.nan)
            for x, o in zip(chunk, order_list):
                shown = ",".join(s.names[k] for k in o)
                for w, n in enumerate(s.names):
                    order_rows.append({"memory_state": st, "memory_len": ln, "order": shown, "name": n,
                                       "p": x["p"][w] if x.get("p") is not None else np.nan,
                                       "covered_mass": x.get("cov", np.nan)})
            for w, n in enumerate(s.names):
                rows.append({"memory_state": st, "memory_len": ln, "name": n, "p": float(pm[w]),
                             "covered_mass": float(np.mean(covs)), "n_orders": len(ps),
                             "count": pd.NA, "n": pd.NA, "n_invalid": sum(1 for x in chunk if x.get("p") is None)})
        else:
            valid = [x["name"] for x in chunk if x.get("name") is not None]
            nv = len(valid)
            for n in s.names:
                c = sum(1 for v in valid if v == n)
                rows.append({"memory_state": st, "memory_len": ln, "name": n, "p": c / nv if nv else np.nan,
                             "covered_mass": np.nan, "n_orders": pd.NA, "count": c, "n": nv,
                             "n_invalid": len(chunk) - nv})
    table = pd.DataFrame(rows)
    if s.mode == "sample":
        lo, hi = clopper_pearson(table["count"].astype(float), table["n"].astype(float))
    else:
        lo = hi = np.full(len(table), np.nan)
    table["ci_low"], table["ci_high"] = lo, hi
    for c in ("count", "n", "n_orders"):
        table[c] = table[c].astype("Int64")
    table["mirror_state"] = [relabel_state(x, mirror) for x in table["memory_state"]]
    table["mirror_name"] = [mirror[x] for x in table["name"]]
    table["mode"] = s.mode
    table["model"] = model
    by_order = pd.DataFrame(order_rows, columns=["memory_state", "memory_len", "order", "name", "p", "covered_mass"])
    return StrategyProbe(names=s.names, memory=s.memory, mode=s.mode, table=table, by_order_table=by_order,
                         model=model, llm_calls=calls)


def strategy_table(names, memory: int, *, mode: str = "exact", samples: int = 20, orders="all",
                   template="main", endpoint: EndpointConfig | None = None, out=None, progress: bool = True,
                   rng=None, **kw) -> StrategyProbe:
    """Measure ``p(name | memory state)`` for every memory state up to ``memory``.

    Parameters
    ----------
    names : str or sequence of str
        Name pool (W = 2 in the paper: ``sum_k 4^k`` states, 1365 for H = 5).
    memory : int
        Largest memory length ``H``; all states of length ``0..H`` are probed.
    mode : {"exact", "sample"}
        ``"exact"``: the model's distribution for each state and each name order in ``orders``
        (one request per (state, order) for single-token names), averaged over orders in
        :meth:`StrategyProbe.to_frame` and kept per order in :meth:`StrategyProbe.by_order`.
        ``"sample"``: ``samples`` generations per state (random orders), with Clopper-Pearson
        intervals.
    samples : int
        Sample mode: generations per state.
    orders : "all" or int
        Exact mode: all ``W!`` orders (default) or the first ``k`` of them.
    template, endpoint, out, progress, rng, **kw
        As in :func:`individual_bias`; ``out`` makes long tables resumable; ``cache=DIR``
        reuses exact-mode distributions journaled there (e.g. a smaller table or a run).

    Returns
    -------
    StrategyProbe
        Tidy ``to_frame()`` for :mod:`normlab.calibration`; ``symmetry()`` compares
        ``p(A | s)`` with ``p(B | relabel(s))``.

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1; Fig. S8;
    Supplementary Text, Statistical Tests for Table 1 and Characterizing Relative Strength.
    """
    from ._sync import run_sync

    return run_sync(lambda: astrategy_table(names, memory, mode=mode, samples=samples, orders=orders,
                                            template=template, endpoint=endpoint, out=out, progress=progress,
                                            rng=rng, **kw))


# ----------------------------------------------------------------------------- meta-prompting
#: Meta-prompting protocols: the AI-norms authors' code (default) or normlab's Table S7 wording.
META_PROTOCOLS = ("authors", "normlab")
#: Meta-prompting scorings: the authors' substring test, or normlab's stricter exact reading.
META_SCORINGS = ("substring", "strict")


@dataclass(frozen=True)
class MetaResult:
    """Answers to the prompt-comprehension questions of Table S7.

    Attributes
    ----------
    answers : pandas.DataFrame
        One row per question asked: ``item`` (memory state index), ``memory_state``,
        ``question`` (type: ``min``, ``max``, ``actions``, ``payoff``, ``round``, ``action_i``,
        ``points_i``, ``n_actions``, ``n_points``), ``table_s7`` (the table's row name),
        ``category`` (``rules`` / ``time`` / ``state``), ``text``, ``gold`` (the string the
        scoring looks for), ``answer`` (raw generated text), ``value`` (the answer as the
        scoring reads it), ``correct``, ``reasks``, ``protocol``, ``scoring``.
    model : str
    llm_calls : int
    protocol, scoring : str

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Prompting; Supplementary
    Text, Meta-Prompting; Table S7; Fig. S1.
    """

    answers: pd.DataFrame
    model: str
    llm_calls: int
    protocol: str = "authors"
    scoring: str = "substring"

    def to_frame(self) -> pd.DataFrame:
        return self.answers.copy()

    def accuracy(self) -> pd.DataFrame:
        """Accuracy per question type: ``category``, ``table_s7``, ``question``, ``n``,
        ``correct``, ``accuracy`` (the bars of Fig. S1)."""
        a = self.answers
        g = a.groupby(["category", "table_s7", "question"], sort=False)["correct"]
        out = g.agg(n="size", correct="sum").reset_index()
        out["accuracy"] = out["correct"] / out["n"]
        return out

    def summary(self) -> dict:
        """Overall accuracy and accuracy per question type (plain Python)."""
        a = self.accuracy()
        return plain({"model": self.model, "protocol": self.protocol, "scoring": self.scoring,
                      "questions": int(len(self.answers)), "llm_calls": self.llm_calls,
                      "accuracy": float(self.answers["correct"].mean()) if len(self.answers) else None,
                      "by_question": {str(r["table_s7"]): float(r["accuracy"]) for _, r in a.iterrows()}})

    def __repr__(self) -> str:
        s = self.summary()
        a = self.accuracy()
        worst = a.sort_values("accuracy").head(2)
        low = ", ".join(f"{r['table_s7']} {r['accuracy']:.0%}" for _, r in worst.iterrows())
        return short_repr("MetaResult", self.model, f"{s['questions']} questions",
                          f"accuracy {fmt(s['accuracy'])}", f"lowest: {low}" if low else None,
                          f"protocol={self.protocol}", f"scoring={self.scoring}")

    def _repr_html_(self) -> str:
        from normlab.theory.sweeps import clopper_pearson

        a = self.accuracy()
        lo, hi = clopper_pearson(a["correct"].to_numpy(), a["n"].to_numpy())
        rows = [(f"{r['table_s7']} ({r['category']})", r["accuracy"], (l, h), f"{int(r['correct'])}/{int(r['n'])}")
                for (_, r), l, h in zip(a.iterrows(), lo, hi)]
        return html_card("MetaResult", rows, subtitle=f"prompt comprehension (Table S7), {self.model}",
                         settings={"protocol": self.protocol, "scoring": self.scoring, "LLM calls": self.llm_calls},
                         note="Clopper-Pearson intervals; .plot() draws the bars of Fig. S1.")

    @plotting
    def plot(self, *, ax=None):
        """Accuracy per question type with Clopper-Pearson 95% intervals, coloured by category.

        Returns
        -------
        matplotlib.axes.Axes

        References
        ----------
        Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. S1, Table S7.
        """
        from normlab.theory.sweeps import clopper_pearson

        a = self.accuracy()
        lo, hi = clopper_pearson(a["correct"].to_numpy(), a["n"].to_numpy())
        ax = new_axes(ax, (7.2, 0.32 * len(a) + 1.4))
        y = np.arange(len(a))[::-1]
        cats = list(dict.fromkeys(a["category"]))
        colors = [f"C{cats.index(c)}" for c in a["category"]]
        ax.barh(y, a["accuracy"], color=colors, alpha=0.8)
        ax.errorbar(a["accuracy"], y, xerr=[a["accuracy"] - lo, hi - a["accuracy"]], fmt="none", ecolor="0.2",
                    capsize=3, lw=1)
        dup = a["table_s7"].duplicated(keep=False)
        ax.set_yticks(y, [f"{t} ({q})" if d else t for t, q, d in zip(a["table_s7"], a["question"], dup)])
        for k, c in enumerate(cats):
            ax.barh([np.nan], [np.nan], color=f"C{k}", label=c)
        ax.set(xlim=(0, 1.02), xlabel="accuracy (95% CI)", title=f"{self.model}: prompt comprehension")
        ax.title.set_fontsize(9)
        legend_outside(ax, title="category")
        return ax


_NUM = re.compile(r"[-+]?\d+(?:\.\d+)?")


def _meta_questions(mem, names, rng, payoffs) -> list[tuple[str, dict, str]]:
    """``(type, placeholders, gold)`` for every question applicable to memory ``mem``.

    The draws follow the authors' ``get_meta_prompt_list``: one round ``i`` per state shared by
    ``action_i`` and ``points_i`` (Player 1), a random player for ``action_i`` and ``n_actions``.
    """
    from .prompts import _fmt

    reward, penalty = payoffs
    x, y = (1, 2)
    p, q = (names[int(rng.integers(len(names)))] for _ in range(2))
    out = [
        ("min", {}, _fmt(min(reward, penalty))),
        ("max", {}, _fmt(max(reward, penalty))),
        ("actions", {}, ",".join(names)),
        ("payoff", {"x": x, "y": y, "p": p, "q": q}, _fmt(reward if p == q else penalty)),
        ("round", {}, str(len(mem) + 1)),
    ]
    if mem:
        i = int(rng.integers(len(mem))) + 1
        who = int(rng.integers(1, 3))
        own, partner = mem[i - 1]
        out.append(("action_i", {"x": who, "i": i}, own if who == 1 else partner))
        out.append(("points_i", {"x": 1, "i": i}, _fmt(reward if own == partner else penalty)))
        who2 = int(rng.integers(1, 3))
        act = names[int(rng.integers(len(names)))]
        cnt = sum(1 for o, pp in mem if (o if who2 == 1 else pp) == act)
        out.append(("n_actions", {"x": who2, "p": act}, str(cnt)))
        score = sum(reward if o == pp else penalty for o, pp in mem)
        out.append(("n_points", {"x": 1}, _fmt(score)))
    return out


def _meta_correct(qtype: str, gold: str, text: str | None, value: str | None, names) -> bool:
    """normlab's strict scoring: the answer field holds the gold name, or a number equal to the gold."""
    if text is None:
        return False
    if qtype == "actions":
        return all(re.search(r"(?<![A-Za-z0-9])" + re.escape(n) + r"(?![A-Za-z0-9])", text) for n in names)
    v = value if value is not None else text
    if qtype == "action_i":
        return v.strip().strip("'\"").lower() == gold.lower()
    m = _NUM.search(v)
    return bool(m) and float(m.group()) == float(gold)


def authors_meta_value(text: str | None) -> str | None:
    """The answer as the authors' ``get_meta_response`` reads it: the generation must contain
    ``value``; its text up to the first ``;`` is split on ``": "`` and the second piece is the
    answer (``None``: no answer, the authors re-ask).

    References
    ----------
    AI-norms code (MIT): ``run_API.py`` (``get_meta_response``), ``meta_prompting.py`` (``gold_sim``),
    ``data-era/meta_prompting.ipynb`` (``run``).
    """
    if text is None or "value" not in text:
        return None
    parts = text.split(";")[0].split(": ")
    return parts[1] if len(parts) >= 2 else None


def authors_meta_gold(qtype: str, gold: str) -> str:
    """The authors' gold string (``gold_sim``) from normlab's gold: names of ``action_i`` in quotes.

    References
    ----------
    AI-norms code (MIT): ``run_API.py`` (``get_meta_response``), ``meta_prompting.py`` (``gold_sim``),
    ``data-era/meta_prompting.ipynb`` (``run``).
    """
    return f"'{gold}'" if qtype == "action_i" else gold


def authors_meta_correct(qtype: str, gold: str, value: str | None, names) -> bool:
    """The authors' substring scoring: ``actions`` is right when every pool name occurs in the
    answer, any other question when the gold string (:func:`authors_meta_gold`) occurs in it.

    References
    ----------
    AI-norms code (MIT): ``run_API.py`` (``get_meta_response``), ``meta_prompting.py`` (``gold_sim``),
    ``data-era/meta_prompting.ipynb`` (``run``).
    """
    if value is None:
        return False
    if qtype == "actions":
        return all(n in value for n in names)
    return authors_meta_gold(qtype, gold) in value


async def ameta_prompting(names, memory: int, *, states=None, n_states: int = 20, template="main",
                          endpoint: EndpointConfig | None = None, temperature: float = 0.5,
                          top_k: int | None = 10, max_tokens: int | None = None, prefill: bool | None = None,
                          payoffs=(100, -50), progress: bool = True, rng=None, protocol: str = "authors",
                          scoring: str | None = None, max_reasks=None, wrap: str = "chat",
                          top_p: float | None = 1.0, min_p: float | None = 0.0) -> MetaResult:
    """Coroutine version of :func:`meta_prompting`."""
    from string import Template

    from .prompts import answer_value

    if protocol not in META_PROTOCOLS:
        raise ValueError(f"protocol must be one of {META_PROTOCOLS}; got {protocol!r}")
    if scoring is None:
        scoring = "substring" if protocol == "authors" else "strict"
    if scoring not in META_SCORINGS:
        raise ValueError(f"scoring must be one of {META_SCORINGS}; got {scoring!r}")
    meta = load_meta_template()
    spec = meta["authors"] if protocol == "authors" else meta
    if max_tokens is None:
        max_tokens = int(meta["authors"]["max_tokens"]) if protocol == "authors" else 12
    if max_reasks is None:
        max_reasks = UNBOUNDED if protocol == "authors" else 0
    max_reasks = check_reasks(max_reasks)
    endpoint = _endpoint(endpoint)
    s, tpl, _ = make_settings(2, memory, names, max_interactions=1, mode="sample", template=template,
                              payoffs=payoffs, temperature=temperature, top_k=top_k, max_tokens=max_tokens,
                              prefill=prefill, embedded=endpoint.embedded, wrap=wrap, top_p=top_p, min_p=min_p,
                              max_reasks=max_reasks)
    rules = spec.get("rules_main") if (protocol == "authors" and tpl.name == "main") else None
    ss = as_seed_sequence(rng)
    g = np.random.default_rng(ss.spawn(1)[0])
    if states is None:
        if not isinstance(n_states, int) or n_states < 1:
            raise ValueError(f"n_states must be an int >= 1; got {n_states!r}")
        st_list = []
        for _ in range(n_states):
            k = int(g.integers(s.memory + 1))
            st_list.append(memory_state_string(
                (s.names[int(g.integers(len(s.names)))], s.names[int(g.integers(len(s.names)))]) for _ in range(k)))
    elif isinstance(states, GameLog):
        d = states.decisions
        d = d[~d["committed"] & (d["memory_len"] <= s.memory)]
        if d.empty:
            raise ValueError("the GameLog holds no uncommitted decision with memory <= memory")
        idx = g.choice(len(d), size=min(n_states, len(d)), replace=False)
        st_list = [str(x) for x in d["memory_state"].to_numpy()[np.sort(idx)]]
    else:
        st_list = [str(x) for x in states]
    for st in st_list:
        mem = parse_memory_state(st)
        if len(mem) > s.memory or any(a not in s.names or b not in s.names for a, b in mem):
            raise ValueError(f"memory state {st!r} is longer than memory={s.memory} or uses names outside {list(s.names)}")
    items = []
    for si, st in enumerate(st_list):
        mem = parse_memory_state(st)
        order = g.permutation(len(s.names))
        shown = tuple(s.names[k] for k in order)
        for qtype, ph, gold in _meta_questions(mem, s.names, g, s.payoffs):
            text = Template(spec["questions"][qtype]).substitute(**{k: str(v) for k, v in ph.items()})
            prompt = tpl.render(mem, shown, payoffs=s.payoffs, query=spec["query"], user=text, rules=rules)
            items.append((si, st, qtype, text, gold, prompt))
    seeds = g.integers(0, 2**31 - 1, size=len(items))
    unbounded = s.max_reasks == UNBOUNDED
    limit = REASK_SAFETY_LIMIT if unbounded else s.max_reasks + 1
    pre = meta["prefill"] if s.prefill else None

    def _full(raw):
        if raw is not None and pre is not None and not raw.lstrip().startswith(pre.strip()):
            raw = pre + raw
        return raw

    async with open_endpoint(endpoint) as client:
        pbar = None
        if progress:
            from tqdm.auto import tqdm

            pbar = tqdm(total=len(items), desc="meta-prompting", leave=False, dynamic_ncols=True)

        async def ask(item, seed):
            prompt = item[5]
            sampler = dict(max_tokens=s.max_tokens, temperature=s.temperature, top_k=s.top_k, top_p=s.top_p,
                           min_p=s.min_p)
            raw, attempt = None, 0
            for attempt in range(limit):
                if s.wrap == "chat":
                    res = await client.chat(prompt.messages(pre), seed=int(seed) + attempt, **sampler)
                else:
                    res = await client.complete(prompt.text(s.wrap, pre), seed=int(seed) + attempt, **sampler)
                raw = _full(res.text)
                # the authors re-ask until the generation holds a 'value' field (get_meta_response)
                if protocol != "authors" or authors_meta_value(raw) is not None:
                    break
            else:
                if unbounded:
                    raise ReaskLimitError(
                        f"meta-prompting question {item[2]!r}: no 'value' field in {REASK_SAFETY_LIMIT} answers "
                        f"(last: {str(raw)[:80]!r}); max_reasks='unbounded' stops at this safety limit "
                        "(normlab.llm_runs.runner.REASK_SAFETY_LIMIT); check --wrap and --max-tokens, or use a cap")
            if pbar is not None:
                pbar.update(1)
            return raw, attempt

        try:
            results = await asyncio.gather(*(ask(it, sd) for it, sd in zip(items, seeds)))
        finally:
            if pbar is not None:
                pbar.close()
        model = client.model
        calls = client.n_requests
    rows = []
    for (si, st, qtype, text, gold, _), (raw, reasks) in zip(items, results):
        if scoring == "substring":
            value = authors_meta_value(raw)
            ok = authors_meta_correct(qtype, gold, value, s.names)
            shown_gold = authors_meta_gold(qtype, gold)
        else:
            value = answer_value(raw, meta["answer_key"]) if raw else None
            ok = _meta_correct(qtype, gold, raw, value, s.names)
            shown_gold = gold
        rows.append({"item": si, "memory_state": st, "question": qtype, "table_s7": meta["table_s7_names"][qtype],
                     "category": meta["categories"][qtype], "text": text, "gold": shown_gold, "answer": raw,
                     "value": value, "correct": bool(ok), "reasks": int(reasks), "protocol": protocol,
                     "scoring": scoring})
    return MetaResult(answers=pd.DataFrame(rows), model=model, llm_calls=calls, protocol=protocol, scoring=scoring)


def meta_prompting(names, memory: int, *, states=None, n_states: int = 20, template="main",
                   endpoint: EndpointConfig | None = None, temperature: float = 0.5, top_k: int | None = 10,
                   max_tokens: int | None = None, prefill: bool | None = None, payoffs=(100, -50),
                   progress: bool = True, rng=None, protocol: str = "authors", scoring: str | None = None,
                   max_reasks=None, wrap: str = "chat", top_p: float | None = 1.0,
                   min_p: float | None = 0.0) -> MetaResult:
    """Ask the prompt-comprehension questions of Table S7 about agents' memories.

    For each memory state (random, given, or sampled from the decisions of a
    :class:`~normlab.schema.GameLog` as in the paper's replay of real agents) the game prompt's
    rules and history are shown with an observer instruction, and every applicable question is
    asked: rules (lowest/highest payoff, allowed actions, payoff of an action pair), time
    (current round, action and points in round ``i``) and state (how often an action was
    chosen, current total). Memory-dependent questions are skipped for empty memories.

    Parameters
    ----------
    names : str or sequence of str
    memory : int
        Memory length ``H`` (states longer than ``H`` are rejected).
    states : None, sequence of str or GameLog
        Memory states (schema strings); ``None``: ``n_states`` random states.
    n_states : int
        Random states, or states sampled from a GameLog.
    template : str or PromptTemplate
        Game template whose rules and history are shown.
    protocol : {"authors", "normlab"}
        ``"authors"`` (default): the AI-norms code -- their observer line ("You are an observer
        who answers questions about the game using a single value. ... You write your response
        using the following format: ..."), their questions ("Answer saying what is the lowest
        payoff Player 1 can get in a single round." ...), the rules text of their
        meta-prompting code (``+100``; main template only), 15 new tokens, re-asks until the
        answer has a ``value`` field. ``"normlab"``: the wording of Table S7 ("What is the
        lowest payoff ...?"), 12 tokens, no re-ask.
    scoring : {"substring", "strict"}, optional
        ``"substring"`` (the authors', default with their protocol): correct when the gold
        string occurs in the answer (:func:`authors_meta_correct`); ``"strict"`` (normlab's,
        default with its protocol): the answer field must hold the gold name, or a number equal
        to the gold (so ``'10'`` is not a right answer to ``1``).
    max_reasks : int or "unbounded", optional
        Default ``"unbounded"`` with the authors' protocol (guarded by
        :data:`normlab.llm_runs.runner.REASK_SAFETY_LIMIT`), 0 with normlab's.
    endpoint, temperature, top_k, top_p, min_p, max_tokens, prefill, payoffs, wrap, progress, rng
        As in :func:`normlab.llm_runs.run_game` (``max_tokens`` default: 15 for the authors'
        protocol, 12 for normlab's).

    Returns
    -------
    MetaResult
        ``accuracy()`` gives the accuracy per question type (Fig. S1).

    References
    ----------
    Flint Ashery, Aiello, Baronchelli, Sci. Adv. 11, eadu9368 (2025): Supplementary Text,
    Meta-Prompting; Table S7; Fig. S1. AI-norms code (MIT): ``prompting.py``
    (``get_meta_prompt``), ``meta_prompting.py`` (``get_question``, ``gold_sim``), ``run_API.py``
    (``get_meta_response``), ``simulation_module.py`` (``simulate_meta_prompting``),
    ``data-era/meta_prompting.ipynb``.
    """
    from ._sync import run_sync

    return run_sync(lambda: ameta_prompting(names, memory, states=states, n_states=n_states, template=template,
                                            endpoint=endpoint, temperature=temperature, top_k=top_k,
                                            max_tokens=max_tokens, prefill=prefill, payoffs=payoffs,
                                            progress=progress, rng=rng, protocol=protocol, scoring=scoring,
                                            max_reasks=max_reasks, wrap=wrap, top_p=top_p, min_p=min_p))
