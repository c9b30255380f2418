"""``normlab tip`` (argparse only; numpy/pandas and the runner are imported in the handler)."""

from __future__ import annotations

import argparse
import sys

from normlab.cli_output import announce_seed, emit, exit_codes, show_progress, with_seed
from normlab.llm_runs.core.cli_kit import add_endpoint_args, endpoint_config, guard, request_budget, sampling

from .fit.registry import FIT_KINDS

__all__ = ["register_tip"]

_EPILOG = """\
examples:
  normlab tip --ainorms ../shared/data/ai-norms/llama31_data.zip --names Q,M --memory 5 --n-agents 24 \\
      --direction overturn_M --json --seed 1           # replay the published archive: its own design
  normlab tip --ainorms ../shared/data/ai-norms/llama3_data.zip --names Q,M --memory 3 --n-agents 48 \\
      --direction overturn_M --seed 1 --plot tip.png
  normlab tip --names X,Y --memory 2 --n-agents 8 --direction overturn_X --runs-per-count 4 \\
      --mode exact --out tip-xy --seed 1               # live, on the embedded SmolLM2 (baselines first)
  normlab tip --names Q,M --memory 5 --n-agents 24 --direction overturn_M --base-url http://127.0.0.1:8000/v1 \\
      --from-log runs/qm_h5 --budget 40runs --out tip-qm    # an endpoint, starting from earlier baseline runs
  normlab tip --names X,Y --memory 1 --n-agents 6 --direction overturn_Y --embedded-model qwen2.5-coder-1.5b \\
      --budget 6runs --out tip-qwen --dry-run               # the plan: mode, runs, requests, tokens; nothing sent

Finds the critical mass of a committed-minority experiment -- the smallest committed count whose
runs meet the published ensemble rule behind Table S3 of Flint Ashery, Aiello & Baronchelli (2025)
-- by playing only the runs that teach the most. After every step it refits the strategy table on
all runs so far (default: the Dirichlet table) with the between-run heterogeneity, reads every
count's experiment as its observed runs plus simulated ones (so the runs decide where they were
played), and plays the next batch (--batch runs at one count) where the expected information about
the critical mass per unit of cost is highest. It stops when the smallest set of tested counts
holding --target of the probability spans at most --tolerance agents (only tested counts are ever
reported), or the --budget (runs, requests, tokens or USD) is spent.

The experiment: with --ainorms, the archive's own (its tested counts and runs per count, its run
protocol and window: the number its authors reported); a run requested at a count is one of the
archive's runs there, drawn without replacement (seeded), and counts it did not test cannot be
played. Live: the paper's design (--runs-per-count runs of --window rounds at every count, runs
stopping at a 3N success streak), every step journaled under --out (a rerun resumes).

--json prints {"direction", "critical_mass": {"estimate", "low", "high", "credible_set", "p_set"},
"replication": {... a fresh experiment of the same design, "distribution"}, "runs_used",
"runs_available", "tokens_used", "counts": {count: runs}, "steps": [...]} (null: not reached on the
grid; tokens_used is null for a replay, whose archive has no token counts). A search that --budget
stopped before --target still prints its result, and exits with 5. Live runs play in sample mode
unless --mode exact is given (the paper's protocol: answers generated and parsed, re-asked; exact
mode reads next-token logprobs, cached per prompt); the mode is printed when the search starts, and
--dry-run prints the whole plan without sending anything.

""" + exit_codes(llm=True)


