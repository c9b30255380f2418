"""Model adequacy of the shipped baseline fits on the committed runs, for every AI-norms archive given.

Usage (README's "Model adequacy" tables)::

    python paper_figures/adequacy_check.py                      # the archives in ../shared/data/ai-norms
    python paper_figures/adequacy_check.py path/to/llama31_data.zip --draws 100 --seed 1
    python paper_figures/adequacy_check.py --json

For each LLM the setting with the most committed-minority runs (as README's critical-mass table)
is checked with its shipped baseline fit (:func:`normlab.calibration.load_fit`; a model without
one is listed and skipped): the fitted table is played under the exact design of the committed
runs, without and with the run effects estimated on the baselines
(:func:`normlab.calibration.evaluate.adequacy.check_adequacy`), and per direction the published rule's
statistic (its ``last3`` sum, the global statistic over counts) is tested, with every per-count
check of p < 0.05 listed. The partners' agreement beyond the table and the first-listed bias of
a shared name order that would explain it come from
:func:`normlab.calibration.evaluate.adequacy.pair_agreement` (the committed runs' N).

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Fig. 3, Table S3,
Methods ("Committed minorities"); A. Gelman, X.-L. Meng, H. Stern, Statistica Sinica 6, 733 (1996).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings

ALPHA = 0.05
STAT = "last3"  # the published rule's statistic


def _f(x, nd=3) -> str:
    """A number as README prints it (``-`` when missing)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{nd}f}"


def _fit_for(model: str, names, memory: int):
    from normlab.calibration import load_fit
    from normlab.calibration.fit.shipped import shipped_fits

    want = tuple(sorted(names))
    for n in shipped_fits():
        f = load_fit(n)
        if f.meta.get("llm") == model and tuple(sorted(f.names)) == want and int(f.memory) == int(memory):
            return n, f
    return None, None


