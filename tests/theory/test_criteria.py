"""The flip criteria of committed-minority runs (normlab.theory.criteria): hand-computed values,
the published Table S3 critical masses from the AI-norms archives, and bad input.

References: Flint Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025), Table S3, Methods
"Committed Minorities"; the authors' plotter.ipynb cells 9-10 (AI-norms at commit e57aeef).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from normlab.theory import criteria as cr


# ----------------------------------------------------------------------------- published rule by hand
def test_published_rule_hand_computed():
    # run a meets the threshold at its own end (0.95 + 0.95 + 0.95 = 2.85) and is padded with 1s;
    # run b does not, and is 5 rounds long
    a = [0.2, 0.95, 0.95, 0.95]
    b = [0.0, 0.5, 0.9, 0.95, 0.95]  # own last three: 2.8, not padded
    r = cr.published_rule([a, b], max_round=5)
    np.testing.assert_allclose(r["mean"], [0.1, 0.725, 0.925, 0.95, 0.975])
    assert r["last3"] == pytest.approx(0.925 + 0.95 + 0.975)  # 2.85
    assert r["success"] and r["n_padded"] == 1
    # truncation at max_round = 4 reads rounds 2-4: 0.725 + 0.925 + 0.95 = 2.6
    r4 = cr.published_rule([a, b], max_round=4)
    assert r4["last3"] == pytest.approx(2.6) and not r4["success"]
    # the ensemble rule: a count can fail although half of its runs flip
    assert not cr.published_rule([[1, 1, 1], [0, 0, 0]], max_round=3)["success"]
    assert cr.published_rule([[0.95, 0.95, 0.949], [0.95, 0.95, 0.949]], max_round=3)["success"] is False
    assert cr.published_rule([[0.95, 0.95, 0.95]], max_round=3)["success"] is True


def test_published_rule_ragged_runs_drop_out_of_later_rounds():
    # a short run that did not flip contributes only to its own rounds (pandas mean of ragged rows)
    r = cr.published_rule([[0.0, 0.0, 0.0, 0.5, 0.5, 0.5], [0.2, 0.2, 0.2]], max_round=6)
    np.testing.assert_allclose(r["mean"], [0.1, 0.1, 0.1, 0.5, 0.5, 0.5])
    assert r["last3"] == pytest.approx(1.5) and not r["success"]


def test_published_critical_mass_is_the_smallest_successful_count():
    by = {0: [[0, 0, 0]], 2: [[1, 1, 1]], 1: [[0.5, 0.5, 0.5]], 3: [[0.1, 0.1, 0.1]]}
    assert cr.published_critical_mass(by, max_round=3) == 2
    assert math.isinf(cr.published_critical_mass({1: [[0, 0, 0]]}, max_round=3))


def test_published_max_round_follows_the_authors():
    assert cr.published_max_round("Llama-3-70B-Instruct", 48) == 21
    assert cr.published_max_round("llama3_70b", 48) == 21
    assert cr.published_max_round("Llama-3.1-70B-Instruct", 48) == 30
    assert cr.published_max_round("Llama-3-70B-Instruct", 24) == 30
    assert cr.published_max_round() == 30


# ----------------------------------------------------------------------------- per-run and end-of-run
def test_first_passage_and_window():
    s = [0.1, 0.9, 0.95, 0.95, 0.96, 0.2]
    assert cr.first_passage(s, window=30) == 5.0  # 0.95 + 0.95 + 0.96 = 2.86 at round 5
    assert np.isnan(cr.first_passage(s, window=4))
    assert np.isnan(cr.first_passage(s, window=30, complete_rounds=4))


def test_end_of_run_sum_matches_blocks():
    N = 2
    hits = np.array([0, 0, 1, 2, 2, 1, 2, 2])
    unc = np.array([2, 2, 2, 2, 2, 2, 2, 2])
    # last three blocks of N = 2 interactions: [1,2]/4, [2,1]/4, [2,2]/4 -> 0.75 + 0.75 + 1
    assert cr.end_of_run_sum(hits, unc, N) == pytest.approx(2.5)
    assert np.isnan(cr.end_of_run_sum(hits[:5], unc[:5], N))


def test_per_run_curve_clopper_pearson_and_c50():
    r = cr.per_run_curve([0, 2, 4, 6], [0, 1, 4, 5], [5, 5, 5, 5], n_boot=200, rng=1)
    assert r["first_count"] == 4 and r["first_all"] == 6
    assert r["ci_low"][0] == 0 and np.isclose(r["ci_high"][0], 1 - 0.025 ** (1 / 5))
    assert r["c50_low"] <= r["c50"] <= r["c50_high"]
    assert 2 < r["c50"] < 4


def test_shares_from_a_simulation_agree_with_the_flip_time():
    from normlab.theory import strategy_game

    res = strategy_game("best_response", n_agents=20, memory=3, n_runs=6, committed=6, initial="consensus",
                        stop="flip", max_interactions=20 * 30, rng=4)
    sh = cr.shares_from_result(res)
    ft = res.flip_times()
    for k, s in enumerate(sh):
        fp = cr.first_passage(s, window=30)
        assert (np.isnan(fp) and np.isnan(ft[k])) or fp * 20 == ft[k]


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("call, match", [
    (lambda: cr.check_criterion("majority"), "criterion must be one of"),
    (lambda: cr.published_rule([[0.1, 0.2, 0.3]], max_round=4), "longer than the runs"),
    (lambda: cr.published_rule([], max_round=3), "at least one run"),
    (lambda: cr.published_rule([[1.5, 0, 0]], max_round=3), r"\[0, 1\]"),
    (lambda: cr.published_rule([[0.1, 0.2, 0.3]], max_round=2), "max_round must be >= 3"),
    (lambda: cr.published_rule([[0.1, 0.2, 0.3]], max_round=3, flip_sum=4), "flip_sum"),
    (lambda: cr.first_passage([0.1, 0.2], window=2), "window must be >= 3"),
    (lambda: cr.per_run_curve([1, 2], [3, 1], [2, 2]), "n_flips <= n_runs"),
    (lambda: cr.round_shares([1, 2], [1]), "one shape"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_bad_criterion_in_the_empirical_analysis():
    from normlab.calibration import empirical_critical_mass
    from normlab.theory import strategy_game

    res = strategy_game("best_response", n_agents=12, memory=3, n_runs=3, committed=4, initial="consensus",
                        stop="max", max_interactions=12 * 6, record_decisions=True, rng=1)
    e = empirical_critical_mass(res.to_log(), within_rounds=6, max_round=6, n_boot=0)
    with pytest.raises(ValueError, match="criterion must be one of"):
        e.critical_mass("1", criterion="c90")
    # a published window longer than the runs: a clear error when asked to be strict
    with pytest.raises(ValueError, match="longer than the runs"):
        empirical_critical_mass(res.to_log(), within_rounds=6, max_round=30, n_boot=0, strict_window=True)


# ----------------------------------------------------------------------------- Table S3 from the archives
@pytest.fixture(scope="module")
def committed_runs(ainorms_dir):
    from normlab.llm_runs.published.ainorms import load_ainorms

    return load_ainorms(ainorms_dir, kinds=["swap", "evolved"], files=["*_Q_M_*", "*_M_Q_*"])


def test_table_s3_by_the_published_rule(committed_runs):
    from normlab.calibration import empirical_critical_mass

    e = empirical_critical_mass(committed_runs, n_boot=0)
    l3_m = e.estimate("M", n_agents=48, memory=3)
    assert l3_m["model"] == "Llama-3-70B-Instruct" and l3_m["max_round"] == 21
    assert l3_m["published"] == 6
    assert e.estimate("Q", n_agents=48, memory=3)["published"] == 1
    l31_m = e.estimate("M", n_agents=24, memory=5)
    assert l31_m["max_round"] == 30 and l31_m["published"] == 10
    assert e.estimate("Q", n_agents=24, memory=5)["published"] == 0
    # the per-run reading gives a different number for Llama-3.1 overturning M (issue 9)
    assert l31_m["first_count"] == 4
    # end_of_run computed from the decisions equals the loader's stored column
    rf = e.runs
    assert (rf["end_of_run"] == rf["flipped_at_end"].astype(bool)).all()


# ----------------------------------------------------------------------------- tidy frames, any source
def test_evaluate_tidy_shares_from_simulations():
    import pandas as pd

    from normlab.theory import strategy_game

    frames, by_count = [], {}
    for c in (0, 3, 6):
        res = strategy_game("best_response", n_agents=20, memory=3, n_runs=5, committed=c, committed_name=1,
                            initial="consensus:0", stop="max", max_interactions=20 * 12, rng=c)
        sh = cr.shares_from_result(res)
        by_count[c] = sh
        for k, s in enumerate(sh):
            frames.append(pd.DataFrame({"committed": c, "run": k, "round": np.arange(1, len(s) + 1), "share": s}))
    df = pd.concat(frames, ignore_index=True)
    pub = cr.evaluate(df, "published", window=12)
    assert pub["critical_mass"] == cr.published_critical_mass(by_count, max_round=12)
    assert list(pub["by_count"]["committed"]) == [0, 3, 6]
    per = cr.evaluate(df, "per_run", window=12)
    exp = [sum(not np.isnan(cr.first_passage(s, window=12)) for s in by_count[c]) for c in (0, 3, 6)]
    assert per["by_count"]["n_flips"].tolist() == exp
    end = cr.evaluate(df, "end_of_run", window=12)
    assert set(end["by_count"].columns) >= {"committed", "n_runs", "n_flips", "p_flip"}
    with pytest.raises(ValueError, match="criterion must be one of"):
        cr.evaluate(df, "median")
    with pytest.raises(ValueError, match="longer than the runs"):
        cr.evaluate(df, "published", window=13)
    with pytest.raises(ValueError, match="lacks columns"):
        cr.evaluate(df.drop(columns="share"), "published")
