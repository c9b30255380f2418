"""Strategy asymmetry under relabelling: the microscopic origin of collective bias.

A strategy is *symmetric* when renaming the conventions does not change behaviour:
``p(A | s) = p(B | relabel(s))`` for every memory state ``s`` (``relabel`` swaps ``A`` and
``B`` everywhere in the memory). Flint Ashery et al. (2025, Table 1) show that LLM agents violate this by their
third interaction -- e.g. ``p(M | {M,Q; Q,M}) = 0.848`` but ``p(Q | {Q,M; M,Q}) = 0.451`` -- and
that this asymmetry, not a first-move preference, selects the "strong" convention.

For two names every non-empty state ``s`` has a distinct mirror ``s'``; the pair gives one
difference ``d = p(A | s) - p(B | s') = p(A | s) + p(A | s') - 1`` (the same from either side),
positive when the pair favours ``A``. The empty memory is its own mirror; there
``d = 2 p(A | {}) - 1`` (individual bias). :func:`strategy_asymmetry` reports, per pair,

- the counts and frequencies, Fisher's exact test of ``p(A | s) = p(B | s')`` (two-sided), and the
  exact binomial tests of each state against 1/2 (``p_dagger`` of Flint Ashery et al. 2025, Table S5);
- with a fitted posterior (:class:`~normlab.calibration.StrategyFit`), the posterior mean of
  ``d`` and ``P(d > 0)`` -- also for pairs never observed;

and summarises the "bias towards A" as (i) the inverse-variance weighted mean of the observed
``d`` with a Cochran-Mantel-Haenszel test of symmetry across all pairs, and (ii) the
visit-weighted mean of ``d`` (weights = how often the pair's states were visited), with its
posterior interval when a posterior is given.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1 and its
caption, Supplementary Text "Statistical Tests for Table 1", Table S5, Figs. S8-S10;
N. Mantel, W. Haenszel, J. Natl. Cancer Inst. 22, 719 (1959).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from normlab._display import fmt, fmt_interval, html_card, plain, plotting, short_repr
from normlab.theory.strategies import encode_state

from ..fit.inputs import StateCounts, _state_tables, state_labels
from ..fit.posterior import StrategyFit
from .trajectories import plot_asymmetry

__all__ = ["AsymmetryResult", "strategy_asymmetry", "mirror_states"]


def mirror_states(n_names: int, memory: int, perm) -> np.ndarray:
    """Index of ``relabel(s)`` for every state ``s`` under the name permutation ``perm``."""
    entries, _ = _state_tables(n_names, memory)
    perm = np.asarray(perm, dtype=np.int64)
    return np.array([encode_state([(int(perm[o]), int(perm[p])) for o, p in e], n_names) for e in entries])


@dataclass(frozen=True)
class AsymmetryResult:
    """Per-pair asymmetry table and summary statistics.

    Attributes
    ----------
    names : tuple of str
    a, b : str
        The two names compared (``d > 0`` favours ``a``).
    pairs : pandas.DataFrame
        One row per mirror pair: ``state``, ``mirror``, ``memory_state``, ``mirror_state``,
        ``memory_len``, ``n``, ``k`` (answers ``a`` in ``state``), ``n_mirror``, ``k_mirror``
        (answers ``b`` in ``mirror``), ``p_a`` (= ``k / n``), ``p_b_mirror``, ``diff``,
        ``p_fisher``, ``p_dagger`` and ``p_dagger_mirror`` (binomial tests against 1/2),
        ``visits`` (``n + n_mirror``), and with a posterior ``post_diff``, ``post_low``,
        ``post_high``, ``post_p_positive``.
    summary : dict
        ``bias_ivw``, ``bias_ivw_se``, ``p_cmh`` (CMH test of symmetry), ``bias_visits`` (visit
        weighted mean of observed ``diff``), ``n_pairs``, ``n_pairs_tested`` (both sides seen),
        ``n_significant`` (Fisher p < 0.05), ``favours_a`` (of those, how many favour ``a``),
        and with a posterior ``post_bias_visits`` with ``post_bias_low/high``,
        ``post_p_bias_positive``, ``post_bias_all_states`` (unweighted mean over every pair).
    by_length : pandas.DataFrame
        The same summary per memory length (the rows of Table 1 of Flint Ashery et al. 2025 are lengths 0, 1, 2):
        ``memory_len``, ``n`` (decisions), ``p_a`` (production probability of ``a`` over the
        states of that length), ``p_binom`` (exact test against 1/2, the interaction-level test
        of the Table 1 caption), ``bias_ivw``, ``p_cmh``.

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Table 1, Table S5.
    """

    names: tuple
    a: str
    b: str
    pairs: pd.DataFrame
    summary: dict = field(default_factory=dict)
    by_length: pd.DataFrame = field(default_factory=pd.DataFrame)

    def __post_init__(self):
        object.__setattr__(self, "summary", plain(dict(self.summary)))  # plain Python numbers

    def to_frame(self) -> pd.DataFrame:
        """The per-pair table (tidy, one row per mirror pair)."""
        return self.pairs.copy()

    def __repr__(self) -> str:
        s = self.summary
        post = ""
        if "post_bias_visits" in s:
            post = (f"posterior bias {s['post_bias_visits']:+.3f} "
                    f"{fmt_interval(s['post_bias_low'], s['post_bias_high'])}")
        return short_repr("AsymmetryResult", f"{self.a} vs {self.b}", f"{s.get('n_pairs_tested')} pairs tested",
                          f"bias towards {self.a} {s.get('bias_visits', float('nan')):+.3f} (visit-weighted)", post or None,
                          f"CMH p = {fmt(s.get('p_cmh'))}",
                          f"{s.get('n_significant')} significant pairs, {s.get('favours_a')} favour {self.a}")

    def _repr_html_(self) -> str:
        s = self.summary
        rows = [(f"bias towards {self.a} (visit-weighted mean of p({self.a}|s) - p({self.b}|mirror s))",
                 s.get("bias_visits")),
                ("bias, inverse-variance weighted", s.get("bias_ivw"),
                 (s.get("bias_ivw", 0) - 1.96 * s.get("bias_ivw_se", float("nan")),
                  s.get("bias_ivw", 0) + 1.96 * s.get("bias_ivw_se", float("nan"))) if s.get("bias_ivw_se") else None),
                ("CMH test of symmetry, p", s.get("p_cmh"))]
        if "post_bias_visits" in s:
            rows.append(("posterior bias (visit-weighted)", s["post_bias_visits"],
                         (s["post_bias_low"], s["post_bias_high"]), f"P(> 0) = {fmt(s['post_p_bias_positive'])}"))
        rows.append((f"pairs tested / significant / favouring {self.a}",
                     f"{s.get('n_pairs_tested')} / {s.get('n_significant')} / {s.get('favours_a')}"))
        for _, r in self.by_length.iterrows():
            rows.append((f"p({self.a}), memory length {int(r['memory_len'])}", r["p_a"], None,
                         f"{fmt(r['n'])} decisions; binomial p = {fmt(r['p_binom'])}"))
        return html_card("AsymmetryResult", rows, subtitle=f"strategy asymmetry under relabelling {self.a} <-> {self.b} "
                         "(Table 1)", note=".plot() draws p(a | s) against p(b | mirror s); .to_frame() gives the pairs.")

    @plotting
    def plot(self, *, ax=None, min_n: int = 1, posterior: bool = False):
        """``p(a | s)`` against ``p(b | relabel(s))`` for every observed pair
        (:func:`normlab.calibration.plot_asymmetry`).

        Returns
        -------
        matplotlib.axes.Axes
        """
        return plot_asymmetry(self, ax=ax, min_n=min_n, posterior=posterior)

    @classmethod
    def _contract_example(cls) -> "AsymmetryResult":
        """Two mirror pairs of memory one, literal counts and tests (``tests/umbrella/test_contracts.py``)."""
        pairs = pd.DataFrame([(1, 4, "A,A", "B,B", 1, 40, 36, 30, 21, 0.9, 0.7, 0.2, 0.03, 1e-7, 0.04, 70),
                              (2, 3, "A,B", "B,A", 1, 20, 9, 25, 14, 0.45, 0.56, -0.11, 0.55, 0.82, 0.69, 45)],
                             columns=["state", "mirror", "memory_state", "mirror_state", "memory_len", "n", "k", "n_mirror",
                                      "k_mirror", "p_a", "p_b_mirror", "diff", "p_fisher", "p_dagger", "p_dagger_mirror",
                                      "visits"])
        summary = {"bias_ivw": 0.08, "bias_ivw_se": 0.07, "p_cmh": 0.2, "bias_visits": 0.1, "n_pairs": 2,
                   "n_pairs_tested": 2, "n_significant": 1, "favours_a": 1}
        by_length = pd.DataFrame({"memory_len": [1], "n": [60], "p_a": [0.75], "p_binom": [1e-4], "bias_ivw": [0.08],
                                  "p_cmh": [0.2]})
        return cls(names=("A", "B"), a="A", b="B", pairs=pairs, summary=summary, by_length=by_length)


def _cmh(k1, n1, k2, n2):
    """Cochran-Mantel-Haenszel chi-square test (1 df, no continuity correction) that the
    proportions ``k1/n1`` and ``k2/n2`` agree in every stratum."""
    from scipy.stats import chi2

    k1, n1, k2, n2 = (np.asarray(x, float) for x in (k1, n1, k2, n2))
    T = n1 + n2
    ok = (T > 1) & (n1 > 0) & (n2 > 0)
    if not ok.any():
        return float("nan")
    k1, n1, k2, n2, T = k1[ok], n1[ok], k2[ok], n2[ok], T[ok]
    m1 = k1 + k2
    e = n1 * m1 / T
    v = n1 * n2 * m1 * (T - m1) / (T**2 * (T - 1))
    if v.sum() <= 0:
        return 1.0 if np.allclose(k1, e) else 0.0
    stat = (k1 - e).sum() ** 2 / v.sum()
    return float(chi2.sf(stat, 1))


def _binom_p(k, n):
    from scipy.stats import binomtest

    return np.array([binomtest(int(round(kk)), int(round(nn)), 0.5).pvalue if nn >= 1 else np.nan
                     for kk, nn in zip(k, n)])


def strategy_asymmetry(data, *, a: str | None = None, b: str | None = None, n_draws: int = 400,
                       level: float = 0.95, rng=0) -> AsymmetryResult:
    """Compare ``p(a | s)`` with ``p(b | relabel(s))`` for every memory state.

    Parameters
    ----------
    data : StateCounts or StrategyFit
        Observed counts, or a fit (its training counts give the observed columns and its
        posterior the ``post_*`` columns, for every state including unobserved ones).
    a, b : str, optional
        The two names compared (default: the last and the first name of the pool, e.g. ``M``
        and ``Q`` for ``("Q", "M")``); other names are left unchanged by the relabelling.
    n_draws : int, optional
        Posterior draws (fits only).
    level : float, optional
        Credible level of the posterior intervals.
    rng : optional
        Seed for the posterior draws.

    Returns
    -------
    AsymmetryResult

    Raises
    ------
    TypeError, ValueError
        Wrong input type, names outside the pool, or no counts.

    References
    ----------
    Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025): Table 1 (e.g.
    ``p(M | {M,Q; Q,M}) = 0.848`` vs ``p(Q | {Q,M; M,Q}) = 0.451``), Supplementary Text
    "Statistical Tests for Table 1", Table S5.
    """
    from scipy.stats import fisher_exact

    if isinstance(data, StrategyFit):
        names, H, C, fit = data.names, data.memory, data.counts, data
    elif isinstance(data, StateCounts):
        names, H, C, fit = data.names, data.memory, data.counts, None
    else:
        raise TypeError(f"data must be a StateCounts or a StrategyFit; got {type(data).__name__}")
    W = len(names)
    a = names[-1] if a is None else a
    b = names[0] if b is None else b
    if a not in names or b not in names or a == b:
        raise ValueError(f"a and b must be two different names of {names}; got {a!r}, {b!r}")
    ia, ib = names.index(a), names.index(b)
    perm = np.arange(W)
    perm[ia], perm[ib] = ib, ia
    mirror = mirror_states(W, H, perm)
    labels = state_labels(names, H)
    _, lengths = _state_tables(W, H)
    S = len(labels)
    n = C.sum(axis=1)
    # one row per unordered pair, represented by the smaller index
    rep = np.flatnonzero(np.arange(S) <= mirror)
    m = mirror[rep]
    k_a, k_b = C[rep, ia], C[m, ib]
    n_s, n_m = n[rep], n[m]
    self_pair = rep == m
    with np.errstate(invalid="ignore", divide="ignore"):
        p_a = np.where(n_s > 0, k_a / n_s, np.nan)
        p_bm = np.where(n_m > 0, k_b / n_m, np.nan)
    diff = np.where(self_pair, p_a - (C[rep, ib] / np.where(n_s > 0, n_s, np.nan)), p_a - p_bm)
    seen = (n_s > 0) & (n_m > 0)
    p_f = np.full(len(rep), np.nan)
    for i in np.flatnonzero(seen & ~self_pair):
        tab = np.round([[k_a[i], n_s[i] - k_a[i]], [k_b[i], n_m[i] - k_b[i]]]).astype(int)
        p_f[i] = fisher_exact(tab)[1]
    for i in np.flatnonzero(self_pair & (n_s > 0)):  # empty memory: a vs b, binomial vs 1/2
        from scipy.stats import binomtest

        tot = C[rep[i], ia] + C[rep[i], ib]
        p_f[i] = binomtest(int(round(C[rep[i], ia])), int(round(tot)), 0.5).pvalue if tot >= 1 else np.nan
    pairs = pd.DataFrame({
        "state": rep, "mirror": m, "memory_state": [labels[i] for i in rep], "mirror_state": [labels[i] for i in m],
        "memory_len": lengths[rep], "n": n_s, "k": k_a, "n_mirror": n_m, "k_mirror": k_b, "p_a": p_a,
        "p_b_mirror": p_bm, "diff": diff, "p_fisher": p_f, "p_dagger": _binom_p(k_a, n_s),
        "p_dagger_mirror": _binom_p(k_b, n_m), "visits": n_s + n_m,
    })
    # --- summaries (observed)
    tested = seen & ~self_pair
    # inverse-variance weights; proportions smoothed by +1/2 so deterministic states keep a variance
    ps_a = (k_a + 0.5) / (n_s + 1)
    ps_b = (k_b + 0.5) / (n_m + 1)
    var = ps_a * (1 - ps_a) / np.maximum(n_s, 1) + ps_b * (1 - ps_b) / np.maximum(n_m, 1)
    w = np.where(tested, 1.0 / var, 0.0)
    bias_ivw = float(np.sum(w * np.nan_to_num(diff)) / w.sum()) if w.sum() > 0 else float("nan")
    bias_se = float(1.0 / np.sqrt(w.sum())) if w.sum() > 0 else float("nan")
    vis = np.where(seen, n_s + n_m, 0.0)
    summary = {
        "a": a, "b": b,
        "bias_ivw": bias_ivw, "bias_ivw_se": bias_se,
        "p_cmh": _cmh(k_a[tested], n_s[tested], k_b[tested], n_m[tested]),
        "bias_visits": float(np.sum(vis * np.nan_to_num(diff)) / vis.sum()) if vis.sum() > 0 else float("nan"),
        "n_pairs": int(len(rep)),
        "n_pairs_tested": int(tested.sum()),
        "n_significant": int(np.sum(tested & (p_f < 0.05))),
        "favours_a": int(np.sum(tested & (p_f < 0.05) & (diff > 0))),
    }
    rows = []
    for L in np.unique(lengths[rep]):
        sel = lengths[rep] == L
        st = np.flatnonzero(lengths == L)
        tot_n = n[st].sum()
        tot_a = C[st, ia].sum()
        tt = tested & sel
        from scipy.stats import binomtest

        rows.append({
            "memory_len": int(L), "n": float(tot_n), "p_a": float(tot_a / tot_n) if tot_n else float("nan"),
            "p_binom": binomtest(int(round(tot_a)), int(round(tot_n)), 0.5).pvalue if tot_n >= 1 else float("nan"),
            "bias_ivw": float(np.sum(w[tt] * diff[tt]) / w[tt].sum()) if w[tt].sum() > 0 else float("nan"),
            "p_cmh": _cmh(k_a[tt], n_s[tt], k_b[tt], n_m[tt]) if tt.any() else float("nan"),
        })
    by_length = pd.DataFrame(rows)
    # --- posterior
    if fit is not None:
        draws = fit.sample_tables(int(n_draws), rng=rng)
        dd = draws[:, rep, ia] - draws[:, m, ib]
        q = (1 - level) / 2
        pairs["post_diff"] = dd.mean(axis=0)
        pairs["post_low"] = np.quantile(dd, q, axis=0)
        pairs["post_high"] = np.quantile(dd, 1 - q, axis=0)
        pairs["post_p_positive"] = (dd > 0).mean(axis=0)
        bv = (dd * vis).sum(axis=1) / vis.sum() if vis.sum() > 0 else np.full(len(dd), np.nan)
        summary.update({
            "post_bias_visits": float(np.mean(bv)),
            "post_bias_low": float(np.quantile(bv, q)),
            "post_bias_high": float(np.quantile(bv, 1 - q)),
            "post_p_bias_positive": float(np.mean(bv > 0)),
            "post_bias_all_states": float(dd.mean()),
        })
    return AsymmetryResult(names=tuple(names), a=a, b=b, pairs=pairs, summary=summary, by_length=by_length)
