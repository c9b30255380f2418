"""``normlab demo`` (argparse only; heavy imports in the handler).

The endpoint and sampling flags, their parsing and the one-line error handling are those of
``normlab llm-run`` (the shared kit :mod:`normlab.llm_runs.core.cli_kit`), so the demo talks to an
endpoint exactly as the runs it orchestrates do; the ``--fit`` choices are the registered fit kinds
(:func:`normlab.calibration.fit_kind_names`).
"""

from __future__ import annotations

import argparse
import sys

from normlab.calibration import fit_kind_names
from normlab.cli_output import emit, show_progress
from normlab.llm_runs.core.cli_kit import EXIT_CODES, add_endpoint_args, endpoint_config, guard, print_estimate, sampling

_EXAMPLES = """\
examples:
  normlab demo --out report                                  # offline, embedded SmolLM2 (about 1 min on 2 free cores)
  normlab demo --out report                                  # again: every model answer comes from the cache
  normlab demo --out report --committed 1,2,3                # more committed counts; the rest is reused
  normlab demo --out report-h3 --n-agents 24 --memory 3      # N = 24, H = 3 (170 prompts); the paper's H = 5: 2,730
  normlab demo --out report-sample --mode sample --runs 4    # the paper's generate-and-parse protocol (no logprobs)
  normlab demo --out report-qwen --embedded-model qwen2.5-coder-1.5b   # a model that plays the game (pip install "normlab[qwen]")
  normlab demo --out report-mine --base-url http://127.0.0.1:8000/v1 --model MODEL   # your model (vLLM, llama.cpp)
  normlab demo --out report-api --base-url URL --model MODEL --price-input 0.6 --price-output 2.4 --dry-run
                                                             # requests, tokens and cost first; nothing is sent
  normlab demo --out report-api --base-url URL --model MODEL --price-input 0.6 --price-output 2.4 --budget '$0.50'
                                                             # stops cleanly at the cap (exit 5); rerun to continue
"""


def _retune(parser: argparse.ArgumentParser, dest: str, *, default=None, help: str | None = None) -> None:
    """Change the default and help of a flag added by the shared endpoint flags."""
    for a in parser._actions:
        if a.dest == dest:
            if help is not None:
                a.help = help
    if default is not None:
        parser.set_defaults(**{dest: default})


def _demo(args) -> int:
    import shlex
    from pathlib import Path

    settings = sampling(args)
    endpoint = endpoint_config(args)
    from normlab.llm_runs.backend import redact_command

    command = (("normlab " + " ".join(shlex.quote(a) for a in redact_command(sys.argv[1:])))
               if Path(sys.argv[0]).name == "normlab" else None)

    kw = dict(names=args.names, n_agents=args.n_agents, memory=args.memory, runs=args.runs,
              max_rounds=args.max_rounds, committed=args.committed, committed_runs=args.committed_runs,
              sample_check=args.sample_check, fit=args.fit, n_draws=args.draws, mode=args.mode or "exact",
              within_rounds=args.within_rounds, tip_runs=args.tip_runs, probe_samples=args.probe_samples,
              endpoint=endpoint, sampling=settings)
    if args.dry_run:
        from normlab.demo.pipeline import estimate_demo

        return print_estimate(estimate_demo(args.out, **kw), args.json)

    def go():
        from normlab.demo.pipeline import run_demo

        res = run_demo(args.out, rng=args.seed, progress=show_progress(args), verbose=True, command=command, **kw)
        if args.json:
            import json

            print(json.dumps(res.summary, indent=1))
        else:
            emit(_headline(res), False)
        return 0

    code = guard("demo", go, None)
    if code == 5:
        print(f"normlab demo: every completed model answer is kept in {args.out}/llm; rerun the same command with a "
              "larger --budget to continue", file=sys.stderr)
    elif code in (3, 4, 130) and any(j.stat().st_size for j in (Path(args.out) / "llm").rglob("journal.jsonl")):
        print(f"normlab demo: every completed model answer is kept in {args.out}/llm; rerun the same command to resume",
              file=sys.stderr)
    return code


