"""The prediction engine: the compiled design (``engine="kernel"``) against the original
per-call implementation (``engine="reference"``), its seeds, the compiled table draws and the
stored posterior-mean tables."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from normlab._rng import child_seed_words, descendant_seed_words
from normlab.calibration import load_fit, predict
from normlab.calibration.hierarchical import _conditional_deltas_reference, conditional_deltas
from normlab.theory.strategies import StrategyTable

FRAMES = ("consensus", "success", "draw_stats", "flips", "critical_mass_draws", "strength")


def _assert_same(a, b):
    for f in FRAMES:
        x, y = getattr(a, f).reset_index(drop=True), getattr(b, f).reset_index(drop=True)
        # float means may differ in the last bits (summation order); everything else is exact
        pd.testing.assert_frame_equal(x, y, check_dtype=False, rtol=1e-12, atol=0)


@pytest.fixture(scope="module")
def fit_h3():
    return load_fit("llama3_70b_QM_H3")


def test_kernel_engine_equals_reference_on_posterior_draws(fit_h3):
    # the shipped fit carries its baselines' run effects, which only the kernel engine plays
    kw = dict(n_agents=12, n_draws=3, n_runs_consensus=6, n_runs_flip=4, max_rounds=60, run_effects=None,
              assume_monotone=True, rng=5)
    a = predict(fit_h3, engine="kernel", **kw)
    b = predict(fit_h3, engine="reference", **kw)
    _assert_same(a, b)
    assert a.critical_mass() == b.critical_mass()
    sa, sb = a.summary(), b.summary()
    ra, rb = sa.pop("relative_strength"), sb.pop("relative_strength")
    assert sa == sb
    for x in ra:
        for q in ra[x]:
            assert ra[x][q] == pytest.approx(rb[x][q], rel=1e-12, abs=1e-14)
    assert (a.flips["simulated"] == False).any()  # noqa: E712 -- the monotone shortcut was exercised


@pytest.mark.parametrize("kw", [
    dict(consensus=False, strength=False, committed=[0, 2, 5], design_runs=6, n_runs_flip=3),
    dict(strength=False, within_rounds=12, max_round=8, committed=[1, 4], directions=["Q"], flip_level=0.75),
])
def test_kernel_engine_equals_reference_across_settings(fit_h3, kw):
    table = fit_h3.mean_table()
    base = dict(n_agents=10, n_draws=2, n_runs_consensus=5, n_runs_flip=4, max_rounds=40, rng=9)
    base.update(kw)
    _assert_same(predict(table, engine="kernel", **base), predict(table, engine="reference", **base))


def test_every_count_is_simulated_by_default():
    """Issue 32: the saturation shortcut (two counts where all 16 runs flipped: every larger count
    "flips every run") hid the runs that do not flip under run effects. By default every count is
    simulated; with the shortcut the filled counts claim n_flips == n_runs where the simulated ones
    at the same counts do not."""
    fit = load_fit("llama31_70b_QM_H5")
    kw = dict(n_agents=24, n_draws=12, consensus=False, strength=False, directions=["M"], rng=3)
    full = predict(fit, **kw)
    assert full.settings["assume_monotone"] is False
    assert full.flips["simulated"].all()
    short = predict(fit, assume_monotone=True, **kw)
    filled = short.flips[~short.flips["simulated"]]
    assert len(filled) and (filled["n_flips"] == filled["n_runs"]).all()
    key = ["draw", "majority", "challenger", "committed"]
    same = full.flips.merge(filled[key], on=key)
    assert len(same) == len(filled) and (same["n_flips"] < same["n_runs"]).any()
    # the shortcut changes nothing else: the critical masses are read before it starts
    pd.testing.assert_frame_equal(full.critical_mass_draws, short.critical_mass_draws)


def test_kernel_engine_three_names_and_executor():
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(4)
    t = rng.dirichlet(np.ones(3) * 0.7, size=1 + 9 + 81)
    table = StrategyTable(t, memory=2, names=("a", "b", "c"))
    kw = dict(n_agents=8, n_draws=3, n_runs_consensus=4, n_runs_flip=3, max_rounds=40, committed=[0, 3],
              directions=[("a", "b"), ("c", "a")], rng=2)
    a = predict(table, engine="kernel", **kw)
    _assert_same(a, predict(table, engine="reference", **kw))
    with ThreadPoolExecutor(2) as ex:
        _assert_same(a, predict(table, engine="kernel", executor=ex, **kw))


def test_statistics_of_independent_streams_agree(fit_h3):
    """Different seeds: the two engines' consensus probabilities and critical masses agree within
    sampling error (both are the same design)."""
    table = fit_h3.mean_table()
    kw = dict(n_agents=12, n_draws=12, n_runs_consensus=10, n_runs_flip=6, max_rounds=60, strength=False)
    a = predict(table, engine="kernel", rng=1, **kw)
    b = predict(table, engine="reference", rng=2, **kw)
    n = 12 * 10
    for nm in ("Q", "M"):
        pa, pb = a.p_consensus()[nm], b.p_consensus()[nm]
        se = np.sqrt(max(pa * (1 - pa), pb * (1 - pb), 0.05) * 2 / n)
        assert abs(pa - pb) < 4 * se
    for crit in ("published", "per_run"):
        x = a.critical_mass_draws[crit].to_numpy()
        y = b.critical_mass_draws[crit].to_numpy()
        assert abs(np.median(x) - np.median(y)) <= 2
        assert np.isfinite(x).mean() == pytest.approx(np.isfinite(y).mean(), abs=0.35)


def test_bad_engine_raises(fit_h3):
    with pytest.raises(ValueError, match="engine must be"):
        predict(fit_h3, n_agents=8, n_draws=1, engine="fast")


def test_descendant_seed_words_match_nested_spawn():
    ss = np.random.SeedSequence(1234).spawn(2)[1]
    keys = np.array([[0, 0, 0], [3, 1, 7], [199, 66, 39]])
    got = descendant_seed_words(ss, keys)
    for row, k in zip(got, keys):
        ref = np.random.SeedSequence(1234).spawn(2)[1]  # fresh: spawn() advances its parent
        for j in k:
            ref = ref.spawn(int(j) + 1)[int(j)]
        assert (row == ref.generate_state(4, np.uint64)).all()
    assert (child_seed_words(ss, 3, start=2) == descendant_seed_words(ss, [[2], [3], [4]])).all()
    with pytest.raises(ValueError, match="2-D"):
        descendant_seed_words(ss, [1, 2])


def test_compiled_conditional_draws_match_the_vectorised_ones():
    rng = np.random.default_rng(8)
    m = 3000
    mu = rng.normal(0, 3, m)
    n = rng.integers(0, 400, m).astype(float)
    k = np.floor(n * rng.random(m))
    tau = rng.uniform(0.3, 4.0, m)
    u = rng.random(m)
    a = conditional_deltas(mu, k, n, tau, u)
    b = _conditional_deltas_reference(mu, k, n, tau, u)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-8)


def test_shipped_fits_store_their_mean_table(tmp_path):
    fit = load_fit("llama3_70b_QM_H3")
    assert fit.stored_mean.shape == fit.counts.shape
    plain = dataclasses.replace(fit, stored_mean=np.zeros((0, 0)))
    np.testing.assert_allclose(fit.mean_table().table, plain.mean_table().table, rtol=0, atol=1e-9)
    # other arguments are computed, not read
    assert not np.array_equal(fit.mean_table(n_draws=50, rng=1).table, fit.mean_table().table)
    back = type(fit).from_json(fit.to_json(tmp_path / "f.json"))
    assert np.array_equal(back.stored_mean, fit.stored_mean)
    assert "mean_table" not in plain.to_dict()
    with pytest.raises(ValueError, match="stored_mean"):
        dataclasses.replace(fit, stored_mean=np.zeros((3, 2)))


def _random_lean_case(rng):
    """A random table game the design plays: W, H, N, a table with zeros (and sometimes an
    invalid row), committed agents, initial memories, a stop rule and a cap."""
    from normlab.theory.strategies import n_states

    W = int(rng.choice([2, 2, 3, 4]))
    H = int(rng.integers(1, 4 if W > 2 else 6))
    N = int(rng.integers(2, 13))
    S = n_states(W, H)
    t = rng.dirichlet(np.ones(W) * rng.choice([0.1, 0.5, 3.0]), size=S)
    t[rng.random((S, W)) < 0.15] = 0.0
    t[t.sum(axis=1) == 0, 0] = 1.0
    t /= t.sum(axis=1, keepdims=True)
    if rng.random() < 0.1:
        t[rng.integers(S)] = 0.7  # an invalid row: the run stops with an error if it visits it
    c = int(rng.integers(0, N))
    cword = int(rng.integers(0, W)) if c > 0 or rng.random() < 0.5 else -1
    c = c if cword >= 0 else 0
    mask = np.zeros(N, np.bool_)
    mask[N - c:] = True
    init = np.full(N, -1, np.int64)
    mode = rng.integers(3)
    if mode == 1:
        init[:] = rng.integers(W)
    elif mode == 2:
        init[:] = rng.integers(-1, W, N)
    stop = int(rng.choice([0, 3, 4] if cword >= 0 else [0, 3]))
    T = int(rng.integers(1, 80)) * N + int(rng.integers(0, N))
    return W, H, N, np.ascontiguousarray(t.reshape(-1)), mask, cword, init, stop, T


def test_lean_design_run_equals_the_full_kernel_run_for_run():
    """The design's lean run (``_sg_lean_run``) draws and chooses exactly as ``_sg_run`` (and its
    pure-Python twin) on random tables, committed minorities, initial memories and stop rules."""
    from normlab._rng import run_seeds
    from normlab.theory._batch import S_FLIP, S_NINT, S_STOP, S_STREAK
    from normlab.theory._reference import sg_run_reference
    from normlab.theory.memory_game import (
        S_ERR, SG_SCALARS, _choice_thresholds, _sg_lean_run, _sg_run,
    )
    from normlab.theory.strategies import KIND_TABLE, n_states, state_offsets

    rng = np.random.default_rng(0)
    e64, e32 = np.zeros(0, np.int64), np.zeros((0, 2), np.int32)
    n_err = n_twin = 0
    for case in range(150):
        W, H, N, params, mask, cword, init, stop, T = _random_lean_case(rng)
        S = n_states(W, H)
        thr = np.empty(S * W)
        _choice_thresholds(params, S, W, thr)
        offs = state_offsets(W, H)
        kinds, poffs = np.full(N, KIND_TABLE, np.int64), np.zeros(N, np.int64)
        init_own = np.repeat(np.maximum(init, 0)[:, None], H, axis=1)
        init_len = np.where(init >= 0, H, 0).astype(np.int64)
        R = T // N + 2
        for seed in run_seeds(case, 2)[1]:
            full = [np.zeros(R, np.int32), np.zeros(R, np.int32), np.zeros(R, np.int64), np.zeros(R, np.int32),
                    np.zeros((R, W), np.int32), np.zeros((R, W), np.int32)]
            sa = np.full(SG_SCALARS, -7, np.int64)
            _sg_run(seed, N, W, H, e64, np.zeros(0, np.int32), mask, cword, kinds, poffs, params, init_own, init_len,
                    T, stop, 2.849 / 3, *full, e32, e32, sa)
            lean = [np.zeros(R, np.int32), np.zeros(R, np.int32), np.zeros((R, W), np.int32), np.zeros((R, W), np.int32)]
            sb = np.full(SG_SCALARS, -7, np.int64)
            args = (seed, N, W, H, offs, mask, cword, thr, init, T, stop, 2.849 / 3)
            _sg_lean_run(*args, *lean, sb, np.zeros(N * (4 + H), np.int64))
            for k in (S_NINT, S_STREAK, S_FLIP, S_STOP, S_ERR):
                assert sa[k] == sb[k], (case, k, sa, sb)
            if sa[S_ERR] >= 0:
                n_err += 1
                continue
            nr = -(-sa[S_NINT] // N)
            for x, y in ((full[0], lean[0]), (full[1], lean[1]), (full[4], lean[2]), (full[5], lean[3])):
                assert np.array_equal(x[:nr], y[:nr]), case
            if case % 10 == 0 and (thr >= 0).all():  # the pure-Python twin agrees too (valid tables)
                n_twin += 1
                ref = sg_run_reference(seed, StrategyTable(params.reshape(S, W), memory=H), N, H, None, list(mask),
                                       cword, [int(v) for v in init], T, stop, 2.849 / 3)
                assert ref["scalars"]["n_interactions"] == sb[S_NINT]
                assert ref["rounds"]["succ"] == lean[1][:nr].tolist()
                assert ref["rounds"]["produ"] == lean[3][:nr].tolist()
    assert n_err > 0 and n_twin > 0  # invalid rows and the twins were exercised


@pytest.mark.parametrize("order_bias", [0.0, 0.5])
def test_lazy_effect_thresholds_are_bit_identical(monkeypatch, order_bias):
    """Run effects computed per state on first use (the default) and for every state before each
    run (the reference, ``theory.design._EAGER_EFFECTS``) play the same runs: every table of the
    prediction is equal, experiment designs and name-order tables included (issue 32, section 8)."""
    import normlab.theory.design as design
    from normlab.calibration import ExperimentDesign, RunEffects

    fit = load_fit("llama31_70b_QM_H5")
    eff = RunEffects(params=np.array([0.1, 0.15, np.log(0.4), np.log(0.3), 0.2]), cov=np.eye(5) * 1e-3, n_runs=40)
    des = ExperimentDesign("M", "Q", 12, counts=(0, 1, 3), lengths=((500,) * 3, (360,) * 4, (360,) * 2), window=20,
                           stop="streak")
    kw = dict(n_agents=12, n_draws=6, n_runs_consensus=6, n_runs_flip=4, design=des, run_effects=eff,
              order_bias=order_bias, rng=9)
    monkeypatch.setattr(design, "_EAGER_EFFECTS", True)
    eager = predict(fit, **kw)
    monkeypatch.setattr(design, "_EAGER_EFFECTS", False)
    lazy = predict(fit, **kw)
    for name in ("consensus", "success", "draw_stats", "flips", "critical_mass_draws", "strength", "experiment",
                 "experiment_cm", "experiment_shares"):
        pd.testing.assert_frame_equal(getattr(eager, name), getattr(lazy, name), check_exact=True)
    # and the effects do act: without them the runs differ
    none = predict(fit, **dict(kw, run_effects=None))
    assert not none.flips["n_flips"].equals(lazy.flips["n_flips"]) or \
        not none.experiment_shares["share"].equals(lazy.experiment_shares["share"])


def test_lazy_effect_thresholds_certain_states_and_many_runs(monkeypatch):
    """The lazy thresholds of run effects (a sentinel per state not met yet, the met states reset at
    the next run) give the eager reference's runs where a table row is certain (p 0 or 1: logits
    -inf and +inf) and over many runs and draws of one block: every table of the prediction equal."""
    import normlab.theory.design as design
    from normlab.calibration import RunEffects

    fit = load_fit("llama31_70b_QM_H5")
    base = fit.mean_table().table.copy()
    rng = np.random.default_rng(3)
    tables = []
    for d in range(3):
        t = base.copy()
        rows = rng.choice(np.arange(1, t.shape[0]), 300, replace=False)
        t[rows[:150]] = (1.0, 0.0)
        t[rows[150:]] = (0.0, 1.0)
        tables.append(StrategyTable(t, memory=fit.memory, names=fit.names))
    eff = RunEffects(params=np.array([0.3, -0.2, np.log(0.8), np.log(0.5), 0.0]), cov=np.eye(5) * 1e-3, n_runs=40)
    kw = dict(n_agents=10, n_draws=3, n_runs_consensus=8, n_runs_flip=6, run_effects=eff, rng=4)
    monkeypatch.setattr(design, "_EAGER_EFFECTS", True)
    eager = predict(tables, **kw)
    monkeypatch.setattr(design, "_EAGER_EFFECTS", False)
    lazy = predict(tables, **kw)
    for name in ("consensus", "success", "draw_stats", "flips", "critical_mass_draws", "strength"):
        pd.testing.assert_frame_equal(getattr(eager, name), getattr(lazy, name), check_exact=True)
    none = predict(tables, **dict(kw, run_effects=None))
    assert not none.flips["n_flips"].equals(lazy.flips["n_flips"])


def test_convergence_runs_play_independent_effects():
    """The committed runs of one count are one cell (with every effect shared, omega = 1, they play
    one effect); the convergence runs are independent runs, as the fitted runs are read (issue 32),
    drawn after the cells' effects, which keep the values they had before (the same stream)."""
    from normlab.calibration.prediction.engine_kernel import _design_layout, _effects

    from normlab.calibration.fit.run_effects import run_effect_values

    def effects(omega):
        draw = np.array([[0.0, 0.0, 0.5, 0.3, 0.0, omega]])
        cfg = dict(effect_draws=draw, consensus=True, n_runs_consensus=6, effect_seed=np.random.SeedSequence(7),
                   n_runs_flip=4, design_runs=4, directions=[("Q", "M")], committed=[1, 2], strength=False)
        sizes = _design_layout(cfg)
        g = np.random.default_rng(np.random.SeedSequence(7, spawn_key=(0,)))
        return _effects(cfg, [0], (1, len(sizes), int(sizes.max()))), run_effect_values(draw[0], sizes, rng=g)

    (b, k), _ = effects(1.0)
    assert len(set(np.round(b[0, 0, :6], 12))) == 6 and len(set(np.round(k[0, 0, :6], 12))) == 6
    for grp in (1, 2):
        assert len(set(np.round(b[0, grp, :4], 12))) == 1 and len(set(np.round(k[0, grp, :4], 12))) == 1
    assert b[0, 1, 0] != b[0, 2, 0]
    (b, k), (bb, kk) = effects(0.4)
    np.testing.assert_array_equal(b[0, 1:, :4].ravel(), bb[6:])
    np.testing.assert_array_equal(k[0, 1:, :4].ravel(), kk[6:])
    assert not np.isin(b[0, 0, :6], bb[:6]).any()


