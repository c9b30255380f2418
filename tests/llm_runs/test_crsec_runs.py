"""CRSEC populations on the journal machinery: resumable run directories, budgets, dry runs,
concurrency that changes nothing, the run object's display, the published-format round trip,
and `normlab crsec run|analyse` -- against the stub server's scripted mode (a scripted stand-in of
a capable model, not a language model)."""

from __future__ import annotations

import json
import math

import matplotlib
import pandas as pd
import pytest
import _paths  # the repository's and tests/' folders (tests/_paths.py)

matplotlib.use("Agg")

from normlab.cli import main  # noqa: E402
from normlab.llm_runs import BudgetExhausted, EndpointConfig, StubServer, load_crsec_run  # noqa: E402
from normlab.llm_runs import journal as jr  # noqa: E402
from normlab.llm_runs.crsec import (estimate_population, events_from_nodes, load_population,  # noqa: E402
                                    run_population)
from normlab.llm_runs.crsec.analysis import behaviour_from_nodes, event_counts  # noqa: E402

AGENTS = ["Bob Johnson", "Carlos Gomez", "Tamara Taylor", "Isabella Rodriguez"]
KW = dict(ops="llm", minutes=90, p_present=1.0, rng=5)


def _same(a, b):
    for name in ("states", "events", "norms", "actions"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name))


@pytest.fixture(scope="module")
def stub():
    with StubServer(scripted="crsec") as s:
        yield s


@pytest.fixture(scope="module")
def reference(stub):
    cfg = EndpointConfig(base_url=stub.base_url, max_retries=0, concurrency=4)
    n0 = stub.n_chat
    run = run_population(AGENTS, endpoint=cfg, **KW)
    return run, stub.n_chat - n0


def test_scripted_endpoint_runs_the_llm_path(reference):
    run, n = reference
    s = run.summary()
    assert n == s["llm_requests"] == s["sent_this_session"] > 50 and s["replayed_from_journal"] == 0
    assert s["norms"]["qualified"] > 0 and s["events"]["chat"] > 0 and s["events"]["conflict"] > 0
    # every answer of the scripted stand-in comes in the format its prompt asked for
    assert all(a == b for a, b in (v.split("/") for v in s["answers_in_format"].values()))
    json.dumps(s)  # plain Python


def test_concurrency_changes_nothing(stub, reference):
    one = run_population(AGENTS, endpoint=EndpointConfig(base_url=stub.base_url, max_retries=0, concurrency=1), **KW)
    many = run_population(AGENTS, endpoint=EndpointConfig(base_url=stub.base_url, max_retries=0, concurrency=16), **KW)
    _same(one, reference[0])
    _same(many, reference[0])


def test_budget_stop_and_resume_pays_no_call_twice(stub, reference, tmp_path):
    ref, n_ref = reference
    out = tmp_path / "run"
    cfg = EndpointConfig(base_url=stub.base_url, max_retries=0, concurrency=4)
    n0 = stub.n_chat
    with pytest.raises(BudgetExhausted, match="40 requests"):
        run_population(AGENTS, endpoint=cfg, out=out, max_requests=40, **KW)
    recs = jr.read_journal(out / "journal.jsonl")
    assert len(jr.calls(recs)) == 40 and jr.steps(recs)  # completed calls and steps are journaled
    assert json.loads((out / "manifest.json").read_text())["sessions"][-1]["outcome"] == "stopped: budget"
    # a token budget counts what the first session spent
    tokens = sum(c.prompt_tokens + c.completion_tokens for c in jr.calls(recs))
    with pytest.raises(BudgetExhausted, match="tokens"):
        run_population(AGENTS, endpoint=EndpointConfig(base_url=stub.base_url, max_retries=0,
                                                       budget_tokens=tokens + 10), out=out, **KW)
    run = run_population(AGENTS, endpoint=cfg, out=out, **KW)
    _same(run, ref)
    assert stub.n_chat - n0 == n_ref  # every request sent once over the three sessions
    assert run.summary()["replayed_from_journal"] > 0
    # a finished directory replays without a request, and reads back from its tables
    n1 = stub.n_chat
    again = run_population(AGENTS, endpoint=cfg, out=out, **KW)
    assert stub.n_chat == n1
    _same(again, ref)
    back = load_population(out)
    pd.testing.assert_frame_equal(back.states, ref.states)
    assert back.summary()["final"] == ref.summary()["final"]
    with pytest.raises(ValueError, match="different settings"):
        run_population(AGENTS, endpoint=cfg, out=out, **{**KW, "minutes": 60})