def register_tip(sub) -> None:
    p = sub.add_parser(
        "tip",
        help="find a critical mass with as few committed-minority runs as the answer needs",
        description="Adaptive committed-minority experiments: the published-rule critical mass (Flint Ashery, Aiello "
                    "& Baronchelli 2025, Table S3) for a fraction of the runs, with its interval and the path of "
                    "the search.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--ainorms", metavar="ZIP", default=None,
                   help="replay a published AI-norms archive (default: play live runs on the endpoint)")
    p.add_argument("--names", required=True, help="two-name pool, comma-separated (e.g. Q,M)")
    p.add_argument("--memory", type=int, required=True, help="memory length H")
    p.add_argument("--n-agents", type=int, required=True, help="population size N of the committed-minority runs")
    p.add_argument("--direction", required=True,
                   help="overturn_<X> (or X): a consensus on X attacked by agents committed to the other name")
    p.add_argument("--llm", default=None, help="--ainorms: the LLM when the archive holds several (model column)")
    start = p.add_argument_group("what is known before the search (default: the archive's baselines; live: "
                                 "--baselines runs played first)")
    start.add_argument("--from-log", action="append", default=None, metavar="DIR",
                       help="baseline runs in DIR (a normlab run directory or GameLog.to_parquet); repeatable")
    start.add_argument("--table", metavar="NAME|JSON", default=None,
                       help="a shipped fitted table (see 'normlab calibrate --list-tables') or a saved fit: its "
                            "decision counts join every refit, its run effects serve until the runs give their own")
    start.add_argument("--probe", action="store_true",
                       help="live: probe every memory state of the endpoint first (exact mode, journaled under "
                            "OUT/probe) and start from those counts")
    start.add_argument("--baselines", type=int, default=None,
                       help="live: baseline runs played first when nothing else is given (default 4; 0: none)")
    start.add_argument("--baseline-rounds", type=int, default=60,
                       help="live: cap of a baseline run in rounds (it stops earlier at a 3N success streak)")
    d = p.add_argument_group("the experiment and the search")
    d.add_argument("--runs-per-count", type=int, default=10, help="live: runs per count of the design (default 10)")
    d.add_argument("--window", type=int, default=None,
                   help="window of the published rule in rounds; live: also the runs' length (default 30; "
                        "--ainorms: the authors' window for that archive)")
    d.add_argument("--target", type=float, default=0.9,
                   help="stop when a set of tested counts spanning at most --tolerance agents holds this much of "
                        "the probability (default 0.9)")
    d.add_argument("--tolerance", type=int, default=1, metavar="AGENTS",
                   help="width in agents the credible set may span at the stop (default 1; on a coarse grid such as "
                        "0,1,2,4,6,8,10 the set {8, 10} is not tight)")
    d.add_argument("--level", type=float, default=0.95, help="level of the reported interval (default 0.95)")
    d.add_argument("--batch", type=int, default=2, help="runs per step, at one count (default 2)")
    d.add_argument("--strategy", default="eig", choices=["eig", "half"],
                   help="eig: expected information about the critical mass per unit of cost (default); half: the "
                        "count whose probability of meeting the rule is nearest 1/2, per unit of cost")
    d.add_argument("--fit-model", default="empirical", choices=list(FIT_KINDS),
                   help="strategy model refitted after every step (default: empirical, the Dirichlet table)")
    d.add_argument("--draws", type=int, default=200, help="posterior draws per step (default 200)")
    d.add_argument("--confirm", type=int, default=10, metavar="RUNS",
                   help="before stopping at --target, play out the most probable critical mass's runs, up to RUNS of "
                        "them (default 10; 0: off): one slow run fails a count under the published rule")
    d.add_argument("--no-run-effects", action="store_true",
                   help="simulate every run with the same table (default: estimate the between-run heterogeneity)")
    d.add_argument("--budget", default=None, metavar="AMOUNT",
                   help="stop before spending more: committed-minority runs (15runs), requests (300req), tokens (50000, "
                        "50k, 2M) or USD ($1.50, with --price-input/--price-output); what every journal in --out "
                        "counts (earlier steps, the probe, requests cut off by a kill) is spent")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="live: the search's directory (every step journaled there; required); with --ainorms: save "
                        "the result there (normlab.load reads it back)")
    p.add_argument("--plot", default=None, metavar="PNG", help="write the figure of the search's path")
    d.add_argument("--dry-run", action="store_true",
                   help="print the plan -- the mode, the baseline runs and at most how many committed runs, their "
                        "requests, tokens and cost (an estimate from the prompts and the design) -- and exit without "
                        "sending anything or writing files")
    add_endpoint_args(p)
    p.set_defaults(func=_tip)


