"""Minimal naming game: kernel = Python twin, invariants, reproducibility, published values.

References: Baronchelli et al., PRE 73, 015102 (2006); PRE 76, 051102 (2007) (β-model);
Flint Ashery et al., Sci. Adv. 11, eadu9368 (2025) Fig. 1A, Fig. S3; values in ../shared/VALIDATION.md.
"""

import networkx as nx
import numba
import numpy as np
import pytest

from normlab._rng import run_seeds
from normlab.theory import minimal_naming_game
from normlab.theory._common import STOP_CODES
from normlab.theory._reference import ng_run_reference
from normlab.theory.naming_game import _parse_initial


def assert_matches_twin(N, W=None, graph=None, committed=0, bias=None, beta=1.0, initial=None, T=3000,
                        stop="consensus", runs=3, seed=7, invent="keep", bias_empty=False):
    res = minimal_naming_game(N, n_words=W, n_runs=runs, graph=graph, committed=committed, production_bias=bias,
                              beta=beta, initial=initial, max_interactions=T, stop=stop, rng=seed, invent=invent,
                              bias_empty=bias_empty, per_interaction=True)
    hit_sum = np.zeros(int(res.n_interactions.max()), np.int64)
    _, seeds = run_seeds(seed, runs)
    nbrs = None if graph is None else [[list(graph.nodes).index(v) for v in graph.adj[u]] for u in graph.nodes]
    init, _ = _parse_initial(initial, N, W or 0, tuple(str(k) for k in range(W or 0)))
    for k in range(runs):
        ref = ng_run_reference(seeds[k], N, W or 0, nbrs, list(res.committed), res.committed_name, bias, beta,
                               list(init), T, STOP_CODES[stop], res.params["flip_threshold"], invent=invent,
                               bias_empty=bias_empty)
        hit_sum[:len(ref["hits"])] += ref["hits"]
        got = res.to_frame().iloc[k]
        for key, rv in ref["scalars"].items():
            if key == "stop_reason":
                assert STOP_CODES[res.stop_reason[k]] == rv
                continue
            v = getattr(res, key)[k]
            assert (rv == -1 and np.isnan(v)) if isinstance(v, float) and np.isnan(v) else v == rv, (key, v, rv, got)
        a, b = res.round_offsets[k], res.round_offsets[k + 1]
        assert res.round_success[a:b].tolist() == ref["rounds"]["succ"]
        assert res.round_count[a:b].tolist() == ref["rounds"]["count"]
        assert res.round_n_words[a:b].tolist() == ref["rounds"]["nw"]
        assert res.round_n_distinct[a:b].tolist() == ref["rounds"]["nd"]
        if W:
            assert res.round_production[a:b].tolist() == ref["rounds"]["prod"]
            assert res.round_production_uncommitted[a:b].tolist() == ref["rounds"]["produ"]
    assert res.interaction_success.tolist() == hit_sum.tolist()
    return res


# ---------------------------------------------------------------- tier 1: kernel == reference twin
@pytest.mark.parametrize(
    "kw",
    [
        dict(N=10),
        dict(N=12, W=3),
        dict(N=12, W=2, committed=3, initial="consensus", stop="flip"),
        dict(N=16, W=2, committed=2, initial=0, stop="max", T=500),
        dict(N=12, W=4, bias=[0.1, 0.2, 0.3, 0.4]),
        dict(N=12, W=2, bias=[0.0, 1.0]),
        dict(N=12, beta=0.5, T=2000),
        dict(N=12, W=3, beta=0.2, T=600, stop="success95"),
        dict(N=12, W=3, stop="streak"),
        dict(N=15, committed=2, T=2000, initial=np.array([-1] * 5 + [3] * 10)),
        dict(N=12, W=3, invent="discard"),
        dict(N=10, invent="discard"),
        dict(N=12, W=4, bias=[0.1, 0.2, 0.3, 0.4], invent="discard"),
        dict(N=12, W=3, beta=0.3, T=800, invent="discard", stop="success95"),
        dict(N=12, W=2, committed=3, initial=np.array([-1] * 6 + [0] * 6), stop="flip", invent="discard"),
        dict(N=12, W=2, bias=[0.3, 0.7], invent="discard", bias_empty=True, stop="streak"),
        dict(N=12, W=3, bias=[0.0, 0.25, 0.75], bias_empty=True),
    ],
)
def test_kernel_equals_twin(kw):
    assert_matches_twin(**kw)


