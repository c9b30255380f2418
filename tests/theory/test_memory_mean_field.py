"""Mean field of the memory-H strategy game (normlab.theory.memory_mean_field).

Tiers: the state algebra against the encoding of normlab.theory.strategies; closed forms (a table
that always says A goes to all-A, a uniform table stays mixed, a relabelling-symmetric table keeps
a symmetric iterate and reaches the unstable symmetric point); the Jacobian against finite
differences; equivariance under relabelling; agreement with large-N simulations within Monte
Carlo error.
"""

from __future__ import annotations

import numpy as np
import pytest

from normlab.theory import strategy_game
from normlab.theory.strategies import StrategyTable, decode_state, encode_state, n_states
from normlab.theory.memory_mean_field import (
    _apply,
    _jacobian_spectrum,
    _swap_states,
    mean_field_boundary,
    strategy_mean_field,
    successor_states,
)


def _table(p1, H, names=("A", "B")):
    """Two-name table with p(name 1 | s) = p1(entries)."""
    S = n_states(2, H)
    t = np.array([p1(decode_state(s, 2, H)) for s in range(S)], float)
    return StrategyTable(t, memory=H, names=names)


def _biased_majority(bias, H):
    """Plays the name most seen from partners; the empty memory picks name 1 with 1/2 + bias,
    ties 1/2; a little noise (0.02) everywhere."""
    def p1(ent):
        if not ent:
            return 0.5 + bias
        c = sum(p for _, p in ent)
        d = c - len(ent) / 2
        return 0.5 if d == 0 else (0.98 if d > 0 else 0.02)
    return _table(p1, H)


@pytest.mark.parametrize("W,H", [(2, 1), (2, 3), (3, 2)])
def test_successors_match_the_state_encoding(W, H):
    succ = successor_states(W, H)
    assert succ.shape == (n_states(W, H), W, W)
    for s in range(n_states(W, H)):
        ent = decode_state(s, W, H)
        for a in range(W):
            for b in range(W):
                assert succ[s, a, b] == encode_state((ent + [(a, b)])[-H:], W)


def test_swap_permutation_relabels_every_state():
    H = 3
    sw = _swap_states(H)
    assert sorted(sw.tolist()) == list(range(n_states(2, H)))
    for s in range(n_states(2, H)):
        assert decode_state(int(sw[s]), 2, H) == [(1 - a, 1 - b) for a, b in decode_state(s, 2, H)]


def test_the_map_conserves_probability_and_matches_a_hand_computed_step():
    tab = _biased_majority(0.1, 1)  # H = 1: states 0 (empty), 1..4 = (0,0), (0,1), (1,0), (1,1)
    x = np.zeros(5)
    x[0] = 1.0
    fx, q = _apply(x, tab.table, successor_states(2, 1))
    # from the empty memory: own a ~ (0.4, 0.6), partner b ~ q = (0.4, 0.6)
    assert q == pytest.approx([0.4, 0.6])
    assert fx == pytest.approx([0.0, 0.16, 0.24, 0.24, 0.36], abs=1e-15)
    assert fx.sum() == pytest.approx(1.0, abs=1e-15)


def test_a_table_that_always_says_a_goes_to_all_a():
    S = n_states(2, 4)
    tab = StrategyTable(np.tile([1.0, 0.0], (S, 1)), memory=4, names=("A", "B"))
    mf = strategy_mean_field(tab)
    assert mf.outcome == "A" and mf.consensus and mf.converged and mf.stable
    assert mf.x[encode_state([(0, 0)] * 4, 2)] == pytest.approx(1.0, abs=1e-9)
    assert mf.p_consensus == {"A": 1.0, "B": 0.0, "none": 0.0}
    assert mf.final_share["A"] == pytest.approx(1.0)
    # success is 1 from the first interaction: the trailing 3-round mean reaches 0.95 at t = 3
    assert mf.rounds_to_95 == pytest.approx(3.0)


def test_a_uniform_table_stays_mixed_and_stable():
    S = n_states(2, 3)
    mf = strategy_mean_field(StrategyTable(np.full((S, 2), 0.5), memory=3, names=("A", "B")))
    assert mf.outcome == "none" and not mf.consensus and mf.stable
    assert mf.share[:, 0] == pytest.approx(0.5, abs=1e-12)
    assert mf.success[-1] == pytest.approx(0.5, abs=1e-12)
    assert mf.p_majority["none"] == 1.0 and mf.p_consensus["none"] == 1.0


@pytest.mark.parametrize("H", [3, 5])
def test_best_response_is_symmetric_and_its_symmetric_point_is_unstable(H):
    mf = strategy_mean_field("best_response", memory=H)
    assert mf.symmetric
    sw = _swap_states(H)
    assert np.array_equal(mf.x, mf.x[sw])  # exactly: the iterate is kept symmetric
    assert mf.share[:, 0] == pytest.approx(mf.share[:, 1], abs=1e-14)
    assert mf.leading_eigenvalue > 1.0 and mf.outcome == "split"
    assert mf.p_majority == {"0": 0.5, "1": 0.5, "none": 0.0}
    # either consensus attracts
    for k in ("0", "1"):
        m = strategy_mean_field("best_response", memory=H, initial=f"consensus:{k}")
        assert m.outcome == k and m.consensus and m.stable


