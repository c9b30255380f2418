"""The runner's per-interaction draws (issue 23, lean runner): the integer-arithmetic replica of
numpy's SeedSequence -> PCG64 -> Generator (`_FastDraws`) gives bit for bit what the numpy
reference (`Game._draws_numpy`) gives, for every seed shape, population, pool size and neighbour
table -- the seeded streams of journals and tables do not change."""

from __future__ import annotations

import types

import numpy as np
import pytest

from normlab.llm_runs.runner.game import Game


def _game(entropy, key, n, w, nbrs=None, order="own"):
    s = types.SimpleNamespace(n_agents=n, name_order=order)
    return types.SimpleNamespace(s=s, ss=np.random.SeedSequence(entropy, spawn_key=key), nbrs=nbrs,
                                 names=[f"n{k}" for k in range(w)], _prefix={})


def _both(g, run, t):
    fast = Game.draws(g, run, t)
    assert run in g._prefix  # the integer-arithmetic path, not the numpy fallback
    ref = Game._draws_numpy(g, run, t)
    return fast, ref


def _same(fast, ref):
    (i, j, (oi, oj), u, seeds), (ri, rj, (roi, roj), ru, rseeds) = fast, ref
    assert (i, j) == (int(ri), int(rj))
    assert list(oi) == [int(x) for x in roi] and list(oj) == [int(x) for x in roj]
    assert [float(x).hex() for x in u] == [float(x).hex() for x in ru]
    assert [int(x) for x in seeds] == [int(x) for x in rseeds]
    assert all(type(x) is int for x in (i, j, *oi, *oj, *seeds)) and all(type(x) is float for x in u)


@pytest.mark.parametrize("entropy,key", [
    (1, ()), (0, (0,)), (12345, (3,)), (2**128 - 1, (7, 9)), (2**160 + 17, ()),
    (np.random.SeedSequence(99).entropy, (2**40, 5)),
])
@pytest.mark.parametrize("n,w,order", [(2, 2, "own"), (3, 1, "own"), (200, 2, "own"), (200, 5, "shared"),
                                       (10**6, 12, "own"), (2**31 + 5, 3, "own"), (2**32 - 1, 2, "own")])
def test_fast_draws_equal_numpy(entropy, key, n, w, order):
    g = _game(entropy, key, n, w, order=order)
    g._draws_numpy = lambda run, t: Game._draws_numpy(g, run, t)
    for run in (0, 1, 2**33 + 1):
        for t in (0, 1, 2, 77, 4095, 2**32, 2**40 + 3):
            _same(*_both(g, run, t))


def test_fast_draws_equal_numpy_with_neighbours():
    rng = np.random.default_rng(0)
    n = 50
    nbrs = [np.sort(rng.choice(n, size=k, replace=False)) for k in rng.integers(1, 9, size=n)]
    g = _game(2024, (1,), n, 3, nbrs=nbrs)
    g._draws_numpy = lambda run, t: Game._draws_numpy(g, run, t)
    for run in range(3):
        for t in range(300):
            _same(*_both(g, run, t))


def test_fast_draws_many_interactions():
    """A long stretch of one run (rejections in the bounded draws included: n near 2**31)."""
    for n in (200, 2**31 - 3):
        g = _game(np.random.SeedSequence().entropy, (4,), n, 2)
        g._draws_numpy = lambda run, t: Game._draws_numpy(g, run, t)
        for t in range(2000):
            _same(*_both(g, 1, t))
