"""Issue 33, "pages that say more than their numbers": each page defect found on a default run, with the
test that fails while the page says more (or other) than its numbers."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest
import _paths  # the repository's and tests/' folders (tests/_paths.py)


@pytest.mark.parametrize("extra", [(), ("--scripted", "crsec")])
def test_stub_server_port_taken_is_one_line(extra):
    """The stub (or scripted) server on a port already taken: one line naming the port, exit 2, no traceback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "normlab.llm_runs.testing", "--port", str(port), *extra],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"127.0.0.1:{port}" in r.stderr and "--port" in r.stderr


def _outside(rows, **cfg):
    import pandas as pd

    from normlab.demo.report import _outside_html
    return _outside_html(pd.DataFrame(rows), {"runs": 20, "committed_runs": 4, "n_agents": 10, **cfg}, None)


_ROUNDS = {"quantity": "rounds to consensus", "key": "", "source": "probe", "predicted": 12.0, "low": 10.0,
           "high": 14.0, "observed": 17.5, "consistent": False}
_CROSS = {"quantity": "rounds to 95% success", "key": "", "source": "probe", "predicted": 8.0, "low": 7.0,
          "high": 9.0, "observed": 13.0, "consistent": False}


def test_exact_mode_miss_is_chance_not_a_table_too_sure():
    """In exact mode the populations play the probed table itself: a miss against it cannot be "a table
    slightly too sure" -- the report says it is chance (unless it persists with more runs); in sample mode
    the table's sureness stays the explanation."""
    exact = _outside([_ROUNDS, _CROSS], mode="exact")
    assert "too sure" not in exact and exact.count("a miss is chance") == 2 and "--runs" in exact
    sample = _outside([_ROUNDS], mode="sample")
    assert "too sure" in sample and "chance" not in sample
    log = _outside([{**_ROUNDS, "source": "log"}], mode="exact")  # the log fit is no replay of the table
    assert "chance" not in log and "in-sample" in log


def test_rounds_to_95_gap_is_said_with_its_size():
    """A crossing 4 rounds after the predicted interval is not "one round earlier or later"."""
    html_ = _outside([_CROSS], mode="sample")
    assert "one round" not in html_ and "earlier or later" not in html_
    assert "crosses 0.95 4 rounds later" in html_
    assert "1.0 round earlier" in _outside([{**_CROSS, "observed": 6.0}], mode="sample")


def test_every_command_builds_its_parser():
    """``normlab --help`` builds every sub-command's parser (after the merge of issue 31's shared
    --embedded-model at b308029, ``study``'s own flag of the same name broke all of them; main fixed it in
    9212604); ``study`` still takes a GGUF file."""
    from normlab.cli import build_parser

    p = build_parser()
    sub = next(a for a in p._actions if a.__class__.__name__ == "_SubParsersAction")
    study = sub.choices["study"]
    assert study.parse_args(["--out", "x", "--embedded-model", "/m/q.gguf"]).embedded_model == "/m/q.gguf"


def _reading(sym_p: float, above: int, states: int = 20):
    return {"name": "Y", "states": states, "p_min": 0.2, "p_max": 0.9, "above_half": above,
            "after_successes": {"X": {"1": sym_p, "2": sym_p}, "Y": {"1": sym_p, "2": sym_p}}}


def test_symmetric_table_sentence_follows_the_predicted_consensus():
    """A full-memory row that is nearly symmetric beside a predicted consensus on Y with probability 1.00:
    the reading must not promise "little collective bias"; it names the prediction and where the bias lies."""
    from normlab.demo.report import strategy_reading_text

    text = strategy_reading_text(_reading(0.9, 17), ("X", "Y"), {"X": 0.0, "Y": 1.0})
    assert "little collective bias" not in text
    assert "predicts a consensus on Y with probability 1.00" in text and "17 of 20" in text
    even = strategy_reading_text(_reading(0.9, 10), ("X", "Y"), {"X": 0.45, "Y": 0.55})
    assert "little collective bias" in even and "only 0.55" in even


