"""``normlab calibrate`` (argparse only; numpy/pandas/PyMC are imported in the handler)."""

from __future__ import annotations

import argparse
import sys

from .fit_kinds import DEFAULT, FIT_KINDS

_EPILOG = """\
examples:
  normlab calibrate --ainorms ../shared/data/ai-norms/llama31_data.zip --names Q,M --json
  normlab calibrate --ainorms ../shared/data/ai-norms/llama3_data.zip --names Q,M --memory 3 --n-agents 48
  normlab calibrate --log runs/qm_h5 --names Q,M --fit-on all
  normlab calibrate --table llama31_70b_QM_H5 --n-agents 24        # shipped fit, no raw data needed
  normlab calibrate --log runs/qm_h5 --names Q,M --out cal/qm     # tables and summary.json saved in cal/qm

Fits p(name | memory state) on the chosen runs (default: baseline/convergence runs), plays
posterior draws of the table in the strategy game and prints: P(consensus on each name),
rounds to 0.95 success, critical mass for each direction (overturn_<X>: a consensus on X attacked
by agents committed to the other name) by two criteria -- "published": the authors' ensemble rule
behind Table S3 of Flint Ashery, Aiello & Baronchelli (2025), applied per posterior draw to a
simulated 10-run experiment with their window (--max-round); "per_run": smallest count where half
the runs flip within --within-rounds -- relative strength, and -- when the data hold them -- the
observed values by the same rules. A '-' or 'not reached' in the summary (null in --json) is a
quantity the simulations did not reach: no flip with up to N - 1 committed agents, no 95% success
within the simulated rounds.

exit codes:
  0    done
  2    bad input: a bad flag or value, a missing or unreadable file, names or settings the data do not hold
       (one line saying what is wrong; nothing fitted)
  130  interrupted (Ctrl-C)
"""


