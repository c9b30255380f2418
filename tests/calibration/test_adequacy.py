"""Model adequacy (calibration/adequacy.py): the fitted table played under the design of the
committed runs against them; partners' agreement and the first-listed bias it implies."""

import dataclasses
import json

import numpy as np
import pytest

from normlab.calibration import ExperimentDesign
from normlab.calibration.adequacy import (ADEQUACY_STATISTICS, Adequacy, PairAgreement, _final_shares,
                                          check_adequacy, pair_agreement)
from normlab.calibration.fit_kinds import fit_strategy
from normlab.calibration.inputs import counts_from_log, select_runs
from normlab.calibration.observed_critical_mass import challenger_shares
from normlab.schema import GameLog
from normlab.theory import StrategyTable, strategy_game
from normlab.theory.strategies import n_states

N, H = 8, 2


def _truth(tilt=0.0):
    """A two-name table of memory 2 that follows the partners' recent names (logit of p(Q) = 3 x
    (share of Q among partners - 1/2) + tilt)."""
    from normlab.theory.strategies import state_offsets  # noqa: F401

    S = n_states(2, H)
    p = np.full(S, 0.5)
    # decode states: offsets by memory length, base-4 entries (own, partner)
    k = 0
    for m in range(H + 1):
        for code in range(4 ** m):
            ent = [(code // 4 ** (m - 1 - i)) % 4 for i in range(m)]
            q = np.mean([e % 2 == 0 for e in ent]) if m else 0.5  # partner name index 0 = Q
            p[k] = 1 / (1 + np.exp(-(3 * (q - 0.5) + tilt)))
            k += 1
    return StrategyTable(np.column_stack([p, 1 - p]), memory=H, names=("Q", "M"))


def _log(table, counts=(1, 3), runs=4, T=(160, 200), seed=0, order_bias=0.0, stop="max"):
    logs = []
    for i, c in enumerate(counts):
        r = strategy_game(table, n_agents=N, memory=H, n_runs=runs, committed=c, committed_name="Q",
                          initial="consensus:M", max_interactions=T[i % len(T)], stop=stop, record_decisions=True,
                          rng=seed + i, order_bias=order_bias, name_order="shared")
        logs.append(r.to_log())
    return GameLog.concat(logs)


@pytest.fixture(scope="module")
def sim_log():
    return _log(_truth())


@pytest.fixture(scope="module")
def fit(sim_log):
    sel = select_runs(sim_log, names=("Q", "M"), memory=H, fit_on="all")
    return fit_strategy(counts_from_log(sel, names=("Q", "M"), memory=H), "empirical", meta={"fit_on": "all"})


# ----------------------------------------------------------------------------- exact
def test_final_share_is_the_mean_of_the_last_three_complete_rounds_in_the_window():
    x = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    assert _final_shares(x, 6, 30) == pytest.approx(0.4)
    assert _final_shares(x, 5, 30) == pytest.approx(0.3)  # the partial sixth round left out
    assert _final_shares(x, 6, 4) == pytest.approx(0.2)  # the window cuts
    assert _final_shares(np.array([np.nan, 1.0, np.nan]), 3, 30) == 1.0
    assert np.isnan(_final_shares(x, 0, 30))


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_observed_statistics_are_read_from_the_runs(sim_log, fit):
    a = check_adequacy(fit, sim_log, n_draws=8, window=20, rng=1)
    assert isinstance(a, Adequacy)
    assert set(a.checks["statistic"]) == set(ADEQUACY_STATISTICS)
    assert sorted(a.checks["committed"].unique()) == [1, 3]
    sh = challenger_shares(sim_log)
    runs = sim_log.runs
    for c in (1, 3):
        ids = runs.loc[runs["committed_count"] == c, "run"]
        f = []
        for r in ids:
            s = sh[sh["run"] == r].sort_values("round")["share"].to_numpy()
            T = int(runs.loc[runs["run"] == r, "n_interactions"].iloc[0])
            f.append(np.nanmean(s[:min(T // N, 20)][-3:]))
        row = a.checks[(a.checks["committed"] == c)].set_index("statistic")
        assert row.loc["final_mean", "observed"] == pytest.approx(np.mean(f))
        assert row.loc["final_sd", "observed"] == pytest.approx(np.std(f, ddof=1))
        assert row.loc["tipped", "observed"] == pytest.approx(np.mean(np.array(f) >= 0.5))
        assert row.loc["final_mean", "runs"] == len(ids)
    # the simulated experiment is the design of the log: 4 runs per count, each capped at the protocol's length
    d = a.settings["designs"][0]
    assert ExperimentDesign.from_dict(d).runs == (4, 4)


def test_adequacy_reads_streak_stopped_runs(fit):
    """Committed runs stopped at a 3N streak (the published Llama-3.1 protocol): the simulated runs of the
    design stop too and are read to their own last round, so every count has simulated statistics (on the
    code before issue 32, a stopped simulated run was read at its cap's rounds: no final share)."""
    log = _log(_truth(), counts=(1, 3), runs=6, T=(320,), seed=4, stop="streak")
    assert (log.runs["n_interactions"] < 320).any()
    a = check_adequacy(fit, log, n_draws=12, window=20, rng=1)
    assert ExperimentDesign.from_dict(a.settings["designs"][0]).stop == "streak"
    tipped = a.checks[a.checks["statistic"] == "tipped"]
    assert len(tipped) == 2 and np.isfinite(tipped["sim_mean"]).all()
    assert np.isfinite(a.checks[a.checks["statistic"] == "final_mean"]["sim_mean"]).all()


def test_invariants_and_same_seed(sim_log, fit):
    a = check_adequacy(fit, sim_log, n_draws=10, window=20, rng=3)
    b = check_adequacy(fit, sim_log, n_draws=10, window=20, rng=3)
    assert a.checks.equals(b.checks) and a.overall.equals(b.overall)
    p = a.checks["p_value"].dropna()
    assert ((p > 0) & (p <= 1)).all()
    assert (a.checks["sim_low"].dropna() <= a.checks["sim_high"].dropna()).all()
    assert set(a.draws["draw"]) == set(range(10))
    assert set(a.overall["direction"]) == {"overturn_M", "all"}
    assert set(a.trajectories["source"]) == {"llm", "sim_runs", "sim_mean"}
    s = a.summary()
    assert "overturn_M" in s["checks"] and "all:final_mean" in s["overall"]
    assert "Adequacy" in repr(a) and "Adequacy" in a._repr_html_()
    assert a.to_frame().equals(a.checks)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.level = 0.5


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_save_load_and_plot(sim_log, fit, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    a = check_adequacy(fit, sim_log, n_draws=6, window=20, rng=2)
    back = Adequacy.load(a.save(tmp_path / "adq"))
    assert back.checks.equals(a.checks)
    axs = a.plot(path=tmp_path / "adq.png")
    assert (tmp_path / "adq.png").exists() and axs.size >= 2


def test_bad_input_is_one_line(sim_log, fit):
    with pytest.raises(TypeError, match="StrategyFit"):
        check_adequacy("x", sim_log)
    with pytest.raises(TypeError, match="GameLog"):
        check_adequacy(fit, None)
    with pytest.raises(ValueError, match="n_draws"):
        check_adequacy(fit, sim_log, n_draws=1)
    with pytest.raises(ValueError, match="majorities"):
        check_adequacy(fit, sim_log, majorities=["Z"])


# ----------------------------------------------------------------------------- statistical
@pytest.mark.slow
def test_the_truth_passes_and_a_wrong_table_fails():
    """Runs of a known table: that table is not rejected; a table tilted towards the old name is."""
    truth = _truth()
    log = _log(truth, counts=(1, 2, 3), runs=6, T=(240,), seed=10)
    ok = check_adequacy(truth_fit(truth), log, n_draws=150, window=30, run_effects=None, rng=1)
    bad = check_adequacy(truth_fit(_truth(tilt=-1.5)), log, n_draws=150, window=30, run_effects=None, rng=1)
    o = ok.overall.set_index(["direction", "statistic"])["p_value"]
    b = bad.overall.set_index(["direction", "statistic"])["p_value"]
    assert o[("all", "final_mean")] > 0.01
    assert b[("all", "final_mean")] < 0.01


@pytest.mark.slow
def test_adequacy_pvalues_uniform_under_the_null():
    """40 logs of a known table whose committed runs stop at a 3N streak (N = 8, H = 2, counts 3-5, six runs
    each, cap 480 interactions), checked against the true table (a fixed fit: posterior predictive
    p-values of a fitted table are conservative, so the exact check uses the truth): the overall
    p-values of the continuous statistics are uniform. The same logs read under the design that gives
    each simulated run the real run's length (the code before issue 32) are not: a short real run has
    flipped, so its simulated twin is cut before it can (measured: KS p 7e-5, 28 % below 0.05). The
    ``tipped`` share is discrete (its p-values sit at 1 when observed and simulated agree exactly) and is
    left out."""
    from scipy.stats import kstest

    truth = _truth()
    fit = truth_fit(truth)
    counts = (3, 4, 5)
    new, old = {}, {}
    for i in range(40):
        log = _log(truth, counts=counts, runs=6, T=(480,), seed=1000 + 10 * i, stop="streak")
        r = log.runs
        leaky = ExperimentDesign("M", "Q", N, counts, tuple(
            tuple(int(t) for t in r.loc[r["committed_count"] == c, "n_interactions"]) for c in counts), 30)
        for out, des in ((new, None), (old, [leaky])):
            a = check_adequacy(fit, log, n_draws=100, window=30, run_effects=None, rng=i, design=des)
            for (d, st), p in a.overall.set_index(["direction", "statistic"])["p_value"].items():
                if d == "all":
                    out.setdefault(st, []).append(p)
    for st in ("final_mean", "final_sd", "tipped_level", "last3"):
        v = np.asarray(new[st])
        assert kstest(v, "uniform").pvalue > 0.01, (st, v)
        assert 0 <= np.mean(v < 0.05) <= 0.15, (st, v)
    assert kstest(old["final_mean"], "uniform").pvalue < 0.01


def truth_fit(table):
    """A posterior that is the table itself (empirical fit on a huge synthetic count)."""
    from normlab.calibration.inputs import StateCounts

    S = table.table.shape[0]
    c = StateCounts(("Q", "M"), H, ("g",), np.zeros(S, np.int64), np.arange(S), table.table * 1e7, {"kind": "test"})
    return fit_strategy(c, "empirical", meta={"fit_on": "truth"})


@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_pair_agreement_sees_a_shared_first_listed_bias():
    """Runs played with a shared first-listed bias of 1.2: the committed runs' partners agree more
    than the table says, and the bias recovered covers 1.2; without bias it is near 0."""
    truth = _truth()
    biased = _log(truth, counts=(1, 2), runs=20, T=(400,), seed=3, order_bias=1.2)
    plain_ = _log(truth, counts=(1, 2), runs=20, T=(400,), seed=3)
    for lg in (biased, plain_):
        lg.runs["kind"] = "swap"
    pb = pair_agreement(biased, names=("Q", "M"), memory=H, fit=truth_fit(truth), kinds=("swap",))
    pp = pair_agreement(plain_, names=("Q", "M"), memory=H, fit=truth_fit(truth), kinds=("swap",))
    assert isinstance(pb, PairAgreement)
    rb, rp = pb.table.iloc[0], pp.table.iloc[0]
    assert rb["name_order"] == "shared" and rb["z"] > 4
    assert rb["order_bias_low"] <= 1.2 <= rb["order_bias_high"]
    assert abs(rp["z"]) < 4 and rp["order_bias_low"] == 0.0
    assert "PairAgreement" in repr(pb)


# ----------------------------------------------------------------------------- the archives
@pytest.fixture(scope="module")
def llama31(ainorms_dir):
    from normlab.llm_runs import load_ainorms

    path = ainorms_dir / "llama31_data.zip"
    if not path.exists():
        pytest.skip("llama31_data.zip not available")
    return load_ainorms(path)


@pytest.mark.slow
def test_adequacy_on_llama31_finds_the_strong_convention_miss(llama31):
    """The baseline fit without run effects is rejected on Llama-3.1's overturn_M runs (its runs too
    alike); with its baselines' run effects it is not. (The pooled fit shipped before the joint refit
    also made the flipped runs too clean -- tipped level above the LLM's at 6 and 8 committed; the
    joint fit's typical-run table does not, at 6.)"""
    from normlab.calibration import load_fit

    fit = load_fit("llama31_70b_QM_H5")
    plain_ = check_adequacy(fit, llama31, majorities=["M"], n_draws=60, run_effects=None, rng=1)
    c = plain_.checks.set_index(["committed", "statistic"])
    o = plain_.overall.set_index(["direction", "statistic"])["p_value"]
    assert o[("overturn_M", "last3")] < 0.05
    for k in (6, 8):
        assert c.loc[(k, "final_sd"), "observed"] > c.loc[(k, "final_sd"), "sim_high"]
    re = check_adequacy(fit, llama31, majorities=["M"], n_draws=60, rng=1)
    assert re.overall.set_index(["direction", "statistic"]).loc[("overturn_M", "last3"), "p_value"] > 0.05


@pytest.mark.slow
def test_pair_agreement_on_llama31(llama31):
    """Partners agree beyond the table in the committed runs (shared order), not in the baselines."""
    t = pair_agreement(llama31, names=("Q", "M"), memory=5).table.set_index("kind")
    assert t.loc["swap", "z_run"] > 5 and abs(t.loc["baseline", "z_run"]) < 2.5
    assert 0.5 < t.loc["swap", "order_bias"] < 1.5


# ----------------------------------------------------------------------------- command line
@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_cli_calibrate_adequacy(sim_log, tmp_path, capsys):
    from normlab.cli import main

    d = tmp_path / "log"
    sim_log.to_parquet(d)
    base = ["calibrate", "--log", str(d), "--names", "Q,M", "--fit-on", "all", "--fit-model", "empirical",
            "--draws", "4", "--runs-flip", "2", "--runs-consensus", "2", "--max-round", "20", "--no-strength",
            "--no-sensitivity", "--seed", "1", "--no-progress"]
    assert main(base + ["--adequacy"]) == 0
    out = capsys.readouterr().out
    assert "adequacy (fit played under the committed runs' design" in out and "overturn_M" in out
    assert main(base + ["--adequacy", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert "overturn_M" in s["adequacy"]["checks"]
    assert main(["calibrate", "--table", "llama31_70b_QM_H5", "--adequacy"]) != 0
    assert "use it with --ainorms/--log" in capsys.readouterr().err