def _headline(res) -> dict:
    """The few lines printed after a demo (the report holds the rest)."""
    s = res.summary
    st = s["settings"]
    pop = s["population"]
    names = st["names"]
    pred = pop["predicted"]["consensus"]
    win = max(names, key=lambda n: (pred.get(n) or {}).get("estimate") or 0)
    o = pop["observed"]["consensus"][win]

    def iv(d, nd=2):
        f = (lambda v: "not reached" if v is None else f"{v:.{nd}f}")
        return f"{f(d.get('estimate'))} [{f(d.get('low'))}, {f(d.get('high'))}]"

    out = {
        "report": str(res.report),
        "model": s["endpoint"]["model"] + (" (embedded)" if s["endpoint"]["embedded"] else ""),
        "population": f"{st['runs']} runs x {st['n_agents']} agents, memory {st['memory']}, {st['mode']} mode",
        "individual bias": ", ".join(f"p({n} | empty memory) = {s['strategy_table']['p_empty'][n]:.2f}" for n in names)
        + ("" if s["strategy_table"].get("p_first_listed_empty") is None else
           f"; p(the name listed first) = {s['strategy_table']['p_first_listed_empty']:.2f}"),
        f"consensus on {win}": f"predicted {iv(pred[win])}, LLM {o['runs']}/{st['runs']}",
        "rounds to consensus": f"predicted {iv(pop['predicted']['consensus_rounds'], 1)}, LLM "
                               + ("-" if pop["observed"]["consensus_rounds"] is None
                                  else f"{pop['observed']['consensus_rounds']:.1f}"),
    }
    for k, v in s["critical_mass"]["from_probe"].items():
        pr = v["per_run"]
        out[f"critical mass, {k.replace('_', ' ')}"] = (
            f"not reached with up to {st['n_agents'] - 1} of {st['n_agents']} committed" if pr["pooled"] is None
            else f"{pr['pooled']:.0f} of {st['n_agents']}") + " (half of the runs flip)"
    for r in s["committed_check"]:
        out[f"{r['committed']} committed to {r['challenger']} vs {r['majority']}"] = \
            f"{r['flips']}/{r['runs']} flipped, predicted P(flip) {r['predicted']:.2f} [{r['low']:.2f}, {r['high']:.2f}]"
    if s["free_generation"]:
        f = s["free_generation"]
        pis = f["predicted_invalid_share"]
        out["free answers with no name"] = f"{f['invalid']}/{f['trials']} (" + (
            f"probe predicts {pis:.2f})" if pis is not None else "not predicted: the table was sampled)")
    t = s.get("tip")
    if t:
        cm = t["critical_mass"]
        secs = [x["wall_s"] for x in s["timing"]["steps"] if x["step"].startswith("tip:")]
        out[f"tip: critical mass to overturn {t['majority']}"] = (
            f"{iv(cm, 0)} ({t['level']:.0%}), "
            + ("P(within one agent)" if cm["estimate"] is not None else f"P(not reached up to {st['n_agents'] - 1})")
            + f" {t['p_within_one']:.2f}; {t['runs_used']} of at most "
            f"{t['run_budget']} committed runs; runs played at (count: runs) "
            + (", ".join(f"{c}: {n}" for c, n in t["counts"].items()) or "none")
            + (f"; {secs[0]:.0f} s" if secs else ""))
    ok = sum(1 for c in s["checks"] if c["consistent"] is True)
    bad = sum(1 for c in s["checks"] if c["consistent"] is False)
    out["checks"] = f"{ok} inside their predicted interval, {bad} outside"
    out["LLM requests"] = f"{s['cost']['llm_calls']} now, {s['cost']['llm_calls_total']} journaled (reused by a rerun)"
    out["time"] = f"{s['timing']['wall_s']:.0f} s wall, {s['timing']['cpu_s']:.0f} s CPU"
    return out


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="from nothing to a report: probe an LLM, predict its populations with the theory, check with LLM runs",
        description=(
            "Probe a model's strategy table (Flint Ashery, Aiello & Baronchelli 2025: the probability of each name "
            "given a memory), predict with the theory which convention its populations adopt, how fast, and how many "
            "committed agents overturn it; play small LLM populations and committed-minority runs to check; "
            "calibrate again from the populations' own log; write OUT/report.html (self-contained, figures "
            "embedded), OUT/*.png, OUT/summary.json and OUT/tables/*.parquet. Offline on the embedded SmolLM2 "
            "model by default. Every model answer is journaled under OUT/llm/: rerunning (or changing a setting) "
            "reuses what was already asked. Exact mode (the default) reads the strategy table from next-token "
            "logprobs (llama.cpp, vLLM); --mode sample needs none: the table is estimated from sampled answers, "
            "with its uncertainty, and the populations generate and parse (hosted APIs without logprobs)."
        ),
        epilog=_EXAMPLES + "\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", required=True, help="report directory (created; a rerun reuses its cached model answers)")
    g = p.add_argument_group("experiment")
    g.add_argument("--names", default="X,Y", help="the two names (default %(default)s: SmolLM2 has almost no "
                                                 "individual bias between them)")
    g.add_argument("--n-agents", type=int, default=8, help="population size N (default %(default)s)")
    g.add_argument("--memory", type=int, default=2,
                   help="memory length H, 1-5 (default %(default)s; the probe asks 2 x (1 + 4 + ... + 4^H) prompts: "
                        "42 for H = 2, 170 for H = 3)")
    g.add_argument("--runs", type=int, default=8, help="LLM populations from empty memories (default %(default)s)")
    g.add_argument("--max-rounds", type=int, default=100,
                   help="cap of those runs in population rounds (default %(default)s)")
    g.add_argument("--committed", default="auto",
                   help="committed counts to test against each convention: auto (the predicted critical mass, at least "
                        "1; N/2 where none is reached), K, or K1,K2,... (default %(default)s)")
    g.add_argument("--committed-runs", type=int, default=4,
                   help="LLM runs per direction and committed count; 0 skips the check (default %(default)s)")
    g.add_argument("--within-rounds", type=int, default=30,
                   help="flip window and length of committed runs, in rounds (default %(default)s, the paper's)")
    g.add_argument("--sample-check", type=int, default=12,
                   help="free-generation answers at an empty memory (sample mode, no re-ask) to measure how often the "
                        "model names no pool name; 0 skips (default %(default)s)")
    g.add_argument("--fit", default="empirical", choices=fit_kind_names(),
                   help="strategy model fitted on the populations' log (default %(default)s; hierarchical runs PyMC, "
                        "about a minute)")
    g.add_argument("--tip-runs", type=int, default=8,
                   help="the tip step: adaptive search (normlab tip) for the critical mass that overturns the "
                        "populations' convention, starting from their runs, with at most this many committed runs; 0 "
                        "skips it (default %(default)s)")
    g.add_argument("--probe-samples", type=int, default=10,
                   help="sample mode: answers sampled per memory state (in each of the probe's two stages) to estimate "
                        "the strategy table with its uncertainty, no logprobs needed (default %(default)s)")
    g.add_argument("--draws", type=int, default=200, help="simulated experiments / posterior draws per prediction "
                                                         "(default %(default)s)")
    add_endpoint_args(p, run_controls=True)
    _retune(p, "mode", help="exact (default): the strategy table from next-token logprobs (the endpoint must return them) "
                            "and populations answered from the probe's cache; sample: the paper's protocol, generate "
                            "and parse (one request per decision and re-ask), the table estimated from "
                            "--probe-samples sampled answers per state -- no logprobs needed")
    _retune(p, "seed", default=1, help="seed of every run and simulation (default %(default)s)")
    _retune(p, "json", help="print summary.json instead of the short summary")
    p.set_defaults(func=_demo)