def register(sub) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit LLM strategy tables and predict collective bias and critical mass",
        description="Fit LLM strategy tables from game logs and predict collective bias, convergence speed "
                    "and critical mass with credible intervals (Flint Ashery, Aiello & Baronchelli 2025: Table 1, "
                    "Figs. 2-3, S8-S10).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--ainorms", metavar="PATH", help="published AI-norms archive (.zip), pickle or folder")
    src.add_argument("--log", metavar="PATH", help="normlab game log: a directory written by GameLog.to_parquet")
    src.add_argument("--table", metavar="NAME|JSON", help="a shipped fitted table (see --list-tables) or a fit saved "
                                                          "with --save-fit; predicts without data")
    src.add_argument("--list-tables", action="store_true", help="list the shipped fitted tables and exit")
    p.add_argument("--names", default=None, help="name pool, comma-separated (e.g. Q,M); required with --ainorms/--log")
    p.add_argument("--memory", type=int, default=None, help="memory length H (default: the H with most runs)")
    p.add_argument("--n-agents", type=int, default=None, help="population size N of the predictions "
                                                              "(default: the most common N of the fitted runs)")
    p.add_argument("--llm", default=None, help="LLM to fit when the data hold several (model column, e.g. "
                                               "Llama-3.1-70B-Instruct or a file shorthand like llama31)")
    p.add_argument("--fit-on", default="baseline", choices=["baseline", "evolved", "swap", "all"],
                   help="which runs to fit on (default: baseline)")
    p.add_argument("--fit-model", default=DEFAULT, choices=list(FIT_KINDS),
                   help=f"strategy model (default: {DEFAULT}, chosen by held-out log-likelihood), one of the "
                        "registered fit kinds -- " + "; ".join(f"{k}: {kind.title}" for k, kind in FIT_KINDS.items()))
    p.add_argument("--draws", type=int, default=200, help="posterior draws of the table (default 200)")
    p.add_argument("--within-rounds", type=int, default=30, help="window of the per-run flip reading in population "
                                                                 "rounds (default 30)")
    p.add_argument("--max-round", type=int, default=None, help="window of the published critical-mass rule "
                                                               "(default the authors': 30, 21 for Llama-3 at N = 48)")
    p.add_argument("--runs-flip", type=int, default=16, help="runs per draw and committed count (default 16)")
    p.add_argument("--runs-consensus", type=int, default=40, help="convergence runs per draw (default 40)")
    p.add_argument("--no-strength", action="store_true", help="skip the relative-strength simulations")
    p.add_argument("--chains", type=int, default=2, help="NUTS chains (default 2)")
    p.add_argument("--nuts-draws", "--samples", dest="samples", type=int, default=1000,
                   help="NUTS draws per chain (default 1000)")
    p.add_argument("--save-fit", metavar="JSON", default=None,
                   help="write the fitted table (StrategyFit JSON, a .json file; reuse it with --table)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="save the result in DIR (created): summary.json, predictions.parquet (predicted vs observed, "
                        "one row per quantity), the fit and the per-draw simulations as Parquet tables "
                        "(normlab.load(DIR) reads it back)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: fresh entropy)")
    p.add_argument("--json", action="store_true", help="print the result as JSON (default: a readable summary)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bars (default: shown when stderr is a terminal)")
    p.set_defaults(func=_calibrate)
    from ._cli_predict import register_predict

    register_predict(sub)


_LLM_ALIASES = {
    "llama3": "Llama-3-70B-Instruct", "llama3_70b": "Llama-3-70B-Instruct",
    "llama31": "Llama-3.1-70B-Instruct", "llama31_70b": "Llama-3.1-70B-Instruct",
}


def _calibrate(args) -> int:
    import logging
    from pathlib import Path

    from normlab.calibration.fit_kinds import fit_family

    if not args.list_tables and not args.table and fit_family(args.fit_model).uses_nuts:
        import pymc  # noqa: F401  (pymc configures its logger on import; quieten it afterwards)

        logging.getLogger("pymc").setLevel(logging.WARNING)

    from normlab.cli import emit

    if args.list_tables:
        from normlab.calibration import shipped_fits

        emit({"tables": shipped_fits()}, args.json)
        return 0
    for nm in ("draws", "within_rounds", "runs_flip", "runs_consensus", "chains", "samples"):
        v = getattr(args, nm)
        if v is None or v < 1:
            raise ValueError(f"--{nm.replace('_', '-')} must be >= 1; got {v}")
    if args.max_round is not None and args.max_round < 3:
        raise ValueError(f"--max-round must be >= 3; got {args.max_round}")
    if args.n_agents is not None and args.n_agents < 2:
        raise ValueError(f"--n-agents must be >= 2; got {args.n_agents}")
    if args.memory is not None and args.memory < 1:
        raise ValueError(f"--memory must be >= 1; got {args.memory}")
    if args.save_fit:
        from normlab._validate import check_out_file

        check_out_file(args.save_fit, "--save-fit", (".json",))
    if args.out:
        _check_result_dir(args.out)
    pk = dict(n_runs_flip=args.runs_flip, n_runs_consensus=args.runs_consensus, strength=not args.no_strength)
    progress = not args.no_progress and sys.stderr.isatty()
    if args.table:
        from normlab.calibration import load_fit, predict

        fit = load_fit(args.table)
        if args.names is not None and tuple(n.strip() for n in args.names.split(",")) != fit.names:
            raise ValueError(f"--names {args.names} does not match the table's names {','.join(fit.names)}")
        if args.memory is not None and args.memory != fit.memory:
            raise ValueError(f"memory length mismatch: --memory {args.memory} but the table is for H={fit.memory}")
        n = args.n_agents or int((fit.meta.get("source") or {}).get("n_agents", [24])[0])
        from normlab.calibration.pipeline import elapsed_bar

        with _warnings_as_lines(), elapsed_bar(f"predicting ({args.draws} posterior draws)", enabled=progress):
            pred = predict(fit, n_agents=n, n_draws=args.draws, within_rounds=args.within_rounds,
                           max_round=args.max_round, rng=args.seed, **pk)
        out = pred.summary()
        out = {"llm": fit.meta.get("llm"), "source": str(args.table), "model": fit.kind, **out,
               "fit": {k: v for k, v in fit.summary().items() if k in ("decisions", "states_observed", "states_total",
                                                                        "decay", "diagnostics")}}
        if args.save_fit:
            fit.to_json(args.save_fit)
        if args.out:
            out["out"] = _save_result(args.out, pred, out)
        _print_result(out, args.json)
        return 0
    if args.names is None:
        raise ValueError("--names is required with --ainorms/--log (e.g. --names Q,M)")
    from normlab.calibration.inputs import _check_names

    names = _check_names(args.names)
    if args.ainorms:
        from normlab.calibration.pipeline import ainorms_file_patterns
        from normlab.llm_runs.published.ainorms import load_ainorms

        path = Path(args.ainorms)
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist")
        kinds = ["baseline", "swap", "evolved"]
        log = load_ainorms(path, kinds=kinds, files=ainorms_file_patterns(names), on_inconsistency="warn")
        source = str(path)
    else:
        from normlab.schema import GameLog

        log = GameLog.read_parquet(args.log)
        source = str(args.log)
    llm = _LLM_ALIASES.get(args.llm, args.llm) if args.llm else None
    from normlab.calibration import calibrate

    fit_kwargs = {"chains": args.chains, "cores": min(args.chains, 2),
                  "draws": args.samples} if fit_family(args.fit_model).uses_nuts else {}
    with _warnings_as_lines():
        cal = calibrate(log, names=names, memory=args.memory, n_agents=args.n_agents, fit_on=args.fit_on,
                        model=args.fit_model, llm=llm, n_draws=args.draws, within_rounds=args.within_rounds,
                        max_round=args.max_round, fit_kwargs=fit_kwargs, predict_kwargs=pk, source=source,
                        rng=args.seed, progress=progress)
    if args.save_fit:
        cal.fit.to_json(args.save_fit)
    summary = cal.summary()
    if args.out:
        summary["out"] = _save_result(args.out, cal, summary)
    _print_result(summary, args.json)
    return 0


def _check_result_dir(path: str) -> None:
    """``--out``: a new or empty directory, or one an earlier ``--out`` wrote (overwritten)."""
    from pathlib import Path

    from normlab._display import MANIFEST
    from normlab._validate import check_out_dir

    check_out_dir(path)
    p = Path(path)
    if p.is_dir() and any(p.iterdir()) and not (p / MANIFEST).exists():
        raise ValueError(f"--out {path} is a non-empty directory holding no saved result; choose a new or empty one")


def _save_result(path: str, result, summary: dict) -> str:
    """``result.save(path)`` plus ``summary.json`` and the tidy ``predictions.parquet``."""
    import json
    from pathlib import Path

    from normlab.cli import _json_default

    result.save(path)
    result.to_frame().to_parquet(Path(path) / "predictions.parquet", index=False)
    (Path(path) / "summary.json").write_text(json.dumps({**summary, "out": str(path)}, indent=1,
                                                        default=_json_default))
    return str(path)


class _warnings_as_lines:
    """Collect warnings (sampler divergences, data inconsistencies) and print each distinct one
    as a single ``normlab calibrate: warning: ...`` line on stderr."""

    def __enter__(self):
        import warnings

        self._cm = warnings.catch_warnings(record=True)
        self._log = self._cm.__enter__()
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning)
        return self

    def __exit__(self, *exc):
        self._cm.__exit__(*exc)
        seen = set()
        for w in self._log:
            msg = " ".join(str(w.message).split())
            if msg and msg not in seen:
                seen.add(msg)
                print(f"normlab calibrate: warning: {msg}", file=sys.stderr)
        return False


