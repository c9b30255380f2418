"""Strong bias, no logprobs and cost guards (issue 31, items 1, 4 and 5).

- ``normlab demo`` ends with a report (exit 0) against a stub whose bias is so strong that the
  predicted consensus probability of one name is 0 (intervals of zero width), and against a stub
  that returns no logprobs in ``--mode sample`` (the strategy table estimated from sampled
  answers); exact mode there says what each mode needs.
- No error bar is ever negative: :func:`normlab._display.error_bars`, the report's figures at the
  extremes, ``Prediction.plot`` and ``ProbePrediction.plot`` with estimates outside their intervals.
- ``exact.name_distribution`` counts an empty end-of-turn token as uncovered mass (no loop).
- ``--embedded-model`` on every endpoint command; ``--dry-run`` (mode printed) and ``--budget`` on
  ``predict --probe``, ``tip`` and ``figures``.
"""

from __future__ import annotations

import asyncio
import functools
import json

import numpy as np
import pandas as pd
import pytest

from normlab.cli import main

TINY = ["--n-agents", "4", "--memory", "1", "--runs", "2", "--max-rounds", "20", "--committed-runs", "1",
        "--sample-check", "2", "--draws", "20", "--within-rounds", "6", "--no-progress", "--json"]


# ----------------------------------------------------------------------------- error bars
def test_error_bars_are_never_negative():
    from normlab._display import error_bars

    below, above = error_bars([0.000625, 0.5, 1.0, np.nan], [0.0, 0.6, 1.0, 0.1], [0.0, 0.9, 1.0, 0.2])
    assert (below >= 0).all() and (above >= 0).all()
    assert below[0] == pytest.approx(0.000625) and above[0] == 0.0  # the mean of draws above its [0, 0] interval
    assert below[1] == 0.0 and above[1] == pytest.approx(0.4)  # an estimate below its interval
    assert below[3] == 0.0 and above[3] == 0.0  # a missing value draws no bar
    b, a = error_bars(pd.Series([0.2]), pd.Series([np.nan]), pd.Series([0.3]))
    assert b[0] == 0.0 and a[0] == pytest.approx(0.1)


def test_report_figures_at_the_extremes(tmp_path):
    """Predictions at 0 and 1 with zero-width intervals, observations outside them, a probed table of 0s
    and 1s: the report's figures draw (Matplotlib refuses a negative error bar)."""
    import matplotlib

    matplotlib.use("Agg")
    from normlab.demo._report_figures import fig_critical_mass, fig_population
    from normlab.calibration import predict
    from normlab.theory import StrategyTable

    table = StrategyTable(np.array([[1.0, 0.0]] + [[1.0, 0.0]] * 4), memory=1, names=("X", "Y"))
    pred = predict(table, n_agents=4, n_draws=10, n_runs_consensus=4, n_runs_flip=2, within_rounds=6, max_rounds=20,
                   rng=1)
    pfacts = {"consensus": {"X": {"estimate": 0.000625, "low": 0.0, "high": 0.0},
                            "Y": {"estimate": 1.0, "low": 1.0, "high": 1.0}}}
    obs = {"consensus": {"X": {"estimate": 0.0, "low": 0.0, "high": 0.6}, "Y": {"estimate": 1.0, "low": 0.4, "high": 1.0},
                         "none": {"estimate": 0.0, "low": 0.0, "high": 0.6}}}
    from normlab.calibration import theory_trajectories

    traj = theory_trajectories(table, n_agents=4, n_rounds=20, n_draws=5, n_runs=2, rng=1)
    llm = traj.assign(mean=traj["mean"])
    fig_population(traj, llm, pfacts, obs, ("X", "Y"), "Y", 2, tmp_path / "population.png")
    rows = [{"majority": "X", "challenger": "Y", "committed": 1, "runs": 2, "flips": 2, "observed": 1.0,
             "observed_low": 0.2, "observed_high": 1.0, "predicted": 0.0, "low": 0.0, "high": 0.0, "consistent": False}]
    fig_critical_mass(pred, pred, rows, ("X", "Y"), 2, tmp_path / "cm.png")
    assert (tmp_path / "population.png").stat().st_size > 0 and (tmp_path / "cm.png").stat().st_size > 0


