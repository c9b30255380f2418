"""Transfer across N, H and LLM (normlab.calibration.transfer): tables at another memory length,
the runs a fit used, and the scores of the shipped fits on the published runs (skip without the
data)."""

from __future__ import annotations

import numpy as np
import pytest
from _docs import docs_page  # the docs pages README's text moved to (issue 33)

from normlab.calibration import load_fit
from normlab.calibration.transfer import fitted_runs, tables_at_memory, target_settings, transfer_scores
from normlab.theory.strategies import decode_state, encode_state, n_states


@pytest.mark.parametrize("h_new", [2, 5])
def test_suffix_transfer_reindexes_every_draw(h_new):
    fit = load_fit("llama3_70b_QM_H3")
    t3 = fit.sample_tables(3, rng=5)
    t_new = tables_at_memory(fit, h_new, 3, how="suffix", rng=5)
    assert [t.memory for t in t_new] == [h_new] * 3
    for d in range(3):
        for s in range(n_states(2, h_new)):
            ent = decode_state(s, 2, h_new)
            assert np.array_equal(t_new[d].table[s], t3[d][encode_state(ent[-3:], 2)])


def test_feature_transfers():
    from normlab.calibration.features import design_matrix

    fit = load_fit("llama31_70b_QM_H5")
    X = design_matrix(3, fit.decay)
    for t in tables_at_memory(fit, 3, 4, how="features", rng=1):
        eta = np.log(t.table[:, 1] / t.table[:, 0])
        # the log-odds are exactly X @ beta for one stored coefficient draw
        d = np.abs(fit.coef_draws @ X.T - eta).max(axis=1)
        assert d.min() < 1e-8
    # with state effects from the prior the log-odds leave the feature plane
    t = tables_at_memory(fit, 3, 1, how="prior", rng=1)[0]
    eta = np.log(t.table[:, 1] / t.table[:, 0])
    assert (np.abs(fit.coef_draws @ X.T - eta).max(axis=1)).min() > 0.5
    assert tables_at_memory(fit, 5, 2, how="features", rng=1)[0].memory == 5  # same H: the fit's own draws
    from normlab.calibration import StrategyFit

    emp = StrategyFit(kind="empirical", names=fit.names, memory=5, counts=fit.counts)
    with pytest.raises(ValueError, match="feature-based"):
        tables_at_memory(emp, 3, 1, how="features")
    assert tables_at_memory(emp, 3, 2, how="suffix", rng=0)[0].memory == 3
    with pytest.raises(ValueError, match="how must be"):
        tables_at_memory(fit, 3, 1, how="nearest")


@pytest.fixture(scope="module")
def qm_log(ainorms_dir):
    from normlab.llm_runs.published.ainorms import load_ainorms

    return load_ainorms(ainorms_dir, kinds=["baseline", "swap", "evolved"], files=["*_Q_M_*", "*_M_Q_*"])


def test_fitted_runs_and_settings_of_the_published_data(qm_log):
    for name in ("llama3_70b_QM_H3", "llama31_70b_QM_H5"):
        fit = load_fit(name)
        ids = fitted_runs(fit, qm_log)
        assert len(ids) == fit.meta["source"]["n_runs"]
        assert set(qm_log.runs.set_index("run").loc[ids, "kind"]) == {"baseline"}
    st = {(t["llm"], t["n_agents"], t["memory"]): t for t in target_settings(qm_log, ("Q", "M"))}
    l3 = st[("Llama-3-70B-Instruct", 48, 3)]
    assert l3["counts"] == [1, 2, 3, 4, 5, 6] and l3["rounds"] == 20 and l3["n_baseline"] == 0
    l31 = st[("Llama-3.1-70B-Instruct", 24, 5)]
    assert l31["n_baseline"] == 40 and 0 in l31["counts"] and l31["rounds"] >= 30 and l31["stop_streak"] == 72
    assert st[("Llama-3-70B-Instruct", 200, 5)]["stop_streak"] == 72  # not 3N: flagged in transfer notes


