"""Memory-H strategy game: state encoding, kernel = Python twin, invariants, Centola critical mass.

References: Flint Ashery et al., Sci. Adv. 11, eadu9368 (2025) (Table 1, Fig. 3, Fig. S8);
Centola et al., Science 360, 1116 (2018) (C*_M values in ../shared/VALIDATION.md).
"""

import networkx as nx
import numba
import numpy as np
import pytest
from numba import njit

from normlab._rng import run_seeds
from normlab.schema import parse_memory_state
from normlab.theory import (
    BestResponse,
    FunctionStrategy,
    LogitStrategy,
    StrategyTable,
    WinStayLoseShift,
    centola_critical_mass,
    strategy_game,
)
from normlab.theory._common import STOP_CODES
from normlab.theory._reference import sg_run_reference
from normlab.theory.strategies import decode_state, encode_state, n_states, resolve_strategy, state_offsets


@njit
def copy_last_partner(own, partner, W, params, out):
    if own.shape[0] == 0:
        for q in range(W):
            out[q] = 1.0 / W
        return
    for q in range(W):
        out[q] = params[0] / W
    out[partner[-1]] += 1.0 - params[0]


@njit
def broken(own, partner, W, params, out):
    for q in range(W):
        out[q] = 0.7


def assert_matches_twin(strategy, N, H, graph=None, committed=0, initial=None, T=2000, stop="consensus",
                        runs=3, seed=11, W=None):
    res = strategy_game(strategy, n_agents=N, memory=H, n_runs=runs, graph=graph, committed=committed,
                        initial=initial, max_interactions=T, stop=stop, rng=seed, record_decisions=True, n_names=W)
    strat = resolve_strategy(strategy, W)
    _, seeds = run_seeds(seed, runs)
    nbrs = None if graph is None else [[list(graph.nodes).index(v) for v in graph.adj[u]] for u in graph.nodes]
    init = 0 if isinstance(initial, str) and initial == "consensus" else initial
    pairs, names, _ = res.interactions
    for k in range(runs):
        ref = sg_run_reference(seeds[k], strat, N, H, nbrs, list(res.committed), res.committed_name, init, T,
                               STOP_CODES[stop], res.params["flip_threshold"])
        for key, rv in ref["scalars"].items():
            if key == "stop_reason":
                assert STOP_CODES[res.stop_reason[k]] == rv
                continue
            v = getattr(res, key)[k]
            assert (rv == -1) if isinstance(v, float) and np.isnan(v) else v == rv, (key, v, rv)
        a, b = res.round_offsets[k], res.round_offsets[k + 1]
        for key, arr in (("succ", res.round_success), ("nw", res.round_n_words), ("nd", res.round_n_distinct),
                         ("count", res.round_count)):
            assert arr[a:b].tolist() == ref["rounds"][key], key
        assert res.round_production[a:b].tolist() == ref["rounds"]["prod"]
        assert res.round_production_uncommitted[a:b].tolist() == ref["rounds"]["produ"]
        T_k = res.n_interactions[k]
        log = np.concatenate([pairs[k, :T_k], names[k, :T_k]], axis=1)
        assert [tuple(x) for x in log.tolist()] == ref["log"]
    return res


# ---------------------------------------------------------------- state encoding
def test_state_encoding_documented_values():
    assert n_states(2, 5) == 1365 and n_states(2, 1) == 5 and n_states(3, 2) == 1 + 9 + 81
    assert list(state_offsets(2, 3)) == [0, 1, 5, 21]
    assert encode_state([], 2) == 0
    assert [encode_state([(o, p)], 2) for o in (0, 1) for p in (0, 1)] == [1, 2, 3, 4]
    assert encode_state([(0, 0), (0, 0)], 2) == 5 and encode_state([(1, 1), (1, 1)], 2) == 20
    # oldest entry is the most significant digit
    assert encode_state([(0, 1), (0, 0)], 2) == 5 + 1 * 4 + 0


@pytest.mark.parametrize("W, H", [(2, 4), (3, 2), (4, 1)])
def test_state_encoding_roundtrip(W, H):
    for s in range(n_states(W, H)):
        assert encode_state(decode_state(s, W, H), W) == s


