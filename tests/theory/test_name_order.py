"""The name order of the prompts (normlab.theory.name_order): per-order tables, the strategy game's
shared / independent order (kernel = Python twin), the design kernel with an order, and
the default (no bias) bit-identical to the plain game."""

import numpy as np
import pytest

from normlab._rng import run_seeds
from normlab.theory import strategy_game
from normlab.theory._reference import sg_run_reference
from normlab.theory._common import STOP_CODES
from normlab.theory.name_order import order_mode, order_tables, pair_agreement_probability
from normlab.theory.strategies import StrategyTable, n_states


def _table(W, H, seed, conc=0.7):
    rng = np.random.default_rng(seed)
    t = rng.dirichlet(np.ones(W) * conc, size=n_states(W, H))
    return StrategyTable(t, memory=H, names=tuple("QMXY"[:W]))


# ----------------------------------------------------------------------------- exact
@pytest.mark.parametrize("W", [2, 3, 4])
@pytest.mark.parametrize("g", [-1.5, 0.4, 2.0])
def test_order_tables_average_to_the_table_and_shift_the_first_listed_logit(W, g):
    p = _table(W, 2, W).table
    P = order_tables(p, g)
    assert P.shape == (W,) + p.shape
    np.testing.assert_allclose(P.mean(axis=0), p, atol=1e-12)
    np.testing.assert_allclose(P.sum(axis=-1), 1.0, atol=1e-12)
    # within one table q: block f multiplies name f by e^g (odds of f against any other name)
    for f in range(W):
        for h in range(W):
            if h == f:
                continue
            lr = np.log(P[f, :, f] / P[f, :, h]) - np.log(P[h, :, f] / P[h, :, h])
            np.testing.assert_allclose(lr, 2 * g, atol=1e-8)
            for w in range(W):  # a name listed neither first nor compared: odds shift by g only
                if w not in (f, h):
                    np.testing.assert_allclose(np.log(P[f, :, f] / P[f, :, h]) - np.log(P[w, :, f] / P[w, :, h]),
                                               g, atol=1e-8)


def test_order_tables_zero_bias_copies_and_invalid_rows_pass_through():
    p = _table(2, 3, 1).table.copy()
    assert np.array_equal(order_tables(p, 0.0), np.repeat(p[None], 2, axis=0))
    p[3] = [0.7, 0.7]
    P = order_tables(p, 1.0)
    assert np.array_equal(P[:, 3], [[0.7, 0.7], [0.7, 0.7]])
    # deterministic rows stay deterministic
    p[4] = [1.0, 0.0]
    assert np.array_equal(order_tables(p, 1.0)[:, 4], [[1.0, 0.0], [1.0, 0.0]])


def test_order_arguments_are_validated():
    assert order_mode(0.0, "shared") == 0 and order_mode(0.5, "shared") == 1 and order_mode(0.5, "independent") == 2
    with pytest.raises(ValueError, match="name_order"):
        order_mode(0.5, "mixed")
    with pytest.raises(ValueError, match="order_bias"):
        order_mode(float("nan"), "shared")
    with pytest.raises(TypeError, match="order_bias"):
        order_mode("1", "shared")
    t = _table(2, 2, 0)
    with pytest.raises(ValueError, match="name_order"):
        strategy_game(t, n_agents=4, memory=2, n_runs=1, max_interactions=10, order_bias=1.0, name_order="x")
    with pytest.raises(ValueError, match="strategy tables"):
        strategy_game("best_response", n_agents=4, memory=2, n_runs=1, max_interactions=10, order_bias=1.0,
                      n_names=2)


def test_pair_agreement_probability():
    a = np.array([[0.8, 0.2], [0.5, 0.5]])
    b = np.array([[0.6, 0.4], [0.5, 0.5]])
    base = (a * b).sum(1)
    assert np.array_equal(pair_agreement_probability(a, b, 1.0, "independent"), base)
    assert np.array_equal(pair_agreement_probability(a, b, 0.0, "shared"), base)
    shared = pair_agreement_probability(a, b, 1.0, "shared")
    assert np.all(shared > base)  # a common bias makes partners agree more
    # two agents at 1/2: per order e/(1+e) each -> agreement s^2 + (1-s)^2
    s = np.e / (1 + np.e)
    assert shared[1] == pytest.approx(s * s + (1 - s) ** 2, abs=1e-12)


