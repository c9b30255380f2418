"""Individual bias: which name an agent with empty memory picks (Fig. 2B, Figs. S4, S5, Tables
S1, S5), with the neutrality tests and Table S5's bootstrap p."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from normlab._display import fmt, html_card, legend_outside, new_axes, plain, plotting, short_repr, error_bars
from normlab._rng import as_generator
from normlab.schema import GameLog
from normlab.cli_output import show_progress

from ..backend import EndpointConfig
from ..core.sync import run_sync
from ..runner.estimate import prompt_tokens
from ..runner.mode import EXACT, mode_of
from .common import bias_stats, clopper_pearson, none_nan, probe_settings, reject_unknown, resolve_endpoint
from .session import ProbeSession


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
        ``"binomial"`` (two-sided exact test of ``p = 1/2``, W = 2) or ``"chi2"`` (uniform, W > 2) on the
        answers of sample mode; ``"none"`` in exact mode, whose counts are drawn locally from ``exact_p``
        (a test of them would measure ``trials``, not the model: ``exact_p`` and ``jsd`` are the bias).
    statistic, p_value : float
        Test statistic (the first name's count for the binomial test) and p-value (NaN in exact mode;
        so is ``bootstrap_p``).
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
                      "test": self.test, "p_value": none_nan(self.p_value), "bootstrap_p": none_nan(self.bootstrap_p),
                      "jsd": none_nan(self.jsd), "covered_mass": none_nan(self.covered_mass),
                      "llm_calls": self.llm_calls})

    def __repr__(self) -> str:
        n = self.n_valid
        shares = ", ".join(f"{nm} {c / n:.2f}" if n else f"{nm} -" for nm, c in zip(self.names, self.counts))
        return short_repr("BiasResult", self.model, f"{self.mode} mode", f"{self.trials} trials ({self.invalid} invalid)",
                          f"shares {shares}", *([] if self.test == "none" else [f"{self.test} p = {fmt(self.p_value)}"]),
                          f"JSD = {fmt(self.jsd)}")

    def _repr_html_(self) -> str:
        f = self.to_frame()
        rows = [(f"share of {r['name']}", r["share"], (r["ci_low"], r["ci_high"]),
                 f"{int(r['count'])}/{int(r['n'])}" + ("" if self.exact_p is None else f"; exact p = {r['p_exact']:.3f}"))
                for _, r in f.iterrows()]
        if self.test != "none":
            rows.append((f"{self.test} test of neutrality, p", self.p_value))
        rows.append(("JSD from uniform (base 2)", self.jsd))
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
        ax.errorbar(x, f["share"], yerr=error_bars(f["share"], f["ci_low"], f["ci_high"]), fmt="none",
                    ecolor="0.2", capsize=4, lw=1, label="95% CI")
        if self.exact_p is not None:
            ax.plot(x, f["p_exact"], "D", color="C3", ms=6, label="model probability (exact)")
        ax.axhline(1.0 / len(f), color="0.4", ls="--", lw=1, label="neutral (1/W)")
        ax.set_xticks(x, [str(n) for n in f["name"]])
        ax.set(ylim=(0, 1.02), ylabel="P(name | empty memory)",
               title=f"{self.model}: " + ("" if self.test == "none" else f"{self.test} p = {fmt(self.p_value)}, ")
               + f"JSD = {fmt(self.jsd)}")
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

    @classmethod
    def _contract_example(cls) -> "BiasResult":
        """Twenty exact-mode first moves over two names, literal numbers (``tests/umbrella/test_contracts.py``)."""
        return cls(names=("A", "B"), counts=(12, 8), invalid=0, trials=20, test="binomial", statistic=12.0,
                   p_value=0.503, exact_p=(0.58, 0.42), covered_mass=0.95, jsd=0.06, mode="exact", model="stub-model",
                   llm_calls=2)



async def aindividual_bias(names, *, trials: int = 100, mode: str = "exact", template="main",
                           endpoint: EndpointConfig | None = None, out=None, progress: bool = True,
                           rng=None, **kw) -> BiasResult:
    """Coroutine version of :func:`individual_bias`."""
    endpoint = resolve_endpoint(endpoint)
    if isinstance(trials, bool) or not isinstance(trials, (int, np.integer)) or trials < 1:
        raise ValueError(f"trials must be an int >= 1; got {trials!r}")
    cache = kw.pop("cache", None)
    s, tpl, _ = probe_settings(names, 1, mode, template, kw, endpoint.embedded)
    reject_unknown(kw)
    async with ProbeSession("bias", s, tpl, endpoint, out, progress, rng, {"trials": int(trials)}, cache) as pr:
        sides = await pr.run_all([(f"bias|{k}", k, (), None) for k in range(trials)], "individual bias")
        calls = pr.llm_calls
        model = pr.s.model
    names_t = pr.s.names
    counts = tuple(int(sum(1 for x in sides if x.name == n)) for n in names_t)
    invalid = sum(1 for x in sides if x.name is None)
    exact_p, cov = None, np.nan
    if pr.s.decision is EXACT:
        ps = [x.probs for x in sides if x.probs is not None]
        exact_p = tuple(np.mean(ps, axis=0)) if ps else None
        cov = float(np.mean([0.0 if x.covered_mass is None else x.covered_mass for x in sides]))
    test, stat, p, jsd = bias_stats(names_t, counts, exact_p)
    boot = np.nan
    if pr.s.decision is EXACT:
        # the counts are drawn locally from exact_p: a test of them measures --trials, not the model
        test, stat, p = "none", np.nan, np.nan
    elif len(names_t) == 2 and sum(counts) and int(0.7 * sum(counts)) >= 1:
        entropy, *key = pr.s.seed
        boot = bootstrap_p(counts, rng=np.random.SeedSequence(int(entropy), spawn_key=tuple(key) + (int(trials), 1)))
    dec = pd.DataFrame({
        "trial": np.arange(trials), "name": [x.name for x in sides],
        "names_shown": [x.names_shown for x in sides],
        "p_name": [np.nan if x.p_name is None else x.p_name for x in sides],
        "covered_mass": [np.nan if x.covered_mass is None else x.covered_mass for x in sides],
        "invalid_reason": [x.invalid_reason for x in sides], "raw_text": [x.text for x in sides],
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
    return run_sync(lambda: aindividual_bias(names, trials=trials, mode=mode, template=template,
                                             endpoint=endpoint, out=out, progress=progress, rng=rng, **kw))


# ----------------------------------------------------------------------------- command line (normlab llm-probe bias; see registry.py)
def command_design(args) -> tuple:
    """The pool and the longest memory the probe's prompts show."""
    return args.names, 1