def test_table_state_strings_roundtrip_and_frame():
    tab = BestResponse(2).to_table(3, names=["Q", "M"])
    assert tab.state_label(0) == "" and tab.state_label(1) == "Q,Q" and tab.state_label(6) == "Q,Q;Q,M" and tab.state_label(8) == "Q,Q;M,M"
    for s in range(tab.table.shape[0]):
        assert tab.state_index(tab.state_label(s)) == s
    df = tab.to_frame()
    assert len(df) == 2 * n_states(2, 3)
    back = StrategyTable.from_frame(df, memory=3, names=["Q", "M"])
    assert np.array_equal(back.table, tab.table)


def test_relabel_symmetry():
    # best response is symmetric under relabelling; a random table is not (seed 003 Table 1 asymmetry)
    br = BestResponse(2).to_table(3)
    assert np.allclose(br.relabel([1, 0]).table, br.table)
    rnd = StrategyTable(np.random.default_rng(0).uniform(size=n_states(2, 3)), memory=3)
    assert not np.allclose(rnd.relabel([1, 0]).table, rnd.table)
    assert np.allclose(rnd.relabel([1, 0]).relabel([1, 0]).table, rnd.table)
    s = encode_state([(0, 1), (1, 1)], 2)
    s_swapped = encode_state([(1, 0), (0, 0)], 2)
    assert np.allclose(rnd.relabel([1, 0]).table[s_swapped, ::-1], rnd.table[s])


# ---------------------------------------------------------------- kernel == reference twin
RNG = np.random.default_rng(0)
CASES = [
    dict(strategy="best_response", N=12, H=3),
    dict(strategy="best_response", N=20, H=4, committed=4, initial="consensus", stop="flip", T=4000),
    dict(strategy="wsls", N=10, H=2, T=500, stop="max"),
    dict(strategy="best_response", N=12, H=3, W=3),
    dict(strategy=StrategyTable(RNG.uniform(size=341), memory=4), N=12, H=4, T=3000, stop="success95"),
    dict(strategy=StrategyTable(RNG.dirichlet([1, 1, 1], size=91), memory=2), N=9, H=2, T=800, stop="max", committed=2),
    dict(strategy=LogitStrategy([3.0, 0.5, 1.0, 2.0, 2.0, 1.0], [0.0, 0.3], decay=0.6), N=16, H=5, T=3000, stop="streak"),
    dict(strategy=LogitStrategy([3.0, 0.5, 1.0, 2.0, 2.0, 1.0], [0.0, 0.3, -0.2]), N=16, H=3, T=2000, committed=3, initial=1, stop="max"),
    dict(strategy=LogitStrategy(np.array([[3.0, 0.5, 1.0, 2.0, 2.0, 1.0], [1.0, -0.5, 2.0, 1.0, 3.0, 0.5]]), [0.0, -0.3]),
         N=12, H=4, T=1500, initial=np.array([0] * 5 + [1] * 4 + [-1] * 3), stop="success95"),
    # a user function is compiled for this case (10 s): in the slow tier (issue 33)
    pytest.param(dict(strategy=FunctionStrategy(copy_last_partner, 2, params=[0.1]), N=14, H=3, T=2000),
                 marks=pytest.mark.slow, id="FunctionStrategy-N14-H3"),
]


@pytest.mark.filterwarnings("ignore:.*before the stop rule")  # some cases hit their cap on purpose
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['strategy'] if isinstance(c['strategy'], str) else type(c['strategy']).__name__}-N{c['N']}-H{c['H']}")
def test_kernel_equals_twin(case):
    assert_matches_twin(**case)


def test_kernel_equals_twin_on_graph():
    assert_matches_twin("best_response", 20, 3, graph=nx.watts_strogatz_graph(20, 4, 0.2, seed=2), T=4000)


def test_table_and_builtin_kernels_agree():
    # the same strategy as a built-in kind and as a tabulated StrategyTable gives identical runs
    a = strategy_game("best_response", n_agents=30, memory=3, n_runs=8, rng=4)
    b = strategy_game(BestResponse(2).to_table(3), n_agents=30, memory=3, n_runs=8, rng=4)
    c = strategy_game(LogitStrategy([2, 0, 1, 1, 1, 0.5], [0, 0.2]).to_table(3), n_agents=30, memory=3, n_runs=8,
                      rng=4, max_interactions=3000)
    d = strategy_game(LogitStrategy([2, 0, 1, 1, 1, 0.5], [0, 0.2]), n_agents=30, memory=3, n_runs=8, rng=4,
                      max_interactions=3000)
    assert np.array_equal(a.consensus_time, b.consensus_time, equal_nan=True)
    assert np.array_equal(a.round_production, b.round_production)
    assert np.array_equal(c.round_production, d.round_production)


