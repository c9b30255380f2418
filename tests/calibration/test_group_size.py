"""Collective bias by group size (normlab.calibration.group_size): the three regimes on tables
built to show them, symmetry, reproducibility, the command behind the docs' numbers (docs/validation/group_size.md)."""

from __future__ import annotations

import numpy as np
import pytest
from _docs import docs_page  # the docs pages README's text moved to (issue 33)

from normlab.calibration import group_size_curve, load_fit
from normlab.theory.strategies import BestResponse, StrategyTable, decode_state, n_states

H = 3


def _table(p_b):
    return StrategyTable(np.array([p_b(decode_state(s, 2, H)) for s in range(n_states(2, H))]), memory=H,
                         names=("A", "B"))


def _majority(first, tie=0.5, short_minority=0.03):
    """p(B | memory): the partners' majority with 3 % noise; ``first`` on the empty memory,
    ``tie`` on ties, ``short_minority`` when a short memory has a majority of A."""
    def p(ent):
        if not ent:
            return first
        d = sum(q for _, q in ent) - len(ent) / 2
        if d > 0:
            return 0.98
        if d == 0:
            return tie
        return short_minority if len(ent) == H else max(short_minority, 0.03)
    return _table(p)


def test_a_first_move_bias_is_amplified_with_size():
    gs = group_size_curve(_majority(0.6), sizes=(4, 64, 500), n_runs=80, rng=1)
    p = gs.p("B")
    assert gs.regime == "amplifies" and gs.limit["outcome"] == "B"
    assert gs.limit["p_majority"]["B"] == 1.0 and gs.individual["B"]["p"] == pytest.approx(0.6)
    assert p.loc[4] < p.loc[500] and p.loc[500] > 0.95
    assert p.loc[4] < 0.9  # small groups keep much of the randomness of the first moves


def test_interaction_overrides_a_first_move_bias():
    # the first move prefers A (p(B) = 0.3), but ties and short A-majority memories lean to B
    gs = group_size_curve(_majority(0.3, tie=0.9, short_minority=0.25), sizes=(8, 300), n_runs=60, rng=2)
    assert gs.limit["outcome"] == "B" and gs.regime == "overrides"
    assert gs.p("B").loc[300] > 0.9


def test_a_symmetric_table_has_no_collective_bias():
    gs = group_size_curve(BestResponse(2).to_table(H, names=("A", "B")), sizes=(6, 200), n_runs=120, rng=3)
    assert gs.limit["outcome"] == "split" and gs.regime == "no collective bias"
    assert gs.limit["p_majority"] == {"A": 0.5, "B": 0.5, "none": 0.0}
    for N in (6, 200):  # each name wins about half the runs (Clopper-Pearson band of 120 runs)
        c = gs.curve[(gs.curve["n_agents"] == N) & (gs.curve["reading"] == "consensus") & (gs.curve["name"] == "A")]
        assert c["low"].iloc[0] < 0.5 < c["high"].iloc[0]


def test_same_seed_same_curve_and_result_api():
    import matplotlib

    matplotlib.use("Agg")
    tab = _majority(0.55)
    a = group_size_curve(tab, sizes=(4, 12), n_runs=30, rng=7)
    b = group_size_curve(tab, sizes=(4, 12), n_runs=30, rng=7)
    assert a.curve.equals(b.curve) and a.speed.equals(b.speed)
    f = a.to_frame()
    assert set(f["reading"]) == {"consensus", "majority"} and np.isinf(f["n_agents"]).any()
    assert (f.groupby(["n_agents", "reading"])["p"].sum().round(12) == 1.0).all()
    s = a.summary()
    assert s["sizes"] == [4, 12] and s["regime"] == a.regime
    assert "GroupSizeCurve(" in repr(a) and "<table" in a._repr_html_()
    ax = a.plot()
    assert ax.get_xscale() == "log" and ax.get_xticklabels()[-1].get_text() == "∞"


def test_posterior_draws_of_a_shipped_fit():
    fit = load_fit("llama3_70b_QM_H3")
    gs = group_size_curve(fit, sizes=(4, 48), n_runs=40, n_draws=4, rng=4)
    assert len(gs.limit_draws) == 4 and gs.limit["draws"] == 4
    assert gs.curve.groupby(["n_agents", "reading"])["n_runs"].first().eq(40).all()
    lo, hi = gs.individual["M"]["low"], gs.individual["M"]["high"]
    assert lo < gs.individual["M"]["p"] < hi  # 400 posterior draws of the first move


def test_bad_input():
    tab = _majority(0.5)
    with pytest.raises(ValueError, match="sizes"):
        group_size_curve(tab, sizes=(1, 4))
    with pytest.raises(ValueError, match="n_draws"):
        group_size_curve(tab, n_draws=3)
    with pytest.raises(TypeError, match="StrategyTable or a StrategyFit"):
        group_size_curve("best_response")
    with pytest.raises(ValueError, match="n_runs"):
        group_size_curve(tab, n_runs=0)


@pytest.mark.slow  # 3 s in the quick tier (issue 33: the default tier under 5 minutes)
def test_the_command_behind_readme(capsys):
    from normlab.calibration.group_size import main

    assert main(["--runs", "20", "--sizes", "4,24", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("mean field: settles on M") == 3
    assert "Llama-3.1 H=5" in out and out.count("P(consensus on M) -> 1.00") == 3
    # the docs' table (docs/validation/group_size.md): the first-move bias and the mean-field limit do not depend on --runs/--sizes
    import re
    from pathlib import Path

    readme = docs_page("validation/group_size.md")
    rows = [r for r in readme.split("**Collective bias by group size.**", 1)[1].split("\n\n")[1].splitlines()
            if r.startswith("| Llama")]
    assert len(rows) == 3
    for row in rows:
        label, p_empty, _, limit = (c.strip() for c in row.strip("|").split(" | "))
        line = next(x for x in out.splitlines() if x.startswith(label.replace(", H = ", " H=") + ":"))
        assert f"p(M | empty memory) {p_empty}" in line, (row, line)
        share, success = re.search(r"share of M (\d\.\d+), success (\d\.\d+)", line).groups()
        assert f"success {success}" in limit and ("share" not in limit or f"share {share}" in limit), (row, line)
