"""``normlab predict --probe`` (argparse only; heavy imports in the handler)."""

from __future__ import annotations

import argparse

from normlab.cli_output import announce_seed, emit, exit_codes, show_progress, with_seed
from normlab.llm_runs.core.cli_kit import add_endpoint_args, endpoint_config, guard, print_estimate

from ._cli_format import format_probe_summary

_EPILOG = """\
examples:
  normlab predict --probe --n-agents 6 --memory 2 --names F,J
  normlab predict --probe --n-agents 10 --memory 3 --names F,J --out probes/fj-h3 --json
  normlab predict --probe --n-agents 24 --memory 5 --names Q,M --base-url http://127.0.0.1:8000/v1 --out probes/qm-h5
  normlab predict --probe --n-agents 6 --memory 2 --names X,Y --embedded-model qwen2.5-coder-1.5b   # pip install "normlab[qwen]"
  normlab predict --probe --n-agents 24 --memory 5 --names Q,M --base-url URL --model MODEL --dry-run   # requests first
  normlab predict --probe --n-agents 24 --memory 5 --names Q,M --base-url URL --model MODEL --budget 2M --out probes/qm

Probes every memory state up to H in every name order with exact next-token probabilities
(one call per state and order: exact mode always, so the endpoint must return logprobs; the cost is
printed before it starts, --dry-run prints it and sends nothing, --budget stops cleanly before
spending more; with --out the answers are journaled and a rerun resumes), turns them into a strategy table with its uncertainty (endpoint
jitter, name-like uncovered mass; the spread over name orders is reported) and predicts the
population of N agents: P(consensus on each name), rounds to 95% success, critical masses by the
published and per-run rules, relative strength -- intervals over table draws of what an
experiment of the paper's size would report, and (underlying) of the quantity itself. --json
prints the schema of 'normlab calibrate --json' plus 'success_curve', 'underlying' and 'probe'.

""" + exit_codes(llm=True)


def register_predict(sub) -> None:
    p = sub.add_parser(
        "predict",
        help="predict an LLM population from single-agent probes alone",
        description="Predict collective bias, convergence speed and critical mass of an LLM population from exact "
                    "probes of every memory state, before running any population (Flint Ashery, Aiello & "
                    "Baronchelli 2025: Table 1, Figs. 1-3).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--probe", action="store_true", required=True,
                   help="predict from probes alone (required: the only source of this command)")
    p.add_argument("--n-agents", type=int, required=True, help="population size N of the prediction")
    p.add_argument("--memory", type=int, required=True, help="memory length H (every state of length 0..H is probed)")
    p.add_argument("--names", required=True, help="name pool, comma-separated (e.g. F,J)")
    p.add_argument("--out", default=None, help="probe directory: answers journaled there, a rerun resumes "
                                               "(default: a temporary directory, nothing kept)")
    p.add_argument("--cache", action="append", default=None, metavar="DIR",
                   help="reuse exact-mode answers journaled in DIR (a probe or run); repeatable")
    p.add_argument("--draws", type=int, default=200, help="table draws (default 200)")
    p.add_argument("--jitter-states", type=int, default=16,
                   help="prompts re-asked without the cache to measure the endpoint's logprob jitter (default 16; 0: none)")
    p.add_argument("--order-mixing", default="average", choices=["average", "dirichlet"],
                   help="average: the population's uniform name shuffle (exact, default); dirichlet: per-draw random "
                        "weights over the probed orders (sensitivity)")
    p.add_argument("--runs-consensus", type=int, default=40, help="convergence runs per draw (default 40, the paper's)")
    p.add_argument("--runs-flip", type=int, default=16, help="runs per draw and committed count (default 16)")
    p.add_argument("--within-rounds", type=int, default=30, help="window of the per-run flip reading (default 30)")
    p.add_argument("--max-round", type=int, default=None, help="window of the published critical-mass rule (default 30)")
    p.add_argument("--no-strength", action="store_true", help="skip the relative-strength simulations")
    p.add_argument("--no-underlying", action="store_true", help="skip the many-run prediction of the underlying values")
    p.add_argument("--save-table", metavar="JSON", default=None, help="write the probed table with its uncertainty "
                                                                      "(ProbeFit JSON)")
    s = p.add_argument_group("sampler the population uses (Flint Ashery, Aiello & Baronchelli 2025, Table S4)")
    s.add_argument("--template", default="main", help="main | bullet | narrative | path to a JSON template")
    s.add_argument("--wrap", default="chat", help="chat | raw-llama3 | raw-llama2 (default %(default)s)")
    s.add_argument("--temperature", type=float, default=0.5)
    s.add_argument("--top-k", type=int, default=10, help="0: no top-k (default %(default)s)")
    s.add_argument("--top-logprobs", type=int, default=20, help="alternatives per position (default %(default)s)")
    s.add_argument("--multi-token", default="expand", choices=("expand", "first_token"),
                   help="scoring of names of several tokens (default %(default)s)")
    # the endpoint, --embedded-model, price, --budget / --dry-run and output flags of every LLM command
    add_endpoint_args(p, run_controls=True, sampling=False)
    p.set_defaults(func=_predict)


def _predict(args) -> int:
    for nm, low in (("n_agents", 2), ("memory", 1), ("draws", 1), ("runs_consensus", 1), ("runs_flip", 1),
                    ("within_rounds", 3), ("jitter_states", 0), ("concurrency", 1), ("top_logprobs", 1)):
        v = getattr(args, nm)
        if v is None or v < low:
            raise ValueError(f"--{nm.replace('_', '-')} must be >= {low}; got {v}")
    if args.max_round is not None and args.max_round < 3:
        raise ValueError(f"--max-round must be >= 3; got {args.max_round}")
    if args.top_k < 0:
        raise ValueError(f"--top-k must be >= 0 (0: none); got {args.top_k}")
    from normlab.schema import validate_names

    names = validate_names(args.names)
    if len(names) < 2:
        raise ValueError(f"--names needs at least two names; got {args.names!r}")
    endpoint = endpoint_config(args)
    if args.out is not None:
        from normlab._validate import check_out_dir

        check_out_dir(args.out)
    if args.dry_run:
        from normlab.calibration.prediction.probe_estimate import probe_estimate

        return print_estimate(probe_estimate(names, args.memory, endpoint=endpoint, template=args.template,
                                             jitter_states=args.jitter_states, out=args.out, cache=args.cache,
                                             wrap=args.wrap), args.json)

    from normlab._rng import resolve_seed

    seed, drawn = resolve_seed(args.seed)

    def go():
        from normlab.calibration.prediction.from_probes import probe_predict

        res = probe_predict(
            names, args.memory, n_agents=args.n_agents, endpoint=endpoint, out=args.out, cache=args.cache,
            template=args.template, n_draws=args.draws, jitter_states=args.jitter_states,
            order_mixing=args.order_mixing, n_runs_consensus=args.runs_consensus, n_runs_flip=args.runs_flip,
            within_rounds=args.within_rounds, max_round=args.max_round, strength=not args.no_strength,
            underlying=not args.no_underlying, progress=show_progress(args),
            announce=args.progress is not False,
            rng=seed, wrap=args.wrap, temperature=args.temperature, top_k=args.top_k or None,
            top_logprobs=args.top_logprobs, multi_token=args.multi_token)
        if args.save_table:
            res.fit.to_json(args.save_table)
        announce_seed("predict", seed, drawn)
        summary = with_seed(res.summary(), seed, drawn)
        if args.json:
            emit(summary, True)
        else:
            print(format_probe_summary(summary))
        return 0

    return guard("predict", go, args.out)