def test_dry_run_counts_the_scripted_requests(reference):
    run, n = reference
    est = estimate_population(AGENTS, endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1", price_input=1.0,
                                                              price_output=2.0), **KW)
    assert est.rows["requests"] == (n, n)
    lo, hi = est.rows["completion_tokens"]
    assert 0 < lo < hi and est.rows["cost_usd"][0] > 0
    assert "nothing was sent" in str(est)
    assert estimate_population(AGENTS, **{**KW, "ops": "rule"}).rows["requests"] == (0, 0)


def test_torn_first_settings_write_starts_afresh_and_foreign_files_are_refused(tmp_path):
    """A kill inside the first settings write leaves settings.json.tmp alone (the fault matrix
    landed one there): the run starts afresh; anybody else's file is refused in one line."""
    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "settings.json.tmp").write_text('{"format"')
    _same(run_population(AGENTS, minutes=60, rng=3, out=torn), run_population(AGENTS, minutes=60, rng=3))
    assert not (torn / "settings.json.tmp").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty and holds no normlab run"):
        run_population(AGENTS, minutes=60, rng=3, out=tmp_path / "mine")


def test_rule_run_directory_and_display(tmp_path):
    run = run_population(AGENTS, minutes=120, rng=3, out=tmp_path / "r")
    assert (tmp_path / "r" / "states.parquet").is_file() and (tmp_path / "r" / "manifest.json").is_file()
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["kind"] == "crsec run"
    s = run.summary()
    assert set(s["final"]) == set(run.topics) and s["llm_requests"] == 0
    ax = run.plot()
    assert isinstance(ax, matplotlib.axes.Axes) and ax.lines and all(len(line.get_xdata()) for line in ax.lines)
    assert isinstance(run.plot(panels="events"), matplotlib.axes.Axes)
    fig = run.plot(panels="both", path=tmp_path / "fig2.png")
    assert isinstance(fig, matplotlib.figure.Figure) and (tmp_path / "fig2.png").is_file()
    t = run.reach_times(0.5)
    assert all(math.isnan(v) or 0 <= v <= 120 for v in t.values())
    assert "<" in run._repr_html_()


def test_published_round_trip_keeps_conflicts_and_behaviour(tmp_path):
    run = run_population(minutes=240, rng=1)
    back = load_crsec_run(run.save_crsec(tmp_path / "pub"))
    ev = events_from_nodes(back.nodes)
    live = event_counts(run.events, bin_minutes=60, t_max=240).groupby("kind")["count"].sum()
    round_trip = event_counts(ev, bin_minutes=60, t_max=240).groupby("kind")["count"].sum()
    assert live["conflict"] > 0 and round_trip.to_dict() == live.to_dict()
    # behaviour comes back from the agents' own action nodes
    beh = behaviour_from_nodes(back.nodes, [240.0], agents=list(run.agents))
    last = run.states[run.states.t == 240].groupby("topic")["action"].mean()
    assert beh.set_index("topic")["proportion"].to_dict() == pytest.approx(last.to_dict())
    # a published run records no conflicts: none are invented
    nodes = back.nodes.copy()
    nodes["keywords"] = [tuple(k for k in kw if k != "conflict") for kw in nodes["keywords"]]
    assert "conflict" not in set(events_from_nodes(nodes)["kind"])