# ---------------------------------------------------------------- invariants and logs
def test_decision_log_memory_states_follow_the_rules():
    res = strategy_game("wsls", n_agents=12, memory=3, n_runs=2, max_interactions=300, stop="max", rng=5,
                        names=["Q", "M"], record_decisions=True)
    log = res.to_log()
    d = log.decisions
    assert len(d) == 2 * 300 * 2 and set(d["name"]) <= {"Q", "M"}
    assert (d["memory_len"] <= 3).all()
    # WSLS is deterministic once memory is non-empty: the choice follows from the last entry
    for state, name in zip(d["memory_state"], d["name"]):
        mem = parse_memory_state(state)
        if mem:
            own, partner = mem[-1]
            assert name == (own if own == partner else partner)
    assert log.runs["n_interactions"].eq(300).all()


@pytest.mark.filterwarnings("ignore:.*before the stop rule")
def test_wsls_conserves_intended_names():
    # After a failure (A, B) the two agents swap names, after a success both stay: the number of
    # agents intending each name is conserved, so deterministic WSLS never reaches consensus (W = 2).
    res = strategy_game("wsls", n_agents=24, memory=2, n_runs=20, max_interactions=24 * 300, rng=8)
    assert np.isnan(res.consensus_time).mean() > 0.9


def test_spontaneous_flip_tracked_without_committed_agents():
    # a strategy that explores name 1 from a full-0 memory and keeps it once seen: the 0 consensus
    # flips on its own, with nobody committed
    S = n_states(2, 2)
    table = np.array([[0.0, 1.0] if any(1 in e for e in decode_state(s, 2, 2)) else [0.7, 0.3] for s in range(S)])
    res = strategy_game(StrategyTable(table, memory=2), n_agents=20, memory=2, initial="consensus:0",
                        committed_name=1, stop="flip", n_runs=10, max_interactions=20 * 200, rng=3)
    assert res.committed.sum() == 0 and res.flipped().all()


def test_mixed_initial_memories():
    init = np.array([0] * 15 + [1] * 5)
    res = strategy_game("best_response", n_agents=20, memory=3, initial=init, n_runs=30, rng=2)
    assert (res.winner == 0).mean() > 0.8  # a 75% majority wins under best response
    assert res.params["initial_label"] == "custom"


@pytest.mark.filterwarnings("ignore:.*before the stop rule")
def test_absorbing_and_flip_bookkeeping():
    res = strategy_game("best_response", n_agents=40, memory=3, n_runs=10, rng=1)
    assert res.absorbing.all()
    noisy = strategy_game(StrategyTable(np.full(n_states(2, 2), 0.5), memory=2), n_agents=6, memory=2, n_runs=10,
                          rng=1, max_interactions=20_000)
    assert not noisy.absorbing.any()
    flip = strategy_game("best_response", n_agents=50, memory=3, committed=15, initial="consensus", stop="flip",
                         n_runs=10, rng=2, max_interactions=50 * 100)
    assert flip.flipped().all() and (flip.flip_times() % 50 == 0).all()


def test_read_only_table_reuses_the_compiled_kernel():
    from normlab.theory.memory_game import _sg_batch_serial

    t = np.random.default_rng(2).uniform(size=n_states(2, 2))
    a = strategy_game(StrategyTable(t, memory=2), n_agents=8, memory=2, n_runs=3, max_interactions=200, stop="max", rng=1)
    n_sigs = len(_sg_batch_serial.signatures)
    ro = StrategyTable(t, memory=2)
    ro.table.setflags(write=False)
    b = strategy_game(ro, n_agents=8, memory=2, n_runs=3, max_interactions=200, stop="max", rng=1)
    assert len(_sg_batch_serial.signatures) == n_sigs
    assert a.round_success.tolist() == b.round_success.tolist()