# ----------------------------------------------------------------------------- relative-strength mixtures
def test_mixture_sources_pair_each_mixture_with_the_reverse_directions_complement():
    from normlab.theory.design_plan import mixture_sources
    from normlab.calibration.prediction.readings import WIDTH_FRACTIONS

    kx = lambda N: np.array([int(round(f * N)) for f in WIDTH_FRACTIONS])  # noqa: E731 -- the engines' mixtures
    src = mixture_sources([(0, 1), (1, 0)], kx(24), 24)
    assert (src[0] == -1).all()  # the first direction of a pair is simulated
    assert src[1, :, 0].tolist() == [0] * 7 and src[1, :, 1].tolist() == [6, 5, 4, 3, 2, 1, 0]
    # N = 23: half of 23 rounds to 12, whose complement (11) is no mixture: that one is simulated
    src = mixture_sources([(0, 1), (1, 0)], kx(23), 23)
    assert src[1, 3].tolist() == [-1, -1] and (src[1, [0, 1, 2, 4, 5, 6], 0] == 0).all()
    for f in (0, 1, 2, 4, 5, 6):
        assert kx(23)[f] + kx(23)[src[1, f, 1]] == 23
    assert (mixture_sources([(0, 1)], kx(24), 24) == -1).all()
    # three names: each ordered pair finds its reverse, whichever comes first
    dirs = [(0, 1), (0, 2), (1, 0), (2, 1), (1, 2), (2, 0)]
    src = mixture_sources(dirs, kx(24), 24)
    assert src[:, 0, 0].tolist() == [-1, -1, 0, -1, 3, 1]


