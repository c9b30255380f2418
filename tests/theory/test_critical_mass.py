"""Critical-mass sweeps: binomial CIs, location, executor independence (threads, dask LocalCluster)."""

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pytest

from normlab.theory import clopper_pearson, critical_mass, locate_critical_mass

KW = dict(n_agents=100, n_runs=30, within_rounds=200, strategy="best_response", memory=4, rng=5, progress=False)


def test_clopper_pearson_exact_values():
    lo, hi = clopper_pearson([0, 10, 5], [10, 10, 10])
    assert lo[0] == 0 and np.isclose(hi[0], 1 - 0.025 ** (1 / 10))
    assert hi[1] == 1 and np.isclose(lo[1], 0.025 ** (1 / 10))
    assert np.isclose(lo[2], 0.187086, atol=1e-6) and np.isclose(hi[2], 0.812914, atol=1e-6)


def test_locate_critical_mass():
    c = [2, 4, 6, 8]
    est, interp, low, high = locate_critical_mass(c, [0, 0.2, 0.8, 1.0], [0, 0.05, 0.5, 0.7], [0.1, 0.5, 0.95, 1], 0.5)
    assert est == 6 and np.isclose(interp, 5.0) and low == 4 and high == 6
    est, interp, *_ = locate_critical_mass(c, [0, 0, 0, 0], [0] * 4, [0.1] * 4)
    assert np.isnan(est) and np.isnan(interp)


def test_sweep_locates_centola_transition_and_is_executor_independent():
    counts = [6, 9, 11, 13, 16]
    serial = critical_mass("strategy", counts, **KW)
    assert serial.p_flip[0] == 0 and serial.p_flip[-1] == 1
    assert 9 <= serial.estimate <= 13  # mean field: C*_4 = 0.111
    assert (serial.ci_low <= serial.p_flip).all() and (serial.p_flip <= serial.ci_high).all()
    with ThreadPoolExecutor(2) as ex:
        threaded = critical_mass("strategy", counts, executor=ex, **KW)
    assert np.array_equal(serial.n_flips, threaded.n_flips)
    df = serial.to_frame()
    assert list(df["committed"]) == counts and df["fraction"].iloc[0] == 0.06


@pytest.mark.slow
def test_sweep_on_dask_local_cluster():
    distributed = pytest.importorskip("dask.distributed")
    counts = [6, 11, 16]
    serial = critical_mass("strategy", counts, **KW)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cl:
        with distributed.Client(cl) as client:
            remote = critical_mass("strategy", counts, executor=client.get_executor(), **KW)
    assert np.array_equal(serial.n_flips, remote.n_flips)


def test_fractions_and_minimal_model():
    res = critical_mass("minimal", [0.05, 0.3], n_agents=60, n_runs=10, within_rounds=60, rng=1, progress=False)
    assert list(res.committed) == [3, 18]
    assert res.p_flip[1] == 1.0


def test_fork_pool_refused():
    with ProcessPoolExecutor(1, mp_context=mp.get_context("fork")) as ex:
        with pytest.raises(ValueError, match="fork"):
            critical_mass("minimal", [3], n_agents=20, executor=ex, progress=False)


@pytest.mark.parametrize(
    "args, kw, match",
    [
        (("minimal", [0]), dict(n_agents=20), "committed counts"),
        (("minimal", [25]), dict(n_agents=20), "committed counts"),
        (("minimal", [2.5]), dict(n_agents=20), "counts or fractions"),
        (("strategy", [2]), dict(n_agents=20), "strategy="),
        (("bogus", [2]), dict(n_agents=20), "model must be"),
        (("minimal", [2]), dict(n_agents=20, level=1.0), "level"),
        (("minimal", [2]), dict(n_agents=20, stop="max"), "set by critical_mass"),
    ],
)
def test_bad_input(args, kw, match):
    with pytest.raises(ValueError, match=match):
        critical_mass(*args, progress=False, **kw)


def test_generic_sweep_grid_and_executor_independence():
    from functools import partial

    from normlab.theory import minimal_naming_game, strategy_game, sweep

    res = sweep(minimal_naming_game, {"n_agents": [50, 100], "n_words": [2, 5]}, n_runs=8, rng=3, progress=False)
    assert len(res.params) == 4 and list(res.params.columns) == ["point", "n_agents", "n_words"]
    df = res.to_frame()
    assert len(df) == 4 * 8 and {"n_agents", "n_words", "consensus_time"} <= set(df.columns)
    s = res.summary()
    # bigger populations take longer to agree
    by_n = s.groupby("n_agents")["mean_consensus_time"].mean()
    assert by_n.loc[100] > by_n.loc[50]
    with ThreadPoolExecutor(2) as ex:
        again = sweep(minimal_naming_game, {"n_agents": [50, 100], "n_words": [2, 5]}, n_runs=8, rng=3,
                      executor=ex, progress=False)
    assert np.array_equal(again.to_frame()["consensus_time"], df["consensus_time"])
    sg = sweep(partial(strategy_game, "best_response"), {"memory": [2, 4]}, n_agents=20, n_runs=4, rng=1,
               progress=False)
    assert set(sg.success_rate()["memory"]) == {2, 4}
    with pytest.raises(ValueError, match="both swept and fixed"):
        sweep(minimal_naming_game, {"n_agents": [10]}, n_agents=10)
    with pytest.raises(ValueError, match="non-empty"):
        sweep(minimal_naming_game, {"n_agents": []})


def test_sweep_reports_the_published_rule_too():
    counts = [6, 9, 11, 13, 16]
    res = critical_mass("strategy", counts, **KW)
    ok = res.published_success
    assert ok.dtype == bool and len(ok) == len(counts)
    assert res.published == min(c for c, o in zip(counts, ok) if o)
    assert ((res.published_last3 >= 2.849) == ok).all()
    assert not ok[0] and ok[-1]  # nobody flips at 6, everybody at 16 (mean field C*_4 = 0.111)
    assert abs(res.published - res.estimate) <= 4
    assert {"published_last3", "published_success"} <= set(res.to_frame().columns)