def test_one_compiled_specialisation_per_kernel():
    """Read-only, Fortran-ordered or int32 inputs, graphs, recorded decisions, both batch paths and
    the prediction design reuse one compiled version of every theory kernel (a second one costs a
    compile, and a cache entry, each)."""
    import numba

    import normlab.theory._batch as batch
    import normlab.theory.memory_game as mg
    import normlab.theory.naming_game as ng
    import normlab.theory.strategies as st
    from normlab.calibration import predict
    from normlab.theory import minimal_naming_game

    t = np.random.default_rng(2).uniform(size=n_states(2, 2))
    ro = StrategyTable(t, memory=2)
    ro.table.setflags(write=False)
    fortran = StrategyTable(np.asfortranarray(np.column_stack([t, 1 - t])), memory=2)
    for table in (StrategyTable(t, memory=2), ro, fortran):
        for kw in (dict(committed=np.array([0, 1], np.int32)), dict(committed=[2], initial="consensus", stop="flip"),
                   dict(initial=np.array([0, 1, -1, 0, 1, 1, 0, 0], np.int32), record_decisions=True),
                   dict(graph=nx.cycle_graph(8), rng=np.int32(3))):
            strategy_game(table, n_agents=8, memory=2, n_runs=3, max_interactions=200, **{"rng": 1, **kw})
    strategy_game("best_response", n_agents=8, memory=2, n_runs=3, stop="max", max_interactions=50, rng=1)
    for kw in (dict(), dict(n_words=2, production_bias=[0.3, 0.7]), dict(graph=nx.path_graph(10)),
               dict(n_words=2, committed=np.array([1], np.int32), initial=np.zeros(10, np.int32), stop="flip"),
               dict(n_words=3, per_interaction=True)):
        minimal_naming_game(10, n_runs=3, rng=1, progress=False, **kw)
    predict(ro, n_agents=6, n_draws=2, n_runs_consensus=2, n_runs_flip=2, max_rounds=20, rng=1)
    for mod in (mg, ng, batch, st):  # kernels called only from other kernels show 1 or, if cached, 0
        for name, obj in vars(mod).items():
            if isinstance(obj, numba.core.registry.CPUDispatcher) and obj.__module__ == mod.__name__:
                assert len(obj.signatures) <= 1, (name, obj.signatures)
    for k in (mg._sg_batch_ragged, mg._sg_batch_serial, mg._sg_design, ng._ng_batch_ragged, ng._ng_batch_serial,
              batch._pack_rows):
        assert len(k.signatures) == 1, k


def test_reproducible_thread_and_kernel_independent(monkeypatch):
    import normlab.theory._batch as ng

    kw = dict(n_agents=30, memory=4, n_runs=40, committed=4, initial="consensus", stop="max", max_interactions=1500)
    monkeypatch.setattr(ng, "PARALLEL_MIN_WORK", 0)  # force the parallel kernel
    a = strategy_game("best_response", rng=3, **kw)
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)  # parallel kernel on one thread is skipped: serial kernel
        b = strategy_game("best_response", rng=3, **kw)
    finally:
        numba.set_num_threads(old)
    monkeypatch.setattr(ng, "PARALLEL_MIN_WORK", 10**18)  # force the serial kernel
    c = strategy_game("best_response", rng=3, **kw)
    for other in (b, c):
        assert np.array_equal(a.round_production_uncommitted, other.round_production_uncommitted)
        assert np.array_equal(a.round_success, other.round_success)


