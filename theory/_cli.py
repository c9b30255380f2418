"""``normlab simulate`` and ``normlab critical-mass`` (argparse only; heavy imports in handlers)."""

from __future__ import annotations

import argparse

from normlab.cli_output import EXIT_CODES, add_progress_flags, announce_seed, emit, show_progress, with_seed


def _graph_from_spec(spec: str | None, n: int, seed):
    """``complete`` (default), ``ba:M``, ``ws:K:P``, ``er:P``, ``ring``, ``grid`` (periodic square lattice)."""
    if spec in (None, "complete"):
        return None
    import networkx as nx

    kind, *args = spec.split(":")
    try:
        nums = [float(a) for a in args]
    except ValueError:
        raise ValueError(f"bad graph spec {spec!r}: parameters must be numbers") from None
    need = {"ba": 1, "ws": 2, "er": 1, "ring": 0, "grid": 0}
    if kind not in need:
        raise ValueError(f"unknown graph spec {spec!r}; use complete, ba:M, ws:K:P, er:P, ring or grid")
    if len(nums) != need[kind]:
        raise ValueError(f"graph spec {kind!r} takes {need[kind]} parameter(s); got {spec!r}")
    ints = {"ba": [0], "ws": [0]}.get(kind, [])
    if any(nums[i] != int(nums[i]) for i in ints):
        raise ValueError(f"bad graph spec {spec!r}: {kind}'s first parameter is a whole number of links")
    if kind == "ba" and not 1 <= nums[0] < n:
        raise ValueError(f"bad graph spec {spec!r}: ba:M needs 1 <= M < N = {n}")
    if kind == "ws" and not (2 <= nums[0] < n and nums[0] % 2 == 0):
        raise ValueError(f"bad graph spec {spec!r}: ws:K:P needs an even K with 2 <= K < N = {n}")
    if kind in ("ws", "er") and not 0 <= nums[-1] <= 1:
        raise ValueError(f"bad graph spec {spec!r}: the probability P must be in [0, 1]")
    if kind == "ba":
        return nx.barabasi_albert_graph(n, int(nums[0]), seed=seed)
    if kind == "ws":
        return nx.connected_watts_strogatz_graph(n, int(nums[0]), nums[1], seed=seed)
    if kind == "er":
        return nx.gnp_random_graph(n, nums[0], seed=seed)
    if kind == "ring":
        return nx.cycle_graph(n)
    side = int(round(n ** 0.5))
    if side * side != n:
        raise ValueError(f"grid needs a square number of agents; got {n}")
    return nx.convert_node_labels_to_integers(nx.grid_2d_graph(side, side, periodic=True))


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n-agents", type=int, required=True, help="population size N")
    p.add_argument("--runs", type=int, default=1, help="independent replicates (default 1)")
    p.add_argument("--committed", type=int, default=0, help="committed agents (committed to the last name)")
    p.add_argument("--max-interactions", type=int, default=None, help="cap per run (default: 1000 rounds)")
    p.add_argument("--stop", default="consensus", choices=["consensus", "success95", "streak", "flip", "max"],
                   help="when a run ends: consensus (every agent holds one same name; default), success95 (95%% of "
                        "the last 3N interactions succeeded), streak (3N consecutive successes, as the published "
                        "LLM runs), flip (the committed name reached 2.849/3 of uncommitted productions over 3 "
                        "rounds; default of 'binary'), max (only at --max-interactions)")
    p.add_argument("--graph", default=None, help="complete (default), ba:M, ws:K:P, er:P, ring, grid")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: one drawn, printed on stderr and recorded in --json and --out)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="directory for tidy tables: runs (one row per run), rounds (one row per run and population "
                        "round), success_rate (one row per round); created, must not be an existing file")
    p.add_argument("--format", default="parquet", choices=["parquet", "csv"], help="table format for --out")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_progress_flags(p, what="a progress bar (on a terminal: from 1,000 runs up)")


_SIM_EPILOG = """\
examples:
  normlab simulate minimal --n-agents 24 --n-words 10 --runs 50 --seed 1
  normlab simulate binary --n-agents 100 --committed 10 --runs 20 --json
  normlab simulate strategy --n-agents 24 --memory 5 --strategy best_response --runs 40 --out runs_h5
  normlab simulate strategy --n-agents 24 --memory 3 --strategy table.csv --names Q,M --format csv --out t

A table file holds memory_state, name and p columns, as written by 'normlab llm-probe strategy'.

""" + EXIT_CODES