def _checks(*bad):
    import pandas as pd

    rows = [{"quantity": "P(consensus)", "key": "Y", "source": "probe", "consistent": True}]
    rows += [{"quantity": q, "key": "", "source": src, "consistent": False} for q in bad for src in ("probe", "log")]
    return pd.DataFrame(rows)


def test_one_slow_experiment_is_not_counted_as_four_findings():
    """A slow experiment misses "rounds to consensus" and "rounds to 95% success" against both predictions:
    4 rows outside, 2 observations -- the count says so (the printed headline and the report share it)."""
    from normlab.demo.report import checks_count

    text = checks_count(_checks("rounds to consensus", "rounds to 95% success"))
    assert text.startswith("1 inside their predicted interval, 4 outside (2 observations: rounds to consensus, "
                           "rounds to 95% success; each compared with both")
    assert checks_count(_checks()) == "1 inside their predicted interval, 0 outside"
    assert checks_count(_checks("rounds to consensus")[:2].to_dict("records")).endswith(", 1 outside")


def _glance(first: float):
    import pandas as pd

    from normlab.demo._report_html import _glance
    s = {"strategy_table": {"p_empty": {"X": 0.5, "Y": 0.5}, "p_first_listed_empty": first}}
    cfg = {"n_agents": 4, "runs": 3}
    iv = {"estimate": 0.5, "low": 0.0, "high": 1.0}
    obs = {"consensus": {"Y": {"runs": 2, "estimate": 0.67, "low": 0.1, "high": 0.99}}, "consensus_rounds": 9.0}
    checks = pd.DataFrame([{"quantity": "P(consensus)", "key": "Y", "source": "probe", "consistent": True}])
    return _glance(s, cfg, checks, "Y", {"consensus": {"Y": iv}, "consensus_rounds": iv}, {}, obs, [], None,
                   ("X", "Y"))[0]


def test_no_position_bias_claimed_at_one_half():
    """p(the name listed first) = 0.50 is no position bias; 0.80 is one."""
    from normlab.demo._report_text import summary_paragraph  # noqa: F401 (the printed summary shares the rule)

    assert "position bias" in _glance(0.8) and "no position bias" not in _glance(0.8)
    assert "no position bias" in _glance(0.5) and "but it picks" not in _glance(0.5)


def test_demo_dry_run_does_not_count_journaled_free_generation_answers(tmp_path):
    """``demo --dry-run`` on a folder whose free-generation check is journaled: those answers are not
    counted again (a rerun reads them from the journal and sends nothing for them)."""
    from normlab.demo.pipeline import _start, estimate_demo
    from normlab.demo._plan import DemoSettings
    from normlab.demo._steps import free_generation_step
    from normlab.llm_runs import EndpointConfig
    from normlab.llm_runs.testing import StubServer

    with StubServer() as stub:
        kw = dict(n_agents=4, memory=1, sample_check=3, endpoint=EndpointConfig(base_url=stub.base_url))
        before = estimate_demo(tmp_path / "d", seed=1, **kw)
        run = _start(DemoSettings.of(tmp_path / "d", **kw), rng=1, progress=False, verbose=False)
        free_generation_step(run)
        sent = stub.n_chat
        assert sent == 3
        free_generation_step(run)  # the rerun's own rule: journaled answers are not asked again
        assert stub.n_chat == sent
        after = estimate_demo(tmp_path / "d", seed=1, **kw)
        stored = estimate_demo(tmp_path / "d", **kw)  # no seed: the stored one, as the run takes it
    # H = 1: 5 memory states x 2 orders (exact, none journaled here) + the 3 free-generation answers
    assert before.to_dict()["requests"]["typical"] == 13
    assert after.to_dict()["requests"]["typical"] == stored.to_dict()["requests"]["typical"] == 10
    assert any("3 already journaled" in n for n in after.notes)