def test_relabelling_the_table_swaps_the_trajectory():
    tab = _biased_majority(0.03, 3)
    a = strategy_mean_field(tab, max_rounds=60, stability=False)
    b = strategy_mean_field(tab.relabel([1, 0]), max_rounds=60, stability=False)
    assert a.share == pytest.approx(b.share[:, ::-1], abs=1e-12)
    assert a.outcome == "B" and b.outcome == "A"


def test_a_small_first_move_bias_is_amplified_to_a_certain_outcome():
    for bias, winner in ((0.02, "B"), (-0.02, "A")):
        mf = strategy_mean_field(_biased_majority(bias, 3))
        assert mf.outcome == winner and mf.stable and mf.consensus
        assert mf.p_majority[winner] == 1.0


def test_steps_per_round_changes_the_path_not_the_fixed_point():
    tab = _biased_majority(0.05, 3)
    a = strategy_mean_field(tab, steps_per_round=2)   # the synchronous map x <- F(x)
    b = strategy_mean_field(tab, steps_per_round=40)
    assert a.outcome == b.outcome == "B"
    assert a.x == pytest.approx(b.x, abs=1e-6)


def _fd_spectrum(x, P, succ, eps=1e-6):
    S = x.size
    J = np.zeros((S, S))
    for r in range(S):
        e = np.zeros(S)
        e[r] = eps
        J[:, r] = (_apply(x + e, P, succ)[0] - _apply(x - e, P, succ)[0]) / (2 * eps)
    w = np.full(S, 1.0 / S)
    return float(np.max(np.linalg.eigvals(J - np.outer(J @ w, np.ones(S))).real))


def test_jacobian_spectrum_matches_finite_differences_and_arpack(monkeypatch):
    import normlab.theory.memory_mean_field as m

    rng = np.random.default_rng(3)
    H = 2
    tab = StrategyTable(rng.uniform(0.05, 0.95, n_states(2, H)), memory=H, names=("A", "B"))
    mf = strategy_mean_field(tab, max_rounds=50, stability=False)
    P, succ = tab.table, successor_states(2, H)
    assert _jacobian_spectrum(mf.x, P, succ) == pytest.approx(_fd_spectrum(mf.x, P, succ), abs=1e-6)
    # the sparse (ARPACK) path agrees with the dense one
    tab4 = _biased_majority(0.05, 4)
    mf4 = strategy_mean_field(tab4, stability=False)
    dense = _jacobian_spectrum(mf4.x, tab4.table, successor_states(2, 4))
    monkeypatch.setattr(m, "_DENSE_LIMIT", 10)
    assert _jacobian_spectrum(mf4.x, tab4.table, successor_states(2, 4)) == pytest.approx(dense, abs=1e-7)


def test_mean_field_boundary_closed_forms():
    S = n_states(2, 3)
    always_a = StrategyTable(np.tile([1.0, 0.0], (S, 1)), memory=3, names=("A", "B"))
    assert mean_field_boundary(always_a, majority="A") == 0.0
    assert mean_field_boundary(always_a, majority="B") == 1.0
    # a symmetric table: the boundary is the symmetric mixture
    assert mean_field_boundary("best_response", memory=3, tol=1e-3) == pytest.approx(0.5, abs=1e-3)


def test_agrees_with_a_large_population_within_monte_carlo_error():
    tab = _biased_majority(0.1, 3)
    N, R, runs = 2000, 12, 12
    res = strategy_game(tab, n_agents=N, memory=3, n_runs=runs, stop="max", max_interactions=R * N, rng=11)
    prod = res.round_production.reshape(runs, R, 2).astype(float)
    share = prod[:, :, 1] / prod.sum(axis=2)
    mean, se = share.mean(axis=0), share.std(axis=0, ddof=1) / np.sqrt(runs)
    mf = strategy_mean_field(tab, max_rounds=R, steps_per_round=40, stability=False)
    for r in range(1, R + 1):  # sim round r holds the productions of t in [r - 1, r)
        m = mf.share[(mf.t >= r - 1) & (mf.t < r), 1].mean()
        assert abs(mean[r - 1] - m) < 4 * se[r - 1] + 0.01, (r, mean[r - 1], se[r - 1], m)
    assert mf.share[-1, 1] > 0.9 and mean[-1] > 0.9


def test_bad_input_is_refused_before_any_work():
    tab = _biased_majority(0.0, 2)
    with pytest.raises(ValueError, match="initial"):
        strategy_mean_field(tab, initial="consensus:Z")
    with pytest.raises(ValueError, match="initial"):
        strategy_mean_field(tab, initial=[0.5, 0.6])
    with pytest.raises(ValueError, match="steps_per_round"):
        strategy_mean_field(tab, steps_per_round=1)
    with pytest.raises(ValueError, match="memory"):
        strategy_mean_field(tab, memory=3)
    with pytest.raises(ValueError, match="memory is required"):
        strategy_mean_field("best_response")
    with pytest.raises(TypeError):
        strategy_mean_field(np.zeros(3))


def test_result_api():
    mf = strategy_mean_field(_biased_majority(0.05, 2), max_rounds=30)
    f = mf.to_frame()
    assert set(f.columns) == {"t", "quantity", "name", "value"}
    assert set(f["quantity"]) == {"share", "success"}
    s = mf.summary()
    assert s["outcome"] == "B" and s["p_majority"]["B"] == 1.0
    assert "StrategyMeanField(" in repr(mf) and "<code>" in mf._repr_html_()
    import matplotlib

    matplotlib.use("Agg")
    ax = mf.plot()
    assert len(ax.lines) == 4 and "settles on B" in ax.get_title()