# ---------------------------------------------------------------- published theory
@pytest.mark.slow
@pytest.mark.parametrize("M", [4, 6])
def test_centola_flip_rises_sharply_near_critical_mass(M):
    # VALIDATION.md: C*_M = 0.111 (M = 3-4), 0.165 (M = 5-6). Finite N = 200 blurs the fold a little.
    assert abs(centola_critical_mass(M) - {4: 0.111, 6: 0.165}[M]) < 5e-4
    c_star = centola_critical_mass(M)
    N = 200
    kw = dict(n_agents=N, memory=M, n_runs=40, initial="consensus", stop="flip", max_interactions=N * 400, rng=M)
    below = strategy_game("best_response", committed=int(round((c_star - 0.04) * N)), **kw)
    above = strategy_game("best_response", committed=int(round((c_star + 0.04) * N)), **kw)
    assert below.flipped().mean() <= 0.1
    assert above.flipped().mean() >= 0.9


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_centola_mean_field_table():
    expected = {3: 0.111, 5: 0.165, 7: 0.199, 9: 0.223, 11: 0.242, 13: 0.257, 19: 0.288, 20: 0.288}
    for M, v in expected.items():
        assert abs(centola_critical_mass(M) - v) < 6e-4


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    "strategy, kw, exc, match",
    [
        ("best_response", dict(n_agents=1, memory=3), ValueError, "n_agents"),
        ("best_response", dict(n_agents=10, memory=0), ValueError, "memory"),
        ("best_response", dict(n_agents=10, memory=3, committed=10), ValueError, "committed"),
        ("nope", dict(n_agents=10, memory=3), ValueError, "unknown strategy"),
        (42, dict(n_agents=10, memory=3), TypeError, "Strategy"),
        (StrategyTable(np.full(21, 0.5), memory=2), dict(n_agents=10, memory=3), ValueError, "H=2"),
        ("best_response", dict(n_agents=10, memory=3, names=["A", "B", "C"]), ValueError, "names"),
        ("best_response", dict(n_agents=10, memory=3, committed_name="C", names=["A", "B"]), ValueError, "committed_name"),
        ("best_response", dict(n_agents=4, memory=3, initial=[0, 1, 2, -1]), ValueError, "initial name indices"),
        ("best_response", dict(n_agents=4, memory=3, initial=[0, 1]), ValueError, "initial as an array"),
        ("best_response", dict(n_agents=10, memory=3, initial="consensus:Z"), ValueError, "unknown name"),
        ("best_response", dict(n_agents=10, memory=3, stop="flip"), ValueError, "committed"),
        (FunctionStrategy(broken, 2), dict(n_agents=10, memory=2, max_interactions=50), ValueError, "invalid probability vector"),
    ],
)
def test_bad_input(strategy, kw, exc, match):
    with pytest.raises(exc, match=match):
        strategy_game(strategy, **kw)


@pytest.mark.parametrize(
    "table, kw, match",
    [
        (np.full((20, 2), 0.5), dict(memory=2), "21 rows"),
        (np.full(21, 1.5), dict(memory=2), r"\[0, 1\]"),
        (np.full((21, 2), 0.4), dict(memory=2), "sum to 1"),
        (np.full((21, 2), 0.5), dict(memory=0), "memory"),
        (np.full((21, 2), np.nan), dict(memory=2), r"\[0, 1\]"),
    ],
)
def test_bad_tables(table, kw, match):
    with pytest.raises(ValueError, match=match):
        StrategyTable(table, **kw)


def test_bad_strategy_objects():
    with pytest.raises(TypeError, match="njit"):
        FunctionStrategy(lambda *a: None, 2)
    with pytest.raises(ValueError, match="coef"):
        LogitStrategy([1.0], [0.0, 0.0])
    with pytest.raises(ValueError, match="decay"):
        LogitStrategy(np.zeros(6), [0.0, 0.0], decay=0.0)


# ---------------------------------------------------------------- mixed populations
def _two_tables(H=2, seed=5):
    rng = np.random.default_rng(seed)
    S = n_states(2, H)
    return [StrategyTable(np.column_stack([p, 1 - p]), memory=H) for p in rng.uniform(0.05, 0.95, (2, S))]


def test_mixed_population_of_one_table_is_the_single_table_game():
    t = _two_tables()[0]
    kw = dict(n_agents=9, memory=2, n_runs=6, committed=2, initial="consensus", stop="flip", max_interactions=900,
              rng=8, record_decisions=True)
    one = strategy_game(t, **kw)
    for groups in ([4, 5], np.array([0, 1, 0, 1, 1, 0, 0, 1, 1], np.int32)):
        mixed = strategy_game([t, t], groups=groups, **kw)
        for k in ("round_success", "round_production", "round_n_words", "round_offsets", "flip_time", "n_interactions"):
            assert np.array_equal(getattr(one, k), getattr(mixed, k), equal_nan=True), k
        assert np.array_equal(one.interactions[1], mixed.interactions[1])
    assert mixed.params["groups"] == [0, 1, 0, 1, 1, 0, 0, 1, 1] and one.params["groups"] is None
    assert mixed.summary()["group_sizes"] == [4, 5] and "group_sizes" not in one.summary()
    assert mixed.summary()["strategies"] == ["StrategyTable", "StrategyTable"]


