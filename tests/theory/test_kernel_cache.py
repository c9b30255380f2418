"""Kernels give the same results whatever the process did before and whether Numba's cache is
cold or warm (issue 29, item 1: a user's strategy kernel, compiled under the built-in kernel's
name, took the place of the built-in's cached code in a process with a warm cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from normlab._jit import kernel_variant

# Every built-in kernel path of the theory layer, after (or without) a FunctionStrategy game,
# printed as fingerprints of the outputs.
SCRIPT = textwrap.dedent(
    """
    import hashlib, json, sys
    import numpy as np
    from numba import njit
    from normlab.theory import (BestResponse, FunctionStrategy, LogitStrategy, StrategyTable, minimal_naming_game,
                                strategy_game)

    @njit
    def copy_last_partner(own, partner, W, params, out):
        if own.shape[0] == 0:
            for q in range(W):
                out[q] = 1.0 / W
            return
        for q in range(W):
            out[q] = params[0] / W
        out[partner[-1]] += 1.0 - params[0]

    def fp(res):
        h = hashlib.sha256()
        for a in (res.round_production, res.n_interactions, res.round_success):
            h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()[:16]

    out = {}
    if sys.argv[1] == "user-first":
        u = strategy_game(FunctionStrategy(copy_last_partner, 2, params=[0.1]), n_agents=14, memory=3, n_runs=3,
                          max_interactions=2000, rng=11)
        out["user"] = fp(u)
    logit = LogitStrategy([2, 0, 1, 1, 1, 0.5], [0, 0.2])
    rng = np.random.default_rng(0)
    tab = StrategyTable(rng.dirichlet([1, 1], size=85), memory=3)
    per_run = [StrategyTable(rng.dirichlet([1, 1], size=85), memory=3) for _ in range(8)]
    cases = {
        "best_response": dict(strategy="best_response"),
        "best_response_table": dict(strategy=BestResponse(2).to_table(3)),
        "wsls": dict(strategy="wsls"),
        "logit": dict(strategy=logit),
        "logit_table": dict(strategy=logit.to_table(3)),
        "table": dict(strategy=tab),
        "per_run_same": dict(strategy=[tab] * 8, per_run=True),  # one table per run, all equal: "table"'s runs
        "per_run": dict(strategy=per_run, per_run=True),
        "per_run_order": dict(strategy=per_run, per_run=True, committed=5, initial="consensus", stop="flip",
                              order_bias=0.3, name_order="shared"),
        "mixed": dict(strategy=[logit, "best_response"], groups=[15, 15]),
        "committed": dict(strategy=logit, committed=5, initial="consensus", stop="flip"),
        "order_shared": dict(strategy=logit.to_table(3), order_bias=0.3, name_order="shared"),
        "order_independent": dict(strategy=logit.to_table(3), order_bias=0.3, name_order="independent"),
    }
    for key, kw in cases.items():
        kw.setdefault("stop", "consensus")
        out[key] = fp(strategy_game(n_agents=30, memory=3, n_runs=8, rng=4, max_interactions=3000, **kw))
    out["naming_game"] = hashlib.sha256(np.asarray(
        minimal_naming_game(n_agents=50, n_runs=4, rng=3).consensus_time).tobytes()).hexdigest()[:16]
    if "--design" in sys.argv:
        from normlab.calibration import load_fit, predict
        p = predict(load_fit("llama3_70b_QM_H3"), n_agents=12, n_draws=4, committed=[0, 2, 4], rng=5,
                    run_effects=None)
        out["design"] = hashlib.sha256(json.dumps(p.summary(), sort_keys=True, default=str).encode()).hexdigest()[:16]
        # run effects (the lazy-threshold variants of the lean kernels), with and without a name-order bias
        for key, kw in (("design_effects", {}), ("design_effects_order", {"order_bias": 0.4})):
            p = predict(load_fit("llama3_70b_QM_H3"), n_agents=12, n_draws=4, committed=[0, 2, 4], rng=5, **kw)
            out[key] = hashlib.sha256(json.dumps(p.summary(), sort_keys=True,
                                                 default=str).encode()).hexdigest()[:16]
    print("FP " + json.dumps(out, sort_keys=True))
    """
)


def _play(cache_dir, order: str, *extra) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, order, *extra], capture_output=True, text=True, env=env,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("FP ")][-1]
    return json.loads(line[3:])


@pytest.mark.slow
def test_every_kernel_same_cold_and_warm_after_a_user_strategy(tmp_path):
    # A: a cold cache filled by built-in kernels only; B: warm, a FunctionStrategy game first (on the
    # code before the fix, the user's kernel took the built-in logit kernel's place here: 0 of 8
    # consensus); C, D: a FunctionStrategy game first on a cold cache, then on that warm cache
    first, second = tmp_path / "first", tmp_path / "second"
    plain = _play(first, "builtin-only", "--design")
    assert any(first.rglob("*.nbi")), "the first process should have filled the cache"
    after_user = [_play(first, "user-first", "--design"), _play(second, "user-first"), _play(second, "user-first")]
    for out in after_user:
        # the design's outputs are compared below (only the --design plays compute them)
        assert {k: v for k, v in out.items() if k != "user" and not k.startswith("design")} == {
            k: v for k, v in plain.items() if not k.startswith("design")}
        # the built-in kernels and the same strategies tabulated play identical runs
        assert out["logit"] == out["logit_table"] and out["best_response"] == out["best_response_table"]
        assert out["per_run_same"] == out["table"]
    for key in ("design", "design_effects", "design_effects_order"):
        assert after_user[0][key] == plain[key]
    assert after_user[1]["user"] == after_user[2]["user"] == after_user[0]["user"]


def test_variant_names_are_unique():
    def f(x):
        return x + _K  # noqa: F821 (a global each variant binds)

    g = kernel_variant(f, "f_plus_one_test", cache=False, _K=1)
    h = kernel_variant(f, cache=False, _K=2)
    assert g(1) == 2 and h(1) == 3
    assert g.py_func.__qualname__ == "f_plus_one_test" and h.py_func.__qualname__ != "f"
    with pytest.raises(ValueError, match="taken"):
        kernel_variant(f, "f_plus_one_test", cache=False, _K=3)
    with pytest.raises(ValueError, match="needs a fixed name"):
        kernel_variant(f, _K=3)
    assert np.isfinite(g(1.5))
