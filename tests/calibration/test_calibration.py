"""normlab.calibration: inputs, features, posterior draws, asymmetry, predictions, empirical
critical mass, CLI, bad input -- and (slow) synthetic recovery with the PyMC models.

Synthetic recovery: a known strategy table is played in the strategy game, the fit sees only the
logged decisions of runs from empty memories (as the published convergence runs), and must
recover the table within its credible intervals and the critical masses within the predicted
intervals (the true critical mass is measured on the true table with many runs).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from normlab.calibration import (
    StateCounts,
    StrategyFit,
    counts_from_log,
    counts_from_probes,
    design_matrix,
    empirical_critical_mass,
    fit_empirical,
    load_fit,
    predict,
    run_flips,
    select_runs,
    shipped_fits,
    strategy_asymmetry,
    to_logit_strategy,
)
from normlab.calibration.features import ASYMMETRIC_COLUMNS, COLUMNS, SYMMETRIC_COLUMNS
from normlab.calibration.hierarchical import conditional_deltas
from normlab.calibration.logit import _log_sigmoid
from normlab.schema import GameLog
from normlab.theory import critical_mass, strategy_game
from normlab.theory.strategies import StrategyTable, decode_state, encode_state

NAMES = ("A", "B")
# A sticky, best-response-like strategy biased towards B (critical masses 3 and 6 of 24, H = 3).
TRUE_COEF = np.array([12.0, 4.0, 0.0, 0.0, 0.0, 0.0, 1.5, 0.0, 0.0, 0.0])
TRUE_DECAY = 1.0
H = 3
N = 24


def _true_table(perturb=0.5, seed=7):
    """Known table: the logit above plus fixed per-state effects (so the truth is not exactly in
    the feature family)."""
    base = to_logit_strategy(TRUE_COEF, TRUE_DECAY).to_table(H, names=NAMES).table[:, 1]
    eta = np.log(base) - np.log1p(-base)
    d = np.random.default_rng(seed).normal(0, perturb, len(eta))
    d[0] = 0.0
    p = 1 / (1 + np.exp(-(eta + d)))
    return StrategyTable(p, memory=H, names=NAMES)


@pytest.fixture(scope="module")
def true_table():
    return _true_table()


@pytest.fixture(scope="module")
def baseline_log(true_table):
    res = strategy_game(true_table, n_agents=N, memory=H, n_runs=40, stop="streak", max_interactions=N * 150,
                        record_decisions=True, rng=11)
    log = res.to_log()
    runs = log.runs.copy()
    runs["kind"] = "baseline"
    return GameLog(log.decisions, runs)


@pytest.fixture(scope="module")
def committed_log(true_table):
    logs = []
    for c in (0, 2, 4, 6):
        res = strategy_game(true_table, n_agents=N, memory=H, n_runs=6, committed=c, committed_name="A",
                            initial="consensus:B", stop="max", max_interactions=N * 32, record_decisions=True,
                            rng=100 + c)
        lg = res.to_log()
        r = lg.runs.copy()
        r["kind"] = "swap" if c else "evolved"
        logs.append((GameLog(lg.decisions, r), res))
    return logs


# ----------------------------------------------------------------------------- features
@pytest.mark.parametrize("memory", [1, 2, 4])
@pytest.mark.parametrize("decay", [0.4, 1.0])
def test_design_matrix_maps_exactly_onto_logit_strategy(memory, decay):
    rng = np.random.default_rng(memory)
    X = design_matrix(memory, decay)
    for _ in range(3):
        c = rng.normal(0, 2, len(COLUMNS))
        L = to_logit_strategy(c, decay)
        p = np.array([L.probs(decode_state(s, 2, memory), memory)[1] for s in range(X.shape[0])])
        np.testing.assert_allclose(1 / (1 + np.exp(-(X @ c))), p, atol=1e-12)
    assert np.linalg.matrix_rank(X) == len(COLUMNS) or memory == 1


def test_design_columns_split_symmetric_and_bias_parts():
    X = design_matrix(3, 0.6)
    swap = np.array([encode_state([(1 - o, 1 - p) for o, p in decode_state(s, 2, 3)], 2) for s in range(len(X))])
    sym = [COLUMNS.index(c) for c in SYMMETRIC_COLUMNS]
    bias = [COLUMNS.index(c) for c in ASYMMETRIC_COLUMNS]
    np.testing.assert_allclose(X[swap][:, sym], -X[:, sym], atol=1e-12)   # flip sign under relabelling
    np.testing.assert_allclose(X[swap][:, bias], X[:, bias], atol=1e-12)  # invariant


# ----------------------------------------------------------------------------- inputs
def test_counts_from_log_matches_decisions(baseline_log, true_table):
    c = counts_from_log(baseline_log, names=NAMES)
    d = baseline_log.decisions
    assert c.n_decisions == int((d["valid"] & ~d["committed"]).sum())
    assert len(c.groups) == len(baseline_log.runs)
    # states are in the theory's encoding
    fr = c.to_frame()
    some = fr.sort_values("n", ascending=False).iloc[0]
    assert true_table.state_index(some["memory_state"]) == some["state"]
    sub = d[d["memory_state"] == some["memory_state"]]
    assert some["n"] == len(sub)
    # relabelling swaps states and answers consistently
    r = c.relabelled([1, 0])
    assert r.n_decisions == c.n_decisions
    s_full_a = true_table.state_index("A,A;A,A;A,A")
    s_full_b = true_table.state_index("B,B;B,B;B,B")
    np.testing.assert_allclose(r.counts[s_full_a], c.counts[s_full_b][::-1])


def test_committed_decisions_are_not_counted(committed_log):
    lg, _ = committed_log[2]
    c = counts_from_log(lg, names=NAMES)
    d = lg.decisions
    assert d["committed"].any()
    assert c.n_decisions == int((~d["committed"]).sum())


def test_select_runs_any_name_order(committed_log):
    lg, _ = committed_log[1]
    runs = lg.runs.copy()
    runs["names"] = "B,A"
    lg2 = GameLog(lg.decisions, runs)
    assert len(select_runs(lg2, names=("A", "B"), fit_on="swap").runs) == len(runs)
    with pytest.raises(ValueError, match="no run matches"):
        select_runs(lg2, names=("A", "B"), fit_on="baseline")


def test_counts_from_probes_answers_and_exact():
    rows = pd.DataFrame({"memory_state": ["", "", "A,B", "A,B", "A,B"], "name": ["A", "B", "B", "B", None],
                         "valid": [True, True, True, True, False], "names": "A,B"})
    c = counts_from_probes(rows, names=NAMES, memory=2)
    s = StrategyTable(np.full((21, 2), 0.5), memory=2, names=NAMES).state_index("A,B")
    np.testing.assert_array_equal(c.counts[0], [1, 1])
    np.testing.assert_array_equal(c.counts[s], [0, 2])
    exact = pd.DataFrame({"memory_state": ["A,B", "A,B"], "name": ["A", "B"], "p": [0.25, 0.75]})
    ce = counts_from_probes(exact, names=NAMES, memory=2, exact_weight=100)
    np.testing.assert_allclose(ce.counts[s], [25, 75])


# ----------------------------------------------------------------------------- bad input
def test_bad_inputs_raise_clear_errors(baseline_log, tmp_path):
    with pytest.raises(TypeError, match="GameLog"):
        counts_from_log(baseline_log.decisions, names=NAMES)
    with pytest.raises(ValueError, match="memory length mismatch"):
        counts_from_log(baseline_log, names=NAMES, memory=5)
    with pytest.raises(ValueError, match="at least two names"):
        counts_from_log(baseline_log, names=("A",))
    with pytest.raises(ValueError, match="differ from the runs' pool"):
        counts_from_log(baseline_log, names=("A", "C"))
    empty = GameLog(baseline_log.decisions.iloc[:0], baseline_log.runs.iloc[:0])
    with pytest.raises(ValueError, match="empty"):
        counts_from_log(empty, names=NAMES)
    with pytest.raises(ValueError, match="no run matches"):
        select_runs(baseline_log, names=NAMES, memory=5)
    # a decision table without memory states cannot even become a GameLog
    d = baseline_log.decisions.drop(columns=["memory_state"])
    with pytest.raises(ValueError, match="missing columns"):
        GameLog(d, baseline_log.runs)
    with pytest.raises(ValueError, match="missing columns"):
        counts_from_probes(pd.DataFrame({"name": ["A"]}), names=NAMES, memory=2)
    with pytest.raises(ValueError, match="memory length mismatch"):
        counts_from_probes(pd.DataFrame({"memory_state": ["A,A;A,A;A,A"], "name": ["A"]}), names=NAMES, memory=2)
    with pytest.raises(ValueError, match="prior"):
        fit_empirical(counts_from_log(baseline_log, names=NAMES), prior=0)
    c = counts_from_log(baseline_log, names=NAMES)
    with pytest.raises(ValueError, match="n_agents"):
        predict(fit_empirical(c), n_agents=1, n_draws=2)
    with pytest.raises(ValueError, match="committed"):
        predict(fit_empirical(c), n_agents=N, n_draws=2, committed=[30])
    from normlab.calibration import fit_hierarchical

    c3 = StateCounts(("A", "B", "C"), 1, ("g",), np.array([0]), np.array([0]), np.array([[1.0, 2.0, 3.0]]))
    with pytest.raises(ValueError, match="two names only"):
        fit_hierarchical(c3)
    # CLI: a log directory whose decisions lack a column -> exit code 2 and a clear message
    bad = tmp_path / "bad"
    bad.mkdir()
    baseline_log.decisions.drop(columns=["memory_state"]).to_parquet(bad / "decisions.parquet")
    baseline_log.runs.to_parquet(bad / "runs.parquet")
    from normlab.cli import main

    assert main(["calibrate", "--log", str(bad), "--names", "A,B", "--fit-model", "empirical"]) == 2
    assert main(["calibrate", "--log", str(bad), "--names", "A", "--fit-model", "empirical"]) == 2


def test_cli_reports_bad_input(tmp_path, capsys, baseline_log):
    from normlab.cli import main

    baseline_log.to_parquet(tmp_path / "ok")
    assert main(["calibrate", "--log", str(tmp_path / "ok"), "--names", "A", "--fit-model", "empirical"]) == 2
    assert "at least two names" in capsys.readouterr().err
    assert main(["calibrate", "--log", str(tmp_path / "ok"), "--names", "A,B", "--memory", "5",
                 "--fit-model", "empirical"]) == 2
    assert "no run matches" in capsys.readouterr().err
    assert main(["calibrate", "--log", str(tmp_path / "missing"), "--names", "A,B"]) == 2


# ----------------------------------------------------------------------------- posterior machinery
def test_conditional_delta_sampler_matches_brute_force():
    rng = np.random.default_rng(3)
    for mu, tau, k, n in ((2.0, 2.5, 122.0, 444.0), (-3.0, 1.0, 5.0, 5.0), (0.5, 3.0, 0.0, 9000.0), (1.0, 0.7, 1.0, 2.0)):
        d = conditional_deltas(np.full(20000, mu), np.full(20000, k), np.full(20000, n), tau, rng.random(20000))
        grid = np.linspace(-80, 80, 400001)
        eta = mu + grid
        lf = k * _log_sigmoid(eta) + (n - k) * _log_sigmoid(-eta) - grid**2 / (2 * tau**2)
        f = np.exp(lf - lf.max())
        cdf = np.cumsum(f) / f.sum()
        for q in (0.05, 0.5, 0.95):
            ref = grid[np.searchsorted(cdf, q)]
            assert abs(np.quantile(d, q) - ref) < 0.05 * max(1.0, abs(ref)) + 0.03


def test_empirical_fit_posterior_and_json_roundtrip(baseline_log, tmp_path):
    c = counts_from_log(baseline_log, names=NAMES)
    fit = fit_empirical(c, prior=1.0)
    draws = fit.sample_tables(300, rng=1)
    assert draws.shape == (300, c.n_states, 2)
    np.testing.assert_allclose(draws.sum(axis=2), 1.0)
    unseen = np.flatnonzero(~fit.observed)
    if unseen.size:  # flat prior: mean 1/2, wide
        assert abs(draws[:, unseen, 1].mean() - 0.5) < 0.05
    fr = fit.to_frame(n_draws=200)
    full = fr[(fr["memory_state"] == "B,B;B,B;B,B") & (fr["name"] == "B")].iloc[0]
    assert full["mean"] > 0.9 and full["low"] <= full["mean"] <= full["high"]
    path = fit.to_json(tmp_path / "f.json")
    back = StrategyFit.from_json(path)
    np.testing.assert_array_equal(back.counts, fit.counts)
    np.testing.assert_allclose(back.sample_tables(5, rng=2), fit.sample_tables(5, rng=2))


def test_hierarchical_draws_from_stored_parameters(tmp_path):
    """A hierarchical StrategyFit built from given (beta, tau) draws: unseen states get
    delta ~ N(0, tau), heavily observed states follow their data, JSON round trip is exact."""
    S = design_matrix(2, 0.5).shape[0]
    counts = np.zeros((S, 2))
    counts[5] = [0, 500]   # state 5: always name 1
    counts[6] = [400, 100]
    coef = np.zeros((50, len(COLUMNS)))
    fit = StrategyFit(kind="hierarchical", names=NAMES, memory=2, counts=counts, decay=0.5, coef_names=COLUMNS,
                      coef_draws=coef, tau_draws=np.full(50, 2.0))
    d = fit.sample_tables(400, rng=0)[:, :, 1]
    assert d[:, 5].min() > 0.97
    assert abs(d[:, 6].mean() - 0.2) < 0.03
    eta = np.log(d[:, 10]) - np.log1p(-d[:, 10])
    assert abs(eta.std() - 2.0) < 0.25
    np.testing.assert_allclose(d[:, 0], 0.5)  # the empty state has no state effect
    back = StrategyFit.from_json(fit.to_json(tmp_path / "h.json"))
    np.testing.assert_allclose(back.sample_tables(3, rng=9), fit.sample_tables(3, rng=9))


# ----------------------------------------------------------------------------- asymmetry
def test_asymmetry_detects_bias_and_not_symmetry(true_table):
    rng = np.random.default_rng(5)
    S = true_table.table.shape[0]
    n = np.full(S, 300)
    # symmetric table: p(B | s) = p(A | relabel(s))
    sym = true_table.table.copy()
    from normlab.calibration.asymmetry import mirror_states

    m = mirror_states(2, H, [1, 0])
    sym_p = 0.5 * (sym[:, 1] + sym[m, 0])
    for table, expect_bias in ((sym_p, False), (true_table.table[:, 1], True)):
        k = rng.binomial(n, table)
        c = StateCounts(NAMES, H, ("g",), np.zeros(S, int), np.arange(S), np.column_stack([n - k, k]))
        r = strategy_asymmetry(c, a="B", b="A")
        if expect_bias:
            assert r.summary["p_cmh"] < 1e-6 and r.summary["bias_visits"] > 0
            assert r.summary["favours_a"] >= 0.8 * r.summary["n_significant"] > 0
        else:
            assert r.summary["p_cmh"] > 0.001
            assert abs(r.summary["bias_visits"]) < 0.03
    assert set(r.by_length["memory_len"]) == {0, 1, 2, 3}


def test_asymmetry_reproduces_the_table1_pair_from_counts():
    """Seed 003 Table 1: p(M | {M,Q; Q,M}) = 0.848 vs p(Q | {Q,M; M,Q}) = 0.451 (1000 answers each)."""
    t = StrategyTable(np.full((21, 2), 0.5), memory=2, names=("Q", "M"))
    s1, s2 = t.state_index("M,Q;Q,M"), t.state_index("Q,M;M,Q")
    c = np.zeros((21, 2))
    c[s1] = [152, 848]
    c[s2] = [451, 549]
    sc = StateCounts(("Q", "M"), 2, ("p",), np.zeros(2, int), np.array([s1, s2]), c[[s1, s2]])
    r = strategy_asymmetry(sc)
    row = r.pairs[r.pairs["n"] > 0].iloc[0]
    assert row["diff"] == pytest.approx(0.848 - 0.451, abs=1e-9)
    assert row["p_fisher"] < 1e-50


# ----------------------------------------------------------------------------- predictions
def test_predict_fixed_table_agrees_with_theory_critical_mass(true_table):
    p = predict(true_table, n_agents=N, n_draws=6, n_runs_flip=40, n_runs_consensus=40, strength=False, rng=2)
    pc = p.p_consensus()
    assert pc["B"] > pc["A"]  # the bias towards B makes B the strong convention
    cm = p.critical_mass()
    ref_b = critical_mass("strategy", n_agents=N, n_runs=200, strategy=true_table, memory=H,
                          initial="consensus:B", committed_name="A", progress=False, rng=3)
    ref_a = critical_mass("strategy", n_agents=N, n_runs=200, strategy=true_table, memory=H,
                          initial="consensus:A", committed_name="B", progress=False, rng=4)
    # the per-run reading is what theory.critical_mass locates (50% of runs flip)
    assert abs(cm["overturn_B"]["per_run"]["estimate"] - ref_b.estimate) <= 1
    assert abs(cm["overturn_A"]["per_run"]["estimate"] - ref_a.estimate) <= 1
    assert cm["overturn_B"]["estimate"] > cm["overturn_A"]["estimate"]  # strong needs more (published)
    assert cm["overturn_B"]["published"]["estimate"] == cm["overturn_B"]["estimate"]
    s = p.summary()
    json.dumps(s)  # JSON-friendly
    assert set(s["critical_mass"]) == {"overturn_A", "overturn_B"}
    for k in ("overturn_A", "overturn_B"):
        for crit in ("published", "per_run"):
            assert {"estimate", "low", "high", "p_not_reached"} <= set(s["critical_mass"][k][crit])
    assert {"committed", "p_flip", "low", "high", "p_published"} <= set(s["flip_curve"]["overturn_B"][0])
    assert p.to_frame()["quantity"].isin(["p_consensus", "rounds_to_95", "critical_mass"]).any()


def test_predict_published_rule_per_draw_and_full_sweep(true_table):
    p = predict(true_table, n_agents=N, n_draws=3, n_runs_flip=4, design_runs=10, consensus=False, strength=False,
                rng=11)
    f = p.flips
    assert p.settings["committed"] == list(range(N))  # 0 .. N - 1
    assert set(f["n_runs"]) == {4}
    for (d, x), g in f.groupby(["draw", "majority"]):
        g = g.sort_values("committed")
        ok = g["published_success"].to_numpy(bool)
        row = p.critical_mass_draws[(p.critical_mass_draws["draw"] == d) & (p.critical_mass_draws["majority"] == x)]
        exp = g["committed"].to_numpy()[ok].min() if ok.any() else np.inf
        assert row["published"].iloc[0] == exp
        assert (g["published_success"] == (g["published_last3"] >= 2.849)).all()
        assert g["simulated"].all()  # every count simulated by default (issue 32)
    # with the saturation shortcut the sweep stops simulating after two all-flip counts
    q = predict(true_table, n_agents=N, n_draws=3, n_runs_flip=4, design_runs=10, consensus=False, strength=False,
                assume_monotone=True, rng=11)
    for _, g in q.flips.groupby(["draw", "majority"]):
        sim = g.sort_values("committed")["simulated"].to_numpy()
        assert not sim[-1] and sim[0]
    pd.testing.assert_frame_equal(q.critical_mass_draws, p.critical_mass_draws)
    assert p.settings["max_round"] == 30 and p.settings["design_runs"] == 10
    with pytest.raises(ValueError, match="criterion must be one of"):
        p.critical_mass("bogus")
    assert set(p.critical_mass("per_run")["overturn_A"]) >= {"estimate", "low", "high", "p_not_reached", "pooled"}


@pytest.mark.parametrize("kw, match", [
    (dict(design_runs=0), "design_runs must be >= 1"),
    (dict(max_round=2), "max_round must be >= 3"),
])
def test_predict_bad_design(true_table, kw, match):
    with pytest.raises(ValueError, match=match):
        predict(true_table, n_agents=N, n_draws=2, **kw)


def test_predict_is_reproducible_and_executor_independent(true_table):
    from concurrent.futures import ThreadPoolExecutor

    kw = dict(n_agents=N, n_draws=4, n_runs_flip=8, n_runs_consensus=8, committed=[0, 3, 6], rng=5)
    a = predict(true_table, **kw)
    b = predict(true_table, **kw)
    with ThreadPoolExecutor(2) as ex:
        c = predict(true_table, executor=ex, **kw)
    pd.testing.assert_frame_equal(a.flips, b.flips)
    pd.testing.assert_frame_equal(a.flips, c.flips)
    pd.testing.assert_frame_equal(a.strength, c.strength)
    assert a.relative_strength()["quantity"].tolist().count("width") == 2


# ----------------------------------------------------------------------------- empirical critical mass
def test_run_flips_agree_with_the_theory_simulator(committed_log):
    for lg, res in committed_log:
        rf = run_flips(lg, within_rounds=30).sort_values("run")
        np.testing.assert_array_equal(rf["flipped"].to_numpy(), res.flipped(within_rounds=30))
        ft = res.flip_times()
        ok = ~np.isnan(ft)
        np.testing.assert_allclose(rf["flip_round"].to_numpy()[ok], ft[ok] / N)


def test_empirical_critical_mass_logistic_and_first_count(committed_log):
    log = GameLog.concat([lg for lg, _ in committed_log])
    e = empirical_critical_mass(log, within_rounds=30, n_boot=200, rng=1)
    est = e.estimate("B")
    cv = e.curves.sort_values("committed")
    assert list(cv["committed"]) == [0, 2, 4, 6]
    p = cv["p_flip"].to_numpy()
    first = cv["committed"][p >= 0.5]
    assert est["first_count"] == (first.min() if len(first) else np.inf)
    if est["b1"] > 0 and np.isfinite(est["c50_low"]):
        assert est["c50_low"] <= est["c50"] <= est["c50_high"]


def test_firth_is_finite_under_separation():
    from normlab.calibration import firth_logistic

    b0, b1 = firth_logistic([1, 2, 3, 4], [0, 0, 5, 5], [5, 5, 5, 5])
    assert np.isfinite(b0) and np.isfinite(b1) and b1 > 0
    assert 2 < -b0 / b1 < 3


# ----------------------------------------------------------------------------- shipped tables, CLI, import
def test_shipped_tables_load_and_predict():
    avail = shipped_fits()
    assert {"llama31_70b_QM_H5", "llama3_70b_QM_H3"} <= set(avail)
    for name in avail:
        f = load_fit(name)
        assert f.kind == "hierarchical" and f.names == ("Q", "M")
        assert f.diagnostics["r_hat_max"] < 1.05 and f.diagnostics["divergences"] == 0
        assert f.meta["fit_on"] == "baseline"
        assert f.sample_tables(3, rng=0).shape == (3, f.n_states, 2)
    f = load_fit("llama3_70b_QM_H3")
    p = predict(f, n_agents=48, n_draws=8, n_runs_flip=8, n_runs_consensus=20, strength=False, rng=1)
    assert p.p_consensus()["M"] > 0.8
    cm = p.critical_mass()
    assert cm["overturn_M"]["estimate"] > cm["overturn_Q"]["estimate"]
    with pytest.raises(ValueError, match="unknown fitted table"):
        load_fit("no_such_table")


@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_cli_with_a_shipped_table():
    r = subprocess.run([sys.executable, "-m", "normlab.cli", "calibrate", "--table", "llama31_70b_QM_H5",
                        "--n-agents", "24", "--draws", "6", "--runs-flip", "4", "--runs-consensus", "8",
                        "--no-strength", "--seed", "1", "--json"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out["p_consensus"]) == {"Q", "M"}
    for k in ("overturn_Q", "overturn_M"):
        assert {"estimate", "low", "high"} <= set(out["critical_mass"][k])
    assert "estimate" in out["rounds_to_95"]


def test_import_is_light():
    code = ("import sys, normlab.calibration as c; c.StateCounts; c.fit_empirical; c.predict; "
            "bad=[m for m in sys.modules if m.split('.')[0] in ('pymc','pytensor','arviz')]; print(bad)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


# ----------------------------------------------------------------------------- synthetic recovery (PyMC)
@pytest.fixture(scope="module")
def hier_fit(baseline_log):
    from normlab.calibration import fit_hierarchical

    c = counts_from_log(baseline_log, names=NAMES)
    return fit_hierarchical(c, decay=TRUE_DECAY, draws=500, tune=500, chains=2, rng=21)


@pytest.mark.slow
def test_synthetic_recovery_of_the_table(hier_fit, true_table):
    d = hier_fit.diagnostics
    assert d["r_hat_max"] < 1.05 and d["divergences"] < 10
    fr = hier_fit.to_frame(n_draws=400, rng=1)
    fr = fr[fr["name"] == "B"]
    truth = true_table.table[fr["state"].to_numpy(), 1]
    covered = (fr["low"].to_numpy() <= truth + 1e-9) & (truth - 1e-9 <= fr["high"].to_numpy())
    well = fr["n"].to_numpy() >= 5
    assert covered[well].mean() >= 0.85, covered[well].mean()
    assert covered.mean() >= 0.85  # including rarely and never observed states
    # posterior mean closer to the truth where data are plenty
    err = np.abs(fr["mean"].to_numpy() - truth)
    assert np.median(err[fr["n"].to_numpy() >= 50]) < 0.03


@pytest.mark.slow
def test_synthetic_recovery_of_the_critical_masses(hier_fit, true_table):
    p = predict(hier_fit, n_agents=N, n_draws=60, n_runs_flip=16, n_runs_consensus=20, strength=False, rng=8)
    cm = p.critical_mass()
    for maj, chall, seed in (("B", "A", 3), ("A", "B", 4)):
        ref = critical_mass("strategy", n_agents=N, n_runs=200, strategy=true_table, memory=H,
                            initial=f"consensus:{maj}", committed_name=chall, progress=False, rng=seed)
        got = cm[f"overturn_{maj}"]["per_run"]
        assert got["low"] <= ref.estimate <= got["high"], (maj, got, ref.estimate)
    assert p.p_consensus()["B"] > 0.7


@pytest.mark.slow
def test_feature_logit_recovers_its_coefficients():
    from normlab.calibration import fit_logit

    coef = np.array([4.0, 1.0, 1.0, 1.5, 0.5, 0.3, 0.8, 0.0, 0.5, 0.0])
    table = to_logit_strategy(coef, 0.6).to_table(3, names=NAMES)
    res = strategy_game(table, n_agents=N, memory=3, n_runs=30, stop="streak", max_interactions=N * 150,
                        record_decisions=True, rng=2)
    c = counts_from_log(res.to_log(), names=NAMES)
    fit = fit_logit(c, decay=0.6, draws=400, tune=400, rng=3)
    cf = fit.coef_frame()
    inside = (cf["low"] <= coef) & (coef <= cf["high"])
    assert inside.mean() >= 0.8, cf.assign(truth=coef)
    assert fit.diagnostics["r_hat_max"] < 1.05


@pytest.mark.slow
def test_model_comparison_and_ppc(baseline_log, hier_fit):
    from normlab.calibration import compare_models, posterior_predictive_check

    c = counts_from_log(baseline_log, names=NAMES)
    cmp = compare_models(c, models=("empirical", "logit", "hierarchical"), by="state", k=3, decay=TRUE_DECAY,
                         draws=200, tune=200, rng=4)
    t = cmp.to_frame().set_index("model")
    # held-out states: the empirical table can only say 1/2 there
    assert t.loc["hierarchical", "heldout_ll"] > t.loc["empirical", "heldout_ll"]
    assert t.loc["logit", "heldout_ll"] > t.loc["empirical", "heldout_ll"]
    assert cmp.chosen in ("logit", "hierarchical")
    ppc = posterior_predictive_check(hier_fit, rng=1)
    assert ppc.loc[ppc["scope"] == "state", "covered"].mean() > 0.9
    assert ppc.loc[ppc["scope"] == "memory_len", "covered"].all()


# ----------------------------------------------------------------------------- CLI on logs, trajectories, figures
@pytest.mark.slow  # 26 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_cli_log_fit_on_all_save_and_reuse(tmp_path, baseline_log, committed_log, capsys):
    from normlab.cli import main

    log = GameLog.concat([baseline_log] + [lg for lg, _ in committed_log])
    log.to_parquet(tmp_path / "log")
    fit_path = tmp_path / "fit.json"
    args = ["calibrate", "--log", str(tmp_path / "log"), "--names", "A,B", "--fit-on", "all", "--fit-model",
            "empirical", "--draws", "4", "--runs-flip", "4", "--runs-consensus", "8", "--no-strength", "--seed", "3",
            "--save-fit", str(fit_path), "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fit_on"] == "all" and out["model"] == "empirical"
    assert out["fit"]["decisions"] == counts_from_log(select_runs(log, names=NAMES, fit_on="all"), names=NAMES).n_decisions
    assert out["observed"]["critical_mass"]["overturn_B"]["counts"] == [0, 2, 4, 6]
    assert main(["calibrate", "--table", str(fit_path), "--n-agents", "24", "--draws", "3", "--runs-flip", "3",
                 "--runs-consensus", "5", "--no-strength", "--json"]) == 0
    out2 = json.loads(capsys.readouterr().out)
    assert out2["model"] == "empirical" and set(out2["critical_mass"]) == {"overturn_A", "overturn_B"}
    assert main(["calibrate", "--table", str(fit_path), "--memory", "5"]) == 2
    assert "memory length mismatch" in capsys.readouterr().err


def test_trajectories_distances_and_figures(baseline_log, committed_log, true_table):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from normlab.calibration import (compare_trajectories, llm_trajectories, plot_asymmetry, plot_flip_curves,
                                     plot_strategy_heatmap, plot_success_prediction, plot_trajectories,
                                     theory_trajectories)

    llm = llm_trajectories(baseline_log, n_rounds=30, n_boot=100, rng=1)
    th = theory_trajectories(true_table, n_agents=N, n_rounds=30, n_draws=5, n_runs=8, rng=2)
    cmp_ = compare_trajectories(llm, th, label="same table")
    d = cmp_.distances.set_index(["quantity", "name"])
    # the "LLM" runs were generated by the very same table: the curves must be close
    assert d.loc[("success_rate", ""), "mean_abs"] < 0.05
    assert abs(d.loc[("success_rate", ""), "llm_rounds_to_95"] - d.loc[("success_rate", ""), "theory_rounds_to_95"]) <= 3
    sc = llm[llm["quantity"] == "success_rate"]
    assert (sc["low"] <= sc["mean"] + 1e-12).all() and (sc["mean"] <= sc["high"] + 1e-12).all()
    lg, _ = committed_log[3]
    llm_c = llm_trajectories(lg, n_rounds=20, n_boot=50, rng=1)
    th_c = theory_trajectories(true_table, n_agents=N, n_rounds=20, n_draws=3, n_runs=4, committed=6,
                               committed_name="A", initial="consensus:B", rng=3)
    assert set(compare_trajectories(llm_c, th_c).distances["quantity"]) == {"success_rate", "production"}
    fit = fit_empirical(counts_from_log(baseline_log, names=NAMES))
    pred = predict(fit, n_agents=N, n_draws=3, n_runs_flip=4, n_runs_consensus=6, strength=False, rng=1)
    emp = empirical_critical_mass(GameLog.concat([g for g, _ in committed_log]), n_boot=20, rng=1)
    fig, axes = plt.subplots(2, 3)
    plot_strategy_heatmap(fit, ax=axes[0, 0])
    plot_asymmetry(strategy_asymmetry(fit, n_draws=20), ax=axes[0, 1])
    plot_flip_curves(pred, emp, majority="B", ax=axes[0, 2])
    plot_trajectories(cmp_, ax=axes[1, 0])
    plot_success_prediction(pred, ax=axes[1, 1])
    plt.close(fig)


def test_summary_without_consensus_or_strength_predictions():
    # a critical-mass-only prediction must still summarise (regression: KeyError 'name')
    from normlab.calibration import load_fit, predict

    pred = predict(load_fit("llama3_70b_QM_H3"), n_agents=12, n_draws=5, committed=[0, 2], consensus=False,
                   strength=False, n_runs_flip=4, rng=1)
    s = pred.summary()
    assert s["p_consensus"] == {} and set(s["critical_mass"]) == {"overturn_Q", "overturn_M"}


def test_ppc_of_a_joint_fit_averages_the_table_over_its_run_effects():
    """A joint fit's table is a typical run's; its pooled counts are checked against the table
    averaged over the run effects of each draw (quadrature = Monte Carlo over the effects), and
    ``run_effects=None`` gives the table alone, as a fit without effects does."""
    from normlab.calibration import load_fit, posterior_predictive_check
    from normlab.calibration.fit.posterior import _marginal_over_run_effects

    p = np.array([[0.02, 0.3, 0.5, 0.9, 1.0]])
    eff = np.array([[0.1, -0.05, 0.4, 0.3, 0.2, 0.0]])
    g = np.random.default_rng(0)
    zk = g.standard_normal(400_000)
    zb = 0.2 * zk + np.sqrt(1 - 0.04) * g.standard_normal(400_000)
    k, b = np.exp(-0.05 + 0.3 * zk), 0.1 + 0.4 * zb
    lg = np.log(p[0, :4] / (1 - p[0, :4]))
    mc = (1 / (1 + np.exp(-(k[:, None] * lg[None, :] + b[:, None])))).mean(axis=0)
    q = _marginal_over_run_effects(p, eff)
    np.testing.assert_allclose(q[0, :4], mc, atol=2e-3)
    assert q[0, 4] == 1.0 and abs(q[0, 2] - 0.5) > 0.01  # a shift moves even p = 1/2
    fit = load_fit("llama3_70b_QM_H3")
    a = posterior_predictive_check(fit, n_draws=50, rng=3)
    b_ = posterior_predictive_check(fit, n_draws=50, rng=3, run_effects=None)
    assert not np.allclose(a["pred_mean"], b_["pred_mean"])
    tab = fit.sample_tables(50, rng=np.random.default_rng(np.random.SeedSequence(3)))[:, :, -1]
    st = b_[b_.scope == "state"]
    np.testing.assert_allclose(st["pred_mean"], tab[:, st["state"].to_numpy()].mean(axis=0))
    with pytest.raises(ValueError, match="run_effects"):
        posterior_predictive_check(fit, run_effects="yes")