def test_kernel_equals_twin_on_graphs():
    assert_matches_twin(20, graph=nx.cycle_graph(20), T=4000)
    assert_matches_twin(20, W=5, graph=nx.barabasi_albert_graph(20, 2, seed=1), committed=np.array([0, 5]))


# ---------------------------------------------------------------- tier 2: invariants
def test_invariants_finite_pool():
    res = minimal_naming_game(30, n_words=4, n_runs=50, rng=3)
    assert np.all(res.n_distinct_max <= 4)
    assert np.all(res.n_words_max <= 30 * 4)
    assert np.all(res.stop_reason == "consensus")
    assert np.all(res.n_interactions == res.consensus_time)
    # every round: productions = interactions; successes <= interactions
    assert np.array_equal(res.round_production.sum(axis=1), res.round_count)
    assert np.all(res.round_success <= res.round_count)
    # at consensus every agent holds the winner only
    last = res.round_offsets[1:] - 1
    assert np.all(res.round_n_words[last] == 30) and np.all(res.round_n_distinct[last] == 1)
    assert set(np.unique(res.winner)) <= set(range(4))


def test_committed_agents_keep_their_name_and_win_above_threshold():
    res = minimal_naming_game(100, n_words=2, n_runs=20, committed=30, initial="consensus", stop="consensus", rng=1)
    assert np.all(res.winner == 1)  # committed to the last name
    assert np.all(res.flipped())


def test_success_rate_is_filled_after_absorbing_consensus():
    res = minimal_naming_game(24, n_words=10, n_runs=30, rng=2)
    sr = res.success_rate(n_rounds=60)
    assert sr["n_runs"].eq(30).all()
    assert np.allclose(sr["success_rate"].iloc[-5:], 1.0)
    assert sr["success_rate"].between(0, 1).all()


def test_production_bias_drives_consensus_to_the_favoured_name():
    # Seed 003 Fig. S3: any bias towards name 1 makes the population converge on it; more bias, faster.
    mild = minimal_naming_game(24, n_words=2, n_runs=400, production_bias=[0.4, 0.6], rng=4)
    strong = minimal_naming_game(24, n_words=2, n_runs=400, production_bias=[0.1, 0.9], rng=4)
    assert (mild.winner == 1).mean() > 0.6
    assert (strong.winner == 1).mean() > (mild.winner == 1).mean()
    assert np.nanmean(strong.consensus_time) < np.nanmean(mild.consensus_time)


def test_beta_model_threshold():
    # Baronchelli et al. 2007: consensus needs beta > 1/3.
    with pytest.warns(RuntimeWarning, match="max_interactions"):
        low = minimal_naming_game(50, n_runs=10, beta=0.2, max_interactions=200_000, stop="consensus", rng=1)
    high = minimal_naming_game(50, n_runs=10, beta=0.6, max_interactions=200_000, stop="consensus", rng=1)
    with pytest.warns(RuntimeWarning):
        minimal_naming_game(50, n_runs=2, beta=0.2, max_interactions=2000, rng=1)
    assert np.isnan(low.consensus_time).all()
    assert not np.isnan(high.consensus_time).any()


# ---------------------------------------------------------------- tier 3: reproducibility
def test_same_seed_same_result_and_thread_independent(monkeypatch):
    import normlab.theory._batch as ng

    monkeypatch.setattr(ng, "PARALLEL_MIN_WORK", 0)  # the parallel kernel whenever threads > 1
    a = minimal_naming_game(40, n_words=5, n_runs=64, rng=11)
    b = minimal_naming_game(40, n_words=5, n_runs=64, rng=np.random.SeedSequence(11))
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        c = minimal_naming_game(40, n_words=5, n_runs=64, rng=11)
    finally:
        numba.set_num_threads(old)
    monkeypatch.setattr(ng, "PARALLEL_MIN_WORK", 10**18)  # the serial kernel
    e = minimal_naming_game(40, n_words=5, n_runs=64, rng=11)
    for other in (b, c, e):
        assert np.array_equal(a.consensus_time, other.consensus_time, equal_nan=True)
        assert np.array_equal(a.round_production, other.round_production)
    # a single run can be reproduced alone: run k uses child k of the seed
    assert minimal_naming_game(40, n_words=5, n_runs=1, rng=11).consensus_time[0] == a.consensus_time[0]
    d = minimal_naming_game(40, n_words=5, n_runs=64, rng=12)
    assert not np.array_equal(a.consensus_time, d.consensus_time)