@pytest.mark.slow
def test_transfer_scores_on_the_published_runs(qm_log):
    src = {"L3 H3": load_fit("llama3_70b_QM_H3"), "L31 H5": load_fit("llama31_70b_QM_H5")}
    targets = [("Llama-3-70B-Instruct", 24, 3), ("Llama-3-70B-Instruct", 48, 3), ("Llama-3-70B-Instruct", 200, 5),
               ("Llama-3.1-70B-Instruct", 24, 5)]
    ts = transfer_scores(src, qm_log, targets=targets, n_draws=12, n_runs_flip=8, rng=3)
    t = ts.table.set_index(["source", "target"])
    assert t.loc[("L3 H3", "Llama-3 N=24 H=3"), "note"] == "every run here was used by the fit"
    assert t.loc[("L3 H3", "Llama-3 N=48 H=3"), "relation"] == "other N"
    assert t.loc[("L3 H3", "Llama-3 N=200 H=5"), "relation"] == "other N and H"
    assert t.loc[("L31 H5", "Llama-3 N=48 H=3"), "relation"] == "other LLM"
    same = t.loc[("L31 H5", "Llama-3.1 N=24 H=5")]
    assert same["relation"] == "same setting" and same["n_consensus_runs"] == 0  # baselines were fitted
    assert same["n_flip_runs"] >= 130 and same["within_rounds"] == 30
    n48 = t.loc[("L3 H3", "Llama-3 N=48 H=3")]
    assert n48["n_flip_runs"] == 68 and n48["within_rounds"] == 20  # the runs' own 20 rounds: none censored
    assert n48["brier_flip"] < 0.15 and n48["log_score_flip"] < np.log(2)
    assert "72 consecutive successes" in t.loc[("L3 H3", "Llama-3 N=200 H=5"), "note"]
    # the rivals on the same runs: the direction rule from the 40 fitted baselines (all on M)
    r = qm_log.runs.set_index("run").loc[fitted_runs(src["L31 H5"], qm_log)]
    assert (r["consensus"] == "M").all() and len(r) == 40
    sc = ts.scores[("L31 H5", "Llama-3.1 N=24 H=5")]
    fl = sc.runs[sc.runs["target"] == "flip"]
    p = np.where(fl["majority"] == "M", 0.5 / 41.5, 40.5 / 41.5)  # KT over Q, M, none
    assert same["brier_flip_direction_rule"] == pytest.approx(np.mean((p - fl["observed"]) ** 2), abs=1e-12)
    assert same["logistic_trained_on"] == "other LLM"  # Llama-3's committed runs
    assert sc.settings["rivals"]["logistic"]["models"] == ["Llama-3-70B-Instruct"]
    assert 0 <= same["zero_width_experiment"] <= 1
    c = ts.comparison()
    assert set(c["forecaster"]) == {"normlab", "direction_rule", "logistic", "base_rate", "coin"}
    m = c[(c["relation"] == "same setting") & (c["majority"] == "M") & (c["forecaster"] == "normlab")]
    assert m["convention"].iloc[0] == "strong" and m["n"].iloc[0] == (fl["majority"] == "M").sum()
    b = ts.by_relation().set_index("relation")
    assert {"same setting", "other N", "other N and H", "other LLM"} <= set(b.index)
    assert {"brier_flip_logistic", "brier_consensus_base_rate", "zero_width_experiment"} <= set(b.columns)
    cs = ts.coverage_summary()
    assert {"fraction_normlab", "fraction_direction_rule", "fraction_logistic", "zero_width"} <= set(cs.columns)
    assert isinstance(ts.rival_wins(), list) and "rival_wins" in ts.summary()
    f = ts.to_frame()
    assert set(f["metric"]) >= {"brier_flip", "brier_consensus", "coverage_experiment"}
    assert "TransferScores(" in repr(ts) and "<table" in ts._repr_html_() and "logistic" in repr(ts)
    import matplotlib

    matplotlib.use("Agg")
    axes = ts.plot_rivals()
    assert len(axes) == len(set(zip(c["target"], c["majority"])))


def _printed_table(out: str, header_start: str) -> list:
    import re

    lines = out.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(header_start))
    rows = []
    for line in lines[i + 2:]:
        if not line.strip():
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


def _readme_table(readme: str, header_start: str) -> list:
    block = readme.split(header_start, 1)[1].split("\n\n")[0]
    return [[c.strip() for c in r.strip().strip("|").split(" | ")] for r in block.splitlines()[2:] if r.startswith("| ")]