def _print_result(summary: dict, as_json: bool) -> None:
    if as_json:
        from normlab.cli import emit

        emit(summary, True)
    else:
        print(format_summary(summary))


def _num(v, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, (int, float)) and float(v) == int(v) and abs(v) < 1e9:
        return str(int(v))
    return f"{v:.{digits}g}"


def _p(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def _interval(d: dict, none_text: str) -> str:
    """``est [low, high]`` of a summary entry; ``None`` ends become ``none_text``."""
    est, lo, hi = d.get("estimate"), d.get("low"), d.get("high")
    if est is None:
        return none_text
    return f"{_num(est)} [{_num(lo) if lo is not None else none_text}, {_num(hi) if hi is not None else none_text}]"


def _scores_text(sc: dict) -> str:
    """The ``scores`` block as readable lines (lower Brier and log scores are better)."""
    ref = sc.get("reference") or {}
    out = ["scores on the runs the fit did not use (lower is better; a forecast giving every outcome the same "
           "probability in brackets):"]
    if sc.get("n_flip_runs"):
        out.append(f"  flips, {sc['n_flip_runs']} committed-minority runs (within {sc.get('within_rounds')} rounds): "
                   f"Brier {sc['brier_flip']:.3f} ({ref.get('brier_flip', 0.25):.3f}), "
                   f"log {sc['log_score_flip']:.3f} ({ref.get('log_score_flip', 0.693):.3f})")
    if sc.get("n_consensus_runs"):
        out.append(f"  consensus winners, {sc['n_consensus_runs']} runs: Brier {sc['brier_consensus']:.3f} "
                   f"({ref.get('brier_consensus', 0.0):.3f}), log {sc['log_score_consensus']:.3f} "
                   f"({ref.get('log_score_consensus', 0.0):.3f})")
    cov = sc.get("coverage") or {}
    pct = int(round(100 * float(sc.get("level") or 0.95)))
    bits = [f"{kind} {cov[kind]:.0%} of {cov[f'n_{kind}']}" for kind in ("experiment", "underlying")
            if cov.get(kind) is not None]
    if bits:
        out.append(f"  observed values inside the {pct}% intervals: " + ", ".join(bits)
                   + " (experiment: what an experiment of the observed size would report)")
    ex = sc.get("excluded") or {}
    if ex:
        out.append("  not scored: " + ", ".join(f"{v} {k}" for k, v in ex.items()))
    return "\n".join(out)


def format_summary(s: dict) -> str:
    """The readable multi-line summary ``normlab calibrate`` prints without ``--json``.

    Every ``null`` of the JSON is spelled out: a critical mass that is ``null`` was not reached
    with up to N - 1 committed agents; rounds to 95% success that are ``null`` were not reached
    within the simulated rounds.
    """
    names = s.get("names") or []
    N = s.get("n_agents")
    lines = []
    head = f"{s.get('llm') or 'strategy table'}: names {','.join(map(str, names))}, memory H = {s.get('memory')}, N = {N}"
    lines.append(head)
    fit = s.get("fit") or {}
    if s.get("source"):
        lines.append(f"data: {s['source']}")
    bits = [f"{s.get('model')}" + (f" on {s['fit_on']} runs" if s.get("fit_on") else "")]
    if fit.get("runs") is not None:
        bits.append(f"{fit['runs']} runs")
    if fit.get("decisions") is not None:
        bits.append(f"{int(fit['decisions']):,} decisions")
    if fit.get("states_observed") is not None:
        bits.append(f"{fit['states_observed']} of {fit['states_total']} memory states observed")
    lines.append("fit: " + ", ".join(bits))
    dg = fit.get("diagnostics") or {}
    if dg:
        div = int(dg.get("divergences") or 0)
        ess = dg.get("ess_bulk_min")
        lines.append(f"sampler: R-hat max {_num(dg.get('r_hat_max'), 4)}, bulk ESS min {_num(None if ess is None else round(ess))}, "
                     f"{div} divergent transition{'s' if div != 1 else ''}"
                     + (" (see the warning above)" if div else ""))
    settings = s.get("settings") or {}
    max_rounds = settings.get("max_rounds")
    obs = s.get("observed") or {}
    base = obs.get("baseline") or {}
    if base and base.get("n_agents") != N:
        base = {}
    pct = int(round(100 * float(s.get("level") or 0.95)))
    lines.append("")
    lines.append(f"predicted (median and {pct}% interval over {s.get('draws')} posterior draws)"
                 + ("; observed in the data" if base else "") + ":")
    rows = []
    pci = s.get("p_consensus_interval") or {}
    for nm in names:
        p = (s.get("p_consensus") or {}).get(nm)
        iv = pci.get(nm) or [None, None]
        o = (base.get("p_consensus") or {}).get(nm) if base else None
        rows.append((f"P(consensus on {nm})", f"{_p(p)} [{_p(iv[0])}, {_p(iv[1])}]",
                     "" if o is None else f"observed {_p(o)}"))
    rows.append(("P(no consensus)", _p(s.get("p_no_consensus")), ""))
    not_reached = "not reached" + (f" within {max_rounds} rounds" if max_rounds else "")
    r95 = s.get("rounds_to_95") or {}
    extra = ""
    if r95.get("p_not_reached"):
        extra = f" ({_num(100 * r95['p_not_reached'])}% of draws: {not_reached})"
    rows.append(("rounds to 95% success", _interval(r95, not_reached) + extra,
                 f"observed {_num(base.get('rounds_to_95'))}" if base else ""))
    cr = s.get("consensus_rounds") or {}
    rows.append(("rounds to consensus", _interval(cr, not_reached),
                 f"observed {_num(base.get('streak_rounds'))}" if base else ""))
    w = max(len(r[0]) for r in rows)
    w2 = max(len(r[1]) for r in rows)
    lines += [f"  {a:<{w}}  {b:<{w2}}  {c}".rstrip() for a, b, c in rows]

    cm = s.get("critical_mass") or {}
    if cm:
        lines.append("")
        lines.append(f"critical mass: committed agents that overturn a consensus (N = {N}) -- published: the authors'")
        lines.append(f"ensemble rule; per-run: half the runs flip within {s.get('within_rounds')} rounds "
                     "(median [interval] over draws):")
        none_cm = f"not reached with up to {N - 1} committed" if N else "not reached"
        ocm = obs.get("critical_mass") or {}
        for key, e in cm.items():
            maj, ch = e.get("majority"), e.get("challenger")
            pub, per = e.get("published") or {}, e.get("per_run") or {}
            txt = f"  {key} ({ch} committed against a consensus on {maj}): published {_interval(pub, none_cm)}; " \
                  f"per-run {_interval(per, none_cm)}"
            lines.append(txt)
            o = ocm.get(key)
            if o:
                op, orr = o.get("published") or {}, o.get("per_run") or {}
                ot = f"observed at counts {o.get('counts')}: " if o.get("counts") else "observed: "
                ot += "published " + (_num(op.get("estimate")) if op.get("estimate") is not None
                                      else "not reached at the observed counts")
                ot += "; first count where half the runs flip " + (
                    _num(orr.get("first_count")) if orr.get("first_count") is not None else "none observed")
                lines.append("      " + ot)
            for crit, d in (("published", pub), ("per-run", per)):
                p_nr = d.get("p_not_reached")
                if p_nr:
                    lines.append(f"      {crit}: {_num(100 * p_nr)}% of draws did not flip with up to {N - 1} "
                                 "committed agents")
    rs = s.get("relative_strength") or {}
    if rs:
        lines.append("")
        lines.append("relative strength of each name's consensus (median [interval]):")
        for nm, q in rs.items():
            lines.append(f"  {nm}: " + ", ".join(f"{k} {_interval(v, '-')}" for k, v in q.items()))
    sc = s.get("scores")
    if sc:
        lines.append("")
        lines.append(_scores_text(sc))
    a = s.get("asymmetry")
    if a:
        lines.append("")
        lines.append(f"asymmetry: the fitted strategy favours {a.get('a')} over {a.get('b')} by "
                     f"{_num(a.get('post_bias_visits'))} [{_num(a.get('post_bias_low'))}, {_num(a.get('post_bias_high'))}] "
                     "(probability, weighted by state visits);")
        lines.append(f"  {a.get('n_significant')} of {a.get('n_pairs_tested')} tested state pairs differ significantly")
    if s.get("out"):
        lines.append("")
        lines.append(f"saved in {s['out']}: summary.json, predictions.parquet, the fit and the simulations "
                     "(normlab.load reads it back)")
    if s.get("seconds") is not None:
        lines.append("")
        lines.append(f"done in {_num(s['seconds'])} s; --json prints every number (flip curves, settings)")
    else:
        lines.append("")
        lines.append("--json prints every number (flip curves, settings)")
    return "\n".join(lines)