def test_prediction_and_probe_prediction_plots_with_estimates_outside_their_intervals(tmp_path, monkeypatch):
    """ProbePrediction.plot when the ProbeFit's order average lies outside its interval over draws (mass on
    names that only start like a pool name), and Prediction.plot with observed flips outside their
    intervals: Matplotlib would refuse the negative error bars ("yerr must not contain negative values")."""
    import matplotlib

    matplotlib.use("Agg")
    from types import SimpleNamespace

    from normlab.calibration.prediction.from_probes import ProbeFit, ProbePrediction

    res = ProbePrediction._contract_example()
    frame = res.fit.to_frame(n_draws=20)
    frame["low"], frame["high"] = frame["p"] + 0.05, frame["p"] + 0.1  # the estimate below its interval
    frame.loc[frame.index[::2], ["low", "high"]] = 0.0  # and above a [0, 0] one
    monkeypatch.setattr(ProbeFit, "to_frame", lambda self, n_draws=200, **kw: frame)
    res.plot(path=tmp_path / "probe.png")
    pred = res.prediction
    fc = pred.flip_curve()
    x = str(fc["majority"].iloc[0])
    cv = pd.DataFrame({"majority": x, "n_agents": pred.n_agents, "memory": pred.memory, "committed": [1, 2],
                       "p_flip": [0.0, 1.0], "ci_low": [0.2, 0.0], "ci_high": [0.9, 0.5]})
    pred.plot("flip", observed=SimpleNamespace(curves=cv))
    assert (tmp_path / "probe.png").stat().st_size > 0


# ----------------------------------------------------------------------------- exact mode: an empty token
def test_an_empty_end_of_turn_token_is_uncovered_mass_not_a_loop():
    from normlab.llm_runs.runner.exact import name_distribution

    asked = []

    async def fetch(partial):
        asked.append(partial)
        return [("", -0.05), ("X", -3.5), ("Y", -4.0)]  # <|im_end|> rendered as "" ranks first

    d = asyncio.run(name_distribution(["X", "Y"], fetch, temperature=1.0, top_k=None))
    assert asked == [""]  # one query: the empty token is not expanded again
    assert d.covered_mass == pytest.approx(np.exp(-3.5) + np.exp(-4.0))
    assert d.probs[0] > d.probs[1] and 0 < d.covered_mass < 0.1


# ----------------------------------------------------------------------------- the demo at the extremes
def _demo(out, *extra):
    import contextlib
    import io

    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        code = main(["demo", "--out", str(out), *TINY, *extra])
    return code, buf.getvalue(), err.getvalue()


@pytest.mark.slow  # 13 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_demo_with_a_predicted_consensus_probability_of_zero_ends_with_a_report(tmp_path):
    from normlab.llm_runs.core.stub import memory_policy
    from normlab.llm_runs.testing import StubServer

    pol = functools.partial(memory_policy, bias={"X": 1.0, "Y": 1e-6}, beta=0.3)
    with StubServer(policy=pol) as stub:
        code, out, err = _demo(tmp_path / "r", "--base-url", stub.base_url, "--tip-runs", "2")
    assert code == 0, err
    s = json.loads(out)
    cons = s["population"]["predicted"]["consensus"]
    assert cons["Y"]["estimate"] == pytest.approx(0.0, abs=0.01) and cons["Y"]["low"] == cons["Y"]["high"] == 0.0
    page = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert "interval of zero width" in page and "Every check" in page
    # every check is discussed: one list item per check below the table
    assert page.count("<li><b>") >= len(s["checks"])
    assert "Traceback" not in err and "overflow" not in err and "Mean of empty slice" not in err


