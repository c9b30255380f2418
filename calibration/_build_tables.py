"""Regenerate the fitted strategy tables shipped in ``calibration/data/`` from the AI-norms data.

Usage (from the repository root; about 15-25 minutes on 2 cores, most of it cross-validation and the
joint NUTS fits)::

    python -m normlab.calibration._build_tables --ainorms ../shared/data/ai-norms --out calibration/data

For each shipped setting (LLM, names Q/M, memory H) the script

1. loads the baseline (convergence) runs only -- the validation protocol: never the committed runs;
2. picks the feature decay by run-grouped held-out log-likelihood (:func:`select_decay`);
3. compares the registered fit kinds (:mod:`.fit.registry`) by 5-fold cross-validated log predictive
   density, holding out whole runs and, separately, whole memory states (:func:`compare_models`; the
   pooled models; ``--reuse-cv`` keeps the comparison stored in the files at ``--out``);
4. fits the default kind (:data:`.fit.registry.DEFAULT`, ``hierarchical``: the choice; see the module
   docstring of :mod:`.fit.model_choice`) **with the run effects in the model** (a joint fit: table,
   state effects and every run's shift and sharpness sampled together, :mod:`.fit.run_effects`) with
   NUTS, 2 chains x 1000 draws, and stores 400 thinned draws -- of ``beta``, ``tau``, the observed
   states' effects (16-bit quantiles, compressed) and the run effects' standard deviations, row for
   row -- with the counts, so predictions from the shipped table play each table draw with its own
   run effects;
5. writes ``<llm>_<names>_H<H>.json`` (a :class:`StrategyFit`), with the model comparison,
   diagnostics and provenance in its ``meta``.

``--run-effects-only`` keeps the stored tables and only recomputes the tests of the stored run effects
(a joint fit's draws stay; a fit without them gets the marginal estimate, :func:`.run_effects.fit_run_effects`).

The raw data are never copied: a shipped fit holds per-state decision counts and posterior draws.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from normlab.llm_runs import load_ainorms
from normlab.llm_runs.published.ainorms_archive import ainorms_file_patterns

from .fit.inputs import counts_from_log, select_runs
from .fit.logit import select_decay
from .fit.model_choice import compare_models
from .fit.posterior import StrategyFit
from .fit.registry import DEFAULT, fit_family, fit_strategy
from .fit.run_effects import RunEffects, fit_run_effects, joint_run_effects

SETTINGS = (
    # (file stem, LLM, names, H, N of the baselines)
    ("llama31_70b_QM_H5", "Llama-3.1-70B-Instruct", ("Q", "M"), 5, 24),
    ("llama3_70b_QM_H3", "Llama-3-70B-Instruct", ("Q", "M"), 3, 24),
    ("llama3_70b_QM_H5", "Llama-3-70B-Instruct", ("Q", "M"), 5, 24),
)
KEEP_DRAWS = 400


def build(ainorms, out, *, settings=SETTINGS, cv: bool = True, seed: int = 20250521, chains: int = 2,
          draws: int = 1000, reuse_cv: bool = False, log=None) -> list[dict]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if log is None:
        log = load_ainorms(ainorms, kinds="baseline", files=ainorms_file_patterns(("Q", "M")))
    report = []
    ss = np.random.SeedSequence(seed)
    for (stem, llm, names, H, N), child in zip(settings, ss.spawn(len(settings))):
        t0 = time.perf_counter()
        sel = select_runs(log, names=names, memory=H, n_agents=N, model=llm, fit_on="baseline")
        counts = counts_from_log(sel, names=names, memory=H)
        s_decay, s_cv1, s_cv2, s_fit = child.spawn(4)
        dec = select_decay(counts, rng=s_decay)
        decay = float(dec.loc[dec["heldout_ll"].idxmax(), "decay"])
        comparisons = {}
        old = Path(out) / f"{stem}.json"
        if reuse_cv and old.exists():
            comparisons = StrategyFit.from_json(old).meta.get("model_selection") or {}
        elif cv:
            for by, s in (("run", s_cv1), ("state", s_cv2)):
                cmp = compare_models(counts, by=by, k=5, decay=decay, rng=s)
                comparisons[by] = cmp.to_frame().to_dict(orient="records")
                print(f"[{stem}] model comparison by {by}:\n{cmp.to_frame().to_string(index=False)}", flush=True)
        fit = fit_strategy(counts, DEFAULT, decay=decay, draws=draws, tune=draws, chains=chains, cores=2, rng=s_fit,
                           meta={"llm": llm, "fit_on": "baseline", "n_agents_fit": N,
                                 "data": "Ariel-Flint-Ashery/AI-norms e57aeef (baseline runs only)",
                                 "decay_selection": dec.to_dict(orient="records"),
                                 "model_selection": comparisons})
        small = fit_family(DEFAULT).thin(fit, KEEP_DRAWS)
        path = small.to_json(out / f"{stem}.json")
        # store the posterior-mean table of the fit as loaded back (coefficients rounded by to_json)
        path = StrategyFit.from_json(path).with_stored_mean().to_json(path)
        path = with_run_effects(path, counts)
        eff = RunEffects.from_dict(StrategyFit.from_json(path).meta.get("run_effects"))
        rec = {"table": stem, "seconds": round(time.perf_counter() - t0, 1), "decay": decay,
               "diagnostics": fit.diagnostics, "bytes": path.stat().st_size, "run_effects": repr(eff)}
        print(json.dumps(rec, default=str), flush=True)
        report.append(rec)
    return report


def with_run_effects(path, counts):
    """The run effects of the shipped fit at ``path``, from the runs behind ``counts`` (deterministic):
    a joint fit's tests recomputed against the table as stored (its posterior draws kept, paired with
    the table draws); otherwise the marginal estimate (:func:`fit_run_effects`). Returns the path."""
    fit = StrategyFit.from_json(path)
    re = RunEffects.from_dict(fit.meta.get("run_effects"))
    if re.kind == "joint":
        eff = joint_run_effects(fit, counts, re.sample[:, 2:5], share=re.share)
    else:
        eff = fit_run_effects(counts, fit)
    return replace(fit, meta={**fit.meta, "run_effects": eff.to_dict()}).to_json(path)


def add_run_effects(ainorms, out, *, settings=SETTINGS, log=None) -> list[dict]:
    """Step 5 alone on the stored tables in ``out``."""
    if log is None:
        log = load_ainorms(ainorms, kinds="baseline", files=ainorms_file_patterns(("Q", "M")))
    report = []
    for stem, llm, names, H, N in settings:
        sel = select_runs(log, names=names, memory=H, n_agents=N, model=llm, fit_on="baseline")
        path = with_run_effects(Path(out) / f"{stem}.json", counts_from_log(sel, names=names, memory=H))
        eff = RunEffects.from_dict(StrategyFit.from_json(path).meta["run_effects"])
        report.append({"table": stem, "run_effects": repr(eff)})
        print(json.dumps(report[-1]), flush=True)
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ainorms", required=True, help="folder or archive of the AI-norms data")
    ap.add_argument("--out", default=str(Path(__file__).parent / "data"))
    ap.add_argument("--no-cv", action="store_true", help="skip the model comparison")
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--draws", type=int, default=1000, help="NUTS draws (and tuning steps) per chain")
    ap.add_argument("--reuse-cv", action="store_true",
                    help="keep the model comparison stored in the files at --out (the pooled models' cross-validation)")
    ap.add_argument("--run-effects-only", action="store_true", help="only (re)compute the stored run effects")
    args = ap.parse_args(argv)
    if args.run_effects_only:
        add_run_effects(args.ainorms, args.out)
        return 0
    build(args.ainorms, args.out, cv=not args.no_cv, chains=args.chains, draws=args.draws, reuse_cv=args.reuse_cv)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