def check(argv=None):
    """The check for the command line ``argv`` (None when no archive is found)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("archives", nargs="*", help="AI-norms archives (.zip); default: those in ../shared/data/ai-norms")
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from normlab.calibration import check_adequacy, pair_agreement
    from normlab.calibration.critical_mass_check import committed_settings
    from normlab.llm_runs.published.ainorms import ainorms_archives_log

    log, paths = ainorms_archives_log(args.archives)
    if log is None:
        return None, args
    rows, pairs, skipped = [], [], []
    for _, s in committed_settings(log).iterrows():
        model, names, H, N = s["model"], tuple(s["names"].split(",")), int(s["memory"]), int(s["n_agents"])
        fname, fit = _fit_for(model, names, H)
        if fit is None:
            skipped.append(f"{model} ({N}, {H})")
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            checks = {re: check_adequacy(fit, log, n_agents=N, llm=model, n_draws=args.draws,
                                         run_effects="fit" if re else None, rng=args.seed)
                      for re in (False, True)}
            pa = pair_agreement(log, names=fit.names, memory=H, n_agents=N, llm=model)
        for re, a in checks.items():
            o = a.overall
            c = a.checks
            for dr in dict.fromkeys(c["direction"]):
                g = o[(o["direction"] == dr) & (o["statistic"] == STAT)]
                fails = c[(c["direction"] == dr) & (c["p_value"] < ALPHA)]
                rows.append({"model": model, "n_agents": N, "memory": H, "fit": fname, "direction": dr,
                             "run_effects": re, "T": float(g["T"].iloc[0]) if len(g) else None,
                             "counts": int(g["counts"].iloc[0]) if len(g) else 0,
                             "p": float(g["p_value"].iloc[0]) if len(g) else None,
                             "checks": int((c["direction"] == dr).sum()),
                             "failures": [{k: (int(v) if k == "committed" else v) for k, v in r.items()}
                                          for r in fails[["statistic", "committed", "observed", "sim_mean",
                                                          "sim_low", "sim_high", "z", "p_value"]]
                                          .to_dict(orient="records")]})
        for _, r in pa.table.iterrows():
            pairs.append({"model": model, "n_agents": N, "memory": H, **{k: (v.item() if hasattr(v, "item") else v)
                                                                         for k, v in r.items()}})
    res = {"rows": rows, "pairs": pairs, "skipped": skipped,
           "settings": {"draws": args.draws, "seed": args.seed, "alpha": ALPHA, "statistic": STAT,
                        "archives": [p.name for p in paths]}}
    return res, args


def _fails(r) -> str:
    by = {}
    for f in r["failures"]:
        by.setdefault(f["statistic"], []).append(str(f["committed"]))
    return "; ".join(f"{k} at {', '.join(v)}" for k, v in by.items()) or "none"


def text(res) -> str:
    """README's tables and summary lines."""
    lines = ["| model (N, H) | direction | run effects | published rule's statistic T (counts), p | "
             "per-count checks with p < 0.05 (statistic at committed counts) |", "|---|---|---|---|---|"]
    for r in res["rows"]:
        lines.append(f"| {r['model']} ({r['n_agents']}, {r['memory']}) | {r['direction']} | "
                     f"{'baselines' if r['run_effects'] else 'none'} | {_f(r['T'], 1)} ({r['counts']}), "
                     f"{_f(r['p'], 4)} | {len(r['failures'])} of {r['checks']}: {_fails(r)} |")
    lines += ["", "| model (N, H) | runs (name order) | pairs | agree: observed / table | z | z, run shifts | "
                  "first-listed bias gamma [95%] |", "|---|---|---|---|---|---|---|"]
    for p in res["pairs"]:
        lines.append(f"| {p['model']} ({p['n_agents']}, {p['memory']}) | {p['kind']} ({p['name_order']}) | "
                     f"{p['pairs']} | {p['observed']:.0f} / {p['predicted']:.0f} | {_f(p['z'], 2)} | "
                     f"{_f(p['z_run'], 2)} | {_f(p['order_bias'], 2)} [{_f(p['order_bias_low'], 2)}, "
                     f"{_f(p['order_bias_high'], 2)}] |")
    st = res["settings"]
    rej = {re: [r for r in res["rows"] if r["run_effects"] == re and r["p"] is not None and r["p"] < ALPHA]
           for re in (False, True)}
    n = sum(1 for r in res["rows"] if not r["run_effects"])
    lines.append("")
    lines.append(f"Published rule's statistic rejected (p < {ALPHA}) in {len(rej[False])} of {n} directions without "
                 f"run effects ({', '.join(r['model'] + ' ' + r['direction'] for r in rej[False]) or 'none'}), "
                 f"in {len(rej[True])} of {n} with the baselines' run effects; {st['draws']} draws, seed {st['seed']}.")
    sd = []
    for r in res["rows"]:
        if r["run_effects"]:
            continue
        fs = [f for f in r["failures"] if f["statistic"] == "final_sd"]
        if fs:
            f = max(fs, key=lambda f: abs(f["z"]))
            sd.append(f"{r['model']} {r['direction']} at {f['committed']} committed {_f(f['observed'])} against "
                      f"{_f(f['sim_mean'])} [{_f(f['sim_low'])}, {_f(f['sim_high'])}] (p = {_f(f['p_value'], 4)})")
    if sd:
        lines.append("Largest miss of the runs' final-share sd without run effects: " + "; ".join(sd) + ".")
    if res["skipped"]:
        lines.append("No shipped baseline fit, skipped: " + ", ".join(res["skipped"]) + ".")
    return "\n".join(lines)


def main(argv=None) -> int:
    res, args = check(argv)
    if res is None:
        print("no archives given and none found in ../shared/data/ai-norms (or $NORMLAB_AINORMS)", file=sys.stderr)
        return 2
    print(json.dumps(res, indent=1, default=str) if args.json else text(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