@pytest.mark.parametrize("second", ["table", "best_response", "wsls", "logit"])
def test_mixed_population_kernel_equals_twin(second):
    a, b = _two_tables()
    other = {"table": b, "best_response": BestResponse(2), "wsls": WinStayLoseShift(2),
             "logit": LogitStrategy(np.zeros((2, 6)) + 0.4, np.array([0.1, -0.2]), decay=0.8)}[second]
    N, H, T = 10, 2, 1200
    groups = np.array([0, 1] * 5)
    res = strategy_game([a, other], groups=groups, n_agents=N, memory=H, n_runs=3, committed=[9], stop="max",
                        max_interactions=T, rng=4, record_decisions=True)
    _, seeds = run_seeds(4, 3)
    pairs, names, _ = res.interactions
    for k in range(3):
        ref = sg_run_reference(seeds[k], [a, other], N, H, None, list(res.committed), res.committed_name, None, T,
                               STOP_CODES["max"], res.params["flip_threshold"], groups=list(groups))
        lo, hi = res.round_offsets[k], res.round_offsets[k + 1]
        assert res.round_production[lo:hi].tolist() == ref["rounds"]["prod"]
        assert res.round_n_words[lo:hi].tolist() == ref["rounds"]["nw"]
        log = np.concatenate([pairs[k], names[k]], axis=1)
        assert [tuple(x) for x in log.tolist()] == ref["log"]


def test_mixed_population_invariants():
    """A group whose table always says name 0 leaves 0 as the only possible consensus (absorbing
    only if the other group also keeps it: best response does); group sizes = group ids."""
    H = 2
    zero = StrategyTable(np.tile([1.0, 0.0], (n_states(2, H), 1)), memory=H)
    res = strategy_game([zero, "best_response"], groups=[3, 9], n_agents=12, memory=H, n_runs=40, rng=2,
                        max_interactions=12 * 400)
    ok = res.stop_reason == "consensus"
    assert ok.mean() > 0.9 and (res.winner[ok] == 0).all() and res.absorbing[ok].all()
    assert "3 x StrategyTable + 9 x BestResponse" in repr(res)
    ids = strategy_game([zero, "best_response"], groups=[0] * 3 + [1] * 9, n_agents=12, memory=H, n_runs=40, rng=2,
                        max_interactions=12 * 400)
    assert np.array_equal(res.round_success, ids.round_success)
    coin = StrategyTable(np.full((n_states(2, H), 2), 0.5), memory=H)
    mixed = strategy_game([zero, coin], groups=[6, 6], n_agents=12, memory=H, n_runs=5, rng=2, stop="max",
                          max_interactions=12 * 20)
    assert not mixed.absorbing.any()


@pytest.mark.parametrize("kw, match", [
    (dict(strategy=[StrategyTable(np.full((5, 2), 0.5), memory=1)] * 2), "groups="),
    (dict(groups=[1, 2]), "list of strategies"),
    (dict(strategy=["best_response", "wsls"], groups=[3, 4]), "sum to n_agents"),
    (dict(strategy=["best_response", "wsls"], groups=[0, 1, 2, 0, 0, 0]), "group ids"),
    (dict(strategy=["best_response", "wsls"], groups=[0, 1, 1]), "6 group ids"),
    (dict(strategy=["best_response", "wsls"], groups=[0.5, 5.5]), "integer"),
    (dict(strategy=["best_response", BestResponse(3)], groups=[3, 3]), "same names"),
])
def test_mixed_population_bad_input(kw, match):
    kw = {"strategy": "best_response", **kw}
    with pytest.raises((ValueError, TypeError), match=match):
        strategy_game(kw.pop("strategy"), n_agents=6, memory=1, **kw)


def test_function_strategy_is_not_mixed():
    fs = FunctionStrategy(copy_last_partner, n_names=2, params=[0.1])
    with pytest.raises(ValueError, match="cannot be mixed"):
        strategy_game([fs, "best_response"], groups=[3, 3], n_agents=6, memory=1)


# ----------------------------------------------------------------------------- one table per run
def _conformity_tables(R, H, seed):
    """Per-run tables that play the game (memory-following, each run its own strength and shift)."""
    from normlab.theory.strategies import n_states

    g = np.random.default_rng(seed)
    base = BestResponse(2).to_table(H).table[:, 1] * 0.8 + 0.1
    lg = np.log(base) - np.log1p(-base)
    q = 1 / (1 + np.exp(-(g.normal(1, 0.3, (R, 1)) * lg[None, :] + g.normal(0, 0.5, (R, 1)))))
    assert q.shape == (R, n_states(2, H))
    return q