_CM_EPILOG = """\
examples:
  normlab critical-mass --n-agents 24 --committed 1,2,3,4,5,6 --runs 40 --seed 1
  normlab critical-mass --model binary_agreement --n-agents 100 --committed 0.05,0.1,0.15 --json
  normlab critical-mass --model strategy --memory 5 --n-agents 24 --out sweep.csv
  normlab critical-mass --n-agents 24 --runs 40 --out cm --format csv    # cm/critical_mass.csv

--committed takes whole counts (1, 2, ...) or fractions of N strictly between 0 and 1 (rounded to
counts); a non-integer count such as 1.5 is refused. The critical mass is the smallest swept count
whose flip probability within --within-rounds population rounds reaches 1/2; its interval comes
from Clopper-Pearson bounds on each point's flip probability.

""" + EXIT_CODES


_MODEL_EPILOGS = {
    "minimal": """\
examples:
  normlab simulate minimal --n-agents 24 --n-words 10 --runs 50 --seed 1
  normlab simulate minimal --n-agents 24 --n-words 2 --bias 0.45,0.55 --runs 200 --json
  normlab simulate minimal --n-agents 100 --graph ba:3 --runs 20 --out ng_ba --format csv
  normlab simulate minimal --n-agents 24 --n-words 2 --initial consensus:0 --committed 6 --stop flip --runs 40
""",
    "binary": """\
examples:
  normlab simulate binary --n-agents 100 --committed 10 --runs 20 --json
  normlab simulate binary --n-agents 1000 --committed 80 --runs 10 --max-interactions 200000 --seed 1
""",
    "strategy": """\
examples:
  normlab simulate strategy --n-agents 24 --memory 5 --strategy best_response --runs 40 --out runs_h5
  normlab simulate strategy --n-agents 24 --memory 3 --strategy wsls --names Q,M --runs 100 --json
  normlab llm-probe strategy --names Q,M --memory 3 --out probes/h3     # measure an LLM's table, then
  normlab simulate strategy --n-agents 24 --memory 3 --strategy probes/h3/strategy.parquet --runs 100

A table file holds memory_state, name and p columns, as written by 'normlab llm-probe strategy'.
""",
}


