"""The rng helper: accepted inputs, child seeds identical to SeedSequence.spawn, clear errors."""

import numpy as np
import pytest

from normlab._rng import as_generator, as_seed_sequence, child_seed_words, kernel_seeds, run_seeds


@pytest.mark.parametrize(
    "ss",
    [
        np.random.SeedSequence(1),
        np.random.SeedSequence(2**100 + 7),
        np.random.SeedSequence(5).spawn(3)[2],
        np.random.SeedSequence([1, 2, 3, 4, 5, 6]),
        np.random.SeedSequence(0),
        np.random.SeedSequence(5, pool_size=8),
    ],
)
def test_child_seed_words_equal_numpy_spawn(ss):
    fast = child_seed_words(ss, 300)
    slow = kernel_seeds([np.random.SeedSequence(ss.entropy, spawn_key=ss.spawn_key + (k,), pool_size=ss.pool_size) for k in range(300)])
    assert np.array_equal(fast, slow)
    assert np.array_equal(fast, kernel_seeds(ss.spawn(300)))
    assert np.array_equal(child_seed_words(ss, 5, start=7), fast[7:12])


def test_inputs_normalised():
    assert isinstance(as_generator(None), np.random.Generator)
    g = np.random.default_rng(3)
    assert as_generator(g) is g
    assert as_seed_sequence(7).entropy == 7
    a, wa = run_seeds(7, 4)
    b, wb = run_seeds(np.random.SeedSequence(7), 4)
    assert np.array_equal(wa, wb)
    # a Generator gives a fresh child each call, so repeated calls differ
    g = np.random.default_rng(3)
    assert not np.array_equal(run_seeds(g, 2)[1], run_seeds(g, 2)[1])


@pytest.mark.parametrize("bad, exc", [(-1, ValueError), (1.5, TypeError), ("3", TypeError), (True, TypeError)])
def test_bad_rng(bad, exc):
    with pytest.raises(exc, match="rng"):
        as_seed_sequence(bad)
