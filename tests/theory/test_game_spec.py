"""The theory's value objects: GameSpec / RunLength (one vocabulary of run lengths), NamingRules,
DesignPlan, LTRHAParams; the engines that take them play the runs of the keyword calls."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from normlab.theory import (
    GameSpec, NamingRules, RunLength, StrategyTable, minimal_naming_game, play_naming_game, play_strategy_game,
    strategy_game,
)
from normlab.theory.design import DesignPlan, strategy_design
from normlab.theory.itcmas import LTRHAParams, play_ltrha, simulate_ltrha
from normlab.theory.spec import Network
from normlab.theory.strategies import n_states


def test_run_length_converts_between_interactions_and_rounds():
    r = RunLength("streak", 40, "rounds")
    assert (r.interactions(24), r.rounds(24), r.code) == (960, 40, 3)
    i = RunLength("max", 1001)
    assert (i.interactions(10), i.rounds(10)) == (1001, 101)
    assert RunLength().interactions(10, default=7) == 7 and RunLength().unit == "interactions"


@pytest.mark.parametrize("kw, err, msg", [
    (dict(stop="x"), ValueError, "stop must be one of"),
    (dict(cap=0), ValueError, "max_interactions must be >= 1; got 0"),
    (dict(cap=0, unit="rounds"), ValueError, "max_rounds must be >= 1; got 0"),
    (dict(cap=1.5), TypeError, "max_interactions must be an int; got float 1.5"),
    (dict(unit="steps"), ValueError, "unit must be one of ('interactions', 'rounds'); got 'steps'"),
])
def test_run_length_errors(kw, err, msg):
    with pytest.raises(err) as info:
        RunLength(**kw)
    assert str(info.value).startswith(msg)


@pytest.mark.parametrize("kw, err, msg", [
    (dict(n_agents=1), ValueError, "n_agents must be >= 2; got 1"),
    (dict(n_agents=10, memory=0), ValueError, "memory must be >= 1; got 0"),
    (dict(n_agents=10, flip_threshold=0), ValueError, "flip_threshold must be in (0, 1]; got 0"),
    (dict(n_agents=10, order_bias="g"), TypeError, "order_bias must be a number"),
    (dict(n_agents=10, name_order="x"), ValueError, "name_order must be one of ('independent', 'shared')"),
    (dict(n_agents=10, committed=10), ValueError, "committed count must be in [0, n_agents - 1]"),
    (dict(n_agents=10, n_names=2, committed_name=2), ValueError, "committed_name must be <= 1; got 2"),
    (dict(n_agents=10, graph=nx.path_graph(3)), ValueError, "graph has 3 nodes but n_agents=10"),
    (dict(n_agents=10, run="consensus"), TypeError, "run must be a RunLength"),
])
def test_game_spec_errors(kw, err, msg):
    with pytest.raises(err) as info:
        GameSpec(**kw)
    assert str(info.value).startswith(msg)


def test_game_spec_normalises():
    g = nx.cycle_graph(6)
    s = GameSpec(6, committed=np.int64(2), graph=g)
    assert s.committed == 2 and s.committed_mask().tolist() == [False] * 4 + [True] * 2
    assert isinstance(s.graph, Network) and s.graph.n_edges == 6 and GameSpec(6, graph=s.graph).graph is s.graph
    assert GameSpec(6, committed=np.array([0, 3])).committed == (0, 3)


def test_naming_engine_plays_the_keyword_runs():
    kw = dict(n_words=3, n_runs=5, committed=2, stop="flip", initial="consensus:0", max_interactions=3000, rng=4)
    a = minimal_naming_game(20, production_bias=[0.5, 0.3, 0.2], beta=0.7, **kw)
    spec = GameSpec(20, n_names=3, committed=2, initial="consensus:0", run=RunLength("flip", 150, "rounds"))
    b = play_naming_game(spec, NamingRules(production_bias=[0.5, 0.3, 0.2], beta=0.7), n_runs=5, rng=4)
    np.testing.assert_array_equal(a.n_interactions, b.n_interactions)
    np.testing.assert_array_equal(a.round_production, b.round_production)
    assert (a.committed_name, a.max_interactions, a.params) == (b.committed_name, b.max_interactions, b.params)


def test_strategy_engine_plays_the_keyword_runs():
    H = 2
    table = StrategyTable(np.full((n_states(2, H), 2), 0.5), memory=H, names=("Q", "M"))
    g = nx.random_regular_graph(4, 12, seed=1)
    a = strategy_game(table, n_agents=12, memory=H, n_runs=4, committed=3, initial="consensus:Q", graph=g,
                      stop="flip", max_interactions=12 * 50, rng=2)
    spec = GameSpec(12, memory=H, committed=3, initial="consensus:Q", graph=g, run=RunLength("flip", 50, "rounds"))
    b = play_strategy_game(spec, table, n_runs=4, rng=2)
    np.testing.assert_array_equal(a.n_interactions, b.n_interactions)
    np.testing.assert_array_equal(a.round_success, b.round_success)
    assert (a.committed_name, a.max_interactions, a.names, a.params) == (b.committed_name, b.max_interactions,
                                                                         b.names, b.params)


def test_naming_rules_errors_keep_their_order():
    with pytest.raises(ValueError, match="invent must be 'keep' or 'discard'"):
        NamingRules(invent="x", beta=5)
    with pytest.raises(TypeError, match="bias_empty must be True or False"):
        NamingRules(bias_empty=1)
    with pytest.raises(ValueError, match="bias_empty=True needs a production_bias"):
        NamingRules(bias_empty=True, beta=5)
    with pytest.raises(ValueError, match=r"beta must be a probability in \[0, 1\]"):
        NamingRules(beta=5)


def test_design_plan_and_keywords_give_the_same_design():
    H, N = 2, 8
    table = np.full((1, n_states(2, H), 2), 0.5)
    seeds = np.random.default_rng(1).integers(1, 2**63, size=(1, 4, 3, 4), dtype=np.uint64)
    kw = dict(consensus=True, n_cons=3, cons_rounds=20, directions=[(0, 1)], counts=[1, 2], n_flip=3, n_design=3,
              within=10, window=20, monotone=False, level=0.5, flip_sum=2.849, strength=False, mix_kx=[])
    a = strategy_design(table, seeds, n_agents=N, memory=H, **kw)
    b = strategy_design(table, seeds, N, H, DesignPlan(**kw))
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k], equal_nan=True) for k in a)
    with pytest.raises(TypeError, match="not both"):
        strategy_design(table, seeds, N, H, DesignPlan(**kw), n_cons=2)
    with pytest.raises(ValueError, match="name_order must be a pair"):
        DesignPlan(**kw, name_order="shared")


def test_ltrha_params_and_engine():
    p = LTRHAParams(n_agents=5, n_steps=8, n_envs=2, rate_input="share")
    assert p.share and p.initial_resources.tolist() == [1.0] * 5 and p.agent_names == tuple(f"a{k}" for k in range(5))
    a = simulate_ltrha(n_agents=5, n_steps=8, n_envs=2, rate_input="share", n_runs=2, rng=3)
    b = play_ltrha(p, n_runs=2, rng=3)
    np.testing.assert_array_equal(a.resources, b.resources)
    with pytest.raises(ValueError, match="s_min must be <= s_max"):
        LTRHAParams(s_min=0.6, s_max=0.5, floor=9.0)