def test_cli_run_analyse_budget_and_dry_run(stub, tmp_path, capsys):
    base = ["crsec", "run", "--ops", "llm", "--base-url", stub.base_url, "--agents", ",".join(AGENTS), "--minutes",
            "90", "--p-present", "1", "--seed", "5", "--no-progress"]
    out = tmp_path / "cli"
    assert main([*base, "--out", str(out), "--budget", "30req"]) == 5
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "30 requests" in err[0] and "larger --budget" in err[0]
    assert main([*base, "--out", str(out), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["llm requests (all sessions)"] > 30
    assert main(["crsec", "analyse", str(out), "--json", "--plot", str(tmp_path / "f.png")]) == 0
    a = json.loads(capsys.readouterr().out)
    assert a["llm requests (all sessions)"] == s["llm requests (all sessions)"] and (tmp_path / "f.png").is_file()
    assert main([*base, "--dry-run", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["requests"]["typical"] == s["llm requests (all sessions)"]
    assert main(["crsec", "analyse", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "does not exist" in err[0]
    assert main(["crsec", "run", "--p-present", "2", "--out", str(tmp_path / "x")]) == 2
    assert "--p-present must be a probability" in capsys.readouterr().err


def test_cli_analyse_reads_a_published_folder(tmp_path, capsys):
    run = run_population(AGENTS, minutes=120, rng=3)
    run.save_crsec(tmp_path / "pub")
    assert main(["crsec", "analyse", str(tmp_path / "pub"), "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert a["agents"] == 4 and a["conflicts"] == int((run.events.kind == "conflict").sum())


@pytest.mark.llm
def test_embedded_model_says_what_it_cannot_do(tmp_path, capsys):
    from normlab.llm_runs import embedded_available

    if not embedded_available():
        pytest.skip("embedded model not installed")
    rc = main(["crsec", "run", "--ops", "llm", "--agents", "Carlos Gomez,Tamara Taylor", "--minutes", "10",
               "--p-thought", "0", "--seed", "0", "--out", str(tmp_path / "smol"), "--json", "--no-progress"])
    assert rc == 0
    cap = capsys.readouterr()
    s = json.loads(cap.out)
    assert s["model"] == "SmolLM2-135M-Instruct" and s["answers in the asked shape"]
    note = [x for x in cap.err.splitlines() if "note:" in x]
    assert len(note) == 1 and "cannot do CRSEC's tasks" in note[0] and "answers in the asked shape" in note[0]


def test_fit_adoption_leaks_no_warning_and_reads_its_numbers():
    """Curves without compliance used to divide by a rate that underflowed to 0 (a RuntimeWarning),
    and compliance equal to belief sized a simulation of petabytes; rates now stop at RATE_BOUNDS."""
    import warnings

    import numpy as np

    from normlab.calibration import fit_adoption
    from normlab.theory import norm_contagion_agents

    t = np.arange(12) * 10.0
    b = np.round(np.clip(0.1 + t / 130, 0, 1) * 20) / 20
    frame = lambda c: pd.concat([pd.DataFrame({"t": t, "measure": "belief", "proportion": b}),  # noqa: E731
                                 pd.DataFrame({"t": t, "measure": "action", "proportion": c})])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        none = fit_adoption(frame(np.zeros_like(t)), n_agents=20, n_boot=6, rng=0)
        same = fit_adoption(frame(b), n_agents=20, n_boot=6, rng=0)
    assert none.at_bound["gamma"] and math.isfinite(none.ratio) and "did not follow" in none.reading()
    assert same.at_bound["gamma"] and same.ratio < 1
    r = norm_contagion_agents(400, 20, 2.0, 0.5, t_max=8, dt=0.02, n_runs=1, rng=1).to_frame()
    r = r[np.isclose((r.t * 2) % 1, 0) | np.isclose((r.t * 2) % 1, 1)]
    fit = fit_adoption(r, n_agents=400, behaviour="compliance", ceiling=1.0, n_boot=10, rng=2)
    assert fit.ci["ratio"][0] > 1 and fit.reading().startswith("belief spread faster than compliance")
    assert fit.summary()["reading"] == fit.reading()
    wide = fit_adoption(r, n_agents=400, behaviour="compliance", ceiling=1.0, n_boot=0)
    assert "no interval" in wide.reading()


def test_analyse_out_saves_summary_and_figure_and_help_reads_plainly(tmp_path, capsys):
    """`crsec analyse --out DIR` keeps what --json prints and Fig. 2; the help says "50%", not "50%%"."""
    with pytest.raises(SystemExit):
        main(["crsec", "analyse", "--help"])
    assert "reach 50% per topic" in " ".join(capsys.readouterr().out.split())
    run = run_population(AGENTS, minutes=60, rng=3, out=tmp_path / "r")
    assert main(["crsec", "analyse", str(tmp_path / "r"), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    res = tmp_path / "analysis"
    assert main(["crsec", "analyse", str(tmp_path / "r"), "--json", "--out", str(res)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown.pop("summary file") == str(res / "summary.json")
    assert shown == printed == json.loads((res / "summary.json").read_text())
    assert (res / "fig2.png").stat().st_size > 0
    # a published folder without norm-related events: the summary, and one line saying why no figure
    pub = run.save_crsec(tmp_path / "pub")
    for nodes in (tmp_path / "pub").rglob("nodes.json"):
        nodes.write_text("{}")
    assert main(["crsec", "analyse", str(pub), "--out", str(tmp_path / "a2")]) == 0
    cap = capsys.readouterr()
    assert (tmp_path / "a2" / "summary.json").is_file() and not (tmp_path / "a2" / "fig2.png").exists()
    assert [x for x in cap.err.splitlines() if x.strip()] == [
        f"normlab crsec analyse: note: no figure ({pub} holds no norm-related events to draw)"]


def test_events_panel_says_when_nothing_happened():
    """A run without conflicts, chats or thoughts (the embedded model's) used to draw an empty panel;
    the panel now says there was nothing to draw."""
    from normlab.llm_runs.crsec.analysis import plot_emergence

    run = run_population(AGENTS[:2], minutes=20, p_present=0.0, rng=0)
    assert not len(run.events[run.events.kind.isin(["conflict", "chat", "thought"])])
    ax = run.plot(panels="events")
    assert [t.get_text() for t in ax.texts] == ["no conflicts, norm-related chats or thoughts in this run"]
    busy = run_population(AGENTS, minutes=120, rng=3).plot(panels="events")
    assert not busy.texts and busy.get_legend() is not None
    with pytest.raises(ValueError, match="give adoption curves"):
        plot_emergence(None, None)


def test_notebook_figure_titles_do_not_cover_the_panels():
    """The notebook's Fig. 2 titles (the suptitle used to be pinned at y=1.02 and printed over the panel
    titles) and its contagion title (a truncated repr) read cleanly."""
    import re
    from pathlib import Path

    cells = json.loads((_paths.REPO / "notebooks" / "crsec_norm_emergence.ipynb")
                       .read_text(encoding="utf-8"))["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    sups = [m.group(0) for src in code for m in re.finditer(r"fig\.suptitle\(.*\)", src)]
    assert len(sups) == 2 and not any("repr(" in src for src in code)
    run = run_population(AGENTS, minutes=60, rng=3)
    for line in sups:
        fig = run.plot(panels="both")
        exec(line, {"fig": fig})
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        top = fig._suptitle.get_window_extent(r)
        for ax in fig.axes:
            if ax.get_title():
                assert not top.overlaps(ax.title.get_window_extent(r)), line


def test_event_counts_end_with_the_run_not_an_empty_bin():
    """Fig. 2a of an 8-hour run used to end with a bin starting at hour 8 -- after the last step --
    drawn as a drop to zero; the bins now cover the run and nothing after it."""
    run = run_population(AGENTS, minutes=120, rng=3)
    kinds = run.events.kind.isin(["conflict", "chat", "thought"]) & ((run.events.kind == "conflict")
                                                                      | run.events.topic.notna())
    c = run.event_counts(60)
    assert sorted(c.t.unique()) == [0.0, 60.0] and c["count"].sum() == kinds.sum()
    assert sorted(run.event_counts(50).t.unique()) == [0.0, 50.0, 100.0]  # 120 min: the last bin is partial
    ev = pd.DataFrame({"t": [0.0, 20.0], "kind": ["chat", "chat"]})
    chats = lambda c: c[c.kind == "chat"]["count"].tolist()  # noqa: E731
    assert chats(event_counts(ev, bin_minutes=10)) == [1, 0, 1]  # no t_max: the last event opens the last bin
    assert chats(event_counts(ev, bin_minutes=10, t_max=20)) == [1, 1]  # an event at t_max: in the last bin


@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_fit_adoption_bootstrap_refits_stay_finite():
    """Reproduced before the fix: with no compliance, bootstrap refits drove gamma to exactly 0
    ("divide by zero encountered in divide" in the ratio's interval), and a flat belief curve sized
    the bootstrap simulation at hundreds of pebibytes (a MemoryError)."""
    import warnings

    import numpy as np

    from normlab.calibration import fit_adoption

    t = np.arange(12) * 10.0
    rise = np.round(np.clip(0.1 + np.arange(12) / 12, 0, 0.95) * 10) / 10
    frame = lambda b: pd.concat([pd.DataFrame({"t": t, "measure": "belief", "proportion": b}),  # noqa: E731
                                 pd.DataFrame({"t": t, "measure": "action", "proportion": np.zeros(12)})])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for b in (rise, np.full(12, 0.2)):
            fit = fit_adoption(frame(b), n_agents=10, n_boot=20, rng=0)
            assert np.isfinite(fit.boot).all() and (fit.boot[:, 1] > 0).all()
            assert all(np.isfinite(v).all() for v in fit.ci.values()) and "did not follow" in fit.reading()