def test_frames_are_tidy():
    res = minimal_naming_game(20, n_words=3, n_runs=5, rng=1)
    f = res.to_frame()
    assert len(f) == 5 and {"run", "consensus_time", "winner", "t_max", "n_words_max", "n_distinct_max"} <= set(f)
    r = res.rounds()
    assert len(r) == res.round_offsets[-1] and r.groupby("run")["round"].min().eq(1).all()
    p = res.production_share(n_rounds=10)
    assert len(p) == 5 * 10 * 3
    assert np.allclose(p.groupby(["run", "round"])["share"].sum(), 1.0)
    cc = res.consensus_counts()
    assert cc["runs"].sum() == 5


# ---------------------------------------------------------------- tier 4: published values
@pytest.mark.slow
def test_scaling_prefactors_at_1600():
    # VALIDATION.md: t_max/N^1.5 ≈ 0.58-0.62, N_w^max/N^1.5 ≈ 0.335 at N = 1600 (within 10%),
    # peak distinct words = N/2.
    N = 1600
    res = minimal_naming_game(N, n_runs=200, rng=2024)
    assert 0.58 * 0.9 <= res.t_max.mean() / N**1.5 <= 0.62 * 1.1
    assert abs(res.n_words_max.mean() / N**1.5 - 0.335) <= 0.1 * 0.335
    assert abs(res.n_distinct_max.mean() / (N / 2) - 1) < 0.02
    assert abs(np.mean(res.consensus_time) / N**1.5 - 1.46) <= 0.1 * 1.46


def test_finite_pool_peak_distinct_is_w():
    res = minimal_naming_game(200, n_words=7, n_runs=50, rng=5)
    assert np.all(res.n_distinct_max == 7)


def test_keep_is_the_default_and_unchanged():
    a = minimal_naming_game(24, n_words=10, n_runs=50, rng=11)
    b = minimal_naming_game(24, n_words=10, n_runs=50, rng=11, invent="keep", per_interaction=True)
    assert a.n_interactions.tolist() == b.n_interactions.tolist()
    assert a.round_success.tolist() == b.round_success.tolist()
    assert a.interaction_success is None and b.interaction_success is not None
    c = minimal_naming_game(24, n_words=10, n_runs=50, rng=11, invent="discard")
    assert c.n_interactions.tolist() != a.n_interactions.tolist()


def test_success_by_interaction_matches_rounds_and_fills_absorbed_runs():
    N = 12
    res = minimal_naming_game(N, n_words=4, n_runs=200, rng=3, per_interaction=True)
    curve = res.success_by_interaction(n_interactions=40 * N)
    assert list(curve.columns) == ["interaction", "round", "success_rate", "sem", "n_runs"]
    assert (curve["n_runs"] == 200).all()  # consensus is absorbing: every run counts everywhere
    assert curve["interaction"].iloc[0] == 1 and curve["round"].iloc[N - 1] == 1.0
    per_round = curve["success_rate"].to_numpy().reshape(40, N).mean(axis=1)
    np.testing.assert_allclose(per_round, res.success_rate(n_rounds=40)["success_rate"], rtol=1e-12)
    assert curve["success_rate"].iloc[-1] == 1.0
    with pytest.raises(ValueError, match="per_interaction"):
        minimal_naming_game(N, n_words=4, n_runs=2, rng=3).success_by_interaction()


def test_success_by_interaction_drops_runs_stopped_without_absorption():
    res = minimal_naming_game(10, n_words=3, n_runs=30, rng=4, stop="success95", per_interaction=True)
    curve = res.success_by_interaction()
    n_int = np.sort(res.n_interactions)
    assert curve["n_runs"].iloc[0] == 30
    assert curve["n_runs"].iloc[-1] == (n_int >= len(curve)).sum() >= 1