def command_run(args, sampling: dict, endpoint, mode: str) -> tuple:
    """Run the probe for ``normlab llm-probe bias``: ``(result, full table, summary)``."""
    r = individual_bias(args.names, trials=args.trials, mode=mode, endpoint=endpoint, out=args.out,
                        progress=show_progress(args), rng=args.seed, cache=args.cache, **sampling)
    frame = r.to_frame()
    summary = {"probe": "bias", "model": r.model, "mode": r.mode, "names": list(r.names),
               "counts": list(r.counts), "invalid": r.invalid, "test": r.test, "p_value": r.p_value,
               "bootstrap_p": r.bootstrap_p,
               "jsd": r.jsd, "exact_p": list(r.exact_p) if r.exact_p else None,
               "covered_mass": r.covered_mass, "llm_calls": r.llm_calls}
    return r, frame, summary


def command_notes(result) -> list[str]:
    """What the counts are and which question each p-value answers (printed under the summary)."""
    r = result
    a = r.names[0]
    n = r.n_valid
    exact = mode_of(r.mode) is EXACT
    if exact:
        src = (f"counts: {r.trials} decisions drawn locally from the exact next-token probabilities of {r.llm_calls} "
               f"request{'s' if r.llm_calls != 1 else ''} (one per name order), not {r.trials} model answers; "
               f"exact_p is the model's own distribution")
    else:
        src = f"counts: {n} answers the model wrote ({r.invalid} named no pool name)"
    out = [src]
    if exact:
        out.append("p_value: none -- a test of counts drawn locally would measure --trials, not the model; exact_p "
                   "and jsd are the bias itself (--mode sample tests the model's own answers)")
    elif r.test == "binomial":
        out.append(f"p_value: is the model biased? exact binomial test of p({a}) = 1/2 on the {n} counts")
    else:
        out.append(f"p_value: is the model biased? chi-squared test of uniform shares on the {n} counts")
    if math.isfinite(r.bootstrap_p):
        out.append("bootstrap_p: could the model's bias be more extreme than observed? Table S5's one-tailed "
                   "bootstrap (a large value: no evidence that it is)")
    out.append("jsd: Jensen-Shannon distance from equal shares (0 = no bias, 1 = always one name)")
    return out


def command_table(result, frame) -> pd.DataFrame:
    """The few columns printed."""
    cols = [c for c in ("name", "count", "n", "share", "p_exact") if c in frame.columns]
    return frame[cols]


def command_estimate(args, s, tpl, per) -> tuple:
    """``--dry-run``: ``(requests (typical, at most), prompt tokens per request, what, notes)``."""
    W = len(s.names)
    n, ptok = args.trials, prompt_tokens(s, tpl, 0)
    reqs = s.decision.requests((n, n), math.factorial(W), s.max_reasks)  # exact: one request per name order at most
    what = f"individual bias: {n} empty-memory decisions, names {','.join(s.names)}, {s.mode} mode"
    return reqs, ptok, what, []