def test_reverse_direction_reads_the_mixture_runs_both_ways():
    # one experiment per mixture pair: runs won by M in (M, Q)'s f plus runs won by Q in (Q, M)'s
    # complement never exceed the runs, and equal them where every run converged
    tab = load_fit("llama31_70b_QM_H5").mean_table()
    p = predict(tab, n_agents=12, n_draws=30, consensus=False, committed=[0], n_runs_flip=16, rng=11)
    st = p.strength
    cols = [c for c in st.columns if c.startswith("p_win_")]
    mq = st[st["majority"] == "M"].set_index("draw")[cols].to_numpy()
    qm = st[st["majority"] == "Q"].set_index("draw")[cols].to_numpy()
    total = mq + qm[:, ::-1]
    assert (total <= 1 + 1e-12).all() and np.isclose(total, 1).mean() > 0.9


def test_reused_mixtures_agree_with_simulated_ones():
    # statistical: (M, Q)'s win probabilities read from (Q, M)'s runs against simulated on their own
    tab = load_fit("llama31_70b_QM_H5").mean_table()
    kw = dict(n_agents=12, n_draws=120, consensus=False, committed=[0], n_runs_flip=16)
    alone = predict(tab, directions=[("M", "Q")], rng=21, **kw).strength
    both = predict(tab, directions=[("Q", "M"), ("M", "Q")], rng=22, **kw).strength
    both = both[both["majority"] == "M"]
    cols = [c for c in alone.columns if c.startswith("p_win_")]
    a, b = alone[cols].to_numpy(), both[cols].to_numpy()
    n = a.shape[0] * 16
    pa, pb = a.mean(0), b.mean(0)
    pool = (pa + pb) / 2
    se = np.sqrt(np.maximum(pool * (1 - pool), 1 / n) * 2 / n)
    assert (np.abs(pa - pb) <= 4.5 * se).all(), (pa, pb)
    # the table must make the comparison informative: M neither always nor never wins everywhere
    assert ((pool > 0.05) & (pool < 0.95)).any()


