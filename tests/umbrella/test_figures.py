"""normlab.figures and ``normlab figures``: every figure's data against the published numbers.

One ``normlab figures --small`` run (in process, on the published AI-norms archives) writes every
PNG and CSV; the tests read its CSVs back and compare them with the numbers printed in Flint
Ashery, Aiello & Baronchelli, Sci. Adv. 11, eadu9368 (2025) (Tables 1, S1-S3, S5 and figure
captions), hard-coded in the authors' ``plotter.ipynb`` (Fig. 2A), or listed in
../shared/VALIDATION.md. Values read off a published figure (no number printed) carry a tolerance
of 0.02. Tests needing the archives skip without them; the theory figures are tested regardless.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from normlab.cli import main
from normlab.figures.registry import FIGURES

L3, L31 = "Llama-3-70B-Instruct", "Llama-3.1-70B-Instruct"
FIGS = ["fig1a", "fig1b", "fig2a", "fig2b", "fig3a", "fig3b", "fig3_prediction", *(f"figS{k}" for k in range(1, 11)),
        "itcmas_fig6", "itcmas_fig7", "itcmas_gini"]
TABLES = ["table1", "tableS1", "tableS2", "tableS3", "tableS5"]
#: Run on an LLM, not read from the archives (tests/umbrella/test_wording.py checks them on the stub server).
LLM_KEYS = ["figS11", "figS12", "tableS6"]


@pytest.fixture(scope="module")
def made(ainorms_dir, tmp_path_factory):
    """One ``normlab figures --small`` run over everything."""
    import contextlib
    import io

    out = tmp_path_factory.mktemp("figs")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["figures", "--small", "--out", str(out), "--data", str(ainorms_dir), "--dpi", "60",
                   "--only", ",".join(k for k in FIGURES if k not in LLM_KEYS)])
    assert rc == 0
    return out, buf.getvalue()


def csv(made, key) -> pd.DataFrame:
    return pd.read_csv(made[0] / f"{key}.csv")


# ----------------------------------------------------------------------------- the command
def test_every_figure_and_table_is_written(made):
    out, text = made
    for k in FIGS:
        assert (out / f"{k}.png").stat().st_size > 10_000, k
    for k in FIGS + TABLES:
        assert (out / f"{k}.csv").exists(), k
    n = sum(1 for k in FIGURES if k not in LLM_KEYS)  # every registered figure and table the archives feed
    assert n >= 25 and f"{n} written, 0 skipped" in text


def test_without_data_the_llm_figures_are_skipped_with_the_reason(tmp_path, capsys):
    empty = tmp_path / "no-data"
    empty.mkdir()
    rc = main(["figures", "--small", "--out", str(tmp_path / "o"), "--data", str(empty),
               "--only", "fig1a,figS3,table1,fig2b"])
    text = capsys.readouterr().out
    assert rc == 0
    assert "fig1a            skipped (the reason at the end)" in text
    assert "  fig1a: Fig. 1A: no run with the ten names" in text
    assert "  table1: Table 1: no probe files" in text
    assert "  fig2b: " in text and str(empty) in text
    assert (tmp_path / "o" / "figS3.png").exists() and not (tmp_path / "o" / "fig1a.png").exists()
    assert "1 written, 3 skipped:" in text


@pytest.mark.parametrize("argv, msg", [
    (["--only", "fig9z", "--out", "x"], "unknown figure(s) ['fig9z']"),
    (["--small"], "--out DIR is required"),
    (["--data", "/no/such/folder", "--out", "x"], "does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(argv, msg, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["figures", *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1


# ----------------------------------------------------------------------------- Fig. 1
def test_fig1a_llm_curves_and_theory(made):
    from normlab.llm_runs.published.ainorms import first_round_reaching

    d = csv(made, "fig1a")
    for model, r95 in ((L3, 10), (L31, 13)):  # VALIDATION.md
        m = d[(d["source"] == model) & (d["curve"] == "mean")].set_index("round")["success_rate"]
        assert first_round_reaching(m, 0.95) == r95
        assert d[(d["source"] == model) & (d["curve"] == "run")]["run"].nunique() == 5  # five thin runs
    inset = d[d["panel"] == "inset"]
    assert len(inset) == 1000 and inset["round"].max() == pytest.approx(1000 / 24)
    th = d[(d["panel"] == "main") & (d["source"] == "theory")].set_index("round")["success_rate"]
    assert th.loc[15] == pytest.approx(0.93, abs=0.02) and th.loc[17] == pytest.approx(0.96, abs=0.02)  # 1000 runs


def test_fig1b_is_llama31_run_6(made):
    d = csv(made, "fig1b").pivot(index="round", columns="name", values="share")
    # read off the published Fig. 1B: M (orange diamonds) 0.15, 0.21, 0.44, 0.73, 0.85, 0.96, 1, 1, 1
    np.testing.assert_allclose(d["M"].to_numpy(), [0.15, 0.21, 0.44, 0.73, 0.85, 0.96, 1, 1, 1], atol=0.02)
    assert d.loc[1, "F"] == pytest.approx(0.27, abs=0.02) and d.loc[3, "Q"] == pytest.approx(0.21, abs=0.02)
    np.testing.assert_allclose(d.sum(axis=1), 1.0)


# ----------------------------------------------------------------------------- Fig. 2, Tables S1-S2
def test_fig2a_counts_equal_the_authors(made):
    d = csv(made, "fig2a")
    pool = list("QMXYFJPRCD")
    # plotter.ipynb cell 5: all_options_counter1 (Llama 3, 40 runs) and 2 (Llama 3.1, 40 runs)
    for model, counts in ((L3, [6, 3, 1, 2, 2, 2, 1, 11, 5, 7]), (L31, [1, 12, 4, 9, 1, 3, 3, 2, 4, 1])):
        got = d[d["model"] == model].set_index("name").reindex(pool)["runs"].tolist()
        assert got == counts


def test_fig2b_and_tables_s1_s2(made):
    d = csv(made, "fig2b")
    ind = d[d["panel"] == "individual"].set_index(["model", "name"])
    # Table S1 (strong M, weak Q) and the Fig. 2B caption's p-values
    for model, (m, q), p in ((L3, (2435, 2565), 0.068), (L31, (5079, 4921), 0.116)):
        assert ind.loc[(model, "M"), "count"] == m and ind.loc[(model, "Q"), "count"] == q
        assert ind.loc[(model, "M"), "p_value"] == pytest.approx(p, abs=5e-4)
        assert bool(ind.loc[(model, "M"), "neutral"])  # the asterisk
    col = d[d["panel"] == "collective"].set_index(["model", "name"])["count"]
    assert col[(L3, "M")] == 40 and col[(L3, "Q")] == 0 and col[(L31, "M")] == 40  # Table S2
    s1 = csv(made, "tableS1")
    assert (s1["strong"] == s1["published_strong"]).all() and (s1["weak"] == s1["published_weak"]).all()
    s2 = csv(made, "tableS2")
    assert (s2["strong"] == s2["published_strong"]).all() and (s2["weak"] == s2["published_weak"]).all()


# ----------------------------------------------------------------------------- Fig. 3, Table S3
def test_fig3_and_table_s3(made):
    s3 = csv(made, "tableS3").set_index(["model", "majority"])
    for model, (cm_m, cm_q) in ((L3, (6, 1)), (L31, (10, 0))):  # Table S3
        assert s3.loc[(model, "M"), "published_rule"] == cm_m == s3.loc[(model, "M"), "published"]
        assert s3.loc[(model, "Q"), "published_rule"] == cm_q
    b = csv(made, "fig3b").set_index(["model", "majority"])["fraction"]
    assert b[(L3, "M")] == pytest.approx(6 / 48) and b[(L31, "M")] == pytest.approx(10 / 24)
    a = csv(made, "fig3a").groupby(["model", "majority", "committed"])["success"].first()
    # the paper's Fig. 3A: both critical counts flip the weak Q; only the larger one flips M
    assert a[(L3, "Q", 1)] and a[(L3, "Q", 6)] and a[(L3, "M", 6)] and not a[(L3, "M", 1)]
    assert a[(L31, "Q", 0)] and a[(L31, "M", 10)] and not a[(L31, "M", 0)]


def test_fig3a_ensemble_sums_match_readme(ainorms_dir):
    from normlab.figures import fig3a_data

    d = fig3a_data(ainorms_dir, counts="all")
    s = d[(d["model"] == L31) & (d["majority"] == "M")].groupby("committed")["last3"].first()
    # README "Criteria": sums 2.34, 2.14, 2.47 at 4, 6, 8 committed; 2.93 at 10
    np.testing.assert_allclose(s.loc[[4, 6, 8, 10]].to_numpy(), [2.34, 2.14, 2.47, 2.93], atol=0.005)


def test_fig3_prediction_band_and_observed_points(made):
    d = csv(made, "fig3_prediction")
    assert {"predicted", "observed"} == set(d["source"])
    ob = d[(d["source"] == "observed") & (d["model"] == L31) & (d["majority"] == "Q")]
    assert (ob["p_flip"] == 1).all()  # a Q consensus of Llama-3.1 always flips (Table S3: 0)
    pr = d[d["source"] == "predicted"]
    assert ((pr["low"] <= pr["p_flip"]) & (pr["p_flip"] <= pr["high"]) | pr["high"].isna()).all()


# ----------------------------------------------------------------------------- S1, S2, S4-S7
def test_figS1_meta_prompting(made):
    d = csv(made, "figS1").set_index(["model", "label"])["accuracy"]
    # Llama-3 stores its summary (#_actions 0.85, #_points 0.967); Llama-3.1 read off the figure
    assert d[(L3, "#_actions")] == pytest.approx(0.85) and d[(L3, "#_points")] == pytest.approx(0.967)
    for q, v in (("#_actions", 0.80), ("min", 0.97), ("points_i", 0.94), ("#_points", 0.94), ("max", 1.0)):
        assert d[(L31, q)] == pytest.approx(v, abs=0.02), q


def test_figS2_settings(made):
    d = csv(made, "figS2")
    first = d[d["round"] == 1].set_index("setting")["success_rate"]
    assert len(first) == 6
    # read off the published Fig. S2 at round 1: W = 6 about 0.18, W = 26 about 0.26, W = 2 about 0.5
    assert first["W = 6, H = 5, N = 24"] == pytest.approx(0.18, abs=0.02)
    assert first["W = 26, H = 5, N = 24"] == pytest.approx(0.26, abs=0.02)
    assert first["W = 2, H = 5, N = 200"] == pytest.approx(0.5, abs=0.03)


def test_figS4_latin_alphabet(made):
    d = csv(made, "figS4").set_index(["panel", "name"])
    assert d.loc[("individual", "A"), "n"] == 480 and d.loc[("collective", "A"), "count"] == 20  # caption
    assert d.loc[("individual", "A"), "share"] == pytest.approx(0.44, abs=0.02)  # read off Fig. S4A


def test_figS5_chi_squared(made):
    d = csv(made, "figS5").groupby("model").first()
    # caption: 15 000 and 10 000 samples; p < 0.001 and p = 0.001
    assert d.loc[L3, "n"] == 15000 and d.loc[L3, "p_value"] < 0.001
    assert d.loc[L31, "n"] == 10000 and round(d.loc[L31, "p_value"], 3) == 0.001


def test_figS6_consensus_counts(ainorms_dir):
    from normlab.figures import figS6_data

    # caption: {Q,M}: M 40/40; {F,J}: F 24/40; {X,Y}: X 40/40; {Alice,Bob}: Alice 40/40
    c = figS6_data(ainorms_dir).attrs["consensus"]
    assert c["Q,M"]["M"] == 40 and c["F,J"]["F"] == 24 and c["X,Y"]["X"] == 40 and c["Alice,Bob"]["Alice"] == 40


def test_figS7_stability(made):
    d = csv(made, "figS7")
    runs = d[d["curve"] == "run"].groupby(["model", "initial"])["run"].nunique()
    assert runs[(L3, "F")] == runs[(L3, "J")] == 4 and runs[(L31, "Q")] == runs[(L31, "M")] == 10  # caption
    assert (d[d["model"] == L3]["share"] == 1).all()  # Llama-3 never leaves its consensus
    q = d[(d["model"] == L31) & (d["initial"] == "Q") & (d["curve"] == "mean")].set_index("round")["share"]
    assert q.loc[1] == pytest.approx(0.9, abs=0.03) and q.loc[12] < 0.1  # read off Fig. S7B


# ----------------------------------------------------------------------------- S8-S10
def test_figS8_table_agrees_with_counts_where_visited():
    from normlab.figures import figS8_data

    fit, cnt = figS8_data(), figS8_data(source="counts")
    assert len(fit) == 2 * 32 * 32 and fit["p_M"].between(0, 1).all()
    seen = cnt["observed"] & (cnt["n"] >= 20)
    assert np.corrcoef(fit.loc[seen, "p_M"], cnt.loc[seen, "p_M"])[0, 1] > 0.95
    assert cnt.loc[~cnt["observed"], "p_M"].isna().all()


def test_figS9_S10_frequencies(made):
    s9 = csv(made, "figS9")
    f = s9.groupby(["model", "source", "setting"])["frequency"].sum()
    np.testing.assert_allclose(f.to_numpy(), 1.0)
    assert (L31, "published runs", "1 committed to Q") in f.index
    assert (L3, "published runs", "unperturbed") not in f.index  # no such Llama-3 runs were published
    top = s9.loc[s9.groupby(["model", "source", "setting"])["frequency"].idxmax(), "state"]
    assert (top == ";".join(["M,M"] * 5)).all()  # the consensus state dominates every panel
    s10 = csv(made, "figS10")
    np.testing.assert_allclose(s10.groupby(["model", "memory_len"])["frequency"].sum().to_numpy(), 1.0)


# ----------------------------------------------------------------------------- Tables 1, S5
def test_table1(made, ainorms_dir):
    from normlab.figures import table1_data

    t = csv(made, "table1").set_index("memory_state", drop=False)
    assert t.loc["M,Q;Q,M", "p_M"] == pytest.approx(0.848, abs=5e-4)  # text
    assert t.loc["Q,M;M,Q", "p_Q"] == pytest.approx(0.451, abs=5e-4)  # text
    p = t.groupby("interaction")["p_interaction"].first()
    assert p[1] == pytest.approx(0.116, abs=1e-3) and p[2] == pytest.approx(0.110, abs=1e-3) and p[3] < 2.2e-16
    assert (t[t["interaction"] == 3]["favours"] == "M").sum() == 5  # "5 out of the 8"
    a = table1_data(ainorms_dir).attrs
    assert round(a["stay"], 3) == 0.994 and round(a["switch"], 3) == 0.973  # 99.4 % and 97.3 %


def test_tableS5_every_memory_biased_none_rejected(made, ainorms_dir):
    from normlab.figures import tableS5_data

    t = csv(made, "tableS5")
    assert len(t) == 12 and t["biased"].all() and t["more_extreme_possible"].all()  # "in all cases"
    two = tableS5_data(ainorms_dir, two_sided=True, n_boot=200)
    assert np.all(two["p_dagger"] >= t["p_dagger"])  # the prose's two-sided test is never smaller


# ----------------------------------------------------------------------------- theory figures (no data)
def test_figS3_bias_sets_the_first_round_and_the_padding_the_end():
    from normlab.figures import figS3_data

    kw = dict(runs=400, rounds=21, biases=[0.25, 0.55, 0.75], rng=5)
    side, cons = figS3_data(**kw), figS3_data(pad="consensus", **kw)
    r1 = side[side["round"] == 1].set_index("bias")["p_name_1"]
    np.testing.assert_allclose(r1.to_numpy(), [0.25, 0.55, 0.75], atol=0.04)  # published: curves start at b
    end = side[side["round"] == 21].set_index("bias")["p_name_1"]
    assert end[0.55] > 0.95 and end[0.25] < 0.05  # the authors' padding: every curve reaches its side
    c = cons[cons["round"] == 21].set_index("bias")
    np.testing.assert_allclose(c["p_name_1"], c["p_consensus_1"], atol=0.03)  # consensus padding: P(consensus)
    assert c.loc[0.55, "p_consensus_1"] < 0.85  # a finite N = 24 population often ends on '0'
    plain = figS3_data(bias_empty=False, **kw)
    assert plain[plain["round"] == 1]["p_name_1"].between(0.45, 0.6).all()  # held names only: round 1 near 1/2