# ----------------------------------------------------------------------------- the game
def test_default_is_bit_identical_to_the_plain_game():
    t = _table(2, 3, 5)
    kw = dict(n_agents=10, memory=3, n_runs=4, committed=2, initial="consensus:M", max_interactions=600,
              stop="max", rng=9, record_decisions=True)
    a = strategy_game(t, **kw)
    b = strategy_game(t, order_bias=0.0, name_order="shared", **kw)
    assert np.array_equal(a.interactions[1], b.interactions[1])
    assert np.array_equal(a.round_success, b.round_success)
    assert "order_bias" not in a.params and "order_bias" not in b.params


@pytest.mark.parametrize("order", ["shared", "independent"])
@pytest.mark.parametrize("W,H,committed", [(2, 3, 2), (3, 2, 0)])
def test_kernel_equals_python_twin_with_an_order_bias(order, W, H, committed):
    t = _table(W, H, 7)
    N, T, R, seed = 8, 400, 3, 21
    res = strategy_game(t, n_agents=N, memory=H, n_runs=R, committed=committed, max_interactions=T, stop="max",
                        rng=seed, record_decisions=True, order_bias=0.8, name_order=order)
    assert res.params["order_bias"] == 0.8 and res.params["name_order"] == order
    _, seeds = run_seeds(seed, R)
    pairs, names, _ = res.interactions
    for k in range(R):
        ref = sg_run_reference(seeds[k], t, N, H, None, list(res.committed), res.committed_name, None, T,
                               STOP_CODES["max"], res.params["flip_threshold"], order_bias=0.8, name_order=order)
        log = np.concatenate([pairs[k, :T], names[k, :T]], axis=1)
        assert [tuple(x) for x in log.tolist()] == ref["log"]
        a, b = res.round_offsets[k], res.round_offsets[k + 1]
        assert res.round_success[a:b].tolist() == ref["rounds"]["succ"]


def test_same_seed_same_game_and_orders_change_the_draws():
    t = _table(2, 3, 3)
    kw = dict(n_agents=8, memory=3, n_runs=2, max_interactions=300, stop="max", record_decisions=True, rng=4)
    a = strategy_game(t, order_bias=1.0, name_order="shared", **kw)
    b = strategy_game(t, order_bias=1.0, name_order="shared", **kw)
    c = strategy_game(t, order_bias=1.0, name_order="independent", **kw)
    assert np.array_equal(a.interactions[1], b.interactions[1])
    assert not np.array_equal(a.interactions[1], c.interactions[1])


def _agreement(res, N):
    """Share of interactions whose two (uncommitted) agents name the same."""
    _, names, _ = res.interactions
    return float(np.mean(names[:, :, 0] == names[:, :, 1]))


@pytest.mark.slow
def test_shared_order_raises_partner_agreement_independent_does_not():
    """At memory 1 (state = last interaction) with a flat table, a shared first-listed bias of 1.5
    makes partners agree with probability s^2 + (1 - s)^2 (s = e^1.5 / (1 + e^1.5)) instead of 1/2;
    independent orders leave it at 1/2."""
    t = StrategyTable(np.full((n_states(2, 1), 2), 0.5), memory=1, names=("Q", "M"))
    kw = dict(n_agents=10, memory=1, n_runs=20, max_interactions=2000, stop="max", record_decisions=True)
    s = np.exp(1.5) / (1 + np.exp(1.5))
    sh = _agreement(strategy_game(t, order_bias=1.5, name_order="shared", rng=1, **kw), 10)
    ind = _agreement(strategy_game(t, order_bias=1.5, name_order="independent", rng=1, **kw), 10)
    n = 20 * 2000
    assert abs(sh - (s * s + (1 - s) ** 2)) < 4 * np.sqrt(0.25 / n)
    assert abs(ind - 0.5) < 4 * np.sqrt(0.25 / n)


