"""SCENE sweeps on the journal machinery: every event journaled as it happens, resumable sweep
directories, budgets, dry runs, episodes concurrent without changing results, 0-turn episodes
named, and `normlab scene run|score` -- against the stub server's scripted mode (a scripted
stand-in of capable models, not a language model)."""

from __future__ import annotations

import json
import warnings

import pytest

from normlab.cli import main
from normlab.llm_runs import BudgetExhausted, EndpointConfig, StubServer, scene
from normlab.llm_runs import journal as jr
from normlab.llm_runs.scene import SceneSettings

SETTINGS = SceneSettings(max_turns=3)


def _plain(eps) -> list:
    """Episodes as JSON, the measured latencies left out (the only values a live request adds)."""
    out = []
    for e in eps:
        d = e.to_dict()
        for ev in d["meta"].get("events", []):
            ev.pop("latency", None)
        out.append(json.dumps(d, sort_keys=True))
    return out


@pytest.fixture(scope="module")
def stub():
    with StubServer(scripted="scene") as s:
        yield s


@pytest.fixture(scope="module")
def items():
    return list(scene.sample_tuples(5, rng=3)) + [scene.load_example_scenario()]


@pytest.fixture(scope="module")
def reference(stub, items):
    cfg = EndpointConfig(base_url=stub.base_url, max_retries=0, concurrency=4)
    n0 = stub.n_chat
    eps = scene.run_scene(items, endpoint=cfg, settings=SETTINGS, rng=1)
    return eps, stub.n_chat - n0


def test_scripted_sweep_is_judged_and_scored(reference):
    eps, n = reference
    s = scene.sweep_summary(eps)
    assert s["played"] == s["judged"] == len(eps) == 6 and s["zero_turns"] == 0
    res = scene.score(eps, n_boot=200, rng=0)
    summ = res.summary()["models"]["stub-model"]
    assert summ["scored"] == 6 and summ["breached"] >= 1 and summ["repair_rate"][0] is not None
    json.dumps(res.summary())


def test_concurrency_changes_nothing(stub, items, reference):
    cfg = EndpointConfig(base_url=stub.base_url, max_retries=0, concurrency=8)
    for k in (1, 6):
        eps = scene.run_scene(items, endpoint=cfg, settings=SETTINGS, rng=1, concurrency=k)
        assert _plain(eps) == _plain(reference[0])