@pytest.mark.slow  # 17 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_demo_in_sample_mode_without_logprobs_ends_with_a_report(tmp_path):
    from normlab.llm_runs.testing import StubServer

    with StubServer(logprobs=False) as stub:
        code, out, err = _demo(tmp_path / "r", "--base-url", stub.base_url, "--mode", "sample", "--probe-samples", "3",
                               "--tip-runs", "0")
        assert code == 0, err
        s = json.loads(out)
        assert s["strategy_table"]["mode"] == "sample" and s["strategy_table"]["answers"]["valid"] > 0
        assert s["strategy_table"]["p_first_listed_empty"] is None
        free = [c for c in s["checks"] if c["quantity"] == "invalid free answers"]
        assert free and free[0]["consistent"] is None  # not predicted by a sampled table
        assert (tmp_path / "r" / "report.html").exists()
        # exact mode on the same endpoint: one line saying what each mode needs
        code, _, err = _demo(tmp_path / "x", "--base-url", stub.base_url)
    assert code == 3
    assert "exact mode reads next-token logprobs" in err and "sample mode needs none" in err
    assert "Traceback" not in err


def test_demo_dry_run_in_sample_mode_counts_the_sampled_table(tmp_path, capsys):
    from normlab.llm_runs.testing import StubServer

    with StubServer() as stub:
        assert main(["demo", "--out", str(tmp_path / "r"), *TINY, "--base-url", stub.base_url, "--mode", "sample",
                     "--probe-samples", "3", "--dry-run"]) == 0
        est = json.loads(capsys.readouterr().out)
        assert stub.n_chat == 0
    assert any("strategy table from sampled answers" in n and "no logprobs" in n for n in est["how"])
    assert "sample mode" in est["estimate"]


# ----------------------------------------------------------------------------- cost guards
def test_predict_probe_dry_run_and_budget(tmp_path, capsys):
    from normlab.llm_runs.testing import StubServer

    with StubServer() as stub:
        url = ["--base-url", stub.base_url]
        assert main(["predict", "--probe", "--n-agents", "4", "--memory", "1", "--names", "X,Y", *url, "--dry-run",
                     "--json", "--price-input", "1", "--price-output", "2"]) == 0
        est = json.loads(capsys.readouterr().out)
        assert stub.n_chat == 0 and est["nothing_sent"]
        assert est["requests"]["typical"] == 10 + 10  # 5 states x 2 orders, and 10 jitter re-asks (of 16 asked)
        assert any(n.startswith("mode: exact") for n in est["how"]) and est["cost_usd"]["typical"] > 0
        out = tmp_path / "p"
        code = main(["predict", "--probe", "--n-agents", "4", "--memory", "1", "--names", "X,Y", *url, "--budget",
                     "600", "--out", str(out), "--draws", "20", "--no-underlying", "--no-strength", "--no-progress"])
        err = capsys.readouterr().err
        assert code == 5, err
        assert "budget" in err and "larger --budget" in err
        first = stub.n_chat
        assert 0 < first < 10
        assert main(["predict", "--probe", "--n-agents", "4", "--memory", "1", "--names", "X,Y", *url, "--budget",
                     "1M", "--out", str(out), "--draws", "20", "--no-underlying", "--no-strength", "--no-progress",
                     "--jitter-states", "2"]) == 0
        assert stub.n_chat == 10 + 2  # the rest of the probe and the jitter re-asks, nothing twice


def test_tip_dry_run_prints_the_plan_and_its_mode(tmp_path, capsys):
    from normlab.llm_runs.testing import StubServer

    with StubServer() as stub:
        assert main(["tip", "--names", "X,Y", "--memory", "1", "--n-agents", "4", "--direction", "overturn_Y",
                     "--base-url", stub.base_url, "--out", str(tmp_path / "t"), "--budget", "3runs", "--dry-run"]) == 0
        text = capsys.readouterr().out
        assert main(["tip", "--names", "X,Y", "--memory", "1", "--n-agents", "4", "--direction", "overturn_Y",
                     "--base-url", stub.base_url, "--out", str(tmp_path / "t"), "--mode", "exact", "--probe",
                     "--dry-run", "--json"]) == 0
        est = json.loads(capsys.readouterr().out)
        assert stub.n_chat == 0
    assert not (tmp_path / "t").exists()
    assert "sample mode" in text and "the default" in text and "at most 3" in text and "nothing was sent" in text
    assert "exact mode" in est["estimate"] and any("--probe" in n for n in est["how"])