def test_strength_shares_from_the_sweep_leave_the_flip_readings_unchanged():
    # counts 0 and 1 are played to the cap when they also give exploration and pull; the flip
    # readings must be those of runs stopped at their flip (the Q consensus flips even at 0 and 1)
    tab = load_fit("llama31_70b_QM_H5").mean_table()
    kw = dict(n_agents=12, n_draws=4, consensus=False, n_runs_flip=6, design_runs=5, committed=[0, 1, 2, 5],
              directions=[("Q", "M")], rng=7)
    on = predict(tab, **kw)
    off = predict(tab, strength=False, **kw)
    pd.testing.assert_frame_equal(on.flips, off.flips)
    pd.testing.assert_frame_equal(on.critical_mass_draws, off.critical_mass_draws)
    low = on.flips[on.flips["committed"] <= 1]
    assert (low["n_flips"] > 0).all()  # the truncation was exercised
    both = dict(kw, directions=None, n_runs_consensus=4, max_rounds=60, consensus=True)
    _assert_same(predict(tab, engine="kernel", **both), predict(tab, engine="reference", **both))
    # without count 0 or 1 in the sweep the strength stage plays its own runs
    own = dict(kw, committed=[2, 5])
    assert predict(tab, **own).strength[["pull", "exploration"]].notna().all().all()
