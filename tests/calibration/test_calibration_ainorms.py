"""Validation of normlab.calibration on the published AI-norms runs (skips without the data).

Protocol (issue 4): fit only on the baseline (convergence) runs of one model, predict that model's
collective bias and critical masses, and compare with its committed-minority runs. References:
Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Table 1, Table S2, Table S3,
Methods "Committed Minorities"; ../shared/VALIDATION.md.

Critical masses are read by the criteria of ``normlab.theory.criteria``: ``published`` (the
authors' ensemble rule behind Table S3, applied to the observed runs and, per posterior draw, to a
simulated 10-run replication of their experiment) and ``per_run`` (50% of runs flip). The published
Llama-3.1 critical mass for overturning M (10 of 24) is *not* reproduced by the strategy fitted to
the baselines (about 6); the tests below check the observed values by the published rule and the
agreement of the per-run prediction with the flip frequencies of the committed runs, and the
notebook ``notebooks/calibration_validation.ipynb`` reports the discrepancy.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from normlab.calibration import (
    counts_from_log,
    counts_from_probes,
    empirical_critical_mass,
    fit_hierarchical,
    load_fit,
    predict,
    select_runs,
    strategy_asymmetry,
)

QM = ("Q", "M")
L31 = "Llama-3.1-70B-Instruct"
L3 = "Llama-3-70B-Instruct"


@pytest.fixture(scope="session")
def qm_log(ainorms_dir):
    from normlab.llm_runs.published.ainorms import load_ainorms

    return load_ainorms(ainorms_dir, kinds=["baseline", "swap", "evolved"], files=["*_Q_M_*", "*_M_Q_*"])


def _overlap(a_lo, a_hi, b_lo, b_hi):
    return a_lo <= b_hi and b_lo <= a_hi


def test_table1_asymmetry_from_the_probes(ainorms_dir):
    from normlab.llm_runs.published.ainorms import load_ainorms_probes

    pr = load_ainorms_probes(ainorms_dir, models="llama31")
    r = strategy_asymmetry(counts_from_probes(pr, names=QM, memory=2))
    row = r.pairs[r.pairs["memory_state"] == "Q,M;M,Q"].iloc[0]
    # p(M | {M,Q; Q,M}) = 0.848 and p(Q | {Q,M; M,Q}) = 0.451 (Table 1)
    assert row["p_b_mirror"] == pytest.approx(1 - 0.848, abs=5e-4)
    assert 1 - row["p_a"] == pytest.approx(0.451, abs=5e-4)
    bl = r.by_length.set_index("memory_len")
    assert bl.loc[0, "p_binom"] == pytest.approx(0.116, abs=1e-3)  # interaction 1
    assert bl.loc[1, "p_binom"] == pytest.approx(0.110, abs=1e-3)  # interaction 2
    assert bl.loc[2, "p_binom"] < 2.2e-16                          # interaction 3


def test_shipped_tables_are_fits_of_the_baseline_runs(qm_log):
    for name, llm, H in (("llama31_70b_QM_H5", L31, 5), ("llama3_70b_QM_H3", L3, 3), ("llama3_70b_QM_H5", L3, 5)):
        b = select_runs(qm_log, names=QM, memory=H, n_agents=24, model=llm, fit_on="baseline")
        np.testing.assert_array_equal(load_fit(name).counts, counts_from_log(b, names=QM).counts)


def test_empirical_critical_masses_of_the_committed_runs(qm_log):
    sw = select_runs(qm_log, names=QM, fit_on=["swap", "evolved"])
    e30 = empirical_critical_mass(sw, within_rounds=30, n_boot=200, rng=1)
    e20 = empirical_critical_mass(sw, within_rounds=20, n_boot=200, rng=1)
    # Llama-3.1, N = 24: a Q consensus flips with nobody committed (Table S3: 0)
    assert e30.estimate("Q", n_agents=24, memory=5)["first_count"] == 0
    # Llama-3, N = 48, H = 3, within the 1000-interaction time frame of those runs (Table S3: 6 and 1)
    assert e20.estimate("M", n_agents=48, memory=3)["first_count"] == 6
    assert e20.estimate("Q", n_agents=48, memory=3)["first_count"] == 1
    # Table S3 by the authors' ensemble rule (windows 21 and 30 follow the authors)
    assert e30.estimate("M", n_agents=48, memory=3)["published"] == 6
    assert e30.estimate("Q", n_agents=48, memory=3)["published"] == 1
    assert e30.estimate("M", n_agents=24, memory=5)["published"] == 10
    assert e30.estimate("Q", n_agents=24, memory=5)["published"] == 0
    # the 30-round window cannot be observed in those 1000-interaction runs: censoring is flagged
    cv = e30.curves
    assert cv[(cv["n_agents"] == 48) & (cv["memory"] == 3) & (cv["majority"] == "M")]["n_censored"].sum() > 0


@pytest.fixture(scope="module")
def llama31_fit(qm_log):
    b = select_runs(qm_log, names=QM, memory=5, n_agents=24, model=L31, fit_on="baseline")
    return fit_hierarchical(counts_from_log(b, names=QM), draws=500, tune=500, chains=2, rng=31)


@pytest.mark.slow
def test_llama31_fit_on_baselines_predicts_the_committed_runs(qm_log, llama31_fit):
    from normlab.llm_runs.published.ainorms import first_round_reaching, mean_success_by_round

    fit = llama31_fit
    assert fit.diagnostics["r_hat_max"] < 1.05 and fit.diagnostics["divergences"] == 0
    p = predict(fit, n_agents=24, n_draws=100, n_runs_flip=12, strength=False, rng=5)
    b = select_runs(qm_log, names=QM, memory=5, n_agents=24, model=L31, fit_on="baseline")
    # collective bias: 40/40 consensus on M observed, and 40 of 40 is not in the predictive's tail (the
    # chance of 40 M consensus in 40 runs, averaged over the posterior draws); M the likelier winner
    assert (b.runs["consensus"] == "M").sum() == 40
    m = p.consensus[p.consensus["name"] == "M"]
    p40 = float(np.mean((m["runs"] / m["n_runs"]).to_numpy(float) ** 40))
    assert p40 > 0.05 and p.p_consensus()["M"] > 0.5, (p40, p.p_consensus())
    r95 = p.rounds_to_95()
    obs95 = first_round_reaching(mean_success_by_round(b), 0.95)
    assert r95["low"] <= obs95 <= r95["high"]
    cm = p.critical_mass()
    assert cm["overturn_Q"]["per_run"]["estimate"] == 0  # the weak consensus collapses unaided
    assert cm["overturn_Q"]["published"]["low"] == 0  # published 0 within the interval
    assert cm["overturn_M"]["estimate"] > cm["overturn_Q"]["estimate"]
    sw = select_runs(qm_log, names=QM, memory=5, n_agents=24, model=L31, fit_on=["swap", "evolved"])
    e = empirical_critical_mass(sw, within_rounds=30, n_boot=500, rng=2).estimate("M", n_agents=24, memory=5)
    assert e["published"] == 10
    pr = cm["overturn_M"]["per_run"]
    assert _overlap(pr["low"], pr["high"], e["c50_low"], e["c50_high"])


@pytest.mark.slow
def test_llama3_fit_at_h3_predicts_the_n48_committed_runs(qm_log):
    b = select_runs(qm_log, names=QM, memory=3, n_agents=24, model=L3, fit_on="baseline")
    fit = fit_hierarchical(counts_from_log(b, names=QM), draws=500, tune=500, chains=2, rng=3)
    # the published Llama-3 runs last 1000 interactions = 20 rounds of 48 agents
    p = predict(fit, n_agents=48, n_draws=100, n_runs_flip=12, within_rounds=20, strength=False, rng=6)
    assert p.p_consensus()["M"] >= 0.9
    cm = p.critical_mass()
    assert p.settings["max_round"] == 21  # the authors' window for Llama-3 at N = 48
    assert cm["overturn_Q"]["per_run"]["estimate"] == 1  # published 1
    assert cm["overturn_Q"]["low"] <= 1 <= cm["overturn_Q"]["high"]
    # the experiment the published 6 was read from (its counts, runs per count, cap and stop rule: the
    # leak-free design), unwidened (before issue 32 this test widened the paper-design interval by one)
    from normlab.calibration import experiment_designs

    des = experiment_designs(qm_log, names=QM, memory=3, n_agents=48, llm=L3)
    pe = predict(fit, n_agents=48, n_draws=100, n_runs_flip=12, within_rounds=20, strength=False, consensus=False,
                 design=des, rng=6)
    exp = pe.critical_mass()["overturn_M"]["experiment"]
    assert exp["low"] <= 6 <= exp["high"], exp  # published 6
    sw = select_runs(qm_log, names=QM, memory=3, n_agents=48, model=L3, fit_on=["swap", "evolved"])
    e = empirical_critical_mass(sw, within_rounds=20, n_boot=500, rng=2).estimate("M", n_agents=48, memory=3)
    assert e["published"] == 6
    pr = cm["overturn_M"]["per_run"]
    assert _overlap(pr["low"], pr["high"], e["c50_low"], e["c50_high"])


@pytest.mark.slow
def test_cli_calibrate_on_the_published_archive(ainorms_dir):
    cmd = [sys.executable, "-m", "normlab.cli", "calibrate", "--ainorms", str(ainorms_dir / "llama3_data.zip"),
           "--names", "Q,M", "--memory", "3", "--n-agents", "48", "--within-rounds", "20", "--draws", "30",
           "--samples", "300", "--runs-flip", "8", "--runs-consensus", "20", "--no-strength", "--seed", "2", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["llm"] == L3 and out["memory"] == 3 and out["n_agents"] == 48 and out["fit_on"] == "baseline"
    assert out["p_consensus"]["M"] > 0.8
    for k in ("overturn_M", "overturn_Q"):
        assert {"estimate", "low", "high"} <= set(out["critical_mass"][k])
        for crit in ("published", "per_run"):
            assert {"estimate", "low", "high", "p_not_reached"} <= set(out["critical_mass"][k][crit])
            assert {"estimate", "low", "high", "p_not_reached"} <= set(out["observed"]["critical_mass"][k][crit])
    assert out["critical_mass"]["overturn_Q"]["per_run"]["estimate"] == 1
    assert out["observed"]["critical_mass"]["overturn_M"]["first_count"] == 6
    assert out["observed"]["critical_mass"]["overturn_M"]["published"]["estimate"] == 6  # Table S3
    assert out["observed"]["critical_mass"]["overturn_Q"]["published"]["estimate"] == 1
    assert out["fit"]["diagnostics"]["divergences"] == 0
    # the committed runs were not fitted: they are scored (no held-out baseline at N = 48)
    sc = out["scores"]
    assert sc["n_flip_runs"] == 68 and sc["n_consensus_runs"] == 0 and sc["brier_consensus"] is None
    assert 0 <= sc["brier_flip"] < sc["reference"]["brier_flip"] and sc["log_score_flip"] < np.log(2)
    # the experiment-interval rows counted by what they are: per direction its flip fractions (one per tested
    # count with scored runs) and its two critical-mass readings; the zero-width share beside the coverage;
    # and normlab's Brier below both rivals' on the same runs (before issue 32: 0 <= coverage <= 1)
    cov = sc["coverage"]
    by_dir = {d["majority"]: d for d in sc["by_direction"]}
    assert cov["n_experiment"] == sum(d["coverage"]["n_experiment"] for d in by_dir.values())
    assert cov["n_experiment"] == sc["fraction_coverage"]["flip"]["n"] + 2 * len(by_dir)
    assert cov["zero_width_experiment"] is not None and 0 <= cov["zero_width_experiment"] <= 1
    inside = round(cov["experiment"] * cov["n_experiment"])
    assert abs(cov["experiment"] * cov["n_experiment"] - inside) < 1e-9  # a share of whole rows
    assert sc["brier_flip"] < sc["rivals"]["direction_rule"]["brier_flip"]
    assert sc["brier_flip"] < sc["rivals"]["logistic"]["brier_flip"]
    # several LLMs in a folder: a clear error, not a silent choice
    r2 = subprocess.run([sys.executable, "-m", "normlab.cli", "calibrate", "--ainorms", str(ainorms_dir), "--names",
                         "Q,M", "--memory", "5", "--fit-model", "empirical", "--draws", "2"],
                        capture_output=True, text=True, timeout=300)
    assert r2.returncode == 2 and "several LLMs" in r2.stderr


@pytest.mark.slow
def test_cli_calibrate_llama31_reports_the_published_critical_mass(ainorms_dir):
    cmd = [sys.executable, "-m", "normlab.cli", "calibrate", "--ainorms", str(ainorms_dir / "llama31_data.zip"),
           "--names", "Q,M", "--draws", "40", "--samples", "300", "--runs-consensus", "20", "--no-strength",
           "--seed", "3", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    pub = out["critical_mass"]["overturn_M"]["published"]
    assert pub["low"] is not None and pub["low"] <= pub["estimate"] <= pub["high"]
    assert out["observed"]["critical_mass"]["overturn_M"]["published"]["estimate"] == 10  # Table S3
    assert out["observed"]["critical_mass"]["overturn_Q"]["published"]["estimate"] == 0
    assert out["observed"]["critical_mass"]["overturn_M"]["published"]["max_round"] == 30
    sc = out["scores"]  # fitted on baselines, scored on the committed and unperturbed runs
    assert set(sc) >= {"brier_flip", "log_score_flip", "brier_consensus", "coverage"}
    assert sc["n_flip_runs"] >= 130 and sc["excluded"].get("censored", 0) <= 5
    assert sc["brier_flip"] < 0.25 and sc["brier_consensus"] is None
    # beside its rivals on the same runs: the 40 fitted baselines all ended on M (the strong convention)
    rv = sc["rivals"]
    assert rv["direction_rule"]["winners"] == {"Q": 0, "M": 40, "none": 0}
    assert rv["logistic"]["trained_on"] == "leave one run out"  # one LLM in the archive
    assert rv["coin"]["brier_flip"] == sc["reference"]["brier_flip"] == 0.25
    d = {x["majority"]: x for x in sc["by_direction"]}
    assert d["M"]["convention"] == "strong" and d["Q"]["convention"] == "weak"
    assert d["M"]["n_flip_runs"] + d["Q"]["n_flip_runs"] == sc["n_flip_runs"]
    # an M consensus never flips by the rule, a Q consensus always: its Brier on Q is tiny, on M large
    assert d["Q"]["brier"]["direction_rule"] < 0.01 < d["M"]["brier"]["direction_rule"]
    assert 0 <= sc["coverage"]["zero_width_experiment"] <= 1 and isinstance(sc["rival_wins"], list)
    from normlab.calibration._cli_format import format_summary  # the lines calibrate prints without --json

    text = format_summary(out)
    assert "committed-fraction logistic:" in text and "zero-width" in text and "from a consensus on M" in text
