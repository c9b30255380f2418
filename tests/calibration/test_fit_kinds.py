"""The registry of fit kinds: every place that names the strategy models reads it, a new family is
one module plus one registration line, and ``normlab calibrate`` on a shipped table prints exactly
the stored numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

import normlab.calibration as cal
from normlab.calibration import (
    FIT_KINDS,
    MODELS,
    FitFamily,
    StrategyFit,
    calibrate,
    compare_models,
    counts_from_log,
    fit_kind_names,
    fit_strategy,
    load_fit,
    predict,
    register_fit_kind,
    unregister_fit_kind,
)
from normlab.calibration.fit_kinds import DEFAULT, fit_family
from normlab.schema import GameLog
from normlab.theory import StrategyTable, strategy_game
import _paths  # the repository's and tests/' folders (tests/_paths.py)

DATA = _paths.DATA


def test_every_place_naming_the_models_reads_the_registry():
    from normlab.calibration import bayes, posterior
    from normlab.calibration._cli import register
    from normlab.cli import build_parser

    assert fit_kind_names() == MODELS == bayes.MODELS == posterior.KINDS == tuple(FIT_KINDS)
    assert {"empirical", "logit_symmetric", "logit", "hierarchical"} <= set(MODELS)  # the built-ins; a new kind adds to them
    assert DEFAULT in FIT_KINDS
    p = build_parser()
    sub = next(a for a in p._actions if a.dest == "command").choices["calibrate"]
    fm = next(a for a in sub._actions if a.dest == "fit_model")
    assert list(fm.choices) == list(FIT_KINDS) and fm.default == DEFAULT
    assert all(k in fm.help and kind.title in fm.help for k, kind in FIT_KINDS.items())
    assert callable(register)
    for k in FIT_KINDS:  # each kind resolves to a family implementing the interface
        assert isinstance(fit_family(k), FitFamily)
    with pytest.raises(ValueError, match="model must be one of"):
        fit_strategy(None, "no_such_kind")


def test_register_rejects_bad_names_and_duplicates():
    with pytest.raises(ValueError, match="registered already"):
        register_fit_kind("empirical", "normlab.calibration.empirical:EMPIRICAL", "again")
    with pytest.raises(ValueError, match="identifier"):
        register_fit_kind("no good", "normlab.calibration.empirical:EMPIRICAL", "x")
    with pytest.raises(ValueError, match="module:ATTRIBUTE"):
        register_fit_kind("toy_x", "normlab.calibration.empirical", "x")
    with pytest.raises(ValueError, match="not registered"):
        unregister_fit_kind("toy_x")


class ToyFamily(FitFamily):
    """A toy family: the table is the counts smoothed by ``prior`` (no uncertainty at all)."""

    conjugate = True
    exact_mean = True

    def fit(self, counts, *, rng=None, meta=None, **kwargs):
        return StrategyFit(kind="toy", names=counts.names, memory=counts.memory, counts=counts.counts, prior=2.0,
                           meta=dict(meta or {}))

    def sample_tables(self, fit, n_draws, g):
        return np.broadcast_to(self.mean_table(fit, n_draws, g), (n_draws,) + fit.counts.shape).copy()

    def mean_table(self, fit, n_draws, rng):
        a = fit.counts + fit.prior
        return a / a.sum(axis=1, keepdims=True)


@pytest.fixture(scope="module")
def small_log():
    t = StrategyTable(np.clip(load_fit("llama3_70b_QM_H3").mean_table().table[:, 1], 0.05, 0.95), memory=3,
                      names=("A", "B"))
    res = strategy_game(t, n_agents=8, memory=3, n_runs=6, stop="streak", max_interactions=8 * 60,
                        record_decisions=True, rng=4)
    lg = res.to_log()
    runs = lg.runs.copy()
    runs["kind"] = "baseline"
    return GameLog(lg.decisions, runs)


@pytest.mark.slow  # 8 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_a_new_family_is_one_module_and_one_registration_line(small_log, tmp_path):
    counts = counts_from_log(small_log, names=("A", "B"))
    register_fit_kind("toy", ToyFamily(), "the smoothed frequencies, without uncertainty")
    try:
        assert "toy" in fit_kind_names() and "toy" in cal.FIT_KINDS
        fit = fit_strategy(counts, "toy")
        assert fit.kind == "toy" and fit.family.__class__ is ToyFamily and np.isinf(fit.n_draws)
        np.testing.assert_allclose(fit.mean_table().table, (counts.counts + 2) / (counts.counts + 2).sum(1)[:, None])
        assert fit.summary()["draws"] is None and "toy" in repr(fit) and fit.coef_frame().empty
        back = StrategyFit.from_json(fit.to_json(tmp_path / "toy.json"))
        np.testing.assert_array_equal(back.sample_tables(3, rng=1), fit.sample_tables(3, rng=1))
        with pytest.raises(ValueError, match="no feature coefficients"):
            fit.to_logit_strategy()
        pred = predict(fit, n_agents=6, n_draws=2, n_runs_consensus=3, n_runs_flip=2, max_rounds=30, strength=False,
                       committed=[0, 2], rng=1)
        assert pred.fit_summary["kind"] == "toy" and set(pred.p_consensus()) == {"A", "B"}
        c = calibrate(small_log, names=("A", "B"), fit_on="all", model="toy", n_draws=2,
                      predict_kwargs=dict(n_runs_consensus=3, n_runs_flip=2, strength=False, committed=[0, 2]), rng=1)
        assert c.fit.kind == "toy" and c.summary()["model"] == "toy"
        cmp = compare_models(counts, models=("empirical", "toy"), k=2, decay=0.7, rng=1)
        assert set(cmp.folds["model"]) == {"empirical", "toy"}
    finally:
        unregister_fit_kind("toy")
    assert "toy" not in fit_kind_names()
    with pytest.raises(ValueError, match="model must be one of"):
        fit_strategy(counts, "toy")
    with pytest.raises(ValueError, match="kind must be one of"):
        StrategyFit(kind="toy", names=("A", "B"), memory=3, counts=counts.counts)


def _same(a, b, path="$"):
    """Equal JSON values: exact except floats, which may differ in the last bits across platforms."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), path
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and not isinstance(b, bool):
        assert b == pytest.approx(a, rel=1e-12, abs=1e-14), path
    else:
        assert a == b, path