@pytest.mark.slow
def test_the_command_behind_readme(ainorms_dir, capsys, monkeypatch):
    """The docs' two transfer tables (docs/validation/transfer.md) are the command's output at --draws 200 --seed 1, number for number."""
    from pathlib import Path

    from normlab.calibration.transfer import main

    monkeypatch.setenv("NORMLAB_AINORMS", str(ainorms_dir))
    assert main(["--draws", "200", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    for rel in ("same setting", "other N", "other H", "other N and H", "other LLM"):
        assert rel in out
    readme = docs_page("validation/transfer.md")

    def dash(v):
        return "—" if v in ("-", "0") else v

    def pct(v):
        return f"{round(100 * float(v))} %"

    printed = {r[0]: r for r in _printed_table(out, "Brier scores by relation")}
    rows = _readme_table(readme, "| fit → target | flip runs |")
    assert len(rows) == 5
    for row in rows:
        rel = row[0].split(" (")[0]
        _, _, flips, b_n, b_d, b_l, winners, w_n, w_b, cov, n_iv, zw = printed[rel]
        assert row[1:8] == [dash(flips), dash(b_n), dash(b_d), dash(b_l), dash(winners), dash(w_n), dash(w_b)], row
        assert row[8] == f"{pct(cov)} of {n_iv} ({pct(zw)})", row
    printed = {(r[0], r[1]): r for r in _printed_table(out, "flips by direction")}
    rows = _readme_table(readme, "| fit → target | consensus attacked |")
    assert len(rows) == len(printed) == 8
    for row in rows:
        maj = row[1].split(" ")[0]
        _, _, conv, runs, *scores, cov, n_iv, zw, in_n, in_d, in_l, nf = printed[(row[0], maj)]
        assert row[1] == f"{maj} ({conv})" and row[2] == runs and row[3:9] == scores, row
        assert row[9] == f"{pct(cov)} of {n_iv} ({pct(zw)})", row
        k = [round(float(v) * int(nf)) for v in (in_n, in_d, in_l)]
        assert row[10] == f"{k[0]} / {k[1]} / {k[2]} of {nf}", row
    # the sentences beside the tables: every rival win they name is one the command prints
    wins = out.split("where a rival scores better than normlab", 1)[1]
    assert "same setting: direction rule beats normlab on flips of a consensus on Q" in wins
    assert "other LLM: committed-fraction logistic beats normlab on flips (all directions)" in wins
    assert "other LLM: base rate of the fit runs beats normlab on consensus winners" in wins
    # the page: "normlab's log score on those flips (X) is worse than the coin's (0.693)"
    import re

    coin = re.search(r"log score on those flips \((\d\.\d+)\) is worse\s+than the coin's \(0\.693\)", readme)
    assert coin, "the page's sentence on the coin"
    assert f"other LLM: coin beats normlab on flips (all directions), 469 runs: log score 0.693 vs {coin.group(1)}" in wins
    lines = [ln.strip() for ln in wins.splitlines()[1:] if ln.startswith("  ")]
    assert not [ln for ln in lines if ln.startswith(("other N:", "other N and H:"))]
    # the page names the same setting's rival wins: on a Q consensus only, the direction rule, and the
    # logistic on the log score alone (a tie within its standard error: the page says so)
    same = [ln for ln in lines if ln.startswith("same setting:")]
    assert same and all("consensus on Q, the weak convention" in ln for ln in same)
    assert {ln.split(" beats", 1)[0] for ln in same} <= {"same setting: direction rule",
                                                          "same setting: committed-fraction logistic"}
    assert "same setting: direction rule" in {ln.split(" beats", 1)[0] for ln in same}
    for ln in same:
        if "logistic" in ln.split(" beats", 1)[0]:
            assert "Brier" not in ln
            d = re.search(r"log score (\d\.\d+) vs (\d\.\d+)", ln)
            assert d and f"{d.group(1)} against {d.group(2)}" in readme
    # "other H": the page names no rival win there beyond the base rate's tie on winners
    assert all("base rate of the fit runs beats normlab on consensus winners" in ln
               for ln in lines if ln.startswith("other H:"))


def test_transfer_plays_the_source_fits_run_effects(monkeypatch):
    """A transfer cell's prediction plays the source fit's run effects (before issue 32 it passed the
    tables as a list, which plays none, and said nothing); a joint fit's are lined up with its draws."""
    import dataclasses

    import normlab.calibration.evaluate.transfer as tr
    from normlab.calibration import RunEffects, fit_strategy
    from normlab.calibration.fit.inputs import counts_from_log
    from normlab.schema import GameLog
    from normlab.theory import strategy_game

    logs = []
    for i, (c, init) in enumerate(((0, None), (1, "consensus:M"), (2, "consensus:M"))):
        kw = dict(committed=c, committed_name="Q", initial=init) if init else {}
        lg = strategy_game("best_response", n_agents=6, memory=2, n_runs=4, names=("Q", "M"), max_interactions=120,
                           stop="max", record_decisions=True, rng=i, **kw).to_log()
        lg.runs["kind"] = "swap" if c else "baseline"
        logs.append(lg)
    log = GameLog.concat(logs)
    fit = fit_strategy(counts_from_log(logs[0], names=("Q", "M"), memory=2), "empirical")
    eff = RunEffects(sample=np.tile([0.1, 0.05, 0.3, 0.2, 0.0], (50, 1)), kind="marginal", n_runs=12)
    fit = dataclasses.replace(fit, meta={**fit.meta, "run_effects": eff.to_dict()})
    seen = []
    real = tr.predict

    def spy(*a, **k):
        seen.append(k.get("run_effects"))
        return real(*a, **k)

    monkeypatch.setattr(tr, "predict", spy)
    ts = transfer_scores({"A": fit}, log, n_draws=4, n_runs_flip=2, rng=1)
    assert seen and all(isinstance(e, RunEffects) and e.active for e in seen)
    assert set(ts.table["run_effects"]) == {"marginal"}
    # explicit tables with run_effects="fit" play none, and the prediction says so
    p = real(fit.tables(3, rng=1), n_agents=6, n_draws=3, n_runs_consensus=2, n_runs_flip=2, strength=False, rng=1)
    assert p.settings["run_effects"] is None and "carry no run effects" in p.settings["run_effects_note"]
    # a joint fit's effects, aligned with explicit draws, pair row i with table i
    joint = RunEffects(sample=np.column_stack([np.zeros((5, 2)), np.arange(5) / 10, np.zeros(5), np.zeros(5)]),
                       kind="joint", n_runs=12)
    al = joint.aligned([4, 0, 2])
    np.testing.assert_array_equal(al.sample[:, 2], [0.4, 0.0, 0.2])