def register(sub) -> None:
    sim = sub.add_parser("simulate", help="simulate a theory model and print a summary",
                         description="Simulate a theory model and print a summary (--out: tidy tables).",
                         epilog=_SIM_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    models = sim.add_subparsers(dest="model", metavar="MODEL", required=True)
    def model_parser(name, help):
        return models.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".",
                                 epilog=_MODEL_EPILOGS[name] + "\n" + EXIT_CODES,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)

    m = model_parser("minimal", "minimal naming game (Baronchelli et al. 2006)")
    _add_common(m)
    m.add_argument("--n-words", type=int, default=None, help="finite pool of W names (default: unlimited)")
    m.add_argument("--beta", type=float, default=1.0, help="collapse probability on success (β-model)")
    m.add_argument("--bias", default=None, help="production weights over names, comma-separated")
    m.add_argument("--initial", default=None, help="empty (default), consensus or consensus:<name index>")
    m.set_defaults(func=_simulate)
    b = model_parser("binary", "binary agreement with committed minority (Xie et al. 2011)")
    _add_common(b)
    b.set_defaults(func=_simulate, stop="flip")
    s = model_parser("strategy", "memory-H strategy-table game (Flint Ashery, Aiello & Baronchelli 2025)")
    _add_common(s)
    s.add_argument("--strategy", default="best_response",
                   help="best_response, wsls, or a table file (.parquet/.csv with memory_state,name,p)")
    s.add_argument("--memory", type=int, required=True, help="memory length H")
    s.add_argument("--names", default=None, help="comma-separated name labels (default 0,1)")
    s.add_argument("--n-names", type=int, default=None, help="pool size for a built-in strategy (default 2)")
    s.add_argument("--initial", default=None, help="empty (default), consensus or consensus:<name>")
    s.set_defaults(func=_simulate)

    cm = sub.add_parser("critical-mass", help="sweep committed-minority sizes and locate the critical mass",
                        description="Sweep committed-minority sizes, estimate the flip probability at each and "
                                    "locate the critical mass (Flint Ashery, Aiello & Baronchelli 2025, Methods "
                                    "'Committed Minorities').",
                        epilog=_CM_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    cm.add_argument("--model", default="minimal", choices=["minimal", "binary_agreement", "strategy"],
                    help="minimal (naming game, W = 2, from consensus; default), binary_agreement (Xie et al. "
                         "2011) or strategy (memory-H strategy-table game; needs --memory)")
    cm.add_argument("--n-agents", type=int, required=True, help="population size N")
    cm.add_argument("--committed", default=None,
                    help="comma-separated whole counts (e.g. 1,2,3) or fractions of N in (0, 1) (e.g. 0.1,0.2); "
                         "default: every count from 1 (0 for strategy) to N/2")
    cm.add_argument("--runs", type=int, default=20, help="replicates per point (default %(default)s)")
    cm.add_argument("--within-rounds", type=int, default=30,
                    help="a run counts as flipped only within this many population rounds (default %(default)s, "
                         "the paper's window)")
    cm.add_argument("--strategy", default="best_response",
                    help="--model strategy: best_response (default) or wsls")
    cm.add_argument("--memory", type=int, default=None, help="--model strategy: memory length H (required there)")
    cm.add_argument("--seed", type=int, default=None, help="random seed (default: one drawn, printed on stderr and recorded in --json and --out)")
    cm.add_argument("--out", default=None, metavar="DIR|FILE",
                    help="the sweep table, one row per committed count: a file ending in .csv or .parquet, or a "
                         "directory (created) receiving critical_mass.parquet (--format csv: .csv)")
    cm.add_argument("--format", default="parquet", choices=["parquet", "csv"],
                    help="table format when --out is a directory (default %(default)s)")
    cm.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_progress_flags(cm, what="a progress bar")
    cm.set_defaults(func=_critical_mass)


_TABLE_SUFFIXES = (".csv", ".parquet")


def _sweep_path(path: str, fmt: str):
    """``--out`` of ``critical-mass``: a ``.csv``/``.parquet`` file, or a directory (as every other
    command's ``--out``) receiving ``critical_mass.<format>``; checked before any work."""
    from pathlib import Path

    from normlab._validate import check_out_dir, check_out_file

    p = Path(path)
    if p.suffix.lower() in _TABLE_SUFFIXES:
        check_out_file(p, "--out", _TABLE_SUFFIXES)
        return p
    if p.suffix and not p.is_dir():
        raise ValueError(f"--out {path}: a table file must end in .csv or .parquet (or give a directory)")
    check_out_dir(p)
    return p / f"critical_mass.{fmt}"


def _parse_committed(text: str):
    """``--committed`` of ``critical-mass``: whole counts, or fractions of N in (0, 1); never both
    (:func:`normlab.theory.population.parse_committed`)."""
    from .population import parse_committed

    return parse_committed(text, flag="--committed")


def _load_table(path: str, memory: int, names):
    """A strategy table file (``memory_state``, ``name``, ``p``; the empty memory is ``""``)."""
    from pathlib import Path

    import pandas as pd

    from .strategies import StrategyTable

    import io

    from normlab.user_files import read_user_bytes

    if not (Path(path).exists() or Path(path).is_symlink()):
        raise ValueError(f"--strategy {path}: no such file (a table file, or best_response, wsls)")
    # a regular file (a FIFO or device is refused without blocking), its size capped before reading
    data = read_user_bytes(path, f"--strategy {path}", max_bytes=256 * 2**20)
    try:
        df = (pd.read_csv(io.BytesIO(data), keep_default_na=False, dtype={"memory_state": str, "name": str})
              if path.endswith(".csv") else pd.read_parquet(io.BytesIO(data)))
    except Exception as exc:  # any reader failure is a bad file, said in one line
        raise ValueError(f"--strategy {path} is not a readable table: {' '.join(str(exc).split())[:200]}") from None
    missing = {"memory_state", "name", "p"} - set(df.columns)
    if missing:
        raise ValueError(f"--strategy {path} lacks column(s) {sorted(missing)}; a table has memory_state, name, p "
                         "(as 'normlab llm-probe strategy' writes)")
    df = df.assign(memory_state=df["memory_state"].fillna(""))
    if names is None:
        names = list(dict.fromkeys(df["name"].astype(str)))
    return StrategyTable.from_frame(df, memory=memory, names=names)


def _write_summary(path, summary: dict) -> None:
    """The printed summary (its seed first) as JSON beside a command's tables under ``--out``."""
    import json

    from normlab.cli_output import json_default
    from normlab.user_files import write_user_text

    write_user_text(path, json.dumps(summary, indent=1, default=json_default))


def _simulate(args) -> int:
    from pathlib import Path

    from . import binary_agreement, minimal_naming_game, strategy_game

    if args.out:
        from normlab._validate import check_out_dir

        check_out_dir(args.out)
    from normlab._rng import resolve_seed

    seed, drawn = resolve_seed(args.seed)  # said on stderr once the run is done (an error stays one line)
    graph = _graph_from_spec(args.graph, args.n_agents, seed)
    common = dict(n_runs=args.runs, graph=graph, max_interactions=args.max_interactions, stop=args.stop, rng=seed,
                  progress=(True if args.progress else None) if show_progress(args) else False)
    if args.model == "minimal":
        initial = args.initial
        if initial and initial.startswith("consensus:") and initial.split(":", 1)[1].isdigit():
            initial = int(initial.split(":", 1)[1])
        try:
            bias = None if args.bias is None else [float(x) for x in args.bias.split(",")]
        except ValueError:
            raise ValueError(f"--bias takes comma-separated weights, one per name (e.g. 0.6,0.4); got {args.bias!r}") \
                from None
        res = minimal_naming_game(args.n_agents, n_words=args.n_words, committed=args.committed, beta=args.beta,
                                  production_bias=bias, initial=initial, **common)
    elif args.model == "binary":
        if args.committed < 1:
            raise ValueError("binary agreement needs --committed K >= 1")
        res = binary_agreement(args.n_agents, args.committed, **common)
    elif args.model == "strategy":
        names = None if args.names is None else args.names.split(",")
        strategy = args.strategy
        if strategy.endswith((".csv", ".parquet")):
            strategy = _load_table(strategy, args.memory, names)
        res = strategy_game(strategy, n_agents=args.n_agents, memory=args.memory, committed=args.committed,
                            initial=args.initial, names=names, n_names=args.n_names, **common)
    else:
        raise ValueError("choose a model: normlab simulate {minimal,binary,strategy} ...")
    summary = with_seed(res.summary(), seed, drawn)
    sr = res.success_rate()
    reach = sr.loc[sr["success_rate"] >= 0.95, "round"]
    summary["rounds_to_95"] = int(reach.iloc[0]) if len(reach) else None
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        tables = {"runs": res.to_frame(), "rounds": res.rounds(), "success_rate": sr}
        for name, df in tables.items():
            if args.format == "csv":
                df.to_csv(out / f"{name}.csv", index=False)
            else:
                df.to_parquet(out / f"{name}.parquet", index=False)
        summary["out"] = str(out)
        _write_summary(out / "summary.json", summary)
    announce_seed("simulate", seed, drawn)
    emit(summary, args.json)
    return 0


def _critical_mass(args) -> int:
    from . import critical_mass

    committed = None if args.committed is None else _parse_committed(args.committed)
    path = _sweep_path(args.out, args.format) if args.out else None
    kw = {}
    if args.model == "strategy":
        if args.memory is None:
            raise ValueError("--model strategy needs --memory H")
        kw = dict(strategy=args.strategy, memory=args.memory)
    from normlab._rng import resolve_seed

    seed, drawn = resolve_seed(args.seed)  # said on stderr once the sweep is done (an error stays one line)
    res = critical_mass(args.model, committed, n_agents=args.n_agents, n_runs=args.runs,
                        within_rounds=args.within_rounds, rng=seed, progress=show_progress(args), **kw)
    summary = with_seed(res.summary(), seed, drawn)
    if not args.json:  # every missing value said in words (null in --json)
        kmax = int(res.committed.max())
        beyond = f"not reached with up to {kmax} committed (the largest count swept)"
        words = {"critical_mass": beyond, "critical_fraction": beyond, "interpolated": beyond, "low": beyond,
                 "high": f"above {kmax}, the largest count swept (sweep larger counts to bound it)",
                 "published": f"rule not met with up to {kmax} committed"}
        summary = {k: (words.get(k, v) if v is None else v) for k, v in summary.items()}
    summary["points"] = res.to_frame()[["committed", "n_flips", "n_runs", "p_flip"]].to_dict(orient="list")
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        df = res.to_frame()
        df.to_csv(path, index=False) if path.suffix.lower() == ".csv" else df.to_parquet(path, index=False)
        summary["out"] = str(path)
        _write_summary(path.with_suffix(".json"), summary)
    announce_seed("critical-mass", seed, drawn)
    emit(summary, args.json)
    return 0
