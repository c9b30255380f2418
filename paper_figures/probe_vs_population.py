"""README "Predicting a population from probes alone": the probe-only predictions and their check.

Two steps:

    python paper_figures/probe_vs_population.py --data DIR   # read the run directories in DIR, run the
                                                             # check, write paper_figures/data/*.json + .png
    python paper_figures/probe_vs_population.py              # print the README tables from that summary

``DIR`` holds what ``paper_figures/probe_vs_population.sh`` produced on the embedded SmolLM2-135M
model (names F,J): the exact probe of every state up to H = 3 (``exact-h3``), sampled probes
(``probe-sample-h3``: 4 generations per state, normlab's 2 re-asks; ``probe-noprefill-h1``: free
generation without the answer prefill, the authors' parser), sample-mode populations at N = 6,
H = 2 and N = 10, H = 3 (re-asking until a pool name appears, as the paper; and with normlab's
cap of 2 re-asks), exact-mode populations (the same chain as the exact probe: a plumbing check
only), and ``normlab predict --probe --json`` outputs. Directories that are missing or unfinished
are left out and named.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Figs. 1-3, Table S4,
Table S6, Methods.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUMMARY = HERE / "data" / "probe_vs_population.json"
FIGURE = HERE / "data" / "probe_vs_population.png"

EXACT = "exact-h3"
SAMPLED = ["probe-sample-h3", "probe-noprefill-h1"]
GROUPS = [  # directories with the same settings (different seeds) form one group
    ["n6h2-unb-a", "n6h2-unb-b", "n6h2-unb-c"],
    ["n10h3-unb-a", "n10h3-unb-b", "n10h3-unb-c"],
    ["n6h2-r2-a", "n6h2-r2-b"],
    ["n6h2-exact"],
    ["n10h3-exact"],
]
PREDICT = {"SmolLM2-135M, N = 6, H = 2": "predict-n6h2.json", "SmolLM2-135M, N = 10, H = 3": "predict-n10h3.json",
           "Gemma-3-270M (base), N = 6, H = 2": "gemma-predict-n6h2.json",
           "Gemma-3-270M (base), N = 10, H = 3": "gemma-predict-n10h3.json"}


def _finished(d: Path) -> bool:
    """A run directory whose tables are written, or a probe directory with a journal (a probe that
    is still running contributes the attempts journaled so far)."""
    if (d / "runs.parquet").exists():
        return True
    st = d / "settings.json"
    return st.exists() and '"probe"' in st.read_text() and (d / "journal.jsonl").exists()


def _times(data: Path, name: str) -> dict | None:
    """Wall and CPU seconds of a step, summed over its (resumed) invocations (``logs/NAME.time``)."""
    f = data / "logs" / f"{name}.time"
    if not f.exists():
        return None
    wall = cpu = 0.0
    for line in f.read_text().splitlines():
        m = re.search(r"wall ([\d.]+) s, user ([\d.]+) s, sys ([\d.]+) s", line)
        if m:
            wall += float(m.group(1))
            cpu += float(m.group(2)) + float(m.group(3))
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}


def collect(data, *, exact=EXACT, sampled=SAMPLED, groups=GROUPS, predict=PREDICT, n_draws=400, rng=2025,
            figure=FIGURE) -> dict:
    """Run the check on the directories in ``data`` and return the summary (JSON-friendly)."""
    from normlab.calibration import probe_check

    data = Path(data)
    skipped = []
    smp = []
    for s in sampled:
        (smp if _finished(data / s) else skipped).append(s)
    grp = []
    for g in groups:
        ok = [d for d in g if _finished(data / d)]
        skipped += [d for d in g if d not in ok]
        if ok:
            grp.append([data / d for d in ok])
    # the table's jitter: as measured by normlab predict --probe (8 prompts re-asked), when available
    from normlab.calibration import probe_fit

    fit = probe_fit(data / exact)
    jit = [js["probe"]["cost"]["jitter"]["jitter_sd"] for js in
           (json.loads((data / f).read_text()) for f in predict.values() if (data / f).exists())
           if js.get("llm") == fit.meta.get("model")]
    if jit:
        import dataclasses

        fit = dataclasses.replace(fit, jitter_sd=max(jit))
    chk = probe_check(fit, sampled=[data / s for s in smp], populations=grp, n_draws=n_draws, rng=rng)
    runs = []
    for g in grp:
        from normlab.calibration.evaluate.probe_comparison import _label, read_population

        pop = read_population(g)
        t = [_times(data, Path(d).name) for d in g]
        r = pop.runs
        runs.append({"group": _label(pop.settings), "directories": [Path(d).name for d in g], "runs": len(r),
                     "interactions": int(r["n_interactions"].sum()), "decisions": int(r["decisions"].sum()),
                     "llm_calls": int(r["llm_calls"].sum()),
                     "wall_s": sum(x["wall_s"] for x in t if x) if all(t) else None,
                     "cpu_s": sum(x["cpu_s"] for x in t if x) if all(t) else None})
    probes = []
    for s in [exact] + smp:
        t = _times(data, s)
        probes.append({"directory": s, **(t or {})})
    preds = {}
    for label, f in predict.items():
        p = data / f
        if p.exists():
            s = json.loads(p.read_text())
            preds[label] = {k: s.get(k) for k in ("llm", "names", "memory", "n_agents", "p_consensus", "p_no_consensus",
                                                  "p_consensus_interval", "rounds_to_95", "consensus_rounds",
                                                  "critical_mass", "relative_strength", "underlying", "draws")}
            preds[label]["probe"] = {"cost": s["probe"]["cost"], "table": s["probe"]["table"]}
        else:
            skipped.append(f)

    def clean(df):
        return json.loads(df.to_json(orient="records", double_precision=6))

    out = {"model": chk.fit.meta.get("model"), "names": list(chk.fit.names), "n_draws": n_draws, "seed": rng,
           "population": clean(chk.population), "divergences": clean(chk.divergences),
           "invalid_reasons": clean(chk.invalid_reasons().drop(columns=["example"])),
           "states": clean(chk.states), "runs": runs, "probes": probes, "predictions": preds,
           "skipped": skipped, "note": "exact-mode populations play the same chain as the exact probe: they only "
                                       "check the plumbing"}
    if figure is not None:
        import matplotlib

        matplotlib.use("Agg")
        axes = chk.plot()
        axes[0].figure.set_size_inches(13, 9.5)
        axes[0].figure.tight_layout()
        axes[0].figure.savefig(figure, dpi=110)
        out["figure"] = str(Path(figure).name)
    return out


# ----------------------------------------------------------------------------- printing
def _f(v, d=2):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if float(v).is_integer():
        return f"{int(v)}"
    return f"{v:.{d}f}"


def _iv(d, d_=2):
    """``est [low, high]``; a missing end (``None``) was not reached within the simulated range."""
    if not d or d.get("estimate") is None:
        return "not reached"
    lo = _f(d.get("low"), d_) if d.get("low") is not None else "n.r."
    hi = _f(d.get("high"), d_) if d.get("high") is not None else "n.r."
    return f"{_f(d['estimate'], d_)} [{lo}, {hi}]"


def tables(s: dict) -> str:
    """The README tables (markdown) from a summary."""
    lines = []
    nm = s["names"][0]
    lines.append(f"Probe-only predictions (names {','.join(s['names'])}; median [95% interval] over table draws of what "
                 "a 40-run experiment reports; underlying: 400 runs per draw; n.r.: not reached with up to N - 1 "
                 "committed agents, or within 200 rounds):")
    lines.append("")
    n0, n1 = s["names"][0], s["names"][1]
    lines.append(f"| | P(consensus on {n0}) | P(none in 200 rounds) | rounds to 95% success | rounds to consensus "
                 f"(3N streak, runs that reach it) | critical mass overturn_{n1} (published / per-run) | overturn_{n0} | "
                 "probe |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for label, p in s["predictions"].items():
        pci = p["p_consensus_interval"].get(nm) or [None, None]
        u = p.get("underlying") or {}
        cm = p["critical_mass"]

        def cms(k):
            v = cm.get(k) or {}
            return f"{_iv(v.get('published'))} / {_iv(v.get('per_run'))}"

        c = p["probe"]["cost"]
        lines.append(f"| {label} | {_f(p['p_consensus'][nm])} [{_f(pci[0])}, {_f(pci[1])}] | "
                     f"{_f(p.get('p_no_consensus'))} | {_iv(p['rounds_to_95'])} (underlying {_iv(u.get('rounds_to_95'))}) | "
                     f"{_iv(p['consensus_rounds'], 1)} | {cms('overturn_' + n1)} | {cms('overturn_' + n0)} | "
                     f"{c['decisions']} prompts, jitter sd {_f(c['jitter']['jitter_sd'], 3)} |")
    lines.append("")
    lines.append("State by state: every sampled attempt against the exact probe of the same prompt (observed "
                 "[95% Clopper-Pearson] vs predicted):")
    lines.append("")
    lines.append(f"| source | attempts | name a pool name | predicted (covered mass) | {nm} among valid | predicted |")
    lines.append("|---|---|---|---|---|---|")
    dv = s["divergences"]
    by = {}
    for r in dv:
        by.setdefault(r["source"], {})[r["aspect"]] = r
    for src, d in by.items():
        if "invalid answers" not in d:
            continue
        a, b = d["invalid answers"], d.get("name chosen")
        lines.append(f"| {src} | {a['n']} | {_f(a['observed'], 3)} [{_f(a['low'], 3)}, {_f(a['high'], 3)}] | "
                     f"{_f(a['predicted'], 3)} | "
                     + (f"{_f(b['observed'], 3)} [{_f(b['low'], 3)}, {_f(b['high'], 3)}] | {_f(b['predicted'], 3)} |"
                        if b else "– | – |"))
    lines.append("")
    orders = [r for r in dv if r["aspect"] == "name order"]
    for src in dict.fromkeys(r["source"] for r in orders):
        rs = [r for r in orders if r["source"] == src]
        lines.append(f"- name order, {src}: " + "; ".join(
            f"shown {r['measure'].rsplit(' ', 1)[1]}: {_f(r['observed'], 2)} vs {_f(r['predicted'], 2)} (n = {r['n']})"
            for r in rs))
    for r in dv:
        if r["aspect"] == "endpoint jitter":
            lines.append(f"- endpoint jitter: sd of the first-token logprob in {r['n']:,} sampled-request tokens vs the "
                         f"exact probe's: {_f(r['observed'], 3)} (the predictions re-ask 16 prompts: "
                         f"{_f(r['predicted'], 3)})")
        if r["aspect"] == "multi-token names":
            lines.append(f"- multi-token names: {_f(r['observed'], 2)} requests per (state, order) prompt "
                         f"({r['note']})")
    lines.append("")
    lines.append("Populations against the chain the probe predicts for their protocol (interval: what an experiment "
                 "with the observed number of runs reports; exact mode = the probe's own chain, a plumbing check):")
    lines.append("")
    lines.append("| group | runs (CPU) | quantity | observed | predicted [95%] | inside |")
    lines.append("|---|---|---|---|---|---|")
    rt = {r["group"]: r for r in s["runs"]}
    for r in s["population"]:
        if r["quantity"] == "p_winner" and r["key"] != nm:
            continue
        g = rt.get(r["group"], {})
        cpu = f"{g['cpu_s'] / 60:.0f} min" if g.get("cpu_s") else "–"
        q = r["quantity"] + (f" {r['key']}" if r["key"] else "")
        inside = {True: "yes", False: "**no**"}.get(r["covered"], "–")
        lines.append(f"| {r['group'].replace('population ', '')} | {r['runs']} ({cpu}) | {q} | {_f(r['observed'])} | "
                     f"{_f(r['predicted'])} [{_f(r['low'])}, {_f(r['high'])}] | {inside} |")
    lines.append("")
    reasons = [r for r in s["invalid_reasons"]]
    if reasons:
        lines.append("Why attempts named no pool name (share of the source's attempts):")
        lines.append("")
        for src in dict.fromkeys(r["source"] for r in reasons):
            rs = [r for r in reasons if r["source"] == src]
            lines.append(f"- {src}: " + "; ".join(f"{r['kind']} {100 * r['share']:.0f}%" for r in rs))
    if s.get("skipped"):
        lines.append("")
        lines.append("Not (yet) available, left out: " + ", ".join(s["skipped"]))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="directory of the runs: recompute the summary (writes "
                                                 f"{SUMMARY.relative_to(HERE.parent)})")
    ap.add_argument("--summary", default=str(SUMMARY), help="summary JSON to print or (with --data) to write, its "
                                                            "figure beside it (default: the committed one)")
    args = ap.parse_args(argv)
    if args.data is not None:
        Path(args.summary).parent.mkdir(parents=True, exist_ok=True)
        s = collect(args.data, figure=Path(args.summary).with_suffix(".png"))
        Path(args.summary).write_text(json.dumps(s, indent=1))
    p = Path(args.summary)
    if not p.exists():
        print(f"no summary at {p}; run with --data DIR first", file=sys.stderr)
        return 2
    print(tables(json.loads(p.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
