"""The benchmark scripts behind the "Speed" numbers of docs/validation/benchmarks.md run in their tiny form and print every
line the page quotes (their timings mean nothing at this size; the runs are still checked run for
run against the plain-C baselines, and the two prediction engines against each other)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import _paths  # the repository's and tests/' folders (tests/_paths.py)

BENCH = _paths.REPO / "benchmarks"


def _run(*args, timeout=600, tmpdir=None):
    """A benchmark's stdout (exit 0 asserted); with ``tmpdir`` (created) as its ``TMPDIR``."""
    env = None
    if tmpdir is not None:
        Path(tmpdir).mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "TMPDIR": str(tmpdir)}
    r = subprocess.run([sys.executable, str(BENCH / args[0]), *args[1:]], capture_output=True, text=True,
                       timeout=timeout, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


@pytest.mark.slow
def test_bench_theory_tiny(tmp_path):
    out = _run("bench_theory.py", "--tiny", tmpdir=tmp_path / "tmp")
    assert not list((tmp_path / "tmp").iterdir())  # its compiled C baselines removed
    for head in ("1. Minimal NG", "2. Many short runs", "3. Strategy game", "4. One run", "5. Start-up"):
        assert head in out
    assert "disagree" not in out
    if "no C compiler" not in out:
        assert "each run for run identical to the plain C" in out
        assert out.count("run for run identical: True") == 2
        assert out.count("goal <= 1.3x") == 3
    assert "goal >= 40x" in out or "authors' code not found" in out
    assert "(mixed-population path)" in out and "same runs: True" in out
    assert "each its own table" in out and "run for run as its own table: True" in out
    assert "import normlab.theory + first call (Numba cache)" in out and "normlab's share" in out


@pytest.mark.slow
def test_bench_theory_startup_alone(tmp_path):
    out = _run("bench_theory.py", "--startup", "--tiny", tmpdir=tmp_path / "tmp")
    assert not list((tmp_path / "tmp").iterdir())  # a section alone returns early: its folder goes at exit
    assert "5. Start-up" in out and "1. Minimal NG" not in out
    assert "deferring SciPy's BLAS module" in out and "normlab's share" in out


@pytest.mark.slow
def test_bench_theory_ng_alone():
    out = _run("bench_theory.py", "--ng", "--tiny")
    assert "1. Minimal NG" in out and "2. Many short runs" not in out and "5. Start-up" not in out
    if "no C compiler" not in out:
        assert "each run for run identical to the plain C" in out and out.count("goal <= 1.3x") == 1


@pytest.mark.slow
def test_bench_calibration_engines_tiny():
    res = json.loads(_run("bench_calibration.py", "--engines", "--draws", "4", "--reps", "1"))
    assert res["predict"]["same_critical_mass"] is True
    for k in ("predict", "mean_table", "table_draws"):
        assert res[k]["old_cpu_s"] > 0 and res[k]["new_cpu_s"] >= 0
    assert res["design_kernel"]["interactions"] > 0
    assert res["predict_run_effects"]["identical"] is True and res["predict_llama31_200_draws_cpu_s"] > 0
    st = res["interactions_by_stage"]
    assert st["all"] > st["consensus"] > 0 and st["all"] > st["strength"] > 0
    eff = res["run_effects_per_interaction"]
    assert eff["zero_effects_same_runs"] is True  # shift 0, sharpness 1: the plain kernel's runs
    assert eff["interactions"]["none"] == eff["interactions"]["zero_effects"]



def test_speed_page_quotes_the_stored_engines_run():
    """The prediction-engine numbers of docs/validation/benchmarks.md are those of the stored
    ``bench_calibration.py --engines --reps 3`` output they cite (docs/validation/_data/)."""
    root = _paths.REPO
    res = json.loads((root / "docs/validation/_data/bench_engines_ad8d4a7.json").read_text())
    page = " ".join((root / "docs/validation/benchmarks.md").read_text().split())
    new = sorted(res["predict_run_effects"]["new_all"])
    eff, dk, st = res["run_effects_per_interaction"], res["design_kernel"], res["interactions_by_stage"]
    quoted = [
        f"**{res['predict_llama31_200_draws_cpu_s']:.2f} s CPU on one core** (median of three, {new[0]:.2f}-{new[-1]:.2f};",
        f"takes {res['predict_run_effects']['old_cpu_s']:.2f} s here",
        f"{st['all'] / 1e6:.1f} M interactions, of which the relative-strength runs add {st['strength'] / 1e6:.1f} M",
        f"the convergence runs {st['consensus'] / 1e6:.1f} M",
        f"plays {eff['interactions']['none'] / 1e6:.1f} M interactions at {eff['M_per_cpu_s']['none']:.1f} M/s",
        f"bit for bit) {eff['M_per_cpu_s']['zero_effects']:.1f} M/s, {eff['plain_vs_zero_effects']:.2f}x slower",
        f"with the fit's effects {eff['M_per_cpu_s']['fit_effects']:.1f} M/s",
        f"{res['predict']['new_cpu_s']:.2f} s against {res['predict']['old_cpu_s']:.1f} s ({res['predict']['ratio']:.1f}x;",
        f"runs {dk['interactions'] / 1e6:.1f} M interactions at {dk['M_per_cpu_s']:.1f} M interactions/s, "
        f"{dk['design_vs_batch']:.1f}x the `strategy_game` batch kernel",
        f"({dk['strategy_game_batch_M_per_cpu_s']:.1f} M/s;",
        f"batch kernel ran at {dk['strategy_game_batch_M_per_cpu_s']:.1f} M interactions/s in this run",
    ]
    for q in quoted:
        assert q in page, q
    assert res["predict_run_effects"]["identical"] is True and res["predict"]["same_critical_mass"] is True


@pytest.mark.slow
def test_bench_faults_aims_kills_at_the_start_and_checks_its_window(tmp_path):
    """Kills early in the run (start-up, the first settings write; CI's trial 17 landed in that
    write and stranded its directory before the fix): every trial resumes to the reference table,
    and the trials' temporary folder is removed at the end."""
    res = json.loads(_run("bench_faults.py", "--trials", "3", "--seed", "5", "--kill-window", "0.05,0.5",
                          tmpdir=tmp_path / "tmp"))
    assert not list((tmp_path / "tmp").iterdir())
    assert res["failures"] == [] and (res["trials"], res["survived"], res["lost"], res["hung"]) == (3, 3, 0, 0)
    assert res["peak_rss_mb"]["children"] > 0
    r = subprocess.run([sys.executable, str(BENCH / "bench_faults.py"), "--kill-window", "0.5"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "--kill-window must be LO,HI" in r.stderr and "Traceback" not in r.stderr


# ----------------------------------------------------------------------------- simulation-based calibration
def _bench_module(name: str):
    """A benchmark script imported as a module (benchmarks/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def _coverage_module():
    return _bench_module("bench_coverage")


def test_coverage_randomised_rank_and_discrete_intervals():
    bc = _coverage_module()
    x = [1, 2, 2, 3, float("inf")]
    # below 1: rank u / 6; ties split at random over their places; inf is the largest value
    assert bc.randomised_rank(x, 0, 0.5) == pytest.approx(0.5 / 6)
    assert bc.randomised_rank(x, 2, 0.0) == pytest.approx(1 / 6)
    assert bc.randomised_rank(x, 2, 1.0) == pytest.approx(4 / 6)
    assert bc.randomised_rank(x, float("inf"), 1.0) == pytest.approx(1.0)
    # 10 draws at 1, 80 at 2, 10 at 3: the interval a user reads off the draws (numpy's inverted CDF,
    # the tails (1 - level) / 2 as the predictions compute them, ties and all)
    vals, probs = [1, 2, 3], [10, 80, 10]
    assert bc.discrete_interval(vals, probs, 0.5) == (2.0, 2.0)
    assert bc.discrete_interval(vals, probs, 0.95) == (1.0, 3.0)
    g = np.random.default_rng(1)
    for _ in range(300):
        n = int(g.choice([8, 20, 40, 100, 200, 37]))
        x = g.integers(0, 6, n).astype(float)
        x[g.random(n) < 0.1] = np.inf
        v, c = np.unique(x, return_counts=True)
        for L in (0.5, 0.8, 0.95):
            a = (1 - L) / 2
            want = (np.quantile(x, a, method="inverted_cdf"), np.quantile(x, 1 - a, method="inverted_cdf"))
            assert bc.discrete_interval(v, c, L) == want, (x, L)
    assert bc.expected_coverage(vals, probs, 1, 2) == pytest.approx(0.9)
    assert bc.expected_coverage(vals, probs, 2, 2) == pytest.approx(0.8)
    # an integer's equal-tailed interval holds at least its level
    g = np.random.default_rng(0)
    for _ in range(50):
        p = g.dirichlet(np.ones(6))
        for L in (0.5, 0.8, 0.95):
            lo, hi = bc.discrete_interval(range(6), p, L)
            assert bc.expected_coverage(range(6), p, lo, hi) >= L - 1e-9


def test_coverage_equality_names_the_cheap_fit_kind_and_rejects_moved_intervals():
    """--equality with --cheap-model: the verdict names both fit kinds, and a cheap fit whose
    intervals move further from the default's than a second default seed does, on every row, and
    change coverage, is rejected (while the same rows as the default's are accepted)."""
    mod = _coverage_module()
    cfg = {"fit_model": "hierarchical", "nuts_draws": 1000, "nuts_tune": None, "chains": 2}

    def rows(shift, covered):
        return [{"quantity": "flip", "key": f"r{i}", **{str(L): {"covered": covered, "low": 0.1 + shift + 0.001 * i,
                                                                 "high": 0.3 + shift} for L in mod.LEVELS}}
                for i in range(12)]

    def rec(cheap_shift, cheap_covered):
        return {"fits": {"a": {"rows": rows(0.0, True), "fit": {}}, "b": {"rows": rows(0.001, True), "fit": {}},
                         "cheap": {"rows": rows(cheap_shift, cheap_covered), "fit": {}}}, "seconds": {}}

    same = mod.equality_verdict([rec(0.0, True) for _ in range(6)], cfg, {"fit_model": "empirical"})
    assert same["cheap"] == {"fit_model": "empirical"} and same["default"]["fit_model"] == "hierarchical"
    assert same["accepted"] is True
    moved = mod.equality_verdict([rec(0.2, False) for _ in range(6)], cfg, {"fit_model": "empirical"})
    assert moved["accepted"] is False and moved["disagreement_cheap_a"] == 1.0


def test_coverage_share_intervals():
    bc = _coverage_module()
    lo, hi = bc.share_interval(19, 20)
    assert lo == pytest.approx(0.7513, abs=1e-4) and hi == pytest.approx(0.9987, abs=1e-4)  # Clopper-Pearson
    assert bc.share_interval(0, 10)[0] == 0.0
    # every truth alike: the bootstrap interval collapses; truths that differ widen it
    assert bc.cluster_bootstrap([(3, 4)] * 10) == (0.75, 0.75)
    lo, hi = bc.cluster_bootstrap([(4, 4)] * 10 + [(0, 4)] * 10)
    assert lo < 0.5 < hi and hi - lo > 0.2


def test_coverage_of_probabilities_at_the_truths_resolution():
    """A wide interval covers at its level; near 0 the truth's resolution (k of n runs) lets a
    calibrated forecaster cover more, and the expected share says how much."""
    from scipy.stats import beta

    bc = _coverage_module()
    a, b = 20.0, 20.0
    lo, hi = beta.ppf(0.025, a, b), beta.ppf(0.975, a, b)
    assert bc.resolution_coverage(a, b, 10**6, lo, hi) == pytest.approx(0.95, abs=0.005)
    a, b = 0.5, 200.0
    lo, hi = beta.ppf(0.25, a, b), beta.ppf(0.75, a, b)
    assert bc.resolution_coverage(a, b, 1000, lo, hi) > 0.7  # a 50 % interval near 0 at 1/1000
    # the planted over-confident forecaster pulls values to the median
    assert bc._shrink_values(np.array([0.0, 5.0, 10.0]), 0.2).tolist() == [4.0, 5.0, 6.0]
    assert bc._shrink_values(np.array([0.0, 4.0, np.inf]), 0.5, support=[0, 2, 4, 8]).tolist()[:2] == [2.0, 4.0]



def test_randomised_coverage_is_the_level_for_calibrated_discrete_forecasts():
    """Truths drawn from the forecast itself: an integer's equal-tailed intervals and a probability's
    near 0 (known through k of 1 000 runs) hold more than their level, the randomised share the level
    (to its binomial noise); a forecaster pulled to half its spread falls below it."""
    from scipy.stats import binom

    bc = _coverage_module()
    g = np.random.default_rng(7)
    support = np.arange(8.0)
    pmf = binom.pmf(np.arange(8), 7, 0.3)  # a critical mass's predictive: mass piled on 1-3
    T = 3000
    for F, in_level in ((None, True), (0.5, False)):
        per = [[bc._discrete_rows("critical_mass", "k", support, pmf, float(g.choice(support, p=pmf)), float(g.random()),
                                  F)] for _ in range(T)]
        for L in bc.LEVELS:
            rz = bc.randomised_share(per, L)
            plain = np.mean([r[0][str(L)]["covered"] for r in per])
            if in_level:
                assert abs(rz["share"] - L) < 4 * math.sqrt(L * (1 - L) / T), (L, rz)
                assert plain > L + 0.03, (L, plain)  # integers: more than the level by construction
                assert rz["low"] <= L <= rz["high"]
            else:
                assert rz["share"] < L - 0.1, (L, rz)
    a, b, n = 0.4, 300.0, 1000  # a probability near 0, the truth known through n runs
    per = []
    for _ in range(T):
        k = int(g.binomial(n, g.beta(a, b)))
        per.append([bc._prob_rows_ab("flip", "c", a, b, (k, n), float(g.random()))])
    for L in bc.LEVELS:
        rz = bc.randomised_share(per, L)
        assert abs(rz["share"] - L) < 4 * math.sqrt(L * (1 - L) / T), (L, rz)
    assert np.mean([r[0]["0.5"]["covered"] for r in per]) > 0.6  # the plain rule credits the resolution
    assert bc.randomised_share([[{"rank": None}]], 0.95) is None


def test_draws_alike_is_beta_summarys_branch_for_draws_that_all_agreed():
    """A flip row is 'every draw alike' exactly when beta_summary took its all-or-none branch (no
    draw saw an event, or every run of every draw did): recorded by _prob_rows from the draws, and
    read off the stored (a, b) of rows written before the branch changed (_pooled_alike)."""
    bc = _coverage_module()
    g = np.random.default_rng(3)
    n = np.full(200, 16.0)
    cases = [(np.zeros(200), True), (n.copy(), True), (np.r_[np.zeros(199), 1.0], False),
             (np.r_[n[:199], 15.0], False), (g.binomial(16, 0.3, 200).astype(float), False),
             (g.binomial(16, 0.001, 200).astype(float), False), (np.r_[np.zeros(199), 3.0], True)]
    for k, alike in cases:
        nn = n.copy() if k[-1] != 3.0 else np.r_[n[:199], 0.0]  # a draw with no run is ignored
        row = bc._prob_rows("flip", "c", k, nn, (0, 1000), 0.5, None)
        assert bc._draws_alike(row) is alike, k[:5]
        assert bc._draws_alike({"a": row["a"], "b": row["b"]}) is False  # today's beta is not the pooled one
    # the pooled beta of that branch before 2026-11-30: c = N - 1, mean 0.5 / (N + 1) (or mirrored)
    N = 3200
    assert bc._pooled_alike({"a": 0.5 * (N - 1) / (N + 1), "b": (N - 1) * (N + 0.5) / (N + 1)})
    assert bc._pooled_alike({"a": (N - 1) * (N + 0.5) / (N + 1), "b": 0.5 * (N - 1) / (N + 1)})
    assert not bc._pooled_alike({"a": 0.5 * (N - 1) / (N + 1), "b": (N - 1) * (N + 0.5) / (N + 1) + 0.3})
    assert {"all", "open", "alike", "differ"} == set(bc.FLIP_ROWS)


def test_refresh_alike_gives_old_rows_the_forecast_of_today():
    """refresh_alike: a row the old all-or-none branch wrote becomes, exactly, the row _prob_rows
    writes now from the same draws, truth and uniform (recovered from the stored rank); rows whose
    draws differed are kept, marked alike = False."""
    from scipy.stats import betabinom

    bc = _coverage_module()
    D, n = 200, 16
    N = D * n
    m, c = 0.5 / (N + 1), N - 1.0
    old = (m * c, (1 - m) * c)
    rows, want = [], []
    for (k_truth, u, side) in ((0, 0.3, 0), (2, 0.7, 0), (1000, 0.9, 1), (998, 0.1, 1)):
        a, b = old if side == 0 else old[::-1]
        rows.append(bc._prob_rows_ab("flip", f"c{k_truth}", a, b, (k_truth, 1000), u))
        kd = np.zeros(D) if side == 0 else np.full(D, float(n))
        want.append(bc._prob_rows("flip", f"c{k_truth}", kd, np.full(D, float(n)), (k_truth, 1000), u, None))
    kd = np.r_[1.0, np.zeros(D - 1)]
    other = bc._prob_rows("consensus", "Q", kd, np.full(D, 40.0), (3, 10000), 0.2, None)
    other.pop("alike")
    rec = {"index": 0, "cfg": {"draws": D}, "views": {"user": {"rows": rows + [other], "fit": {}}}}
    out = bc.refresh_alike([rec])[0]["views"]["user"]["rows"]
    for got, exp in zip(out, want):
        assert got["alike"] is True and (got["a"], got["b"]) == (exp["a"], exp["b"])
        assert got["rank"] == pytest.approx(exp["rank"], abs=1e-9)
        assert {L: got[L] for L in ("0.5", "0.8", "0.95")} == {L: exp[L] for L in ("0.5", "0.8", "0.95")}
    assert out[-1] == dict(other, alike=False)
    assert out[0]["rank"] != rows[0]["rank"] and betabinom.pmf(0, 1000, *old) < 0.9
    with pytest.raises(ValueError, match="do not split over"):
        bc.refresh_alike([dict(rec, cfg={"draws": 7})])
    with pytest.raises(ValueError, match="debug-shrink"):
        bc.refresh_alike([dict(rec, views={"user": {"rows": rows, "rows_shrunk": rows}})])


def test_randomised_table_on_the_page_is_the_stored_summaries():
    """The page's table of randomised shares (in-family truths, 80 % / 95 %) and README's sentence
    are the stored summaries' ``randomised`` entries."""
    from _docs import docs_page

    data = _paths.REPO / "docs" / "validation" / "_data"
    page = docs_page("validation/calibration.md")
    user = json.loads((data / "sbc_user.json").read_text())
    pred = json.loads((data / "sbc_prediction.json").read_text())

    def pair(d):
        return f"{d['0.8']['randomised']['share']:.3f} / {d['0.95']['randomised']['share']:.3f}"

    for label, key in (("critical masses (400 rows)", ("coverage_detail", "prediction_sbc", "critical_mass")),
                       ("flip, all 9 600 rows", ("coverage_detail", "prediction_sbc", "flip")),
                       ("consensus (400 rows)", ("coverage_detail", "prediction_sbc", "consensus"))):
        line = f"| {label} | {pair(user[key[0]][key[2]])} | {pair(pred[key[1]][key[2]])} |"
        assert line in page, line
    line = (f"| flip, open forecasts (1 999 / 2 011 rows) | {pair(user['coverage_flip_open']['flip'])} | "
            f"{pair(pred['prediction_flip_open']['flip'])} |")
    assert line in page, line
    for part, what in (("alike", "every draw alike"), ("differ", "draws differ")):
        u, q = user[f"coverage_flip_{part}"]["flip"], pred[f"prediction_flip_{part}"]["flip"]
        rows = " / ".join(f"{d['0.8']['rows']:,}".replace(",", " ") for d in (u, q))
        line = f"| flip, {what} ({rows} rows) | {pair(u)} | {pair(q)} |"
        assert line in page, line
    readme = " ".join((_paths.REPO / "README.md").read_text().split())
    det = user["coverage_detail"]

    def ci(d):
        return f"{d['share']:.3f} [{d['low']:.3f}, {d['high']:.3f}]"

    cm95, fl80 = det["critical_mass"]["0.95"]["randomised"], det["flip"]["0.8"]["randomised"]
    for text in (f"masses ({ci(cm95)} at 95 %, {det['critical_mass']['0.8']['randomised']['share']:.3f} at 80 %)",
                 f"{det['flip']['0.95']['randomised']['share']:.3f} at 95 % and {ci(fl80)} at 80 %",
                 f"(prediction view {ci(pred['prediction_sbc']['flip']['0.8']['randomised'])})",
                 f"outcome {user['coverage_flip_alike']['flip']['0.8']['randomised']['share']:.3f} at 80 %",
                 f"differ {ci(user['coverage_flip_differ']['flip']['0.8']['randomised'])} "
                 f"({user['coverage_flip_differ']['flip']['0.95']['randomised']['share']:.3f} at 95 %)"):
        assert text in readme, text
    guide = " ".join(docs_page("guide/calibration.md").split())
    assert f"the critical masses hold {ci(cm95)}" in guide


@pytest.mark.slow
def test_coverage_truth_values_scatter_like_independent_runs():
    """The rows score a true probability as k of n independent runs (binomial noise), so the truth
    must be estimated that way: each run its own draw of the run effects. Under a strong run effect
    runs sharing a table scatter far more (100 tables of 10 runs: 2.6-3.3x for Llama-3.1 truths)."""
    bc = _coverage_module()
    p1 = np.array([0.5, 0.3, 0.5, 0.5, 0.7])  # H = 1, two names: empty memory, then the four (own, partner) pairs
    truth = bc.Truth("posterior", 0, memory=1, n_agents=4, p1=p1, effects=np.array([0.0, 0.0, 2.0, 0.0, 0.0, 0.0]))
    cfg = dict(truth_runs=60, n_agents=4, window=30, consensus_rounds=50)
    est = []
    for s in range(30):
        v = bc.truth_values(truth, cfg, np.random.default_rng(s))
        k, n = v["consensus"]["M"]
        assert n == 60 and v["effect_tables"] == 60
        est.append(k / n)
    p = float(np.mean(est))
    assert 0.2 < p < 0.8
    ratio = float(np.std(est, ddof=1)) / math.sqrt(p * (1 - p) / 60)
    assert 0.6 < ratio < 1.4, ratio


def test_coverage_consensus_truth_has_its_own_runs():
    """P(consensus) is estimated from ``truth_runs_consensus`` runs (its binomial noise near 0 and 1
    would otherwise be as wide as the forecasts), the flips from ``truth_runs``; a record without
    the key (written before it) reads ``truth_runs`` for both, and its rescore records the default."""
    bc = _coverage_module()
    p1 = np.array([0.5, 0.3, 0.5, 0.5, 0.7])
    truth = bc.Truth("posterior", 0, memory=1, n_agents=4, p1=p1, effects=np.array([0.0, 0.0, 0.5, 0.0, 0.0, 0.0]))
    cfg = dict(truth_runs=20, truth_runs_consensus=70, n_agents=4, window=30, consensus_rounds=50)
    v = bc.truth_values(truth, cfg, np.random.default_rng(0))
    assert {n for _, n in v["flip"].values()} == {20}
    assert {n for _, n in v["consensus"].values()} == {70} and v["runs_consensus"] == 70
    old = {k: x for k, x in cfg.items() if k != "truth_runs_consensus"}
    assert {n for _, n in bc.truth_values(truth, old, np.random.default_rng(0))["consensus"].values()} == {20}
    rec = {"cfg": dict(bc.DEFAULTS, truth_runs_consensus=None)}
    rec["cfg"].pop("truth_runs_consensus")
    new = bc._rescored_settings(dict(rec, fingerprint=bc._fingerprint(rec["cfg"])))
    assert new["cfg"]["truth_runs_consensus"] == 10000 and new["fingerprint"] == bc._fingerprint(bc.DEFAULTS)
    tiny = bc._rescored_settings({"cfg": {k: x for k, x in {**bc.DEFAULTS, **bc.TINY}.items()
                                          if k != "truth_runs_consensus"}})
    assert tiny["cfg"]["truth_runs_consensus"] == 3000


def test_coverage_expected_share_nears_the_level_with_more_truth_runs():
    """The reason for those runs, measured on one stored-like forecast near P = 1: a calibrated
    Beta's 95 % interval covers a truth known through 1 000 runs far less often than its level,
    through 10 000 runs nearly at it."""
    from scipy.stats import beta as B

    bc = _coverage_module()
    a, b = 531.0, 3.9  # a Llama-3 H = 3 truth's consensus forecast on M (user view)
    lo, hi = B.ppf(0.025, a, b), B.ppf(0.975, a, b)
    e1, e10 = bc.resolution_coverage(a, b, 1000, lo, hi), bc.resolution_coverage(a, b, 10000, lo, hi)
    assert e1 < 0.92 and 0.94 < e10 < 0.96, (e1, e10)


@pytest.mark.slow
def test_truth_scatter_tiny_and_its_page_table():
    """``--truth-scatter`` (the measurement behind the change above) runs in a small form on the stored
    user-view rows, and the page's table is the stored output of its full form."""
    from _docs import docs_page

    data = _paths.REPO / "docs" / "validation" / "_data"
    out = json.loads(_run("bench_coverage.py", "--truth-scatter", str(data / "sbc_user_rows.jsonl.gz"),
                          "--scatter-truths", "1", "--scatter-reps", "4", timeout=600))
    assert len(out) == 1 and out[0]["reps"] == 4 and out[0]["runs"] == 1000
    assert out[0]["ratio_tables"] > 1.5 > out[0]["ratio_one_per_run"]
    page = docs_page("validation/calibration.md")
    stored = json.loads((data / "truth_scatter.json").read_text())
    assert len(stored) == 3 and all(r["reps"] == 30 for r in stored)
    for r in stored:
        line = (f"| {r['index']} | {r['p_M']:.3f} | {r['binomial_sd']:.4f} | {r['sd_100_tables']:.4f} "
                f"({r['ratio_tables']:.2f}x) | {r['sd_one_table_per_run']:.4f} ({r['ratio_one_per_run']:.2f}x) |")
        assert line in page, line

@pytest.mark.slow
def test_bench_coverage_tiny(tmp_path):
    """The CI form: keys, truths, every family; a planted over-confident forecaster is seen; the
    same seed gives the same JSON whatever the number of workers."""
    res = json.loads(_run("bench_coverage.py", "--tiny", "--debug-shrink", "0.2", "--json", timeout=900))
    assert res["n_truths"] == 8
    assert set(res["n_truths_by_family"]) == {"posterior", "run_effects", "shared_order", "non_logit"}
    for q in ("critical_mass", "flip", "consensus", "tip"):
        for lv in ("0.5", "0.8", "0.95"):
            assert 0 <= res["coverage"][q][lv] <= 1
            d = res["coverage_detail"][q][lv]
            assert d["low"] <= d["share"] <= d["high"] and d["rows"] >= d["truths"] > 0
    assert set(res["posterior_sbc"]) == set(res["prediction_sbc"]) == {"critical_mass", "flip", "consensus"}
    assert set(res["prediction_by_family"]) == {"run_effects", "shared_order"}  # the wider truths with a source
    assert res["reading_differs"] == 0  # the intervals scored are the ones the user sees
    assert all(len(h) == 20 for h in res["ranks"].values())
    honest, shrunk = res["coverage"]["critical_mass"]["0.95"], res["shrunk"]["coverage"]["critical_mass"]["0.95"]
    assert shrunk < honest and shrunk < 0.8
    assert res["shrunk"]["coverage"]["flip"]["0.95"] < res["coverage"]["flip"]["0.95"]
    a = json.loads(_run("bench_coverage.py", "--tiny", "--truths", "2", "--wider", "0", "--families", "posterior",
                        "--workers", "2", "--json", timeout=600, tmpdir=tmp_path / "tmp"))
    assert not list((tmp_path / "tmp").iterdir())  # the workers' PyTensor caches removed
    b = json.loads(_run("bench_coverage.py", "--tiny", "--truths", "2", "--wider", "0", "--families", "posterior",
                        "--workers", "1", "--json", timeout=600))
    for x in (a, b):
        for k in ("seconds", "stage_seconds", "settings"):
            x.pop(k, None)
    assert a == b


@pytest.mark.slow
def test_bench_coverage_tip_alone(tmp_path):
    """--sbc tip: no view and no truth probabilities, only tip on the simulated log scored against
    archive B; the records resume from --results, and the summary's tip entry is theirs."""
    res = tmp_path / "tip.jsonl"
    args = ("bench_coverage.py", "--tiny", "--truths", "2", "--wider", "0", "--families", "posterior", "--sbc", "tip",
            "--workers", "1", "--results", str(res), "--json")
    js = json.loads(_run(*args, timeout=600))
    recs = [json.loads(x) for x in res.read_text().splitlines()]
    assert len(recs) == 2 and all(r["views"] == {} and r["truth_values"] == {} for r in recs)
    assert all(len(r["tip"]) == 1 and r["tip"][0]["quantity"] == "tip" for r in recs)
    d = js["coverage_detail"]
    assert d["tip"]["0.95"]["rows"] == 2 and d["flip"]["0.95"]["rows"] == 0
    assert js["coverage"]["tip"]["0.95"] == round(sum(r["tip"][0]["0.95"]["covered"] for r in recs) / 2, 4)
    tr, tips = js["tip_runs"], [r["tip"][0] for r in recs]
    assert tr["searches"] == 2 and tr["mean"] == round(sum(t["runs_used"] for t in tips) / 2, 1)

    def near(key, k):  # "not reached" (None) is k agents from nothing but itself
        return sum((t[key] is None and t["truth"] is None) or (None not in (t[key], t["truth"])
                                                               and abs(t[key] - t["truth"]) <= k) for t in tips)

    assert (tr["tip_exact"], tr["tip_within_1"]) == (near("estimate", 0), near("estimate", 1))
    assert (tr["full_grid_exact"], tr["full_grid_within_1"]) == (near("truth_same_archive", 0),
                                                                  near("truth_same_archive", 1))
    bc = _coverage_module()
    assert any(line.startswith("- tip (2 searches): runs read") for line in bc.markdown_table(js))
    again = json.loads(_run(*args, timeout=600))  # every truth read back, none run again
    for x in (js, again):
        for k in ("seconds", "stage_seconds"):
            x.pop(k, None)
    assert again == js
    one = tmp_path / "one.jsonl"  # --match: the summary of the truths another results file holds
    one.write_text(res.read_text().splitlines()[1] + "\n")
    m = json.loads(_run("bench_coverage.py", "--summarise", str(res), "--match", str(one), "--json", timeout=120))
    assert m["n_truths"] == 1 and m["tip_runs"]["mean"] == recs[1]["tip"][0]["runs_used"]


def _children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid`` (Linux /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                st = open(f"/proc/{d}/status").read()
            except OSError:
                continue
            f = dict(x.split(":\t", 1) for x in st.splitlines() if ":\t" in x)
            if f.get("PPid", "").strip() == str(pid) and not f.get("State", "").startswith("Z"):
                out.append(int(d))
    return out


def _alive(pid: int) -> bool:
    try:
        return not open(f"/proc/{pid}/status").read().split("State:\t", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_ends_the_workers_and_keeps_the_finished_truths(tmp_path):
    """A terminal's Ctrl-C (SIGINT to the whole process group) during a run on 2 workers: the parent
    ends its workers at once and exits 130, saying how many truths it kept; every finished truth is
    in --results and a rerun reads them (before, the workers caught it, went on with the queue and
    the parent waited for them at exit)."""
    import signal
    import time

    res, err = tmp_path / "r.jsonl", tmp_path / "err.txt"
    cmd = [sys.executable, str(BENCH / "bench_coverage.py"), "--tiny", "--truths", "8", "--wider", "0",
           "--families", "posterior", "--sbc", "prediction", "--seed", "3", "--workers", "2", "--results", str(res)]
    (tmp_path / "tmp").mkdir()
    with err.open("w") as fh:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=fh, start_new_session=True,
                             env={**os.environ, "TMPDIR": str(tmp_path / "tmp")})
    try:
        t0 = time.time()
        while not (res.exists() and res.read_text().count("\n") >= 1) and time.time() - t0 < 400:
            assert p.poll() is None, err.read_text()[-2000:]
            time.sleep(0.5)
        workers = _children(p.pid)
        assert len(workers) >= 2 and res.read_text().count("\n") < 8, err.read_text()[-2000:]
        os.killpg(p.pid, signal.SIGINT)
        rc = p.wait(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    text = err.read_text()
    kept = len(res.read_text().splitlines())
    assert rc == 130 and "Traceback" not in text, text[-2000:]
    assert f"# interrupted: {kept} of 8 truths done, kept in {res}" in text, text[-2000:]
    t0 = time.time()
    while [w for w in workers if _alive(w)] and time.time() - t0 < 10:
        time.sleep(0.2)
    assert not [w for w in workers if _alive(w)]
    assert not list((tmp_path / "tmp").iterdir())  # the workers' PyTensor caches removed on the way out
    # a rerun reads them; --max-seconds 0 starts no truth (the pool's stop path, no worker spawned)
    again = subprocess.run(cmd + ["--max-seconds", "0", "--json", "-"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"# {kept} truths read from {res}, {8 - kept} to run" in again.stderr
    assert f"# stopped after 0.0 s: {kept} of 8 truths done" in again.stderr
    assert json.loads(again.stdout)["n_truths"] == kept


def test_tip_fresh_experiment_before_and_after_on_the_page():
    """The page's before/after of tip's fresh-experiment tables (section tip-fresh): the run before
    (commit 2b07332's rows, summarised) and after searched the same way (the same runs read, the
    same estimates against archive B), and the page quotes both summaries' per-source lines and
    each level's plain and randomised shares."""
    from _docs import docs_page

    bc = _coverage_module()
    page = docs_page("validation/calibration.md")
    data = _paths.REPO / "docs" / "validation" / "_data"
    before = json.loads((data / "sbc_tip_2b07332.json").read_text())
    after = json.loads((data / "sbc_tip.json").read_text())
    assert before["n_truths"] == after["n_truths"] == 200 and before["seed"] == after["seed"] == 2026
    assert before["tip_runs"] == after["tip_runs"]  # the searches are the same; only the replication changed
    for js in (before, after):
        src = [x for x in bc.markdown_table(js) if x.startswith("- tip, truths from")]
        assert len(src) == 3
        for line in src:
            assert line in page, f"docs/validation/calibration.md lacks\n{line}"
    for L in ("0.5", "0.8", "0.95"):
        cells = []
        for js in (before, after):
            e = js["coverage_detail"]["tip"][L]
            r = e["randomised"]
            cells.append(f"{e['share']:.3f} ({e['expected']:.3f}) | {r['share']:.3f} [{r['low']:.3f}, {r['high']:.3f}]")
        row = f"| {float(L):.0%} | {cells[0]} | {cells[1]} |"
        assert row in page, f"docs/validation/calibration.md lacks\n{row}"


def test_calibration_page_tables_are_the_stored_summaries():
    """The coverage tables of docs/validation/calibration.md (and README's) are
    ``bench_coverage.py --summarise ... --markdown`` of the summaries the runs wrote with ``--json``
    (docs/validation/_data/): every line of the rendered table is on the page, and each summary
    is the run the page's command describes."""
    from _docs import docs_page

    bc = _coverage_module()
    page = docs_page("validation/calibration.md")
    readme = (_paths.REPO / "README.md").read_text()
    data = _paths.REPO / "docs" / "validation" / "_data"
    want = {"sbc_prediction.json": (2026, 200, "prediction"), "sbc_user.json": (2026, 200, "user"),
            "sbc_tiny.json": (1, 8, "all"), "sbc_tip.json": (2026, 200, "tip")}
    for name, (seed, n, sbc) in want.items():
        js = json.loads((data / name).read_text())
        assert js["seed"] == seed and js["settings"]["sbc"] == sbc, name
        if n is not None:
            assert js["n_truths"] >= n, name
        for line in bc.markdown_table(js):
            assert line in page, f"{name}: docs/validation/calibration.md lacks\n{line}"
    pred = json.loads((data / "sbc_prediction.json").read_text())

    def headline(line, view):  # README's rows: every quantity at 80 and 95 %, the flips' split only on the page
        return (line.startswith(f"| {view} |") and ("| 0.95 |" in line or "| 0.80 |" in line)
                and "every draw alike" not in line and "draws differ" not in line)

    for line in bc.markdown_table(pred)[2:]:
        if headline(line, "prediction"):
            assert line in readme, f"README lacks\n{line}"
    # README's sentence on tip's coverage run: its truths, runs read and randomised shares
    tipjs = json.loads((data / "sbc_tip.json").read_text())
    d, tr = tipjs["coverage_detail"]["tip"], tipjs["tip_runs"]
    r95, r80 = d["0.95"]["randomised"], d["0.8"]["randomised"]
    flat = " ".join(readme.split())
    for text in (f"`tip` on {tipjs['n_truths']} of these truths", f"reads {100 * tr['mean_share']:.0f} % of the runs",
                 f"in {r95['share']:.3f} [{r95['low']:.3f}, {r95['high']:.3f}] of them at 95 %, {r80['share']:.3f} at 80 % "
                 "(randomised)"):
        assert text in flat, f"README lacks {text!r}"
    # README's sentence on the user view quotes its 95 % shares, rows and truths, beside its table
    user = json.loads((data / "sbc_user.json").read_text())
    for line in bc.markdown_table(user)[2:]:
        if headline(line, "user"):
            assert line in readme, f"README lacks\n{line}"
    det, op = user["coverage_detail"], user["coverage_flip_open"]["flip"]["0.95"]
    cm, co = det["critical_mass"]["0.95"], det["consensus"]["0.95"]
    for text in (f"{user['n_truths']} of the 200", f"{cm['share']:.3f} of {cm['rows']} critical masses ({cm['expected']:.3f}",
                 f"{op['share']:.3f} of {op['rows']} open", f"({op['expected']:.3f})",
                 f"{co['share']:.3f} [{co['low']:.3f}, {co['high']:.3f}] of {co['rows']} consensus rows ({co['expected']:.3f})"):
        assert text in " ".join(readme.split()), f"README lacks {text!r}"
    # the user guide quotes the same shares, and the Llama-3.1 truths' consensus share
    guide = " ".join(docs_page("guide/calibration.md").split())
    l31 = user["by_source"]["llama31_70b_QM_H5"]["consensus"]["0.95"]
    for text in (f"{user['n_truths']} truths drawn from the shipped fits",
                 f"{cm['share']:.3f} of {cm['rows']} critical masses ({cm['expected']:.3f}",
                 f"{op['share']:.3f} of {op['rows']} open flip forecasts ({op['expected']:.3f})",
                 f"{co['share']:.3f} [{co['low']:.3f}, {co['high']:.3f}] of {co['rows']} consensus rows ({co['expected']:.3f})",
                 f"`llama31_70b_QM_H5`) {l31['share']:.3f} of the consensus rows ({l31['expected']:.3f})"):
        assert text in guide, f"docs/guide/calibration.md lacks {text!r}"
    text = f"`llama31_70b_QM_H5`: {l31['share']:.3f} against {l31['expected']:.3f} expected"
    assert text in " ".join(readme.split()), f"README lacks {text!r}"


def test_truth_resolution_table_is_the_stored_summaries():
    """The right-hand column of the page's table on the consensus truths from 10 000 runs is the
    stored summaries' consensus shares (overall and by source), and both summaries were scored
    against such truths."""
    from _docs import docs_page

    data = _paths.REPO / "docs" / "validation" / "_data"
    page = docs_page("validation/calibration.md")

    def cell(d):
        lv = ("0.5", "0.8", "0.95")
        return (" / ".join(f"{d[x]['share']:.3f}" for x in lv) + " ("
                + " / ".join(f"{d[x]['expected']:.3f}" for x in lv) + ")")

    user = json.loads((data / "sbc_user.json").read_text())
    pred = json.loads((data / "sbc_prediction.json").read_text())
    for js in (user, pred):
        assert js["settings"]["truth_runs_consensus"] == 10000
    rows = {"user view, all 400 rows": user["coverage_detail"]["consensus"],
            "user view, Llama-3.1 truths": user["by_source"]["llama31_70b_QM_H5"]["consensus"],
            "user view, Llama-3 H = 3 truths": user["by_source"]["llama3_70b_QM_H3"]["consensus"],
            "user view, Llama-3 H = 5 truths": user["by_source"]["llama3_70b_QM_H5"]["consensus"],
            "prediction view, all 400 rows": pred["prediction_sbc"]["consensus"]}
    for label, d in rows.items():
        line = next((x for x in page.splitlines() if x.startswith(f"| {label} |")), None)
        assert line is not None and line.rstrip().endswith(f"| {cell(d)} |"), (label, line, cell(d))


def test_user_view_summary_is_its_stored_rows():
    """docs/validation/_data/sbc_user.json and sbc_prediction.json are ``bench_coverage.py --summarise``
    of the rows the runs wrote (sbc_*_rows.jsonl.gz, one line per truth in the order they finished;
    the runs resume from them), and a summary does not depend on that order."""
    import gzip

    bc = _coverage_module()
    data = _paths.REPO / "docs" / "validation" / "_data"
    for rows, summary in (("sbc_user_rows.jsonl.gz", "sbc_user.json"),
                          ("sbc_prediction_rows.jsonl.gz", "sbc_prediction.json"),
                          ("sbc_tip_rows.jsonl.gz", "sbc_tip.json")):
        with gzip.open(data / rows, "rt") as fh:
            records = [json.loads(x) for x in fh.read().splitlines() if x.strip()]
        assert len({(r["family"], r["index"]) for r in records}) == len(records)
        stored = json.loads((data / summary).read_text())
        got = json.loads(json.dumps(bc.summarise(records, records[0]["cfg"], 0.0, 2026)))
        again = json.loads(json.dumps(bc.summarise(records[::-1], records[0]["cfg"], 0.0, 2026)))
        for x in (stored, got, again):
            x.pop("seconds")
        assert got == stored, summary
        assert again == got, summary


def test_stored_rows_resume_under_the_pages_commands():
    """The page's commands resume from the stored rows (every truth found, none run again): the rows'
    fingerprints are the settings this code records for those commands, rescored rows included."""
    import gzip

    bc = _coverage_module()
    data = _paths.REPO / "docs" / "validation" / "_data"
    for rows, view, wider, families in (("sbc_user_rows.jsonl.gz", "user", 0, ["posterior"]),
                                        ("sbc_prediction_rows.jsonl.gz", "prediction", 20,
                                         ["posterior", "run_effects", "shared_order"]),
                                        ("sbc_tip_rows.jsonl.gz", "tip", 0, ["posterior"])):
        cfg = dict(bc.DEFAULTS, sbc=view, tip_directions="M" if view == "tip" else "none")
        specs = bc.plan(200, wider, families, 2026, cfg)
        with gzip.open(data / rows, "rt") as fh:
            recs = [json.loads(x) for x in fh.read().splitlines() if x.strip()]
        have = {(r["family"], r["index"], r["fingerprint"]) for r in recs}
        want = {(s["family"], s["index"], s["fingerprint"]) for s in specs}
        assert have == want, rows
    old = {"cfg": dict(bc.DEFAULTS, effect_tables=100), "fingerprint": "written before"}
    new = bc._rescored_settings(old)
    assert "effect_tables" not in new["cfg"] and new["fingerprint"] == bc._fingerprint(dict(bc.DEFAULTS))


def test_consensus_summary_check_tiny_and_its_page_table(tmp_path):
    """bench_consensus_summary.py runs in a tiny form (masses are shares growing with the level, widths
    positive, one row per runs per draw, the JSON what it returned), and the table on
    docs/validation/calibration.md is the stored run's (consensus_summary.json)."""
    from _docs import docs_page

    b = _bench_module("bench_consensus_summary")
    js = b.main(["--fits", "llama31_70b_QM_H5", "--draws", "30", "--runs", "20,60", "--reference-runs", "60",
                 "--reference-draws", "40", "--replicates", "2", "--n-agents", "8", "--json", str(tmp_path / "c.json")])
    assert [r["runs_per_draw"] for r in js["rows"]] == [20, 60]
    for r in js["rows"]:
        assert all(0.0 <= v <= 1.0 for v in r["mass"].values()) and all(v > 0 for v in r["width"].values())
        assert r["mass"]["0.5"] <= r["mass"]["0.8"] <= r["mass"]["0.95"]
    assert json.loads((tmp_path / "c.json").read_text())["rows"] == js["rows"]
    stored = json.loads((_paths.REPO / "docs" / "validation" / "_data" / "consensus_summary.json").read_text())
    assert stored["settings"]["draws"] == 200 and stored["settings"]["replicates"] >= 40
    page = docs_page("validation/calibration.md")
    for line in b.markdown_table(stored):
        assert line in page, f"docs/validation/calibration.md lacks\n{line}"


def test_tip_bench_table_on_the_page_is_the_stored_run():
    """The `tip` tables of docs/validation/calibration.md are ``bench_tip.readme_table`` of the rows their
    commands wrote with ``--json`` (docs/validation/_data/tip_truths.json: hidden truths; tip_archives.json:
    ``--archives --seeds 6``), and the per-seed readings the prose quotes (archive B's and A's critical
    masses) are those rows'."""
    from _docs import docs_page

    b = _bench_module("bench_tip")
    rows = json.loads((_paths.REPO / "docs" / "validation" / "_data" / "tip_truths.json").read_text())["rows"]
    assert {r["seed"] for r in rows} == {1, 2, 3, 4} and {r["case"] for r in rows} == set(b.DEFAULT_TRUTHS)
    page = docs_page("validation/calibration.md")
    for line in b.readme_table(rows).splitlines():
        assert line in page, f"docs/validation/calibration.md lacks\n{line}"
    for case in b.DEFAULT_TRUTHS:
        full = sorted((r for r in rows if r["case"] == case and r["method"] == "full grid"), key=lambda r: r["seed"])
        truth = ", ".join(f"{r['truth']:g}" for r in full)
        same = ", ".join(f"{r['truth_same_archive']:g}" for r in full)
        assert truth in page and same in page, (case, truth, same)
    arch = json.loads((_paths.REPO / "docs" / "validation" / "_data" / "tip_archives.json").read_text())["rows"]
    assert {r["seed"] for r in arch} == set(range(1, 7)) and {r["truth_kind"] for r in arch} == {"published"}
    for line in b.readme_table(arch).splitlines():
        assert line in page, f"docs/validation/calibration.md lacks\n{line}"