def test_every_option_of_every_command_has_help():
    """``--temperature`` (llm-run, llm-probe, demo, predict ...) had no help text; no option may lack one."""
    import argparse

    from normlab.cli import build_parser

    def walk(p, path):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sp in a.choices.items():
                    yield from walk(sp, f"{path} {name}")
            elif a.option_strings and not a.help:
                yield f"{path} {a.option_strings[-1]}"

    missing = sorted(set(walk(build_parser(), "normlab")))
    assert not missing, missing



@pytest.mark.slow  # 4 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_tip_says_not_reached_properly():
    """A search whose estimate is "not reached" prints neither ``P(|CM - not reached| <= 1)`` (fixed on main
    by 7a33e9e, issue 32) nor "P(within one agent)" for what is the probability of not reaching it."""
    import dataclasses
    import math

    import importlib.util
    from pathlib import Path

    from normlab.calibration.tip import tip
    from normlab.calibration.tip_sources import ArchiveReplay

    spec = importlib.util.spec_from_file_location("bench_tip", _paths.REPO / "benchmarks" / "bench_tip.py")
    b = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(b)
    log = b.synthetic_archive(b._conformity_truth(), n_agents=8, majority="Y", runs=4, baselines=8, seed=1)
    src = ArchiveReplay(log, names=("X", "Y"), majority="Y", memory=2, n_agents=8, stop="streak", rng=3)
    ok = tip(src, target=0.5, n_draws=20, rng=3, max_steps=1)
    assert math.isfinite(ok.estimate) and f"P(within one agent) = {ok.p_within:.2f}" in ok.describe()
    steps = [*ok.steps[:-1], {**ok.steps[-1], "estimate": math.inf}]
    none = dataclasses.replace(ok, estimate=math.inf, low=math.inf, high=math.inf, steps=tuple(steps))
    text = none.describe() + repr(none) + none._repr_html_()
    assert "|CM" not in text and "within one" not in text
    assert f"P(not reached up to 7 committed) = {none.p_within:.2f}" in text


def test_game_plot_labels_what_it_averages():
    """Runs stopped at the 3N success streak (not absorbing) drop out of later rounds: the success curve's
    legend must not say "mean of 20 runs" where fewer runs are averaged; with every run to the end it does."""
    import matplotlib

    matplotlib.use("Agg")
    from normlab.theory import minimal_naming_game

    res = minimal_naming_game(8, n_words=2, n_runs=20, stop="streak", rng=1)
    n = res.success_rate()["n_runs"]
    assert n.iloc[-1] < 20  # the set-up the label must describe
    label = res.plot("success").get_legend_handles_labels()[1]
    assert "mean of 20 runs" not in label
    assert f"mean of the runs still going (20 of 20 at first, {n.iloc[-1]} in the last round)" in label
    full = minimal_naming_game(8, n_words=2, n_runs=20, stop="max", max_interactions=8 * 10, rng=1)
    assert "mean of 20 runs" in full.plot("success").get_legend_handles_labels()[1]


def test_tip_step_and_run_table_share_one_meaning_of_flipped(monkeypatch):
    """A run that met the flip criterion over the window's last three rounds and fell back later: the run
    table said "flipped", the step line "1 flipped" (the narrower reading, at the run's end). One meaning now;
    the narrower one keeps its own name (``flipped_at_end``)."""
    from types import SimpleNamespace

    import pandas as pd

    from normlab.calibration.tip import search

    shares = {0: [0.2, 0.5, 0.96, 0.96, 0.96, 0.5, 0.4],  # flipped in the window (rounds 3-5), not at its end
              1: [0.3, 0.6, 0.9, 0.97, 0.97, 0.97, 0.97]}  # flipped by its end
    sh = pd.DataFrame([(r, k + 1, v) for r, s in shares.items() for k, v in enumerate(s)],
                      columns=["run", "round", "share"])
    monkeypatch.setattr(search, "challenger_shares", lambda log: sh)
    batch = SimpleNamespace(count=2, log=SimpleNamespace(runs=pd.DataFrame({"run": [0, 1]})))
    source = SimpleNamespace(design=SimpleNamespace(window=5))
    table = search._run_table([batch], source, [])
    assert list(table["outcome"]) == ["flipped", "flipped"] and list(table["flipped_at_end"]) == [False, True]
    assert search._flips(batch, source) == (table["outcome"] == "flipped").sum() == 2


