"""The docs' "Model adequacy" tables (docs/validation/adequacy.md) are what `python paper_figures/adequacy_check.py`
prints."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from _docs import docs_page  # the docs pages README's text moved to (issue 33)
import _paths  # the repository's and tests/' folders (tests/_paths.py)

ROOT = _paths.REPO
SCRIPT = ROOT / "paper_figures" / "adequacy_check.py"


def _script():
    spec = importlib.util.spec_from_file_location("adequacy_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_text_lists_failures_and_counts_rejections():
    fail = {"statistic": "final_sd", "committed": 6, "observed": 0.278, "sim_mean": 0.072, "sim_low": 0.019,
            "sim_high": 0.18, "z": 4.1, "p_value": 0.0198}
    row = dict(model="A", n_agents=24, memory=5, fit="a", direction="overturn_M", counts=7, checks=35)
    res = {"rows": [{**row, "run_effects": False, "T": 99.04, "p": 0.0099, "failures": [fail, {**fail, "committed": 8,
                                                                                            "z": 2.0}]},
                    {**row, "run_effects": True, "T": 4.17, "p": 0.4356, "failures": []}],
           "pairs": [{"model": "A", "n_agents": 24, "memory": 5, "kind": "swap", "name_order": "shared", "pairs": 10,
                      "observed": 8.0, "predicted": 6.4, "z": 9.47, "z_run": 8.8, "order_bias": 1.234,
                      "order_bias_low": 1.02, "order_bias_high": 1.47}],
           "skipped": ["B (24, 3)"], "settings": {"draws": 100, "seed": 1}}
    lines = _script().text(res).splitlines()
    assert "| A (24, 5) | overturn_M | none | 99.0 (7), 0.0099 | 2 of 35: final_sd at 6, 8 |" in lines
    assert "| A (24, 5) | overturn_M | baselines | 4.2 (7), 0.4356 | 0 of 35: none |" in lines
    assert "| A (24, 5) | swap (shared) | 10 | 8 / 6 | 9.47 | 8.80 | 1.23 [1.02, 1.47] |" in lines
    assert lines[-3].startswith("Published rule's statistic rejected (p < 0.05) in 1 of 1 directions without run "
                                "effects (A overturn_M), in 0 of 1 with")
    assert lines[-2] == ("Largest miss of the runs' final-share sd without run effects: A overturn_M at 6 committed "
                         "0.278 against 0.072 [0.019, 0.180] (p = 0.0198).")
    assert lines[-1] == "No shipped baseline fit, skipped: B (24, 3)."


@pytest.mark.slow
def test_readme_adequacy_is_what_the_script_prints(ainorms_dir):
    """Every line the script prints (default 100 draws, seed 1, the archives at hand) is on the docs
    page beside its command, and the finding the page states holds: without run effects the published
    rule's statistic rejects the shipped Llama-3.1 fit overturning M, with the baselines' run
    effects it does not, and Llama-3.1's committed-run partners agree beyond the table even with
    run shifts while its baselines' partners do not."""
    res, _ = _script().check(sorted(map(str, Path(ainorms_dir).glob("*.zip"))))
    readme = docs_page("validation/adequacy.md")
    assert "python paper_figures/adequacy_check.py\n" in readme
    for line in _script().text(res).splitlines():
        assert line in readme, f"docs/validation/adequacy.md lacks the script's line:\n{line}"
    rows = {(r["model"], r["direction"], r["run_effects"]): r for r in res["rows"]}
    l31 = "Llama-3.1-70B-Instruct"
    assert rows[(l31, "overturn_M", False)]["p"] < 0.05 < rows[(l31, "overturn_M", True)]["p"]
    pairs = {(p["model"], p["kind"]): p for p in res["pairs"]}
    assert pairs[(l31, "swap")]["z_run"] > 3 > abs(pairs[(l31, "baseline")]["z_run"])
    assert pairs[(l31, "swap")]["order_bias_low"] > 0