# ----------------------------------------------------------------------------- design kernel
@pytest.mark.parametrize("omode", [1, 2])
def test_lean_order_run_equals_the_full_kernel_run_for_run(omode):
    """The design's lean run with per-order tables draws the order and chooses as ``_sg_play``."""
    from normlab.theory._batch import S_ERR, S_NINT, SG_SCALARS
    from normlab.theory.design import _choice_thresholds, _sg_lean_order_play
    from normlab.theory.memory_game import _sg_play
    from normlab.theory.strategies import KIND_TABLE, state_offsets

    rng = np.random.default_rng(omode)
    e64, e32 = np.zeros(0, np.int64), np.zeros((0, 2), np.int32)
    for case in range(12):
        W = int(rng.choice([2, 3]))
        H = int(rng.integers(1, 4))
        N = int(rng.integers(3, 11))
        S = n_states(W, H)
        P = order_tables(rng.dirichlet(np.ones(W), size=S), float(rng.uniform(-2, 2)))  # (W, S, W)
        params = np.ascontiguousarray(P.reshape(-1))
        thr = np.empty(W * S * W)
        _choice_thresholds(params, W * S, W, thr)
        c = int(rng.integers(0, N // 2 + 1))
        mask = np.zeros(N, np.bool_)
        mask[N - c:] = True
        cword = W - 1 if c else -1
        init = np.full(N, int(rng.integers(-1, W)), np.int64)
        init_own = np.repeat(np.maximum(init, 0)[:, None], H, axis=1)
        init_len = np.where(init >= 0, H, 0).astype(np.int64)
        T = int(rng.integers(5, 40)) * N
        R = T // N + 2
        kinds, poffs = np.full(N, KIND_TABLE, np.int64), np.zeros(N, np.int64)
        for seed in run_seeds(case, 2)[1]:
            full = [np.zeros(R, np.int32), np.zeros(R, np.int32), np.zeros(R, np.int64), np.zeros(R, np.int32),
                    np.zeros((R, W), np.int32), np.zeros((R, W), np.int32)]
            sa = np.full(SG_SCALARS, -7, np.int64)
            _sg_play(seed, (N, W, H, e64, np.zeros(0, np.int32), mask, cword, kinds, poffs, params, init_own, init_len),
                     (T, 0, 2.849 / 3, np.int64(omode)), tuple(full), (e32, e32), sa)
            lean = [np.zeros(R, np.int32), np.zeros(R, np.int32), np.zeros((R, W), np.int32), np.zeros((R, W), np.int32)]
            sb = np.full(SG_SCALARS, -7, np.int64)
            _sg_lean_order_play(seed, N, W, H, state_offsets(W, H), mask, cword, thr, init, T, 0, 2.849 / 3,
                                np.int64(omode), *lean, sb, np.zeros(N * (4 + H), np.int64))
            assert sa[S_NINT] == sb[S_NINT] and sa[S_ERR] == sb[S_ERR]
            nr = -(-sa[S_NINT] // N)
            for x, y in ((full[0], lean[0]), (full[1], lean[1]), (full[4], lean[2]), (full[5], lean[3])):
                assert np.array_equal(x[:nr], y[:nr]), case


def test_design_without_bias_is_identical_and_with_bias_reproducible():
    from normlab.calibration import ExperimentDesign, predict

    t = _table(2, 3, 11, conc=2.0)
    des = ExperimentDesign("M", "Q", 10, (1, 3), ((200, 240), (200, 260)), 20, extend=False)
    kw = dict(n_agents=10, n_draws=2, design=des, consensus=False, strength=False, committed=[0], n_runs_flip=2,
              design_runs=2, run_effects=None, max_round=20, rng=5)
    a = predict(t, **kw)
    b = predict(t, order_bias=0.0, **kw)
    assert a.experiment_shares.equals(b.experiment_shares)
    c = predict(t, order_bias=1.0, **kw)
    d = predict(t, order_bias=1.0, **kw)
    assert c.experiment_shares.equals(d.experiment_shares)
    assert not c.experiment_shares.equals(a.experiment_shares)
    assert c.settings["order_bias"] == 1.0