@pytest.mark.slow  # 6 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_bias_probe_prints_no_test_of_simulated_counts(tmp_path):
    """Exact mode draws the counts locally from two requests' probabilities: a binomial p of them is a
    function of --trials alone (5.1e-17 at the default) -- none is printed, in the table, JSON or repr;
    sample mode (the model's own answers) keeps its test."""
    import json

    import numpy as np

    from normlab.llm_runs import individual_bias
    from normlab.llm_runs.testing import StubServer

    with StubServer(["Q", "M"]) as stub:
        args = [sys.executable, "-m", "normlab.cli", "llm-probe", "bias", "--base-url", stub.base_url,
                "--no-progress", "--seed", "1"]
        p = json.loads(subprocess.run([*args, "--trials", "400", "--json", "--out", str(tmp_path / "400")],
                                      capture_output=True, text=True, timeout=120).stdout)["p_value"]
        out = subprocess.run([*args, "--trials", "40", "--out", str(tmp_path / "40")], capture_output=True,
                             text=True, timeout=120).stdout
        from normlab.llm_runs import EndpointConfig
        sample = individual_bias("Q,M", trials=20, mode="sample", endpoint=EndpointConfig(base_url=stub.base_url),
                                 rng=1, progress=False)
    assert p is None and "binomial" not in out and "p_value: none" in out
    assert sample.test == "binomial" and np.isfinite(sample.p_value)


def test_adoption_fit_says_how_many_bootstrap_replicates_its_interval_rests_on():
    """The CRSEC notebook's headline reading (belief faster than compliance) rested on 8 bootstrap
    replicates without saying so: the reading, the figure title and the repr carry the count."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    from normlab.calibration import fit_adoption
    from normlab.theory import norm_contagion_agents

    r = norm_contagion_agents(400, 20, 2.0, 0.5, t_max=8, dt=0.02, n_runs=1, rng=1).to_frame()
    r = r[np.isclose((r.t * 2) % 1, 0) | np.isclose((r.t * 2) % 1, 1)]
    fit = fit_adoption(r, n_agents=400, behaviour="compliance", ceiling=1.0, n_boot=8, rng=2)
    assert fit.reading().startswith("belief spread faster than compliance")
    assert "at 95% from 8 bootstrap replicates" in fit.reading() and "from 8 bootstrap replicates" in repr(fit)
    assert fit.plot().get_title().endswith("(8 bootstrap replicates)")


_FAKE_KERNEL = """
import sys, types, warnings
sys.modules["ipywidgets"] = None  # not installed (a plain `pip install normlab`)
class ZMQInteractiveShell:  # what tqdm.auto asks of a Jupyter kernel
    config = {"IPKernelApp": {}}
ip = types.ModuleType("IPython")
ip.get_ipython = ZMQInteractiveShell
sys.modules["IPython"] = ip
sys.modules["ipykernel.zmqshell"] = types.ModuleType("ipykernel.zmqshell")
warnings.simplefilter("always")  # printed to stderr, as into a notebook's output
from normlab.theory import minimal_naming_game
minimal_naming_game(6, n_words=2, n_runs=2, rng=1, progress=True)
print("ok")
"""


def test_progress_bars_print_no_tqdm_warning_in_a_notebook_without_ipywidgets():
    """Two notebooks' outputs held tqdm's "IProgress not found" TqdmWarning: in a Jupyter kernel without
    ipywidgets, normlab's bars fall back to tqdm's text bar."""
    r = subprocess.run([sys.executable, "-c", _FAKE_KERNEL], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
    assert "TqdmWarning" not in r.stderr and "IProgress" not in r.stderr