def _runs_budget(text):
    """``--budget``: ``(runs, rest)`` -- a number of runs (``15runs``), or the text for tokens/USD."""
    if text is None:
        return None, None
    t = str(text).strip().lower().replace(" ", "")
    if t.endswith("runs") or t.endswith("run"):
        v = t.removesuffix("runs").removesuffix("run")
        if not v.isdigit() or int(v) < 1:
            raise ValueError(f"--budget in runs must be a positive whole number of runs (15runs); got {text!r}")
        return int(v), None
    return None, text


def _tip(args) -> int:
    from pathlib import Path

    for nm, low in (("memory", 1), ("n_agents", 3), ("batch", 1), ("draws", 20), ("runs_per_count", 1),
                    ("confirm", 0), ("tolerance", 0),
                    ("baseline_rounds", 3)):
        v = getattr(args, nm)
        if v is None or v < low:
            raise ValueError(f"--{nm.replace('_', '-')} must be >= {low}; got {v}")
    if args.window is not None and args.window < 3:
        raise ValueError(f"--window must be >= 3; got {args.window}")
    if args.baselines is not None and args.baselines < 0:
        raise ValueError(f"--baselines must be >= 0; got {args.baselines}")
    if not 0 < args.target < 1:
        raise ValueError(f"--target must be in (0, 1); got {args.target}")
    if not 0 < args.level < 1:
        raise ValueError(f"--level must be in (0, 1); got {args.level}")
    from normlab.schema import validate_names

    names = validate_names([x.strip() for x in args.names.split(",")])
    if len(names) != 2:
        raise ValueError(f"--names must be a two-name pool (e.g. Q,M); got {args.names!r}")
    majority = args.direction.removeprefix("overturn_")
    if majority not in names:
        raise ValueError(f"--direction {args.direction} names {majority!r}, not a name of --names {args.names}")
    runs_budget, other_budget = _runs_budget(args.budget)
    live = args.ainorms is None
    if not live:
        for flag, bad in (("--probe", args.probe), ("--baselines", args.baselines is not None),
                          ("--base-url", args.base_url)):
            if bad:
                raise ValueError(f"{flag} plays live runs; it does not combine with --ainorms (a replay)")
        if other_budget is not None:
            raise ValueError("a replay sends no request and has no token or USD cost; give --budget in runs (e.g. 15runs)")
        if not Path(args.ainorms).exists():
            raise FileNotFoundError(f"{args.ainorms} does not exist")
    elif args.out is None:
        raise ValueError("live runs need --out DIR (every step is journaled there; a rerun resumes)")
    if args.plot:
        from normlab._validate import check_out_file

        check_out_file(args.plot, "--plot", (".png", ".pdf", ".svg"))
    args.budget = other_budget
    req_budget = request_budget(args) if live else None  # 300req: taken off args.budget
    endpoint = endpoint_config(args) if live else None
    if req_budget is not None:
        import dataclasses

        endpoint = dataclasses.replace(endpoint, budget_requests=req_budget)
        args.budget = f"{req_budget}req"
    progress = show_progress(args)
    from normlab._rng import resolve_seed

    # the search's seed (its replay order, refits and simulations): drawn and printed when not given. A live
    # source's runs keep their own seeds in their run directories (None: drawn per step and stored there, so a
    # rerun resumes them whatever seed this session draws).
    seed, drawn = resolve_seed(args.seed)  # said on stderr once the search is done (an error stays one line)
    if args.dry_run:
        return _dry_run(args, names, majority, endpoint, runs_budget, live)
    if live:
        print(f"normlab tip: {_mode_line(args)}; {endpoint.model_label}", file=sys.stderr)

    def go():
        import contextlib

        from normlab.calibration.tip.search import tip
        from normlab.calibration.tip.sources import ArchiveReplay, LLMSource

        prior = None
        if args.table:
            from normlab.calibration import load_fit

            prior = load_fit(args.table)
        logs = [_read_log(x) for x in args.from_log or []]
        log = None
        if logs:
            from normlab.schema import GameLog

            log = GameLog.concat(logs) if len(logs) > 1 else logs[0]
        if not live:
            from normlab.llm_runs.published.ainorms import ainorms_file_patterns
            from normlab.llm_runs import load_ainorms

            from ._cli_format import _LLM_ALIASES

            archive = load_ainorms(args.ainorms, kinds=["baseline", "swap", "evolved"],
                                   files=ainorms_file_patterns(names), on_inconsistency="warn")
            llm = _LLM_ALIASES.get(args.llm, args.llm) if args.llm else None
            source = ArchiveReplay(archive, names=names, majority=majority, memory=args.memory,
                                   n_agents=args.n_agents, llm=llm, window=args.window, rng=seed)
            ctx = contextlib.nullcontext()
        else:
            from normlab.llm_runs.backend import shared_embedded_server

            ctx = shared_embedded_server() if endpoint.embedded else contextlib.nullcontext()
        with ctx:
            if live:
                nb = args.baselines if args.baselines is not None else (0 if (log is not None or prior is not None
                                                                               or args.probe) else 4)
                kw = sampling(args)
                mode = args.mode or "sample"
                if args.probe:
                    prior = _probe_counts(names, args, endpoint, kw)
                source = LLMSource(names=names, majority=majority, memory=args.memory, n_agents=args.n_agents,
                                   out=args.out, endpoint=endpoint, runs_per_count=args.runs_per_count,
                                   window=args.window or 30, baselines=nb, baseline_rounds=args.baseline_rounds,
                                   mode=mode, sampling=kw, progress=progress and sys.stderr.isatty(), rng=args.seed)
            res = tip(source, target=args.target, level=args.level, batch=args.batch, fit_model=args.fit_model,
                      prior=prior, run_effects=not args.no_run_effects, n_draws=args.draws, strategy=args.strategy,
                      max_runs=runs_budget, log=log, confirm=args.confirm, tolerance=args.tolerance,
                      progress=progress, rng=seed)
        if args.plot:
            res.plot("both", path=args.plot)
        if args.out:
            import json

            from normlab.cli_output import json_default
            from normlab.user_files import write_user_text

            res.save(Path(args.out) / "result")
            write_user_text(Path(args.out) / "summary.json",
                            json.dumps(with_seed(res.summary(), seed, drawn), indent=1, default=json_default))
        announce_seed("tip", seed, drawn)
        if args.json:
            emit(with_seed(res.summary(), seed, drawn), True)
        else:
            print(res.describe())
        return 5 if res.stopped.startswith("budget") or res.stopped.startswith("run budget") else 0

    return guard("tip", go, args.out if live else None)