def test_events_journaled_as_they_happen_and_resume(stub, items, reference, tmp_path):
    ref, n_ref = reference
    out = tmp_path / "sweep"
    cfg = EndpointConfig(base_url=stub.base_url, max_retries=0, concurrency=4)
    n0 = stub.n_chat
    with pytest.raises(BudgetExhausted, match="requests"):
        scene.run_scene(items, endpoint=cfg, settings=SETTINGS, rng=1, out=out, max_requests=n_ref // 2)
    recs = jr.read_journal(out / "journal.jsonl")
    done, events = jr.episodes_done(recs), jr.episode_events(recs)
    unfinished = [e for e in events if e not in done]
    assert unfinished and all(events[e] for e in unfinished)  # events of unfinished episodes are on disk
    assert len(jr.calls(recs)) == n_ref // 2
    eps = scene.run_scene(items, endpoint=cfg, settings=SETTINGS, rng=1, out=out)
    assert stub.n_chat - n0 == n_ref  # no answered call sent twice
    assert _plain(eps) == _plain(ref)
    n1 = stub.n_chat
    again = scene.run_scene(items, endpoint=cfg, settings=SETTINGS, rng=1, out=out)
    assert stub.n_chat == n1 and [json.dumps(e.to_dict(), sort_keys=True) for e in again] == \
        [json.dumps(e.to_dict(), sort_keys=True) for e in eps]
    assert [e.to_dict() for e in scene.load_episodes(out)] == [e.to_dict() for e in eps]
    with pytest.raises(ValueError, match="different settings"):
        scene.run_scene(items[:2], endpoint=cfg, settings=SETTINGS, rng=1, out=out)
    m = json.loads((out / "manifest.json").read_text())
    assert m["kind"] == "scene run" and [s["outcome"] for s in m["sessions"]] == ["stopped: budget", "finished",
                                                                                  "finished"]


def test_dry_run_counts_the_scripted_requests(items, reference):
    est = scene.estimate_scene(items, endpoint=EndpointConfig(base_url="http://127.0.0.1:9/v1"), settings=SETTINGS,
                               rng=1)
    typ, most = est.rows["requests"]
    assert typ == reference[1] and most >= typ


def test_zero_turn_episodes_say_why(tmp_path):
    def junk(body):
        return "I cannot do that."

    with StubServer(responder=junk) as stub:
        cfg = EndpointConfig(base_url=stub.base_url, max_retries=0)
        with pytest.warns(UserWarning, match=r"1 of 1 episodes ended with 0 turns: scenario generation failed "
                                             r"\(1 x scaffold unparseable\)"):
            eps = scene.run_scene([("bug_report", "concise_answer_norm", "address_explicit", "silent_ignore", "absent")],
                                  endpoint=cfg, settings=SceneSettings(max_reasks=0), rng=0)
    s = scene.sweep_summary(eps)
    assert s["zero_turns"] == 1 and s["zero_turn_reasons"] == {"scaffold unparseable": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert scene.zero_turn_warning([]) is None


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_cli_run_score_budget_dry_run(stub, tmp_path, capsys):
    base = ["scene", "run", "--base-url", stub.base_url, "--tuples", "4", "--seed", "2", "--max-turns", "3",
            "--no-progress", "--n-boot", "200"]
    out = tmp_path / "cli"
    assert main([*base, "--out", str(out), "--budget", "25req"]) == 5
    err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(err) == 1 and "25 requests" in err[0]
    assert main([*base, "--out", str(out), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["episodes"] == s["played"] == s["judged"] == 4
    assert main(["scene", "score", str(out), "--n-boot", "200", "--json", "--plot", str(tmp_path / "s.png"),
                 "--out", str(tmp_path / "sc")]) == 0
    sc = json.loads(capsys.readouterr().out)
    # issue 33: numbers as numbers (value/low/high/n), in --json and in --out's summary.json; and one
    # computation of rho's bootstrap interval, whatever seed the run played with
    saved = json.loads((tmp_path / "sc" / "summary.json").read_text())
    for d in (s, sc, saved):
        for k in ("repair rate", "Spearman rho"):
            assert set(d[k]) == {"value", "low", "high", "n"} and isinstance(d[k]["n"], int), d[k]
            assert all(v is None or isinstance(v, float) for v in (d[k]["value"], d[k]["low"], d[k]["high"]))
        assert not any(isinstance(v, str) and "[" in v for v in d.values()), d
    assert sc["repair rate"] == s["repair rate"] == saved["repair rate"] and (tmp_path / "s.png").is_file()
    assert s["Spearman rho"]["low"] is not None  # an interval to compare
    assert sc["Spearman rho"] == s["Spearman rho"] == saved["Spearman rho"]
    assert main([*base, "--out", str(tmp_path / "dry"), "--dry-run", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["nothing_sent"] and d["requests"]["typical"] > 0 and not (tmp_path / "dry").exists()
    assert main(["scene", "run", "--base-url", stub.base_url, "--tuples", "2", "--out", str(tmp_path / "x")]) == 2
    assert "--seed" in capsys.readouterr().err
    assert main(["scene", "score", str(tmp_path / "none")]) == 2


@pytest.mark.llm
def test_embedded_tuple_ends_with_zero_turns_and_says_why(tmp_path, capsys):
    from normlab.llm_runs import embedded_available

    if not embedded_available():
        pytest.skip("embedded model not installed")
    rc = main(["scene", "run", "--tuple", "bug_report,concise_answer_norm,address_explicit,silent_ignore,absent",
               "--max-reasks", "0", "--max-turns", "1", "--seed", "0", "--out", str(tmp_path / "smol"), "--json",
               "--no-progress"])
    assert rc == 0
    cap = capsys.readouterr()
    s = json.loads(cap.out)
    assert s["played"] == 0 and "ended with 0 turns" in s
    warn = [x for x in cap.err.splitlines() if "warning:" in x]
    assert len(warn) == 1 and "ended with 0 turns: scenario generation failed" in warn[0]


def test_score_and_population_show_themselves(reference, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    res = scene.score(reference[0], n_boot=100, rng=0)
    h = res._repr_html_()
    assert h.startswith("<div") and "SceneScore" in h and "repair rate" in h
    s = res.summary()
    json.dumps(s)
    assert isinstance(res.plot(path=tmp_path / "s.png"), matplotlib.figure.Figure)  # four panels: the Figure


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_score_out_saves_summary_and_figure_and_help_reads_plainly(stub, tmp_path, capsys):
    """`scene score --out DIR` keeps what --json prints and the figure; the help says "95%", not "95%%"."""
    with pytest.raises(SystemExit):
        main(["scene", "score", "--help"])
    assert "Wilson 95% intervals" in capsys.readouterr().out
    sweep = tmp_path / "sweep"
    assert main(["scene", "run", "--base-url", stub.base_url, "--tuples", "3", "--seed", "4", "--max-turns", "2",
                 "--no-progress", "--n-boot", "50", "--out", str(sweep)]) == 0
    capsys.readouterr()
    assert main(["scene", "score", str(sweep), "--n-boot", "50", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    res = tmp_path / "scores"
    assert main(["scene", "score", str(sweep), "--n-boot", "50", "--json", "--out", str(res)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown.pop("summary file") == str(res / "summary.json")
    assert shown == printed == json.loads((res / "summary.json").read_text())
    assert (res / "scene.png").stat().st_size > 0
    (tmp_path / "file").write_text("x")
    assert main(["scene", "score", str(sweep), "--out", str(tmp_path / "file")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out" in err[0] and "not a directory" in err[0]


@pytest.mark.slow  # 2 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_run_and_score_print_one_rho_interval(stub, tmp_path, capsys):
    """Issue 33: ``scene run --seed 1`` bootstrapped rho with the run's seed, ``scene score`` with its own:
    the same episodes printed two intervals. One computation now (README's set-up, fewer resamples)."""
    out = tmp_path / "rho"
    assert main(["scene", "run", "--base-url", stub.base_url, "--tuples", "12", "--seed", "1", "--max-turns", "4",
                 "--no-progress", "--n-boot", "400", "--out", str(out), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["Spearman rho"]
    assert main(["scene", "score", str(out), "--n-boot", "400", "--json"]) == 0
    score = json.loads(capsys.readouterr().out)["Spearman rho"]
    assert run["low"] is not None and run == score
