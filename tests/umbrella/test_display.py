"""Result objects show themselves (normlab._display): short reprs, HTML cards holding the key
numbers, summaries of plain Python values, plots that return Axes/Figures and save PNGs with
``path=``, and save/load round trips of the expensive results."""

from __future__ import annotations

import pytest

import dataclasses
import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import normlab  # noqa: E402
from normlab._display import fmt, fmt_interval, html_card, plain, short_repr  # noqa: E402
from normlab.llm_runs import EndpointConfig, StubServer, run_game  # noqa: E402
from normlab.llm_runs.probes import find_neutral_names, individual_bias, meta_prompting, strategy_table  # noqa: E402
from normlab.llm_runs.testing import memory_policy  # noqa: E402
from normlab.schema import GameLog  # noqa: E402


# ----------------------------------------------------------------------------- helpers
def _plain_only(obj, where="summary"):
    """Fail on any value that is not plain Python (numpy scalars print as np.float64(...))."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            assert isinstance(k, (str, int)), f"{where}: key {k!r} is a {type(k).__name__}"
            _plain_only(v, f"{where}.{k}")
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            _plain_only(v, where)
    else:
        assert obj is None or type(obj) in (int, float, str, bool), f"{where}: {obj!r} is a {type(obj).__name__}"


def _check_display(obj, expect_html=(), max_repr=600):
    """repr short (no raw arrays), HTML card with the class name and the key numbers, summary plain."""
    r = repr(obj)
    assert len(r) <= max_repr, f"repr of {type(obj).__name__} is {len(r)} characters"
    assert r.count("\n") <= 6 and "array(" not in r and "np.float64" not in r, r
    h = obj._repr_html_()
    assert type(obj).__name__ in h and h.startswith("<div")
    for s in expect_html:
        assert s in h, f"{s!r} missing from the HTML of {type(obj).__name__}"
    s = obj.summary() if callable(obj.summary) else obj.summary
    assert isinstance(s, dict)
    _plain_only(s)
    assert "np.float64" not in repr(s)
    return r, h


def _check_plot(obj, tmp_path, *args, figure=False, **kw):
    out = obj.plot(*args, path=tmp_path / "fig.png", **kw)
    kind = matplotlib.figure.Figure if figure else matplotlib.axes.Axes
    assert isinstance(out, kind), f"{type(obj).__name__}.plot returned {type(out).__name__}"
    png = (tmp_path / "fig.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    fig = out if figure else out.figure
    assert fig.axes and any(a.has_data() for a in fig.axes)
    plt.close("all")
    return out


def _stub_endpoint(stub):
    return EndpointConfig(base_url=stub.base_url, backoff=0.01)


# ----------------------------------------------------------------------------- _display itself
def test_formatting_and_plain():
    assert fmt(np.float64(0.93512)) == "0.935" and fmt(np.int64(12)) == "12" and fmt(6.0) == "6"
    assert fmt(0.99996) == "0.99996" and fmt(None) == "—" and fmt(float("nan")) == "—"
    assert fmt(math.inf) == "not reached" and fmt(123456.7) == "123,457"
    assert fmt_interval(np.float64(5), 7) == "[5, 7]" and fmt_interval(None, float("nan")) == ""
    p = plain({"a": np.float64(1.5), "b": [np.int64(2), (np.bool_(True),)], "c": np.arange(2), "d": pd.NA})
    assert p == {"a": 1.5, "b": [2, (True,)], "c": [0, 1], "d": None}
    _plain_only(p)
    assert type(p["a"]) is float and type(p["b"][0]) is int
    assert short_repr("X", "a", None, "b") == "X(a, b)"
    long = short_repr("X", *[f"part number {k}" for k in range(20)], width=60)
    assert long.startswith("X(\n") and all(len(line) <= 60 for line in long.splitlines())
    h = html_card("X", [("p", 0.5, (0.25, 0.75), "note"), ("n", 3)], settings={"N": 24}, note="x & y")
    assert "[0.25, 0.75]" in h and "N = 24" in h and "x &amp; y" in h and "95% interval" in h


def test_style_keeps_an_interactive_mode_switched_on_inside():
    """Jupyter's inline backend switches interactive mode on with the first figure; if that
    happens inside a plot method, leaving the style must not switch it off again (every later
    figure would stay hidden)."""
    from normlab._display import style

    was = matplotlib.is_interactive()
    try:
        matplotlib.interactive(False)
        with style():
            matplotlib.interactive(True)
        assert matplotlib.is_interactive()
        with style():
            pass
        assert matplotlib.is_interactive()
        assert matplotlib.rcParams["axes.grid"] == matplotlib.rcParamsDefault["axes.grid"]  # the style is local
    finally:
        matplotlib.interactive(was)


def test_plot_path_convention_and_load_errors(tmp_path):
    import inspect

    from normlab.theory import GameResult

    assert "path" in inspect.signature(GameResult.plot).parameters
    with pytest.raises(ValueError, match="no suffix"):
        normlab.theory.binary_agreement_ode(0.12, t_max=10).plot(path=tmp_path / "noext")
    plt.close("all")
    with pytest.raises(ValueError, match="not a saved normlab result"):
        normlab.load(tmp_path)
    (tmp_path / "x.txt").write_text("x")
    from normlab.calibration import load_fit

    with pytest.raises(ValueError, match="non-empty folder"):
        load_fit("llama3_70b_QM_H3").save(tmp_path)


# ----------------------------------------------------------------------------- theory
@pytest.fixture(scope="module")
def theory_results():
    th = normlab.theory
    return {
        "minimal": th.minimal_naming_game(24, n_words=10, n_runs=60, rng=1, progress=False),
        "committed": th.binary_agreement(100, 0.15, n_runs=6, stop="flip", rng=2, progress=False),
        "unlimited": th.minimal_naming_game(60, n_runs=4, rng=3, progress=False, per_interaction=True),
        "strategy": th.strategy_game("best_response", n_agents=10, memory=2, n_runs=3, names=["Q", "M"], rng=4,
                                     record_decisions=True, committed=2, committed_name="Q", initial="consensus:M",
                                     stop="max", max_interactions=200),
    }


@pytest.mark.parametrize("key", ["minimal", "committed", "unlimited", "strategy"])
def test_game_result_display_plot_and_round_trip(theory_results, key, tmp_path):
    r = theory_results[key]
    rep, h = _check_display(r, expect_html=[f"{r.n_runs}"])
    assert f"N={r.n_agents}" in rep
    s = r.summary()
    assert s["runs"] == r.n_runs and isinstance(s["consensus_fraction"], float)
    if key == "minimal":
        assert fmt(s["consensus_fraction"]) in h
    _check_plot(r, tmp_path)
    if key == "minimal":
        _check_plot(r, tmp_path, "success", n_rounds=20)
    r.save(tmp_path / "r")
    back = normlab.load(tmp_path / "r")
    assert type(back) is type(r)
    for f in dataclasses.fields(r):
        a, b = getattr(r, f.name), getattr(back, f.name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype, f.name
            assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), f.name
        elif f.name == "interactions" and a is not None:
            assert all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(a, b))
        elif f.name == "seed":
            assert (a.entropy, a.spawn_key) == (b.entropy, b.spawn_key)
        else:
            assert a == b, f.name
    pd.testing.assert_frame_equal(back.success_rate(), r.success_rate())
    if r.interactions is not None:
        pd.testing.assert_frame_equal(back.to_log().decisions, r.to_log().decisions)


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_critical_mass_sweep_and_mean_field_results(tmp_path):
    th = normlab.theory
    cm = th.critical_mass("strategy", [0, 1, 2, 3, 4, 5], n_agents=12, n_runs=6, within_rounds=20,
                          strategy="best_response", memory=3, rng=5, progress=False)
    rep, h = _check_display(cm, expect_html=[fmt(cm.estimate), fmt_interval(cm.low, cm.high)])
    assert "critical mass" in rep
    for c, k, n in zip(cm.committed, cm.n_flips, cm.n_runs):
        assert f"{int(k)}/{int(n)} runs" in h
    assert cm.summary()["critical_mass"] == cm.estimate
    _check_plot(cm, tmp_path)
    _check_plot(cm, tmp_path, fraction=True)

    sw = th.sweep(th.minimal_naming_game, {"n_agents": [20, 40], "n_words": [2, 5]}, n_runs=4, rng=6,
                  progress=False)
    assert "4 points" in repr(sw) and "n_agents" in sw._repr_html_()
    _check_plot(sw, tmp_path)
    _check_plot(sw, tmp_path, "consensus_fraction")
    with pytest.raises(ValueError, match="neither a per-run column"):
        sw.plot("nope")

    mf = th.binary_agreement_ode(0.12, t_max=80)
    _check_display(mf, expect_html=["0.12"])
    assert mf.summary()["flipped"] is True
    _check_plot(mf, tmp_path)

    nc = th.norm_contagion_agents(60, 5, 2.0, 0.5, t_max=4, dt=0.05, n_runs=3, rng=7)
    _check_display(nc, expect_html=[fmt(float(nc.belief[:, -1].mean()))])
    _check_plot(nc, tmp_path)
    ode = nc.ode()
    _check_display(ode)
    _check_plot(ode, tmp_path)


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_strategy_table_and_ltrha_results(tmp_path):
    from normlab.theory import itcmas
    from normlab.theory.strategies import BestResponse

    t = BestResponse().to_table(3, names=["Q", "M"])
    rep, h = _check_display(t, expect_html=["p(Q | empty memory)"])
    assert "85 memory states" in rep and len(rep) < 300
    ax = _check_plot(t, tmp_path)
    unseen = np.zeros(t.table.shape[0], bool)
    unseen[5] = True
    ax = t.plot(unseen=unseen, memory_len=2)
    labels = [x.get_text() for x in ax.get_xticklabels()]
    assert labels == ["QQ", "QM", "MQ", "MM"]  # tick labels name the plays
    assert "not observed" in ax.get_title()
    plt.close("all")

    one = itcmas.simulate_ltrha(n_steps=20, rng=1)
    assert "1 run," in repr(one)
    _check_display(one, expect_html=["Gini"])
    _check_plot(one, tmp_path)
    many = itcmas.simulate_ltrha(n_steps=20, n_runs=5, rng=2)
    s = many.summary()  # Eq. 19 as written: negative resources, where the Gini is undefined
    assert s["final_gini"] is None and s["final_gini_undefined_runs"] == 5 and s["runs"] == 5
    assert "Gini undefined" in repr(many) and "undefined" in many._repr_html_()
    _check_plot(many, tmp_path)
    many = itcmas.simulate_ltrha(n_steps=20, n_runs=5, rng=2, floor=0.0)
    s = many.summary()
    assert len(s["final_gini"]) == 3 and s["final_gini_undefined_runs"] == 0 and s["runs"] == 5
    _check_plot(many, tmp_path)
    _check_plot(many, tmp_path, "resources", run=3)


# ----------------------------------------------------------------------------- logs and LLM results
def test_game_log_display_and_plot(theory_results, tmp_path):
    log = theory_results["strategy"].to_log()
    rep, h = _check_display(log, expect_html=["runs"], max_repr=400)
    assert "3 runs" in rep and f"{len(log.decisions):,} decisions" in rep
    _check_plot(log, tmp_path)
    _check_plot(log, tmp_path, "production", name="Q")


@pytest.mark.slow  # 4 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_llm_results_show_themselves(tmp_path):
    pol = lambda system, names: memory_policy(system, names, bias={"Q": 1.6})  # noqa: E731
    with StubServer(["Q", "M"], policy=pol) as stub:
        ep = _stub_endpoint(stub)
        bias = individual_bias("Q,M", trials=40, endpoint=ep, rng=1, progress=False)
        probe = strategy_table("Q,M", 2, endpoint=ep, rng=1, progress=False)
        run = run_game(6, 2, "Q,M", max_interactions=60, runs=2, mode="exact", endpoint=ep, rng=1, progress=False)
    rep, h = _check_display(bias, expect_html=["JSD from uniform", "share of Q"])
    assert "shares Q" in rep
    _check_plot(bias, tmp_path)

    rep, h = _check_display(probe, expect_html=["memory length 2"])
    assert "H=2" in rep and "21 states" in rep
    ax = _check_plot(probe, tmp_path)
    assert [x.get_text() for x in ax.get_xticklabels()] == ["QQ", "QM", "MQ", "MM"]
    _check_plot(probe, tmp_path, "symmetry")
    probe.save(tmp_path / "probe")
    back = normlab.load(tmp_path / "probe")
    pd.testing.assert_frame_equal(back.to_frame(), probe.to_frame())
    pd.testing.assert_frame_equal(back.by_order(), probe.by_order())
    assert back.summary() == probe.summary() and repr(back) == repr(probe)

    rep, h = _check_display(run, expect_html=["decisions", str(int(run.log.runs["decisions"].sum()))])
    assert "2 runs of N=6" in rep
    _check_plot(run, tmp_path)

    def lowercase_bias(system, names):
        return memory_policy(system, names, bias={n: 1.5 if n[0].islower() else 1.0 for n in names})

    with StubServer(policy=lowercase_bias) as stub:
        ns = find_neutral_names(endpoint=_stub_endpoint(stub), rng=1, max_pools=6, progress=False)
    _check_display(ns, expect_html=[str(ns.candidates["pool"].iloc[0])])
    _check_plot(ns, tmp_path)

    with StubServer(["Q", "M"]) as stub:
        meta = meta_prompting("Q,M", 2, n_states=4, endpoint=_stub_endpoint(stub), rng=1, progress=False)
    _check_display(meta, expect_html=["min_max"])
    assert isinstance(meta.summary()["accuracy"], float)
    _check_plot(meta, tmp_path)


# ----------------------------------------------------------------------------- calibration
@pytest.fixture(scope="module")
def sim_log():
    from normlab.theory import strategy_game

    base = strategy_game("best_response", n_agents=8, memory=2, n_runs=4, names=["Q", "M"], rng=1,
                         record_decisions=True).to_log()
    com = [strategy_game("best_response", n_agents=8, memory=2, n_runs=3, names=["Q", "M"], committed=k,
                         committed_name="Q", initial="consensus:M", stop="max", max_interactions=96, rng=k,
                         record_decisions=True).to_log() for k in (1, 2, 3)]
    return GameLog.concat([base] + com)


def test_strategy_fit_display_plots_and_round_trip(tmp_path):
    from normlab.calibration import load_fit

    fit = load_fit("llama3_70b_QM_H3")
    rep, h = _check_display(fit, expect_html=["p(M | all M)", "R-hat max"])
    assert "hierarchical" in rep and "Llama-3-70B-Instruct" in rep
    ax = _check_plot(fit, tmp_path)
    assert len(ax.get_xticklabels()) == 8 and "not observed" in ax.get_title()
    _check_plot(fit, tmp_path, "ppc")
    fit.save(tmp_path / "fit")
    assert normlab.load(tmp_path / "fit").to_dict() == fit.to_dict()
    assert load_fit(tmp_path / "fit").to_dict() == fit.to_dict()


def test_prediction_display_plots_and_round_trip(tmp_path):
    from normlab.calibration import load_fit, predict

    pred = predict(load_fit("llama3_70b_QM_H3"), n_agents=10, n_draws=4, committed=[0, 1, 2, 3, 4],
                   n_runs_consensus=4, n_runs_flip=4, max_rounds=40, strength=False, rng=3)
    cm = pred.critical_mass()["overturn_M"]
    rep, h = _check_display(pred, expect_html=["critical mass overturn_M (published rule)",
                                               fmt_interval(cm["low"], cm["high"]), "P(consensus on M)"])
    assert "N=10" in rep and "4 draws" in rep
    _plain_only(pred.summary())
    _check_plot(pred, tmp_path)
    _check_plot(pred, tmp_path, "success")
    pred.save(tmp_path / "pred")
    back = normlab.load(tmp_path / "pred")
    for k in ("consensus", "success", "draw_stats", "flips", "critical_mass_draws", "strength"):
        pd.testing.assert_frame_equal(getattr(back, k), getattr(pred, k))
    assert back.summary() == pred.summary() and repr(back) == repr(pred)


@pytest.mark.slow  # 11 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_calibration_empirical_and_comparison_results(sim_log, tmp_path):
    from normlab.calibration import (ModelComparison, calibrate, compare_trajectories, counts_from_log,
                                     empirical_critical_mass, llm_trajectories, strategy_asymmetry,
                                     theory_trajectories)

    emp = empirical_critical_mass(sim_log, within_rounds=10, n_boot=50, rng=1)
    rep, h = _check_display(emp, expect_html=["published rule", "logistic 50% point"])
    assert "Q overturning M" in rep
    _check_plot(emp, tmp_path)

    cal = calibrate(sim_log, names=("Q", "M"), fit_on="all", model="empirical", n_draws=4, rng=1,
                    predict_kwargs=dict(n_runs_consensus=4, n_runs_flip=4, max_rounds=30, strength=False,
                                        committed=[0, 1, 2, 3]))
    cal = dataclasses.replace(cal, empirical=emp)
    rep, h = _check_display(cal, expect_html=["critical_mass overturn_M", "p_consensus"])
    _plain_only(cal.summary())
    _check_plot(cal, tmp_path, figure=True)
    _check_plot(cal, tmp_path, "strategy")
    cal.save(tmp_path / "cal")
    back = normlab.load(tmp_path / "cal")
    pd.testing.assert_frame_equal(back.to_frame(), cal.to_frame())
    pd.testing.assert_frame_equal(back.empirical.curves, emp.curves)
    pd.testing.assert_frame_equal(back.empirical.estimates, emp.estimates)
    assert back.summary() == cal.summary() and repr(back.empirical) == repr(emp)

    counts = counts_from_log(sim_log, names=("Q", "M"))
    rep, h = _check_display(counts, expect_html=["memory length 0"])
    assert "H=2" in rep

    asym = strategy_asymmetry(cal.fit, rng=0)
    rep, h = _check_display(asym, expect_html=["CMH"])
    assert all(type(v) in (int, float, str, bool, type(None)) for v in asym.summary.values())
    _check_plot(asym, tmp_path)

    llm = llm_trajectories(sim_log.select(initial="empty"), n_rounds=10, n_boot=50, rng=1)
    th = theory_trajectories(cal.fit, n_agents=8, n_rounds=10, n_draws=4, n_runs=3, rng=1)
    tc = compare_trajectories(llm, th, label="best response vs its own fit")
    rep, h = _check_display(tc, expect_html=["mean |LLM - theory|"])
    assert "best response vs its own fit" in rep
    _check_plot(tc, tmp_path)

    folds = pd.DataFrame({"model": ["a", "a", "b", "b"], "fold": [0, 1, 0, 1], "heldout_ll": [-10.0, -12, -15, -14],
                          "n_test": [20, 20, 20, 20]})
    mc = ModelComparison(by="run", k=2, folds=folds, decay=0.5, chosen="a")
    rep, h = _check_display(mc, expect_html=["-7"])
    assert "chosen a" in rep
    _check_plot(mc, tmp_path)


def test_adoption_fit_display(tmp_path):
    from normlab.calibration import fit_adoption

    sim = normlab.theory.norm_contagion_agents(40, 4, 2.0, 0.6, t_max=6, dt=0.25, n_runs=1, rng=1)
    fit = fit_adoption(sim.to_frame(), n_agents=40, behaviour="compliance", n_boot=4, rng=1)
    _check_display(fit, expect_html=["ratio", fmt(fit.ratio)])
    _check_plot(fit, tmp_path)