@pytest.mark.slow  # 4 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_calibrate_on_a_shipped_table_prints_the_stored_numbers(capsys):
    """``normlab calibrate --table llama31_70b_QM_H5 --n-agents 24 --json --seed 1``: the stored
    output (regenerated when the shipped fits gained their run effects, issue 21: every simulated
    run plays its own effect; the numbers before that were identical across the layout change; and
    when ``predict`` stopped filling the counts above two all-flipped ones with 1, issue 32: only the
    flip curve moved, every critical mass and consensus number stayed; and when predicted convergence
    runs became independent runs, each with its whole effect, issue 32: only the consensus numbers
    moved; and when pull and exploration became the sweep's runs at counts 1 and 0 and the reverse
    direction's mixtures the first direction's, issue 32: only those relative-strength numbers moved,
    the pull and exploration of both directions and M's width and boundary)."""
    from normlab.cli import main

    assert main(["calibrate", "--table", "llama31_70b_QM_H5", "--n-agents", "24", "--json", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    want = (DATA / "calibrate_llama31_70b_QM_H5_N24_seed1.json").read_text()
    _same(json.loads(want), json.loads(out))


def test_saved_results_keep_their_type_tags(tmp_path):
    """The result classes keep their public module in the type tag of a saved result, so folders
    saved before the layout change load unchanged (and the other way round)."""
    fit = load_fit("llama3_70b_QM_H3")
    pred = predict(fit, n_agents=6, n_draws=2, n_runs_consensus=3, n_runs_flip=2, max_rounds=30, strength=False,
                   committed=[0, 2], rng=1)
    for obj, tag in ((pred, "normlab.calibration.prediction:Prediction"),
                     (fit, "normlab.calibration.posterior:StrategyFit")):
        d = obj.save(tmp_path / type(obj).__name__)
        assert json.loads((d / "result.json").read_text())["format"] == tag


def test_a_joint_fit_round_trips_through_json(tmp_path):
    """A fit with run effects in the model keeps its state effects' draws (16-bit quantiles, compressed)
    and its run effects' draws, paired row for row with the table draws, through JSON and thinning."""
    import dataclasses

    from normlab.calibration import RunEffects
    from normlab.calibration.fit.hierarchical import HierarchicalParams
    from normlab.calibration.fit.features import COLUMNS
    from normlab.theory.strategies import n_states

    g = np.random.default_rng(4)
    D, H = 30, 2
    S = n_states(2, H)
    states = np.array([1, 2, 5, 7, 11])
    params = HierarchicalParams(decay=0.7, coef_names=COLUMNS, coef_draws=g.normal(0, 1, (D, len(COLUMNS))),
                                tau_draws=g.uniform(0.2, 1.0, D), delta_states=states,
                                delta_draws=g.normal(0, 1.5, (D, len(states))))
    sample = np.column_stack([np.zeros((D, 2)), g.uniform(0, 0.5, (D, 2)), np.zeros(D)])
    eff = RunEffects(sample=sample, kind="joint", n_runs=12, n_decisions=100.0)
    counts = np.zeros((S, 2))
    counts[states] = 5
    fit = cal.StrategyFit(kind="hierarchical", names=("Q", "M"), memory=H, counts=counts, params=params,
                          meta={"run_effects": eff.to_dict()})
    back = cal.StrategyFit.from_json(fit.to_json(tmp_path / "joint.json"))
    np.testing.assert_array_equal(back.params.delta_states, states)
    rng_ = np.ptp(params.delta_draws, axis=0)
    assert (np.abs(back.params.delta_draws - params.delta_draws) <= rng_ / 131070 + 1e-6).all()
    np.testing.assert_array_equal(RunEffects.from_dict(back.meta["run_effects"]).sample, sample)
    a, ia = fit.sample_tables(50, rng=3, return_index=True)
    b, ib = back.sample_tables(50, rng=3, return_index=True)
    np.testing.assert_array_equal(ia, ib)
    assert np.abs(a - b).max() < 1e-4
    # the observed states' logits are the stored draws': X beta + delta of the draw the index names
    lg = np.log(a[:, states, 1] / a[:, states, 0])
    np.testing.assert_allclose(lg, params.coef_draws[ia] @ fit.design()[states].T + params.delta_draws[ia],
                               atol=1e-9)
    th = fit.family.thin(fit, 10)
    keep = np.linspace(0, D - 1, 10).round().astype(int)
    np.testing.assert_array_equal(th.params.delta_draws, params.delta_draws[keep])
    np.testing.assert_array_equal(RunEffects.from_dict(th.meta["run_effects"]).sample, sample[keep])
    with pytest.raises(ValueError, match="stored state effects"):
        cal.StrategyFit(kind="hierarchical", names=("Q", "M"), memory=H, counts=counts,
                        params=dataclasses.replace(params, delta_draws=params.delta_draws[:5]))
