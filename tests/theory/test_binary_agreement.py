"""Xie et al. (2011) committed minority: mean-field ODE, p_c by bisection, agents vs mean field."""

import numpy as np
import pytest

from normlab.theory import (
    binary_agreement,
    binary_agreement_ode,
    consensus_time_mf,
    critical_fraction,
)


def test_critical_fraction_matches_xie():
    # VALIDATION.md: p_c = 0.09789 (Xie et al., PRE 84, 011130, 2011); acceptance: 0.0979 ± 0.0005
    pc = critical_fraction()
    assert abs(pc - 0.0979) < 5e-4
    assert abs(pc - 0.09789) < 2e-5


def test_ode_conserves_mass_and_has_two_regimes():
    below = binary_agreement_ode(0.08, t_max=2000)
    above = binary_agreement_ode(0.12, t_max=2000)
    for tr in (below, above):
        assert np.allclose(tr.n_A + tr.n_B + tr.n_AB, 1 - tr.p)
        assert (tr.n_AB > -1e-9).all()
    assert below.n_B[-1] > 0.5  # mixed state survives below p_c
    assert above.n_B[-1] < 1e-6 and above.total_A[-1] > 0.999
    df = above.to_frame()
    assert set(df["state"]) == {"A", "B", "AB", "A_total"} and len(df) == 4 * len(above.t)


def test_consensus_time_grows_like_log_n():
    t = [consensus_time_mf(0.15, N) / N for N in (10**3, 10**4, 10**5, 10**6)]
    steps = np.diff(t)
    assert np.all(steps > 0)
    assert np.allclose(steps, steps.mean(), rtol=0.1)  # equal increments per decade = ln N
    with pytest.raises(ValueError, match="below the critical"):
        consensus_time_mf(0.05, 1000)


@pytest.mark.slow
def test_agents_flip_above_but_not_below_pc():
    N = 500
    below = binary_agreement(N, 0.06, n_runs=10, stop="flip", max_interactions=N * 150, rng=1)
    above = binary_agreement(N, 0.14, n_runs=10, stop="flip", max_interactions=N * 150, rng=1)
    assert not below.flipped().any()
    assert above.flipped().all()


def test_agents_follow_mean_field_at_large_n():
    # production share of A (committed + A-only + half of AB) per round vs the ODE at mid-round
    p, N = 0.15, 20_000
    tr = binary_agreement_ode(p, t_max=20, n_points=41)
    res = binary_agreement(N, p, n_runs=2, stop="max", max_interactions=N * 16, rng=3)
    sh = res.production_share(uncommitted=False)
    sim = sh[sh["name"] == "A"].groupby("round")["share"].mean()
    for r in (4, 8, 12, 16):
        k = 2 * r - 1  # t = r - 1/2 on the 0.5-spaced grid
        mf = tr.p + tr.n_A[k] + tr.n_AB[k] / 2
        assert abs(sim.loc[r] - mf) < 0.05, (r, sim.loc[r], mf)


@pytest.mark.parametrize("p", [-0.1, 1.0])
def test_bad_fraction(p):
    with pytest.raises(ValueError, match="committed fraction"):
        binary_agreement_ode(p)
