"""The value objects of calibration (issue 30): PredictSettings, TipSettings, ProbeSettings and the fit
families' parameter dataclasses -- the same checks, messages and order as the keywords they gather,
and the engines taking them give what the keyword functions give."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from normlab.calibration import PredictSettings, ProbeSettings, StrategyFit, TipSettings, load_fit, predict
from normlab.calibration.fit.empirical import EmpiricalParams
from normlab.calibration.fit.hierarchical import HierarchicalParams
from normlab.calibration.fit.logit import LogitParams
from normlab.calibration.fit.posterior import GenericParams
from normlab.calibration.prediction.api import predict_settings, run_prediction


@pytest.mark.parametrize("kw, err, msg", [
    (dict(n_agents=1, n_draws=0, engine="x"), ValueError, "engine must be 'kernel' or 'reference'; got 'x'"),
    (dict(n_agents=6, run_effects="no"), TypeError, "run_effects must be 'fit', a RunEffects or None; got 'no'"),
    (dict(n_agents=6.0, n_draws=0), TypeError, "n_agents must be an int; got float 6.0"),
    (dict(n_agents=1, n_draws=0), ValueError, "n_agents must be in [2, 10,000]"),
    (dict(n_agents=6, n_draws=0, within_rounds=1), ValueError, "n_draws must be >= 1; got 0"),
    (dict(n_agents=6, within_rounds=2), ValueError, "within_rounds must be >= 3; got 2"),
    (dict(n_agents=6, level=1.0, flip_level=2), ValueError, "level must be in (0, 1); got 1.0"),
    (dict(n_agents=6, flip_level=0), ValueError, "flip_level must be in (0, 1]; got 0"),
    (dict(n_agents=6, max_round=2), ValueError, "max_round must be >= 3; got 2"),
])
def test_predict_settings_report_the_first_bad_argument_as_predict_did(kw, err, msg):
    with pytest.raises(err) as a:
        PredictSettings(**kw)
    with pytest.raises(err) as b:
        predict(load_fit("llama3_70b_QM_H3"), **kw)
    assert str(a.value).startswith(msg) and str(a.value) == str(b.value)


def test_run_prediction_gives_what_predict_gives():
    fit = load_fit("llama3_70b_QM_H3")
    kw = dict(n_agents=6, n_draws=2, n_runs_consensus=3, n_runs_flip=2, max_rounds=30, strength=False,
              committed=[0, 2], run_effects=None)
    a = predict(fit, rng=1, **kw)
    b = run_prediction(fit, PredictSettings(**kw), rng=1)
    assert a.to_frame().equals(b.to_frame()) and a.settings == b.settings
    settings, run = predict_settings(rng=1, threads=1, **kw)
    assert settings == PredictSettings(**kw) and run == {"rng": 1, "threads": 1}
    with pytest.raises(TypeError, match=r"^predict\(\) got an unexpected keyword argument 'n_run'$"):
        predict_settings(n_run=3, **kw)


@pytest.mark.parametrize("kw, err, msg", [
    (dict(target=1, batch=0), ValueError, "target must be in (0, 1); got 1"),
    (dict(batch=0, n_draws=1), ValueError, "batch must be >= 1; got 0"),
    (dict(n_draws=10), ValueError, "n_draws must be >= 20; got 10"),
    (dict(strategy="x", fit_model="y"), ValueError, "strategy must be one of ['eig', 'half']; got 'x'"),
    (dict(fit_model="y"), ValueError, "fit_model must be one of"),
    (dict(max_runs=-1), ValueError, "max_runs must be >= 0; got -1"),
    (dict(max_steps=0), ValueError, "max_steps must be >= 1; got 0"),
])
def test_tip_settings_messages(kw, err, msg):
    with pytest.raises(err, match="^" + msg.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        TipSettings(**kw)
    assert TipSettings(confirm=-1).confirm == -1  # checked by the engine, after the prior and the log


@pytest.mark.parametrize("kw, err, msg", [
    (dict(n_agents=1, memory=0), ValueError, "n_agents must be >= 2; got 1"),
    (dict(n_agents=6, memory=0, n_draws=0), ValueError, "memory must be >= 1; got 0"),
    (dict(n_agents=6, memory=2, n_draws=0), ValueError, "n_draws must be >= 1; got 0"),
    (dict(n_agents=6, memory=2, jitter_states=-1), ValueError, "jitter_states must be >= 0; got -1"),
    (dict(n_agents=6, memory=2, order_mixing="x"), ValueError,
     "order_mixing must be one of ('average', 'dirichlet'); got 'x'"),
])
def test_probe_settings_messages(kw, err, msg):
    with pytest.raises(err) as info:
        ProbeSettings(**kw)
    assert str(info.value) == msg


def test_each_family_owns_its_parameters_and_documents_keep_their_entries():
    fit = load_fit("llama31_70b_QM_H5")
    assert type(fit.params) is HierarchicalParams and fit.family.Params is HierarchicalParams
    assert fit.coef_draws is fit.params.coef_draws and fit.prior == 1.0 and not fit.coef_draws.flags.writeable
    doc = fit.to_dict()
    assert list(doc)[5:10] == ["prior", "decay", "coef_names", "coef_draws", "tau_draws"]
    assert json.dumps(StrategyFit.from_dict(doc).to_dict()) == json.dumps(doc)
    emp = StrategyFit(kind="empirical", names=fit.names, memory=fit.memory, counts=fit.counts, prior=2.0)
    assert emp.params == EmpiricalParams(prior=2.0) and np.isnan(emp.decay) and emp.coef_draws.size == 0
    assert list(emp.to_dict())[5:10] == ["prior", "decay", "coef_names", "coef_draws", "tau_draws"]
    with pytest.raises(ValueError, match=r"^prior must be > 0; got -1$"):
        EmpiricalParams(prior=-1)
    with pytest.raises(TypeError, match="has no parameter 'decay'"):
        StrategyFit(kind="empirical", names=fit.names, memory=fit.memory, counts=fit.counts, decay=0.5)
    thin = fit.family.thin(fit, 7)
    assert type(thin.params) is HierarchicalParams and thin.coef_draws.shape[0] == thin.tau_draws.shape[0] == 7
    logit = dataclasses.replace(fit, kind="logit", params=LogitParams(fit.decay, fit.coef_names, fit.coef_draws))
    assert logit.tau_draws.size == 0 and logit.to_dict()["tau_draws"] == []
    assert GenericParams().to_dict() == {"prior": 1.0, "decay": None, "coef_names": [], "coef_draws": [],
                                         "tau_draws": []}
