"""Critical masses on the experiment a critical mass is compared with (issue 21): the design of a
log's committed runs, the design kernel's experiment stage against a pure-Python reading of the
same runs, run effects in the kernel against their twin, and the prediction's experiment entry."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from normlab.calibration import ExperimentDesign, RunEffects, fit_run_effects, predict
from normlab.calibration.fit.run_effects import SAMPLE_COLUMNS
from normlab.calibration.inputs import StateCounts
from normlab.theory._batch import S_NINT, SG_SCALARS
from normlab.theory.criteria import FLIP_SUM
from normlab.theory._thresholds import (_choice_thresholds_py, _effect_thresholds, _effect_thresholds_py, _table_logits,
                                       _table_logits_py)
from normlab.theory.design import _sg_lean_run, strategy_design
from normlab.theory.strategies import n_states
import _paths  # the repository's and tests/' folders (tests/_paths.py)


def _authors_rule(trajectories, window, flip_sum=FLIP_SUM) -> tuple[float, bool]:
    """plotter.ipynb cells 9-10 as written: pad a run whose own last three rounds sum to >= 2.849,
    average the runs round by round (ended runs drop out), cut at ``window``, read the last three."""
    longest = max(len(t) for t in trajectories)
    padded = [len(t) >= 1 and sum(t[-3:]) >= flip_sum for t in trajectories]
    L = min(window, longest + 30 if any(padded) else longest)
    mean = []
    for q in range(L):
        vals = []
        for t, p in zip(trajectories, padded):
            if q < len(t):
                if not math.isnan(t[q]):
                    vals.append(t[q])
            elif p:
                vals.append(1.0)
        mean.append(sum(vals) / len(vals) if vals else math.nan)
    last3 = sum(mean[-3:])
    return last3, last3 >= flip_sum


def _random_table(rng, H):
    S = n_states(2, H)
    p = rng.uniform(0.02, 0.98, S)
    return np.column_stack([1 - p, p])


def _lean_shares(table, seed_words, N, H, c, x, y, T, stop=0):
    """One run of the design as the lean kernel plays it (tested run for run against the full kernel
    and its twin in test_prediction_engine.py): its per-round challenger shares."""
    S = table.shape[0]
    thr = np.empty(S * 2)
    _choice_thresholds_py(table.reshape(-1), S, 2, thr)
    offsets = np.array([sum(4 ** j for j in range(k)) for k in range(H + 1)], np.int64)
    mask = np.zeros(N, bool)
    mask[N - c:] = True
    R = T // N + 2
    r_count, r_succ = np.zeros(R, np.int32), np.zeros(R, np.int32)
    r_prod, r_produ = np.zeros((R, 2), np.int32), np.zeros((R, 2), np.int32)
    scal = np.zeros(SG_SCALARS, np.int64)
    _sg_lean_run(seed_words, N, 2, H, offsets, mask, np.int64(y), thr, np.full(N, x, np.int64), T, np.int64(stop),
                    FLIP_SUM / 3, r_count, r_succ, r_prod, r_produ, scal, np.zeros(N * (4 + H), np.int64))
    nr = -(-int(scal[S_NINT]) // N)
    tot = r_produ[:nr].sum(axis=1)
    return [r_produ[q, y] / tot[q] if tot[q] else math.nan for q in range(nr)]


@pytest.mark.parametrize("stop", [0, 3])
def test_experiment_stage_reads_the_runs_as_the_published_rule_does(stop):
    """Every count of a ragged design: the kernel's rule outcome and 3-round sum equal the authors'
    arithmetic on the same runs replayed run by run; the critical mass is the first
    count met; counts after it are simulated only where tested. ``stop=3``: runs with committed
    agents end at a 3N success streak (issue 22's replay of runs stopped at a consensus), count 0
    plays to its length."""
    rng = np.random.default_rng(5)
    N, H, window = 8, 2, 6
    table = _random_table(rng, H)
    if stop:  # a strategy that soon settles on the challenger, so that runs end at their streak
        table = np.column_stack([np.full(len(table), 0.04), np.full(len(table), 0.96)])
    des = ExperimentDesign("0", "1", N, counts=(0, 2, 4), lengths=((40, 64), (30, 56, 72), (64,)), window=window)
    grid = des.grid()
    G, M = len(grid), max(len(L) for _, L, _ in grid)
    seeds = rng.integers(1, 2**63, size=(1, G, M, 4), dtype=np.uint64)
    exp = {"directions": [(0, 1)], "direction": [0] * G, "counts": [c for c, _, _ in grid],
           "runs": [len(L) for _, L, _ in grid], "lengths": [t for _, L, _ in grid for t in L],
           "simulate_all": [t for *_, t in grid], "keep": [t for *_, t in grid], "window": window,
           "max_rounds": des.max_rounds(), "stop": [stop if c > 0 else 0 for c, _, _ in grid]}
    out = strategy_design(table[None], seeds, n_agents=N, memory=H, consensus=False, n_cons=1, cons_rounds=5,
                          directions=np.zeros((0, 2), np.int64), counts=[], n_flip=1, n_design=1, within=3,
                          window=window, monotone=False, level=0.5, flip_sum=FLIP_SUM, strength=False,
                          mix_kx=[], experiment=exp)
    met = False
    first = math.inf
    kept = early = 0
    for j, (c, L, tested) in enumerate(grid):
        if met and not tested:
            assert out["ex_ok"][0, j] == -1
            continue
        trs = [_lean_shares(table, seeds[0, j, k], N, H, c, 0, 1, T, stop if c > 0 else 0) for k, T in enumerate(L)]
        early += sum(len(t) < -(-T // N) for t, T in zip(trs, L))
        last3, ok = _authors_rule(trs, window)
        assert out["ex_ok"][0, j] == int(ok), (c, last3)
        assert out["ex_last3"][0, j] == pytest.approx(last3, abs=1e-12)
        if tested:
            for k, t in enumerate(trs):
                got = out["ex_share"][0, kept + k, :len(t)]
                np.testing.assert_allclose(got, t, atol=1e-15)
            kept += len(L)
        if ok and not met:
            met, first = True, c
    assert out["ex_cm"][0, 0] == first
    assert (early > 0) == bool(stop)  # the streak ended runs early only where asked


def test_run_effect_thresholds_match_their_twin_and_the_table_at_zero_effect():
    rng = np.random.default_rng(2)
    t = _random_table(rng, 3)
    t[3] = (1.0, 0.0)
    t[7] = (0.0, 1.0)
    S = t.shape[0]
    lg_py, lg = np.empty(S), np.empty(S)
    _table_logits_py(t.reshape(-1), S, 2, lg_py)
    _table_logits(t.reshape(-1), S, 2, lg)
    np.testing.assert_array_equal(lg, lg_py)
    for b, k in ((0.0, 1.0), (0.7, 0.6), (-1.3, 1.8)):
        a, c = np.empty(2 * S), np.empty(2 * S)
        _effect_thresholds_py(lg, b, k, a)
        _effect_thresholds(lg, b, k, c)
        np.testing.assert_array_equal(a, c)
    base = np.empty(2 * S)
    _choice_thresholds_py(t.reshape(-1), S, 2, base)
    np.testing.assert_allclose(a[0::2][[3, 7]], [2.0, 0.0])  # certain choices stay certain
    z = np.empty(2 * S)
    _effect_thresholds_py(lg, 0.0, 1.0, z)
    np.testing.assert_allclose(z, base, atol=1e-12)  # no effect: the table's own thresholds


def test_experiment_design_and_its_validation():
    des = ExperimentDesign("A", "B", 10, counts=(0, 1, 2, 3), lengths=((400,), (100, 120), (90, 200, 300), (150,)),
                           window=30, source="t")
    assert des.runs == (1, 2, 3, 1) and des.n_runs == 7
    assert [c for c, _, t in des.grid() if not t] == list(range(4, 10))
    assert ExperimentDesign.from_dict(des.to_dict()) == des
    assert "counts 0, 1, 2, 3" in des.describe()
    with pytest.raises(ValueError, match="increasing"):
        ExperimentDesign("A", "B", 10, counts=(2, 1), lengths=((1,), (1,)))
    with pytest.raises(ValueError, match="one list of run lengths"):
        ExperimentDesign("A", "B", 10, counts=(1, 2), lengths=((1,),))
    paper = ExperimentDesign.paper("A", "B", 6)
    assert paper.counts == tuple(range(6)) and paper.runs == (10,) * 6 and paper.grid()[-1][0] == 5


def _planted_counts(rng, p, R, sd_b, sd_k, H=3, n=(5, 30)):
    """Run-grouped counts of R runs, each playing the table ``p`` (first len(p) states of memory H) under
    its own effect ``logit p_r = kappa_r logit p + b_r``, ``b ~ N(0, sd_b)``, ``log kappa ~ N(0, sd_k)``."""
    S = len(p)
    L = np.log(p / (1 - p))
    gi, gs, gc = [], [], []
    for r in range(R):
        b, lk = rng.normal(0, sd_b), rng.normal(0, sd_k)
        q = 1 / (1 + np.exp(-(np.exp(lk) * L + b)))
        m = rng.integers(n[0], n[1], S)
        k = rng.binomial(m, q)
        gi += [r] * S
        gs += list(range(S))
        gc += list(zip(m - k, k))
    return StateCounts(("A", "B"), H, tuple(f"run:{r}" for r in range(R)), np.array(gi), np.array(gs),
                       np.array(gc, float))


@pytest.mark.slow  # 6 s in the quick tier (issue 33: the default tier under 5 minutes)
@pytest.mark.parametrize("sd_b, sd_k", [(0.0, 0.0), (0.5, 0.0), (0.0, 0.3), (0.4, 0.3)])
def test_run_effects_recover_planted_spreads(sd_b, sd_k):
    """Counts of 40 runs from a known table with planted spreads of the shift and the log-sharpness:
    the 90 % interval of each standard deviation covers what was planted; a planted 0 has an
    interval from 0, and with nothing planted the test says so and the estimates are near 0 (before
    issue 32: the prior plus Jacobian pulled a flat truth's sd to 0.15-0.2, and a Laplace interval on
    the log scale could not reach 0)."""
    rng = np.random.default_rng(1000 + int(10 * sd_b) + int(100 * sd_k))
    S = 60
    p = rng.uniform(0.1, 0.9, S)
    table = np.concatenate([p, np.full(n_states(2, 3) - S, 0.5)])
    eff = fit_run_effects(_planted_counts(rng, p, 40, sd_b, sd_k), np.column_stack([1 - table, table]))
    # rho is fitted only when both standard deviations are distinguishable from 0
    both = eff.tests["sd_b_alone"]["p_value"] < 0.05 and eff.tests["sd_k_alone"]["p_value"] < 0.05
    assert eff.kind == "marginal" and eff.tests["rho_fitted"] == both == bool(sd_b and sd_k)
    if not both:
        assert eff.rho == 0.0
    for name, planted in (("sd_b", sd_b), ("sd_k", sd_k)):
        _, lo, hi = eff.interval(name, 0.9)
        assert lo <= planted <= hi, (name, planted, lo, hi)
        if planted == 0:
            assert lo == 0.0
    if sd_b == sd_k == 0:
        assert eff.p_heterogeneity > 0.05 and eff.sd_b < 0.1 and eff.sd_k < 0.1
    else:
        assert eff.p_heterogeneity < 1e-3
    back = RunEffects.from_dict(eff.to_dict())
    assert back.summary() == eff.summary()
    np.testing.assert_array_equal(back.sample, eff.sample)
    assert not RunEffects.none().active and RunEffects.none().draws(3).shape == (3, 6)


@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_run_effects_reference_is_the_mean_logit_table():
    """Runs that all follow one table, fitted by the Dirichlet table: against the mean of its draws'
    logits the average run needs no significant correction; against the mean of its draws'
    probabilities -- flatter than every draw -- a spurious sharpness shows (the shipped Llama-3 H5
    fit's "heterogeneity, p 0.020" before issue 32 was this)."""
    from normlab.calibration import fit_strategy

    rng = np.random.default_rng(3)
    S = n_states(2, 3)
    p = 1 / (1 + np.exp(-rng.normal(0, 2.0, S)))
    counts = _planted_counts(rng, p, 30, 0.0, 0.0, n=(1, 4))
    fit = fit_strategy(counts, "empirical")
    good = fit_run_effects(counts, fit)
    old = fit_run_effects(counts, fit, reference="mean_table")
    # (what remains against the mean logits, ~0.05 and not significant, is the Dirichlet prior's shrinkage of
    # thinly counted states: the runs are sharper than the posterior table)
    assert abs(good.mu_k) < 0.06 and good.p_mean > 0.05, (good.mu_k, good.p_mean)
    assert old.mu_k > 1.5 * good.mu_k and old.p_mean < 0.05, (old.mu_k, old.p_mean)


def _null_lr(counts, table):
    """The heterogeneity test of :func:`fit_run_effects` alone: ``(LR, chi-bar p, weights, mean under the null)``."""
    from normlab.calibration.fit import run_effects as re_

    x, k1, k0, st = re_._run_rows(counts, np.log(table / (1 - table)))
    runs = re_._Runs(x, k1, k0, st, re_.QUADRATURE)
    _, _, _, lr, p, w, _, _ = re_._tests(runs, [{"sd_b": 0.05, "sd_k": 0.05}])
    th0, _ = re_._maximise(runs, ("mu_b", "mu_k"), {}, [{}])
    return lr, p, w, th0[:2]


@pytest.mark.slow
def test_heterogeneity_pvalues_are_uniform_under_the_null():
    """150 data sets without run effects (20 states, 20 runs, H = 2): the chi-bar-squared p-values of "no
    heterogeneity" (an LR of 0 -- the point mass of weight w0 -- randomised over its p-values, [1 - w0, 1])
    are never anti-conservative: no excess of small p-values (one-sided KS), at most 9 % below 0.05;
    and on two data sets a parametric bootstrap of the LR (simulated from the null fit) gives a p-value
    no larger than the asymptotic one by more than 0.05, nor smaller by more than 0.25 (measured: 0.40
    against 0.59; before issue 32: chi2 with 5 degrees of freedom at the MAP, the mean effect tested too). At this size the asymptotic reference is conservative, as variance-component LR tests
    are in small samples (Crainiceanu & Ruppert 2004): measured, LR = 0 in 35 % of the sets against
    w0 = 0.26, 95th percentile 3.2 against the mixture's 4.2, 2 % of p-values below 0.05."""
    from scipy.stats import kstest

    g = np.random.default_rng(0)
    ps, kept = [], []
    for i in range(150):
        rng = np.random.default_rng(5000 + i)
        p = rng.uniform(0.15, 0.85, 20)
        table = np.concatenate([p, [0.5]])
        c = _planted_counts(rng, p, 20, 0.0, 0.0, H=2, n=(3, 12))
        lr, pv, w, mu = _null_lr(c, table)
        ps.append(pv if lr > 1e-6 else 1.0 - w[0] * g.random())
        if 0.05 < pv < 0.6 and len(kept) < 2:
            kept.append((p, table, lr, pv, mu))
    ps = np.asarray(ps)
    assert kstest(ps, "uniform", alternative="greater").pvalue > 0.05, np.sort(ps)  # no excess of small p
    assert np.mean(ps < 0.05) <= 0.09 and np.mean(ps < 0.2) <= 0.26, np.sort(ps)
    assert kstest(ps, "uniform").pvalue > 1e-4, np.sort(ps)  # conservative, not degenerate
    for p, table, lr, pv, mu in kept:  # the parametric bootstrap: runs simulated at the null's mean effect
        rng = np.random.default_rng(7)
        q = 1 / (1 + np.exp(-(np.exp(mu[1]) * np.log(p / (1 - p)) + mu[0])))
        boot = [_null_lr(_planted_counts(rng, q, 20, 0.0, 0.0, H=2, n=(3, 12)), table)[0] for _ in range(150)]
        pb = np.mean(np.asarray(boot) >= lr)  # conservative: the asymptotic p is not below the bootstrap's
        assert pb - 0.05 <= pv <= pb + 0.25, (pv, pb)


def test_run_effects_draws_pair_by_index():
    sample = np.column_stack([np.zeros((4, 2)), [[0.1, 0.2, 0.0], [0.3, 0.4, 0.0], [0.5, 0.6, 0.0], [0.7, 0.8, 0.0]]])
    eff = RunEffects(sample=sample, kind="joint", n_runs=10)
    d = eff.draws(6, rng=1, index=[3, 0, 1, 2, 5, 4])
    np.testing.assert_array_equal(d[:, 2], [0.7, 0.1, 0.3, 0.5, 0.3, 0.1])
    with pytest.raises(ValueError, match="one entry per draw"):
        eff.draws(3, index=[1, 2])


def test_run_effects_cell_shares_fixed_with_their_rows():
    """A sample with its cell shares (``omega``): rows and shares come out together, aligned and
    through ``to_dict``; without them the share rule draws omega."""
    sample = np.column_stack([np.zeros((3, 2)), [[0.1, 0.2, 0.0], [0.3, 0.4, 0.0], [0.5, 0.6, 0.0]]])
    eff = RunEffects(sample=sample, omega=[0.9, 0.0, 0.4], kind="joint", n_runs=10)
    d = eff.draws(4, rng=1, index=[2, 0, 1, 2])
    np.testing.assert_array_equal(d[:, 5], [0.4, 0.9, 0.0, 0.4])
    np.testing.assert_array_equal(d[:, 2], [0.5, 0.1, 0.3, 0.5])
    back = RunEffects.from_dict(eff.to_dict())
    np.testing.assert_array_equal(back.omega, eff.omega)
    np.testing.assert_array_equal(eff.aligned([1, 1]).draws(2, rng=0, index=[0, 1])[:, 5], [0.0, 0.0])
    free = RunEffects(sample=sample, kind="joint", n_runs=10).draws(400, rng=1)[:, 5]
    assert 0.4 < free.mean() < 0.6 and free.std() > 0.25  # U(0, 1)
    for bad in ([0.5, 0.5], [0.5, 1.5, 0.0]):
        with pytest.raises(ValueError, match="omega must hold one share"):
            RunEffects(sample=sample, omega=bad, kind="joint", n_runs=10)


def test_prediction_on_a_design_reports_its_grid_and_is_reproducible():
    from normlab.calibration import load_fit

    fit = load_fit("llama3_70b_QM_H3")
    des = ExperimentDesign("M", "Q", 12, counts=(1, 3, 5), lengths=((240,) * 3, (200, 240, 300), (240,) * 2),
                           window=20)
    eff = RunEffects(params=np.array([0.0, 0.0, np.log(0.3), np.log(0.1), 0.0]), cov=np.eye(5) * 1e-4, n_runs=10)
    kw = dict(n_agents=12, n_draws=12, n_runs_consensus=4, n_runs_flip=4, strength=False, design=des,
              run_effects=eff, rng=3)
    a, b = predict(fit, **kw), predict(fit, **kw)
    ea, eb = a.critical_mass()["overturn_M"]["experiment"], b.critical_mass()["overturn_M"]["experiment"]
    assert ea == eb
    assert set(ea["distribution"]) <= {1, 3, 5, *range(6, 12), "not reached"}
    assert a.critical_mass()["overturn_M"]["design"] == "experiment"
    assert a.critical_mass()["overturn_Q"]["design"] == "paper"
    pd.testing.assert_frame_equal(a.experiment_shares, b.experiment_shares)
    assert set(a.experiment_shares["committed"]) <= {1, 3, 5}
    off = predict(fit, **dict(kw, run_effects=None))
    assert off.settings["run_effects"] is None and a.settings["run_effects"] is not None
    with pytest.raises(ValueError, match="reference engine"):
        predict(fit, **dict(kw, engine="reference"))
    with pytest.raises(ValueError, match="for N = 12"):
        predict(fit, **dict(kw, n_agents=10))


AINORMS = Path(os.environ.get("NORMLAB_AINORMS", _paths.REPO.parent / "shared/data/ai-norms"))


@pytest.mark.skipif(not (AINORMS / "llama31_data.zip").is_file(), reason="published AI-norms data not present")
@pytest.mark.data
def test_design_of_the_published_llama31_runs():
    """Llama-3.1's committed runs (N = 24, H = 5): counts 0 (the evolved runs), 1, 2, 4, 6, 8, 10,
    ten runs each, the authors' 30-round window; every run gets the protocol's cap (800 interactions,
    the evolved runs 1000) and stops at a 3N streak -- not its own length, which tells its outcome
    (every run shorter than 800 flipped; issue 32)."""
    from normlab.calibration import experiment_designs
    from normlab.llm_runs import load_ainorms

    log = load_ainorms(AINORMS / "llama31_data.zip")
    d = {x.majority: x for x in experiment_designs(log, names=("Q", "M"), memory=5, n_agents=24)}
    m = d["M"]
    assert (m.challenger, m.counts, m.runs, m.window, m.stop) == ("Q", (0, 1, 2, 4, 6, 8, 10), (10,) * 7, 30,
                                                                  "streak")
    assert set(m.lengths[0]) == {1000} and all(set(L) == {800} for L in m.lengths[1:])  # caps, not outcomes
    q = d["Q"]
    assert q.counts == (0, 1, 2, 4, 6, 8, 10, 22) and q.runs[-1] == 1 and q.stop == "streak"
    assert all(set(L) == {800} for L in q.lengths[1:])
    assert "capped at" in m.describe() and m.summary()["cap"] == [1000] + [800] * 6


@pytest.mark.skipif(not (AINORMS / "llama3_data.zip").is_file(), reason="published AI-norms data not present")
@pytest.mark.data
def test_llama3_designs_read_the_stop_rule():
    """Llama-3 at N = 48, H = 3: overturn_M played every run to 1000 interactions (no stop); overturn_Q
    stopped 12 of the 16 runs at count 1 at a 144 = 3N streak (cap unknown beyond the longest run)."""
    from normlab.calibration import experiment_designs
    from normlab.llm_runs import load_ainorms

    log = load_ainorms(AINORMS / "llama3_data.zip")
    d = {x.majority: x for x in experiment_designs(log, names=("Q", "M"), memory=3, n_agents=48)}
    assert d["M"].stop == "none" and all(set(L) == {1000} for L in d["M"].lengths)
    assert d["Q"].stop == "streak" and d["Q"].runs[0] == 16 and all(set(L) == {1258} for L in d["Q"].lengths)
    assert d["Q"].window == 21


def _shuffle_outcome_lengths(runs, cap, rng):
    """The run table with every length below ``cap`` replaced by another value below it, and which runs
    of a count are short shuffled: what a design must not read."""
    r = runs.reset_index(drop=True)
    for c, idx in r.groupby("committed_count").groups.items():
        idx = list(idx)
        short = r.loc[idx, "n_interactions"].astype(int) < cap
        k = int(short.sum())
        if not k:
            continue
        new = np.array(idx)[rng.permutation(len(idx))[:k]]
        r.loc[idx, "n_interactions"] = cap
        r.loc[new, "n_interactions"] = rng.integers(100, cap, size=k)
    return r


@pytest.mark.data
def test_design_does_not_read_outcomes():
    """A log's design depends on what the experimenter fixed (counts, runs per count, cap, stop rule), not
    on how long each run lasted: new lengths below the cap, on other runs, give the same design (on
    the code before issue 32, each run's slot was its own length)."""
    from normlab.schema import GameLog
    from normlab.theory import strategy_game

    logs = []
    for i, c in enumerate((1, 2, 3)):
        r = strategy_game("best_response", n_agents=8, memory=2, n_runs=4, names=("Q", "M"), committed=c,
                          committed_name="Q", initial="consensus:M", max_interactions=320, stop="streak",
                          record_decisions=True, rng=i)
        logs.append(r.to_log())
    log = GameLog.concat(logs)
    assert (log.runs["n_interactions"] < 320).any()  # some runs stopped on the challenger's consensus
    des = ExperimentDesign.from_log(log, names=("Q", "M"), majority="M", window=20)
    assert des.stop == "streak" and all(set(L) == {320} for L in des.lengths)
    rng = np.random.default_rng(5)
    for _ in range(3):
        other = GameLog(log.decisions, _shuffle_outcome_lengths(log.runs, 320, rng))
        assert ExperimentDesign.from_log(other, names=("Q", "M"), majority="M", window=20).to_dict() == des.to_dict()
    if (AINORMS / "llama31_data.zip").is_file():
        from normlab.llm_runs import load_ainorms

        pub = load_ainorms(AINORMS / "llama31_data.zip")
        ref = ExperimentDesign.from_log(pub, names=("Q", "M"), majority="M", memory=5, n_agents=24)
        sel = (pub.runs["initial"] == "consensus:M") & (pub.runs["committed_count"] > 0)
        runs = pub.runs.copy()
        runs.loc[sel, "n_interactions"] = _shuffle_outcome_lengths(pub.runs[sel], 800, rng)["n_interactions"].to_numpy()
        again = ExperimentDesign.from_log(GameLog(pub.decisions.iloc[:0], runs), names=("Q", "M"), majority="M",
                                          memory=5, n_agents=24)
        assert again.to_dict() == ref.to_dict()


@pytest.mark.slow
def test_joint_fit_recovers_planted_effects():
    """30 runs of a known H = 2 table, each under its own planted effect (sd_b 0.5, sd_k 0.3): the joint fit's
    90 % posterior intervals of both standard deviations cover what was planted, and its table is the
    run-median table (the planted one: logits regress on the truth with slope 0.9-1.1), not the pooled
    table of the runs."""
    from normlab.calibration import fit_hierarchical

    rng = np.random.default_rng(21)
    S = n_states(2, 2)
    p = 1 / (1 + np.exp(-rng.normal(0, 1.5, S)))
    counts = _planted_counts(rng, p, 30, 0.5, 0.3, H=2, n=(10, 40))
    fit = fit_hierarchical(counts, decay=0.7, draws=300, tune=300, chains=2, cores=2, rng=5)
    eff = RunEffects.from_dict(fit.meta["run_effects"])
    assert eff.kind == "joint" and fit.diagnostics["divergences"] <= 3
    for name, planted in (("sd_b", 0.5), ("sd_k", 0.3)):
        lo, hi = np.quantile(eff.sample[:, SAMPLE_COLUMNS.index(name)], [0.05, 0.95])
        assert lo <= planted <= hi, (name, lo, hi)
    tabs = fit.sample_tables(200, rng=1)[:, :, 1]
    est = np.mean(np.log(tabs / (1 - tabs)), axis=0)[1:]
    truth = np.log(p / (1 - p))[1:]
    slope = float(np.sum(est * truth) / np.sum(truth * truth))
    assert 0.9 <= slope <= 1.1, slope