@pytest.mark.parametrize("invent, r1, r2", [("discard", 0.058, 0.194), ("keep", 0.112, 0.273)])
def test_fig1a_early_rounds_tell_the_variants_apart(invent, r1, r2):
    # Issue 9: the authors' NG_module.py (empty speakers discard the invented name) gives 0.058 and
    # 0.194 in rounds 1 and 2 at N = 24, W = 10; normlab's keep-variant 0.112 and 0.273.
    res = minimal_naming_game(24, n_words=10, n_runs=10_000, rng=2025, invent=invent, max_interactions=3 * 24,
                              stop="max")
    sr = res.success_rate().set_index("round")["success_rate"]
    assert abs(sr.loc[1] - r1) < 0.01
    assert abs(sr.loc[2] - r2) < 0.01


@pytest.mark.slow
def test_fig1a_theory_line():
    # Seed 003 Fig. 1A: N = 24, W = 10, mean success ≈ 0.93 at round 15 and ≈ 0.96 at round 17.
    res = minimal_naming_game(24, n_words=10, n_runs=10_000, rng=2025)
    sr = res.success_rate().set_index("round")["success_rate"]
    assert abs(sr.loc[15] - 0.93) < 0.01
    assert abs(sr.loc[17] - 0.96) < 0.01


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(n_agents=1), "n_agents"),
        (dict(n_agents=10, n_words=0), "n_words"),
        (dict(n_agents=10, committed=10), "committed"),
        (dict(n_agents=10, committed=-1), "committed"),
        (dict(n_agents=10, n_words=2, production_bias=[0.5, 0.6]), "probability vector"),
        (dict(n_agents=10, n_words=2, production_bias=[1.5, -0.5]), "non-negative"),
        (dict(n_agents=10, n_words=3, production_bias=[0.5, 0.5]), "one weight per name"),
        (dict(n_agents=10, production_bias=[0.5, 0.5]), "finite pool"),
        (dict(n_agents=10, beta=1.5), "beta"),
        (dict(n_agents=10, stop="never"), "stop"),
        (dict(n_agents=10, stop="flip"), "committed"),
        (dict(n_agents=10, n_words=3, initial="consensus:7"), "initial"),
        (dict(n_agents=10, n_words=3, initial="consensus:Z"), "unknown name"),
        (dict(n_agents=10, n_words=3, initial=5), "initial"),
        (dict(n_agents=4, graph=nx.empty_graph(4)), "isolated"),
        (dict(n_agents=5, graph=nx.path_graph(4)), "nodes"),
        (dict(n_agents=4, graph=nx.DiGraph(nx.cycle_graph(4))), "directed"),
        (dict(n_agents=10, invent="forget"), "invent"),
    ],
)
def test_bad_input(kw, match):
    n = kw.pop("n_agents")
    with pytest.raises(ValueError, match=match):
        minimal_naming_game(n, **kw)


def test_bad_types():
    with pytest.raises(TypeError):
        minimal_naming_game(10.5)
    with pytest.raises(TypeError):
        minimal_naming_game(10, graph="complete")
    with pytest.raises(TypeError, match="per_interaction"):
        minimal_naming_game(10, per_interaction=1)


@pytest.mark.parametrize("game", ["naming", "strategy"])
def test_in_place_ragged_outputs_equal_the_chunked_ones(monkeypatch, game):
    """The serial path appends rounds in place (growing its outputs twice here); the chunked path
    copies them from per-chunk buffers: identical results."""
    import normlab.theory.memory_game as mg
    import normlab.theory.naming_game as ng
    from normlab.theory import strategy_game

    def play():
        if game == "naming":
            return minimal_naming_game(10, n_words=3, n_runs=400, stop="max", max_interactions=10 * 150, rng=4,
                                       progress=False)
        return strategy_game("best_response", n_agents=10, memory=3, n_runs=400, stop="max",
                             max_interactions=10 * 150 + 7, rng=4, progress=False)

    a = play()
    monkeypatch.setattr(ng, "_ng_batch_ragged", None)
    monkeypatch.setattr(mg, "_sg_batch_ragged", None)
    b = play()
    assert a.round_offsets[-1] == 400 * (151 if game == "strategy" else 150)  # > the first 2**14 rows
    for k in ("round_offsets", "round_count", "round_success", "round_n_words", "round_n_distinct",
              "round_production", "round_production_uncommitted", "n_interactions", "t_max", "winner"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k