@pytest.mark.parametrize("kw", [
    dict(committed=4, committed_name="M", initial="consensus:Q", stop="flip", max_interactions=24 * 40),
    dict(committed=4, committed_name="M", initial="consensus:Q", stop="flip", max_interactions=24 * 40,
         order_bias=0.4, name_order="shared"),
    dict(stop="streak", max_interactions=24 * 60),
    dict(stop="streak", max_interactions=24 * 60, record_decisions=True),  # the chunked (non-ragged) kernel
])
@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.filterwarnings("ignore:.*reached max_interactions")
def test_per_run_tables_play_each_run_as_its_own_table_would(monkeypatch, kw, parallel):
    """Run k of a per-run call is run k of a call with table k alone (same seed): exact, on the serial,
    ragged and parallel kernels, with and without a first-listed bias."""
    import normlab.theory._batch as batch

    monkeypatch.setattr(batch, "PARALLEL_MIN_WORK", 0 if parallel else 10**18)
    R, H = 12, 3
    q = _conformity_tables(R, H, 1)
    both = dict(n_agents=24, memory=H, names=("Q", "M"), rng=5, **kw)
    res = strategy_game(q, per_run=True, **both)
    tabs = [StrategyTable(np.column_stack([1 - x, x]), memory=H, names=("Q", "M")) for x in q]
    assert res.n_runs == R and "per run" in repr(res)
    as_list = strategy_game(tabs, per_run=True, n_runs=R, **{k: v for k, v in both.items() if k != "names"})
    for k in range(R):
        one = strategy_game(tabs[k], n_runs=R, **both)
        for a in (res, as_list):
            assert a.n_interactions[k] == one.n_interactions[k] and a.winner[k] == one.winner[k], k
            assert np.array_equal(a.round_success[a.round_offsets[k]:a.round_offsets[k + 1]],
                                  one.round_success[one.round_offsets[k]:one.round_offsets[k + 1]]), k
    assert len({tuple(np.round(x, 6)) for x in q}) == R  # the runs really had different tables
    assert len(set(res.winner.tolist())) > 1 if kw["stop"] == "streak" else 0 < res.flipped().sum() < R


@pytest.mark.filterwarnings("ignore:.*reached max_interactions")
def test_per_run_absorbing_is_each_runs_own():
    """A consensus is absorbing when the run's own table plays the winner surely from a full-winner memory."""
    from normlab.theory.strategies import encode_state

    R, H = 6, 2
    q = _conformity_tables(R, H, 2)
    full = [encode_state([(w, w)] * H, 2) for w in (0, 1)]
    q[:3, full[0]], q[:3, full[1]] = 0.0, 1.0  # runs 0-2 absorb at either name, runs 3-5 never do
    res = strategy_game(q, per_run=True, n_agents=10, memory=H, stop="consensus", max_interactions=10 * 400, rng=1)
    done = res.stop_reason == "consensus"
    assert done[:3].all() and done.any()
    assert np.array_equal(res.absorbing, done & (np.arange(R) < 3))


@pytest.mark.parametrize("args, kw, match", [
    ("list3", dict(groups=[5, 5]), "groups"),
    ("list3", dict(n_runs=4), "n_runs=4"),
    ("bad_rows", {}, "probability vectors"),
    ("wrong_states", {}, "states"),
    ("mixed_memory", {}, "memory H=2"),
    ("not_tables", {}, "StrategyTable"),
    ("one_d", {}, "shaped"),
])
def test_per_run_bad_input(args, kw, match):
    from normlab.theory.strategies import n_states

    t = StrategyTable(np.full((n_states(2, 2), 2), 0.5), memory=2)
    bad = np.full((3, n_states(2, 2), 2), 0.5)
    bad[1, 0] = [0.7, 0.7]
    given = {"list3": [t] * 3, "bad_rows": bad, "wrong_states": np.full((3, 5, 2), 0.5),
             "mixed_memory": [t, StrategyTable(np.full((n_states(2, 3), 2), 0.5), memory=3)],
             "not_tables": [t, "best_response"], "one_d": np.full(7, 0.5)}[args]
    with pytest.raises((ValueError, TypeError), match=match):
        strategy_game(given, per_run=True, n_agents=10, memory=2, **kw)
