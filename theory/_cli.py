"""``normlab simulate`` and ``normlab critical-mass`` (argparse only; heavy imports in handlers)."""

from __future__ import annotations

import argparse


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
    p.add_argument("--seed", type=int, default=None, help="random seed (default: fresh entropy)")
    p.add_argument("--out", default=None, help="directory for tidy tables (runs, rounds, success_rate); created, "
                                               "must not be an existing file")
    p.add_argument("--format", default="parquet", choices=["parquet", "csv"], help="table format for --out")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


_SIM_EPILOG = """\
examples:
  normlab simulate minimal --n-agents 24 --n-words 10 --runs 50 --seed 1
  normlab simulate binary --n-agents 100 --committed 10 --runs 20 --json
  normlab simulate strategy --n-agents 24 --memory 5 --strategy best_response --runs 40 --out runs_h5
  normlab simulate strategy --n-agents 24 --memory 3 --strategy table.csv --names Q,M --format csv --out t
"""

_CM_EPILOG = """\
examples:
  normlab critical-mass --n-agents 24 --committed 1,2,3,4,5,6 --runs 40 --seed 1
  normlab critical-mass --model binary_agreement --n-agents 100 --committed 0.05,0.1,0.15 --json
  normlab critical-mass --model strategy --memory 5 --n-agents 24 --out sweep.csv

--committed takes whole counts (1, 2, ...) or fractions of N strictly between 0 and 1 (rounded to
counts); a non-integer count such as 1.5 is refused. The critical mass is the smallest swept count
whose flip probability within --within-rounds population rounds reaches 1/2; its interval comes
from Clopper-Pearson bounds on each point's flip probability.
"""


def register(sub) -> None:
    sim = sub.add_parser("simulate", help="simulate a theory model and print a summary",
                         description="Simulate a theory model and print a summary (--out: tidy tables).",
                         epilog=_SIM_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    models = sim.add_subparsers(dest="model", metavar="MODEL")
    m = models.add_parser("minimal", help="minimal naming game (Baronchelli et al. 2006)")
    _add_common(m)
    m.add_argument("--n-words", type=int, default=None, help="finite pool of W names (default: unlimited)")
    m.add_argument("--beta", type=float, default=1.0, help="collapse probability on success (β-model)")
    m.add_argument("--bias", default=None, help="production weights over names, comma-separated")
    m.add_argument("--initial", default=None, help="empty (default), consensus or consensus:<name index>")
    m.set_defaults(func=_simulate)
    b = models.add_parser("binary", help="binary agreement with committed minority (Xie et al. 2011)")
    _add_common(b)
    b.set_defaults(func=_simulate, stop="flip")
    s = models.add_parser("strategy", help="memory-H strategy-table game (Flint Ashery, Aiello & Baronchelli 2025)")
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
    cm.add_argument("--seed", type=int, default=None, help="random seed (default: fresh entropy)")
    cm.add_argument("--out", default=None, help="write the sweep table (parquet or csv by extension)")
    cm.add_argument("--json", action="store_true", help="print the summary as JSON (and no progress bar)")
    cm.set_defaults(func=_critical_mass)


def _check_out_dir(path: str) -> None:
    """``--out`` of ``simulate`` is a directory: refuse an existing file before any work."""
    from pathlib import Path

    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValueError(f"--out {path} is an existing file; --out names a directory for the tables "
                         "(give a new or existing directory)")


def _check_out_file(path: str) -> None:
    """``--out`` of ``critical-mass`` is a table file in an existing directory."""
    from pathlib import Path

    p = Path(path)
    if p.is_dir():
        raise ValueError(f"--out {path} is a directory; --out names a table file (.csv or .parquet)")
    if not p.parent.is_dir():
        raise ValueError(f"--out {path}: directory {p.parent} does not exist")


def _parse_committed(text: str):
    """``--committed`` of ``critical-mass``: whole counts, or fractions of N in (0, 1); never both."""
    vals = []
    for tok in text.split(","):
        try:
            vals.append(float(tok))
        except ValueError:
            raise ValueError(f"--committed takes comma-separated counts or fractions of N; {tok.strip()!r} "
                             "is not a number") from None
    fractions = [v for v in vals if 0 < v < 1]
    if fractions and len(fractions) < len(vals):
        raise ValueError(f"--committed mixes fractions of N in (0, 1) with counts ({text}); give one kind")
    if fractions:
        return vals
    for v in vals:
        if v < 0 or v != int(v):
            raise ValueError(f"--committed {v:g} is neither a whole count (0, 1, 2, ...) nor a fraction of N "
                             "in (0, 1)")
    return [int(v) for v in vals]


def _load_table(path: str, memory: int, names):
    import pandas as pd

    from .strategies import StrategyTable

    df = pd.read_csv(path) if path.endswith(".csv") else pd.read_parquet(path)
    if names is None:
        names = list(dict.fromkeys(df["name"].astype(str)))
    return StrategyTable.from_frame(df, memory=memory, names=names)


def _simulate(args) -> int:
    from pathlib import Path

    from normlab.cli import emit

    from . import binary_agreement, minimal_naming_game, strategy_game

    if args.out:
        _check_out_dir(args.out)
    graph = _graph_from_spec(args.graph, args.n_agents, args.seed)
    common = dict(n_runs=args.runs, graph=graph, max_interactions=args.max_interactions, stop=args.stop, rng=args.seed)
    if args.model == "minimal":
        initial = args.initial
        if initial and initial.startswith("consensus:") and initial.split(":", 1)[1].isdigit():
            initial = int(initial.split(":", 1)[1])
        bias = None if args.bias is None else [float(x) for x in args.bias.split(",")]
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
    summary = res.summary()
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
    emit(summary, args.json)
    return 0


def _critical_mass(args) -> int:
    from normlab.cli import emit

    from . import critical_mass

    committed = None if not args.committed else _parse_committed(args.committed)
    if args.out:
        _check_out_file(args.out)
    kw = {}
    if args.model == "strategy":
        if args.memory is None:
            raise ValueError("--model strategy needs --memory H")
        kw = dict(strategy=args.strategy, memory=args.memory)
    res = critical_mass(args.model, committed, n_agents=args.n_agents, n_runs=args.runs,
                        within_rounds=args.within_rounds, rng=args.seed, progress=not args.json, **kw)
    summary = res.summary()
    summary["points"] = res.to_frame()[["committed", "n_flips", "n_runs", "p_flip"]].to_dict(orient="list")
    if args.out:
        df = res.to_frame()
        df.to_csv(args.out, index=False) if args.out.endswith(".csv") else df.to_parquet(args.out, index=False)
        summary["out"] = args.out
    emit(summary, args.json)
    return 0
