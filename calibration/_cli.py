"""``normlab calibrate`` (argparse only; numpy/pandas/PyMC are imported in the handler)."""

from __future__ import annotations

import argparse
import sys

from normlab.cli_output import add_progress_flags, announce_seed, emit, json_default, show_progress, with_seed

from ._cli_format import _LLM_ALIASES, format_summary
from ._cli_predict import register_predict
from ._cli_tip import register_tip
from .fit.registry import DEFAULT, FIT_KINDS, fit_family

__all__ = ["register", "format_summary"]

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
  4    the disk failed while writing --out or --save-fit (full, read-only, no permission; one line naming the file)
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
    p.add_argument("--n-agents", type=int, default=None, help="population size N of the predictions, 2 .. 10,000 "
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
    p.add_argument("--no-run-effects", action="store_true",
                   help="simulate every run with the same table (default: estimate how much the fitted runs differ "
                        "and give every simulated run its own effect; a shipped table uses the effects stored with it)")
    p.add_argument("--no-sensitivity", action="store_true",
                   help="skip finding the memory states that decide each prediction (about 10-30 s each)")
    p.add_argument("--design", choices=["data", "paper"], default="data",
                   help="critical masses on the design of the data's committed-minority runs (their counts, runs per "
                        "count, run lengths and window), where the data hold them (default), or on the paper's only")
    p.add_argument("--adequacy", action="store_true",
                   help="also play the fit under the exact design of the data's committed-minority runs and test it "
                        "against them, count by count (calibration.check_adequacy: predictive p-values)")
    p.add_argument("--chains", type=int, default=2, help="NUTS chains (default 2)")
    p.add_argument("--nuts-draws", "--samples", dest="samples", type=int, default=1000,
                   help="NUTS draws per chain (default 1000)")
    p.add_argument("--save-fit", metavar="JSON", default=None,
                   help="write the fitted table (StrategyFit JSON, a .json file; reuse it with --table)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="save the result in DIR (created): summary.json, predictions.parquet (predicted vs observed, "
                        "one row per quantity), the fit and the per-draw simulations as Parquet tables "
                        "(normlab.load(DIR) reads it back)")
    p.add_argument("--seed", type=int, default=None,
                   help="random seed (default: one drawn, printed on stderr and recorded in --json and --out)")
    p.add_argument("--json", action="store_true", help="print the result as JSON (default: a readable summary)")
    add_progress_flags(p)
    p.set_defaults(func=_calibrate)
    register_predict(sub)
    register_tip(sub)


def _calibrate(args) -> int:
    import logging
    from pathlib import Path

    if not args.list_tables and not args.table and fit_family(args.fit_model).uses_nuts:
        from .fit.logit import import_pymc

        import_pymc()  # pymc configures its logger on import; quieten it afterwards

        logging.getLogger("pymc").setLevel(logging.WARNING)

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
    if args.n_agents is not None:
        from normlab.calibration.prediction.api import check_predicted_agents

        check_predicted_agents(args.n_agents, "--n-agents")
    if args.memory is not None and args.memory < 1:
        raise ValueError(f"--memory must be >= 1; got {args.memory}")
    if args.save_fit:
        from normlab._validate import check_out_file

        check_out_file(args.save_fit, "--save-fit", (".json",))
    if args.out:
        _check_result_dir(args.out)
    pk = dict(n_runs_flip=args.runs_flip, n_runs_consensus=args.runs_consensus, strength=not args.no_strength)
    progress = show_progress(args)
    from normlab._rng import resolve_seed

    seed, drawn = resolve_seed(args.seed)  # said on stderr once the run is done (an error stays one line)
    if args.table and args.adequacy:
        raise ValueError("--adequacy tests a fit against the data's committed runs; use it with --ainorms/--log")
    if args.table:
        from normlab.calibration import load_fit, predict

        fit = load_fit(args.table)
        from normlab.schema import validate_names

        if args.names is not None and validate_names(args.names) != fit.names:
            raise ValueError(f"--names {args.names} does not match the table's names {','.join(fit.names)}")
        if args.memory is not None and args.memory != fit.memory:
            raise ValueError(f"memory length mismatch: --memory {args.memory} but the table is for H={fit.memory}")
        n = args.n_agents or int((fit.meta.get("source") or {}).get("n_agents", [24])[0])
        from normlab._display import elapsed_bar

        with _warnings_as_lines(), elapsed_bar(f"predicting ({args.draws} posterior draws)", enabled=progress):
            pred = predict(fit, n_agents=n, n_draws=args.draws, within_rounds=args.within_rounds,
                           max_round=args.max_round, run_effects=None if args.no_run_effects else "fit",
                           rng=seed, **pk)
        out = pred.summary()
        from normlab.calibration import RunEffects

        eff = RunEffects.none("--no-run-effects") if args.no_run_effects else \
            RunEffects.from_dict(fit.meta.get("run_effects"))
        out = {"seed": seed, "seed_drawn": drawn, "llm": fit.meta.get("llm"), "source": str(args.table),
               "model": fit.kind, **out,
               "run_effects": eff.summary(),
               "fit": {k: v for k, v in fit.summary().items() if k in ("decisions", "states_observed", "states_total",
                                                                        "decay", "diagnostics")}}
        if args.save_fit:
            fit.to_json(args.save_fit)
        if args.out:
            out["out"] = _save_result(args.out, pred, out)
        announce_seed("calibrate", seed, drawn)
        _print_result(out, args.json)
        return 0
    if args.names is None:
        raise ValueError("--names is required with --ainorms/--log (e.g. --names Q,M)")
    from normlab.calibration.fit.inputs import _check_names

    names = _check_names(args.names)
    if args.ainorms:
        from normlab.llm_runs.published.ainorms import ainorms_file_patterns
        from normlab.llm_runs import load_ainorms

        path = Path(args.ainorms)
        if not path.exists():
            from normlab.llm_runs.published.ainorms_archive import AINORMS_SOURCE

            raise FileNotFoundError(f"--ainorms {path} does not exist: {AINORMS_SOURCE}")
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
                        run_effects=not args.no_run_effects, design=args.design,
                        sensitivity=not args.no_sensitivity, rng=seed, progress=progress)
    if args.save_fit:
        cal.fit.to_json(args.save_fit)
    summary = with_seed(cal.summary(), seed, drawn)
    adequacy = None
    if args.adequacy:
        from normlab.calibration.evaluate.adequacy import check_adequacy

        try:
            with _warnings_as_lines():
                adequacy = check_adequacy(cal, log, n_agents=cal.prediction.n_agents, llm=llm, n_draws=args.draws,
                                          rng=seed)
            summary["adequacy"] = adequacy.summary()
        except ValueError as err:  # e.g. no committed-minority run: the calibration is kept, the check skipped
            summary["adequacy"] = {"skipped": str(err)}
            print(f"normlab calibrate: warning: adequacy check skipped: {err}", file=sys.stderr)
    if args.out:
        summary["out"] = _save_result(args.out, cal, summary)
    announce_seed("calibrate", seed, drawn)
    _print_result(summary, args.json)
    if adequacy is not None and not args.json:
        print("adequacy (fit played under the committed runs' design; predictive p, sum of z^2 over counts):")
        for _, r in adequacy.overall.iterrows():
            print(f"  {r['direction']:<12} {r['statistic']:<13} T = {r['T']:7.2f} over {int(r['counts'])} counts, "
                  f"p = {r['p_value']:.3f}")
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

    from normlab.user_files import write_user_text

    result.save(path)
    result.to_frame().to_parquet(Path(path) / "predictions.parquet", index=False)
    write_user_text(Path(path) / "summary.json", json.dumps({**summary, "out": str(path)}, indent=1,
                                                            default=json_default))
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
        emit(summary, True)
    else:
        print(format_summary(summary))