_MODES = {"sample": "sample mode (the paper's protocol: answers generated, parsed and re-asked; any endpoint)",
          "exact": "exact mode (next-token logprobs, cached per prompt; the endpoint must return logprobs)"}


def _mode_line(args) -> str:
    """The live runs' mode in words, saying when it is the default."""
    mode = args.mode or "sample"
    return f"live runs in {_MODES[mode]}" + ("" if args.mode else "; the default, --mode exact for the other")


def _dry_run(args, names, majority, endpoint, runs_budget, live) -> int:
    """``tip --dry-run``: the plan and what it may cost; nothing sent, nothing written."""
    from pathlib import Path

    from normlab.llm_runs.core.estimate import RunEstimate
    from normlab.llm_runs.core.cli_kit import print_estimate

    if not live:
        est = RunEstimate(what=f"tip: a replay of {args.ainorms} (its own design)", rows={
            "requests": (0.0, 0.0), "prompt_tokens": (0.0, 0.0), "completion_tokens": (0.0, 0.0), "cost_usd": (0.0, 0.0)},
            prices={"all": (0.0, 0.0)}, notes=("a replay draws the archive's runs: no endpoint is asked",
                                               f"at most {runs_budget or 'every'} committed run(s) of the archive"))
        return print_estimate(est, args.json)
    from normlab.llm_runs.runner import estimate_game

    kw = sampling(args)
    mode = args.mode or "sample"
    N, H = args.n_agents, args.memory
    challenger = next(n for n in names if n != majority)
    nb = args.baselines if args.baselines is not None else (0 if (args.from_log or args.table or args.probe) else 4)
    window = args.window or 30
    grid = args.runs_per_count * N  # counts 0 .. N - 1, --runs-per-count runs each
    runs = min(runs_budget, grid) if runs_budget else grid
    parts, notes = [], [_mode_line(args), f"on {endpoint.model_label}"]
    if args.probe:
        from normlab.calibration.prediction.probe_estimate import probe_estimate

        parts.append(("probe", probe_estimate(names, H, endpoint=endpoint, template=kw["template"], jitter_states=0,
                                    out=Path(args.out) / "probe", wrap=kw["wrap"])))
        notes.append(f"--probe: an {parts[-1][1].what} first (logprobs needed)")
    if nb:
        parts.append(("baselines", estimate_game(N, H, list(names), max_interactions=args.baseline_rounds * N, runs=nb,
                                                 mode=mode, stop="streak", endpoint=endpoint, **kw)))
        notes.append(f"baselines: {nb} run(s) from empty memories, up to {args.baseline_rounds} rounds each")
    if runs:
        # one committed agent: the most deciding agents, the most requests a run can make
        one = estimate_game(N, H, list(names), max_interactions=window * N, runs=runs, mode=mode, stop="streak",
                            committed=1, committed_name=challenger, initial=f"consensus:{majority}",
                            endpoint=endpoint, **kw)
        parts.append(("committed runs", one))
        notes.append(f"committed runs: at most {runs} ({'--budget' if runs_budget else f'the whole grid: {args.runs_per_count} at each of counts 0..{N - 1}'}), "
                     f"{window} rounds each; the search usually stops far earlier (--target {args.target})")
    keys = ("requests", "prompt_tokens", "completion_tokens", "cost_usd")
    rows = {}
    for k in keys:
        t = [p.rows[k] for _, p in parts if k in p.rows]
        rows[k] = (sum(x[0] for x in t), None if any(x[1] is None for x in t) else sum(x[1] for x in t))
    for label, p in parts:
        notes += [f"{label}: {n}" for n in p.notes[:2]]
    if endpoint.budget_tokens or endpoint.budget_usd or endpoint.budget_requests:
        notes.append(f"--budget {args.budget}: the search stops cleanly there (exit 5)")
    est = RunEstimate(what=f"tip: critical mass to overturn {majority} (N = {N}, H = {H}, names {','.join(names)}), "
                           f"{mode} mode", rows=rows, prices={"all": (endpoint.price_input, endpoint.price_output)},
                      notes=tuple(notes))
    return print_estimate(est, args.json)


def _read_log(path):
    from pathlib import Path

    from normlab.schema import GameLog

    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(f"--from-log {path} is not a directory")
    return GameLog.read_parquet(p)


def _probe_counts(names, args, endpoint, kw):
    """--probe: exact probes of every memory state (journaled under OUT/probe) as decision counts."""
    from pathlib import Path

    from normlab.calibration import counts_from_probes
    from normlab.llm_runs import strategy_table

    keep = {k: kw[k] for k in ("template", "temperature", "top_k", "top_logprobs", "multi_token", "wrap") if k in kw}
    probe = strategy_table(list(names), args.memory, out=Path(args.out) / "probe", endpoint=endpoint, **keep)
    return counts_from_probes(probe.to_frame(), names=names, memory=args.memory)
