"""Transfer across N, H and LLM (normlab.calibration.transfer): tables at another memory length,
the runs a fit used, and the scores of the shipped fits on the published runs (skip without the
data)."""

from __future__ import annotations

import numpy as np
import pytest

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
    b = ts.by_relation().set_index("relation")
    assert {"same setting", "other N", "other N and H", "other LLM"} <= set(b.index)
    f = ts.to_frame()
    assert set(f["metric"]) >= {"brier_flip", "brier_consensus", "coverage_experiment"}
    assert "TransferScores(" in repr(ts) and "<table" in ts._repr_html_()


@pytest.mark.slow
def test_the_command_behind_readme(ainorms_dir, capsys, monkeypatch):
    from normlab.calibration.transfer import main

    monkeypatch.setenv("NORMLAB_AINORMS", str(ainorms_dir))
    assert main(["--draws", "6", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    for rel in ("same setting", "other N", "other H", "other N and H", "other LLM"):
        assert rel in out
    # README's table: the runs scored and the intervals counted come from the data, not the draws
    # (its Brier scores and coverage percentages are those of --draws 200)
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    rows = [r for r in readme.split("| fit → target |", 1)[1].split("\n\n")[0].splitlines() if r.startswith("| ")
            and "---" not in r]
    assert len(rows) == 5
    printed = {re.split(r"\s{2,}", x.strip())[0]: x.split() for x in out.splitlines()}
    for row in rows:
        label, flips, _, winners, _, coverage = (c.strip() for c in row.strip("|").split(" | "))
        rel = label.split(" (")[0]
        cols = printed[rel][len(rel.split()):]  # cells, n_flip_runs, brier, log, n_consensus_runs, ..., n_experiment
        assert cols[1] == ("0" if flips == "—" else flips) and cols[4] == ("0" if winners == "—" else winners), row
        assert coverage.endswith(f"of {cols[8]}"), (row, cols)
