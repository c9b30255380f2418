"""``normlab tip``: adaptive committed-minority experiments (issue 22).

Exact: the replay hands out only the runs paid for (a search on an archive whose unplayed runs
were deleted is the same search), the JSON's keys, the stop rule and the budget. Reproducibility:
the same seed gives the same search. The archive test (slow) is the issue's done-when command on
the published Llama-3.1 archive, which skips cleanly without the data.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import math

import numpy as np
import pandas as pd
import pytest

from normlab.calibration.tip import count_met, tip
from normlab.calibration.tip_sources import ArchiveReplay, archive_design
from normlab.schema import GameLog
import _paths  # the repository's and tests/' folders (tests/_paths.py)

BENCH = _paths.REPO / "benchmarks" / "bench_tip.py"
KEYS = {"direction", "critical_mass", "replication", "runs_used", "runs_available", "tokens_used", "counts", "steps"}


def _bench():
    spec = importlib.util.spec_from_file_location("bench_tip", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def archive():
    """A synthetic archive played by a hidden conformity table (N = 8, H = 2): 8 baselines and 4
    runs at every committed count 0 .. 7, stopped at a 3N success streak."""
    b = _bench()
    return b.synthetic_archive(b._conformity_truth(), n_agents=8, majority="Y", runs=4, baselines=8, seed=1)


def _source(log, seed=3):
    return ArchiveReplay(log, names=("X", "Y"), majority="Y", memory=2, n_agents=8, stop="streak", rng=seed)


def _no_time(summary):
    return [{k: v for k, v in s.items() if k != "seconds"} for s in summary["steps"]], \
        {k: v for k, v in summary.items() if k != "steps"}


@pytest.fixture(scope="module")
def search(archive):
    # a target above the prior's certainty, so that the search plays runs
    return tip(_source(archive), target=0.99, n_draws=40, rng=3)


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_replay_hands_out_only_the_runs_asked_for(archive):
    src = _source(archive)
    # the committed grid at every tested count, 0 included (the archive tested it): 4 runs at 0 .. 7
    assert src.runs_available == int((archive.runs["kind"] != "baseline").sum()) == 32
    assert src.remaining(3) == 4 and src.remaining(8) == 0  # 8 committed of 8: never tested
    b = src.play(3, 3, step=1)
    assert len(b.log.runs) == 3 and set(b.log.decisions["run"]) == set(b.log.runs["run"])
    assert (b.log.runs["committed_count"] == 3).all() and src.remaining(3) == 1
    with pytest.raises(ValueError, match="1 left"):
        src.play(3, 2, step=2)
    with pytest.raises(ValueError, match="did not test"):
        src.play(9, 1, step=2)
    known = src.known()
    assert set(known.log.runs["kind"]) == {"baseline"} and len(known.log.runs) == 8


@pytest.mark.slow  # 19 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_search_never_sees_an_unpaid_run(archive, search):
    """The same search on the archive with every unplayed committed run's decisions deleted: what
    was not paid for cannot have steered it."""
    played = set(search.runs["run"])
    assert len(played) == search.runs_used > 0
    r = archive.runs
    unpaid = set(r.loc[r["kind"] != "baseline", "run"]) - played
    assert unpaid
    stripped = GameLog(archive.decisions[~archive.decisions["run"].isin(unpaid)], r)
    again = tip(_source(stripped), target=0.99, n_draws=40, rng=3)
    assert _no_time(again.summary()) == _no_time(search.summary())


def test_design_is_read_from_the_run_table_only(archive):
    d = archive_design(archive, names=("X", "Y"), majority="Y", memory=2, n_agents=8, stop=None)
    stripped = GameLog(archive.decisions.iloc[:0], archive.runs)
    assert archive_design(stripped, names=("X", "Y"), majority="Y", memory=2, n_agents=8).to_dict() == d.to_dict()
    assert d.stop == "streak" and list(d.counts) == list(range(8)) and d.runs == (4,) * 8


def test_json_shape(search):
    s = search.summary()
    assert set(s) == KEYS
    assert set(s["critical_mass"]) == {"estimate", "low", "high", "credible_set", "p_set"}
    assert set(s["replication"]) >= {"estimate", "low", "high", "credible_set", "distribution"}
    assert abs(sum(s["replication"]["distribution"].values()) - 1) < 1e-3
    assert s["direction"] == "overturn_Y" and s["tokens_used"] is None and s["runs_available"] == 32
    assert sum(s["counts"].values()) == s["runs_used"] == search.runs_used
    assert all(int(k) >= 0 for k in s["counts"])  # count 0 is a tested count of this archive
    assert s["steps"][0]["runs_used"] == 0 and s["steps"][-1]["stopped"]
    json.dumps(s)  # plain JSON
    lo, est, hi = (s["critical_mass"][k] for k in ("low", "estimate", "high"))
    assert lo <= hi and est is not None


def test_stop_rule_and_steps(search):
    steps = search.steps
    target = search.settings["target"]
    for st in steps[:-1]:  # it went on only while the credible set was not tight, or to play out its counts
        assert not st["tight"] or st["next"]["why"] == "confirm"
        assert st["p_set"] >= target or not st["tight"]
        if st["next"]["why"] == "confirm":
            assert st["next"]["count"] in st["credible_set"]
    last = steps[-1]
    assert last["stopped"].startswith("target reached") == (last["tight"] and last["p_set"] >= target)
    used = [st["runs_used"] for st in steps]
    assert used == sorted(used) and all(b - a <= 2 for a, b in zip(used, used[1:]))  # batch 2
    for st in steps[1:]:
        assert 1 <= st["played"]["runs"] <= 2 and 0 <= st["played"]["flipped"] <= st["played"]["runs"]


@pytest.mark.slow  # 8 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_same_seed_same_search(archive, search):
    again = tip(_source(archive), target=0.99, n_draws=40, rng=3)
    assert _no_time(again.summary()) == _no_time(search.summary())


@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_run_budget(archive):
    res = tip(_source(archive), target=0.999, n_draws=40, max_runs=3, rng=5)
    assert res.runs_used <= 3
    assert res.stopped.startswith("run budget") or res.stopped.startswith("target")
    if res.stopped.startswith("run budget"):
        assert res.runs_used == 3


def test_bad_input_before_any_run(archive):
    src = _source(archive)
    with pytest.raises(ValueError, match="target"):
        tip(src, target=1.5)
    with pytest.raises(ValueError, match="strategy"):
        tip(src, strategy="grid")
    with pytest.raises(TypeError, match="RunSource"):
        tip(archive)
    assert all(src.remaining(c) == 4 for c in range(8))


def _authors_rule(trajectories, max_round):
    """``plotter.ipynb`` cells 9-10 (``did_converge``, ``non_cm_word_use``) transcribed with pandas,
    independently of normlab's code: a run whose last three shares sum to >= 2.849 is padded with
    1s to the longest run's length + 30; the mean over runs, round by round (pandas skips the
    rounds a run does not have), is cut at ``max_round``; the count succeeds when its last three
    values sum to >= 2.849. One documented departure (``count_met``'s docstring): where every
    run that did not reach the threshold is shorter than the window, the authors' mean would be
    read where only padded runs remain; normlab reads it at the longest such run instead."""
    def did_converge(run):
        return not (sum(run[-3:]) < 2.849)

    bins = [list(map(float, t)) for t in trajectories]
    longest = max(len(t) for t in bins)
    padded = [t + [1] * (longest - len(t) + 30) if did_converge(t) else t for t in bins]
    open_len = [len(t) for t in bins if not did_converge(t)]
    if open_len and max(open_len) < max_round:  # the departure
        max_round = max(open_len)
        if max_round < 3:
            return False
    avg = pd.concat([pd.Series(t) for t in padded], axis=1).mean(axis=1).values[:max_round]
    return did_converge(list(avg))


def test_count_met_against_an_independent_transcription_of_the_authors_rule():
    g = np.random.default_rng(0)
    branches = set()
    for case in range(200):
        window = int(g.choice([21, 30]))
        trs = []
        for _ in range(int(g.integers(1, 6))):
            L = int(g.integers(1, 40))
            x = np.clip(np.linspace(g.uniform(0, 0.5), g.uniform(0.5, 1.0), L) + g.normal(0, 0.03, L), 0, 1)
            if g.random() < 0.35:  # flipped: its last rounds at (nearly) 1
                x[-3:] = g.choice([1.0, 0.99, 0.95], size=min(3, L))
            trs.append(x)
        open_len = [len(t) for t in trs if not sum(t[-3:]) >= 2.849]
        branches.add("fallback" if open_len and max(open_len) < window else "window")
        assert count_met(trs, window) == _authors_rule(trs, window), case
    assert branches == {"fallback", "window"}  # both branches of count_met were read


@pytest.mark.parametrize("trs, expected", [
    # the threshold: three rounds summing to 2.849 meet it, 2.848 does not
    ([np.r_[np.full(27, 0.5), 1.0, 1.0, 0.849]] * 2, True),
    ([np.r_[np.full(27, 0.5), 1.0, 1.0, 0.848]] * 2, False),
    # a short flipped run is padded with 1s: (1 + 0.9) / 2 = 0.95 a round, 2.85 >= 2.849
    ([np.r_[np.full(7, 0.5), 1.0, 1.0, 1.0], np.full(30, 0.9)], True),
    # a short run that did not flip drops out of the later rounds (it is not read as zeros)
    ([np.zeros(10), np.ones(30), np.full(30, 0.9)], True),
    # every open run shorter than the window: the mean is read at the longest open run (12 rounds):
    # (1 + 0.5) / 2 * 3 = 2.25 (the authors' code would read round 30, where only the padded run is left)
    ([np.r_[np.full(5, 0.5), 1.0, 1.0, 1.0], np.full(12, 0.5)], False),
])
def test_count_met_hand_cases(trs, expected):
    assert count_met(trs, 30) is expected
    assert _authors_rule(trs, 30) is expected


def test_summarise_reports_tested_counts_only():
    """46 % of the draws at 8, 46 % at 10, 8 % at 6 on the grid {0, 1, 2, 4, 6, 8, 10} (+ its
    extension): before issue 32 the estimate was 9, a count never tested."""
    from normlab.calibration.tip.search import _Grid, _summarise

    tested = [0, 1, 2, 4, 6, 8, 10]
    grid = _Grid(tested + list(range(11, 24)), [10] * 20, [True] * 7 + [False] * 13)
    cm = np.array([8.0] * 46 + [10.0] * 46 + [6.0] * 8)
    s = _summarise(cm, 0.95, grid, tol=1, target=0.9)
    assert s["estimate"] in (8.0, 10.0)
    assert s["credible_set"] == (8.0, 10.0) and s["p_set"] == pytest.approx(0.92)
    assert s["tight"] is False and s["low"] == 6.0 and s["high"] == 10.0
    # one count holding the target: tight; neighbouring tested counts {1, 2}: tight; {4, 6}: not
    assert _summarise(np.array([8.0] * 95 + [10.0] * 5), 0.95, grid)["tight"] is True
    assert _summarise(np.array([1.0] * 50 + [2.0] * 45 + [4.0] * 5), 0.95, grid)["credible_set"] == (1.0, 2.0)
    assert _summarise(np.array([1.0] * 50 + [2.0] * 45 + [4.0] * 5), 0.95, grid)["tight"] is True
    assert _summarise(np.array([4.0] * 50 + [6.0] * 45 + [8.0] * 5), 0.95, grid)["tight"] is False
    # draws past the tested counts (the extension, or not reached) are "beyond", never an untested count
    s = _summarise(np.array([13.0] * 60 + [math.inf] * 35 + [10.0] * 5), 0.95, grid)
    assert math.isinf(s["estimate"]) and s["credible_set"] == (math.inf,) and s["tight"] is True
    assert s["p_beyond"] == pytest.approx(0.95) and s["low"] == 10.0 and math.isinf(s["high"])


@pytest.fixture(scope="module")
def coarse(archive):
    """The fixture archive with the odd counts dropped: tested counts 0, 2, 4, 6."""
    r = archive.runs
    keep = r[(r["kind"] == "baseline") | (r["committed_count"] % 2 == 0)]
    return GameLog(archive.decisions[archive.decisions["run"].isin(keep["run"])], keep)


@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_tip_stops_only_on_a_tight_credible_set(coarse):
    src = _source(coarse)
    assert list(src.design.counts) == [0, 2, 4, 6]
    res = tip(src, target=0.9, n_draws=40, rng=2)
    ok = {0.0, 2.0, 4.0, 6.0, math.inf}
    for st in res.steps:
        assert st["estimate"] in ok and st["low"] in ok and st["high"] in ok
        assert set(st["credible_set"]) <= ok
    assert res.estimate in ok and set(res.credible_set) <= ok
    assert set(res.replication["distribution"]) <= ok
    if res.stopped.startswith("target reached"):
        fin = [c for c in res.credible_set if math.isfinite(c)]
        assert res.p_set >= 0.9 and (not fin or max(fin) - min(fin) <= 1)
        assert res.target_reached
    assert set(res.counts) <= {0, 2, 4, 6}


def test_plot_and_save(search, tmp_path):
    assert "TipResult" in repr(search) and len(repr(search)) < 400
    assert "TipResult" in search._repr_html_() and "critical mass" in search.describe()
    assert set(search.to_frame()["quantity"]) == {"p_met", "p_cm", "p_at_least", "observed"}
    ax = search.plot()
    assert ax.get_xlabel() == "committed agents" and len(ax.lines) >= len(search.steps)
    p = search.save(tmp_path / "r")
    back = type(search).load(p)
    assert back.summary() == search.summary()


def test_cli_bad_input_one_line(tmp_path, capsys):
    from normlab.cli import main

    base = ["tip", "--names", "Q,M", "--memory", "5", "--n-agents", "24"]
    assert main(base + ["--ainorms", str(tmp_path / "none.zip"), "--direction", "overturn_X"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and "overturn_X" in err
    assert main(base + ["--ainorms", str(tmp_path / "none.zip"), "--direction", "overturn_M", "--budget", "5k"]) == 2
    assert "runs" in capsys.readouterr().err


@pytest.mark.slow
def test_done_when_llama31_replay(ainorms_dir, capsys):
    """The issue's done-when: the published 10 within one agent, covered, a fraction of the archive's
    70 committed runs (10 at each tested count 0, 1, 2, 4, 6, 8, 10)."""
    from normlab.cli import main

    rc = main(["tip", "--ainorms", str(ainorms_dir / "llama31_data.zip"), "--names", "Q,M", "--memory", "5",
               "--n-agents", "24", "--direction", "overturn_M", "--json", "--seed", "1", "--no-progress"])
    assert rc == 0
    s = json.loads(capsys.readouterr().out)
    assert set(s) == KEYS | {"seed", "seed_drawn"} and s["runs_available"] == 70
    cm = s["critical_mass"]
    tested = {0, 1, 2, 4, 6, 8, 10}
    assert cm["estimate"] in tested and cm["low"] in tested and cm["high"] in tested  # never 9
    assert abs(cm["estimate"] - 10) <= 1 and cm["low"] <= 10 <= cm["high"]
    assert set(cm["credible_set"]) <= tested and cm["p_set"] >= 0.9
    assert all(st["estimate"] in tested | {None} for st in s["steps"])
    assert s["runs_used"] <= 0.4 * 70
    assert set(map(int, s["counts"])) <= tested  # only counts the archive tested


def test_vectorised_rule_and_classes_agree_with_the_per_draw_reading():
    """The published rule and the run classes read for all draws at once agree with reading each
    draw's experiment through ``published_rule`` (ragged runs, runs shorter than the window,
    NaN rounds, padded and open runs)."""
    from normlab.calibration.tip import _rule, _rule_draws, _run_class, _run_classes

    g = np.random.default_rng(7)
    seen = set()
    for trial in range(60):
        D, n, T, W = 25, int(g.integers(1, 6)), int(g.integers(4, 40)), int(g.integers(3, 31))
        lengths = g.integers(1, T + 1, size=(D, n))
        shares = np.full((D, n, T), np.nan)
        for d in range(D):
            for k in range(n):
                L = lengths[d, k]
                up = g.random() < 0.5
                x = np.clip(np.linspace(g.uniform(0, 0.6), 1.0 if up else g.uniform(0.3, 0.97), L)
                            + g.normal(0, 0.01, L), 0, 1)
                if up and g.random() < 0.7:
                    x[-3:] = 1.0
                if g.random() < 0.1:
                    x[g.integers(L)] = np.nan
                shares[d, k, :L] = x
        obs = [np.clip(g.random(int(g.integers(1, 35))) ** 0.2, 0, 1) for _ in range(int(g.integers(0, 3)))]
        fast = _rule_draws(obs, shares, lengths, W)
        slow = [_rule(list(obs) + [shares[d, k, :lengths[d, k]] for k in range(n)], W) for d in range(D)]
        assert fast.tolist() == slow, trial
        seen |= set(slow)
        cls = _run_classes(shares, lengths, W)
        ref = [[_run_class(shares[d, k, :lengths[d, k]], W) for k in range(n)] for d in range(D)]
        assert cls.tolist() == ref, trial
        seen |= {f"class {c}" for r in ref for c in r}
    assert seen == {True, False, "class 0", "class 1", "class 2"}  # every branch was read


@pytest.mark.slow
def test_bench_tip_tiny_runs():
    """The truth comes from a second archive of the hidden table that no method reads; the
    seeded tiny run's answer is pinned."""
    r = subprocess.run([sys.executable, str(BENCH), "--tiny"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = json.loads(r.stdout)
    methods = {x["method"] for x in rows}
    assert {"tip (eig)", "full grid", "bisection (5 runs, all flip)", "bisection (10 runs, published rule)"} <= methods
    for x in rows:
        assert x["truth_seed"] != x["replay_seed"] and x["truth_kind"] == "independent archive"
        assert x["estimate_tested"] is True and 0 <= x["brier"] <= 2
    tip_row = next(x for x in rows if x["method"] == "tip (eig)")
    grid = next(x for x in rows if x["method"] == "full grid")
    assert tip_row["runs"] < tip_row["full_grid"] == grid["runs"] == 28
    # archive B's critical mass (the truth) differs from the replayed archive's here: the full
    # grid of the replayed archive is scored against B like any method
    assert (tip_row["truth"], tip_row["truth_same_archive"], grid["estimate"]) == (3.0, 2.0, 2.0)
    assert tip_row["estimate"] == 2.0 and tip_row["covered"] is True
    # the replication interval (a fresh experiment of the design) holds B's value when "covered" says so
    assert tip_row["rep_low"] <= tip_row["truth"] <= tip_row["rep_high"]


@pytest.mark.slow  # 6 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_half_strategy_and_no_confirm(archive):
    res = tip(_source(archive), target=0.99, n_draws=40, strategy="half", confirm=0, rng=4)
    assert res.settings["strategy"] == "half" and res.settings["confirm"] == 0
    for st in res.steps[:-1]:
        assert st["next"]["why"] == "half" and not st["tight"]
    assert res.runs_used == sum(res.counts.values())


def test_a_live_source_offers_the_whole_committed_grid(tmp_path):
    """A live search's runs_available is its design's grid, count 0 included (a run there is paid like
    any other, as in a replay). Before: R * (N - 1), 28 where the design held 32 runs (N = 8, R = 4)."""
    from normlab.calibration.tip.sources import LLMSource
    from normlab.llm_runs import EndpointConfig

    src = LLMSource(names=["X", "Y"], majority="Y", memory=2, n_agents=8, out=tmp_path, runs_per_count=4,
                    window=30, endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1"))
    assert list(src.design.counts) == list(range(8))
    assert src.runs_available == sum(src.remaining(c) for c in range(8)) == 32


def _absorbed_reference(tabs, E, zc, zr, cell, st, r, w):
    """Slow twin of ``_absorbed_out``: per draw, state and run, the logit of name 1 moved to
    ``(1 - sum w) l + sum_r w_r (l - b_r) / kappa_r`` with the effect written out by hand."""
    out = np.array(tabs, float)
    D, S, _ = out.shape
    for d in range(D):
        _, _, sd_b, sd_k, rho, om = E[d]
        for s in range(S):
            p = min(max(out[d, s, 1], 1e-12), 1 - 1e-12)
            lo = math.log(p / (1 - p))
            new, kept = 0.0, 1.0
            for i in range(len(st)):
                if st[i] != s:
                    continue
                z1, z2 = (math.sqrt(om) * zc[d, cell[r[i]], k] + math.sqrt(1 - om) * zr[d, r[i], k] for k in (0, 1))
                b, lk = sd_b * z1, sd_k * (rho * z1 + math.sqrt(1 - rho * rho) * z2)
                new += w[i] * (lo - b) * math.exp(-lk)
                kept -= w[i]
            x = new + kept * lo
            out[d, s, 1] = 1 / (1 + math.exp(-x))
            out[d, s, 0] = 1 - out[d, s, 1]
    return out


def test_fresh_tables_absorbed_effects_match_their_twin():
    from normlab.calibration.tip.search import _absorbed_out

    g = np.random.default_rng(5)
    D, S, R, C = 6, 7, 9, 4
    tabs = g.dirichlet([1, 1], size=(D, S))
    E = np.column_stack([g.normal(size=(D, 2)), g.uniform(0, 0.8, (D, 2)), g.uniform(-0.9, 0.9, D), g.uniform(0, 1, D)])
    zc, zr = g.standard_normal((D, C, 2)), g.standard_normal((D, R, 2))
    cell = g.integers(0, C, R)
    st = g.integers(0, S - 1, 25)  # the last state: no decisions
    r = g.integers(0, R, 25)
    w = g.uniform(0, 1, 25)
    w = w / (np.bincount(st, weights=w, minlength=S)[st] * 1.1)  # a state's runs hold 1/1.1 of its mass
    fast = _absorbed_out(tabs, E, zc, zr, cell, st, r, w)
    np.testing.assert_allclose(fast, _absorbed_reference(tabs, E, zc, zr, cell, st, r, w), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(fast[:, S - 1], tabs[:, S - 1])  # nothing to take out where no run played


@pytest.mark.parametrize("omega", [1.0, 0.0])
def test_fresh_tables_take_out_what_the_cells_shared(omega):
    """The spread the replication's tables gain at a state is the spread of the fitted runs' mean
    effect there: a state played by one cell of 10 runs gains sd_b sqrt(omega + (1 - omega) / 10),
    one played by 40 independent runs sd_b / sqrt(40); a state no run played gains nothing; a
    sharpness spread scales the logit by exp(-lk)."""
    from normlab.calibration.tip.search import _absorbed_out

    g = np.random.default_rng(11)
    D, S = 4000, 4
    tabs = np.tile([0.3, 0.7], (D, S, 1))
    # runs 0-9: one committed cell (cell 0); runs 10-49: convergence runs, each its own cell
    cell = np.r_[np.zeros(10, int), np.arange(1, 41)]
    st = np.r_[np.zeros(10, int), np.ones(40, int), np.full(10, 3)]
    r = np.r_[np.arange(10), np.arange(10, 50), np.arange(10)]
    w = np.r_[np.full(10, 0.1), np.full(40, 1 / 40), np.full(10, 0.1)]
    zc, zr = g.standard_normal((D, 41, 2)), g.standard_normal((D, 50, 2))
    lo = math.log(0.7 / 0.3)
    E = np.tile([0.0, 0.0, 0.5, 0.0, 0.0, omega], (D, 1))
    out = _absorbed_out(tabs, E, zc, zr, cell, st[:50], r[:50], w[:50])
    x = np.log(out[:, :, 1] / out[:, :, 0]) - lo
    want = 0.5 * math.sqrt(omega + (1 - omega) / 10)
    assert abs(x[:, 0].std() / want - 1) < 0.06, (x[:, 0].std(), want)
    assert abs(x[:, 1].std() / (0.5 / math.sqrt(40)) - 1) < 0.06
    assert abs(x[:, 0].mean()) < 4 * want / math.sqrt(D)
    np.testing.assert_array_equal(x[:, 2], 0.0)
    E[:, 2], E[:, 3] = 0.0, 0.3  # sharpness only
    out = _absorbed_out(tabs, E, zc, zr, cell, st[50:], r[50:], w[50:])
    k = np.log(np.log(out[:, 3, 1] / out[:, 3, 0]) / lo)
    assert abs(k.std() / (0.3 * math.sqrt(omega + (1 - omega) / 10)) - 1) < 0.06


def test_replication_integrates_the_fitted_cells_out(archive):
    """With run effects the replication's tables are the fit's with the fitted runs' effects taken
    out (a different, reproducible distribution); without them the search's own draws."""
    from normlab.calibration.tip import search as S

    src = lambda: _source(archive)  # noqa: E731
    with_eff = [tip(src(), target=0.99, n_draws=40, max_runs=8, rng=4).replication for _ in range(2)]
    assert with_eff[0] == with_eff[1]
    data = [archive]
    fit, eff = S._refit(data, None, None, src(), "empirical", True, None, 1)
    assert eff.active
    fresh = S._fresh_tables(fit, eff, data, src(), 30, 2)
    assert len(fresh[0]) == 30 and fresh[1].kind == "joint" and fresh[1].omega.shape == (30,)
    base = fit.sample_tables(30, rng=np.random.default_rng(2))
    assert not np.allclose(np.array([t.table for t in fresh[0]]), base)
    assert S._fresh_tables(fit, type(eff).none(), data, src(), 30, 2) is None