def test_tip_live_budget_in_tokens_stops_cleanly(tmp_path, capsys):
    from normlab.llm_runs.testing import StubServer

    with StubServer() as stub:
        code = main(["tip", "--names", "X,Y", "--memory", "1", "--n-agents", "4", "--direction", "overturn_X",
                     "--base-url", stub.base_url, "--out", str(tmp_path / "t"), "--budget", "2k", "--baselines", "1",
                     "--baseline-rounds", "5", "--runs-per-count", "1", "--window", "5", "--draws", "20", "--confirm",
                     "0", "--no-progress", "--seed", "1"])
    err = capsys.readouterr().err
    assert code == 5, err
    assert "live runs in sample mode" in err


def test_figures_dry_run_and_endpoint_flags(tmp_path, capsys):
    assert main(["figures", "--only", "figS11,tableS6", "--small", "--out", str(tmp_path / "f"), "--dry-run",
                 "--embedded-model", "qwen2.5-coder-1.5b"]) == 0
    text = capsys.readouterr().out
    assert "figS11, tableS6" in text and "mode: exact" in text and "qwen2.5-coder-1.5b" in text
    assert not (tmp_path / "f").exists()
    assert main(["figures", "--only", "fig1a", "--out", str(tmp_path / "g"), "--embedded-model", "smollm2"]) == 2
    assert "Figs. S11, S12 and Table S6 only" in capsys.readouterr().err


@pytest.mark.parametrize("command", [
    ["llm-run", "--n-agents", "4", "--memory", "1", "--names", "X,Y", "--max-interactions", "4", "--dry-run"],
    ["llm-probe", "strategy", "--names", "X,Y", "--memory", "1", "--dry-run"],
    ["demo", "--out", "DIR", "--dry-run"],
    ["predict", "--probe", "--n-agents", "4", "--memory", "1", "--names", "X,Y", "--dry-run"],
    ["tip", "--names", "X,Y", "--memory", "1", "--n-agents", "4", "--direction", "X", "--out", "DIR", "--dry-run"],
    ["crsec", "run", "--ops", "llm", "--out", "DIR", "--minutes", "20", "--dry-run"],
    ["scene", "run", "--tuples", "1", "--seed", "1", "--out", "DIR", "--dry-run"],
    ["figures", "--only", "figS12", "--out", "DIR", "--dry-run"],
])
def test_every_endpoint_command_takes_embedded_model_and_dry_run(command, tmp_path, capsys, monkeypatch):
    """--embedded-model NAME (choices from the registry) on every command that calls an endpoint, and a
    plan naming the model, sent and written nothing."""
    monkeypatch.delenv("NORMLAB_LLM_BASE_URL", raising=False)
    argv = [str(tmp_path / "d") if a == "DIR" else a for a in command]
    assert main([*argv, "--embedded-model", "qwen2.5-coder-1.5b"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "qwen2.5-coder-1.5b" in out and "nothing" in out
    assert not (tmp_path / "d").exists()
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--embedded-model", "llama-70b"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err


def test_embedded_model_help_names_the_licences(capsys):
    with pytest.raises(SystemExit):
        main(["llm-run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--embedded-model NAME" in text and "Apache-2.0" in text and "Gemma terms of use" in text
    assert 'pip install "normlab[qwen]"' in text


def test_embedded_model_and_base_url_exclude_each_other(capsys):
    assert main(["llm-run", "--n-agents", "4", "--memory", "1", "--names", "X,Y", "--max-interactions", "4",
                 "--dry-run", "--embedded-model", "qwen2.5-coder-1.5b", "--base-url", "http://127.0.0.1:9/v1"]) == 2
    assert "exclude each other" in capsys.readouterr().err
