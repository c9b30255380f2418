"""``normlab study`` (argparse only; heavy imports in the handler).

The endpoint, price, budget and sampling flags are those of ``normlab llm-run`` and ``normlab demo``
(:mod:`normlab.llm_runs.core.cli_kit`), with ``--embedded-model`` (a registered embedded model or a
GGUF file served in-process) and ``--model-file`` (the GGUF an endpoint serves, for its SHA-256).
"""

from __future__ import annotations

import argparse
import sys

from normlab.cli_output import emit, show_progress
from normlab.llm_runs.core.cli_kit import EXIT_CODES, add_endpoint_args, endpoint_config, guard, sampling

_EXAMPLES = """\
examples:
  normlab study --out study --dry-run                          # the plan: stages, modes, requests, tokens (nothing sent)
  normlab study --out study --until measure                    # the timed first stage alone (the cost per decision)
  normlab study --out study --dry-run                          # again: now with the time of every stage
  normlab study --out study --until register                   # predictions.json written (and hashed), nothing played
  normlab study --out study                                    # the rest; a rerun resumes where it stopped
  normlab study --out qwen --embedded-model qwen2.5-coder-1.5b --n-agents 4 --memory 2 --populations 20
  normlab study --out qwen --embedded-model /path/to/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf --embedded-threads 1
  normlab study --out mine --base-url http://127.0.0.1:8080/v1 --model-file model.gguf --budget 2M

stages (each runs once; OUT/stages.jsonl says which are done and how long they took):
  measure -> probe -> register (predictions.json + predictions.sha256, before any population) -> populations
  (sample) -> committed (sample) -> exact (the same runs from the probe's cache) -> tip (sample) -> score -> report
A stage after register refuses to run if predictions.json changed.
"""

_DEFAULTS = {"names": "X,Y", "n_agents": 4, "memory": 1, "populations": 20, "max_rounds": 40, "runs_per_count": 4,
             "window": 20, "max_counts": 3, "tip_runs": 8, "draws": 200, "jitter_states": 8, "measure_interactions": 12}


def _study(args) -> int:
    import shlex
    from pathlib import Path

    from normlab.llm_runs.backend import redact_command
    from normlab.study._settings import STAGES, StudySettings

    if args.mode is not None:
        raise ValueError("--mode: the study fixes each stage's mode (the probe exact; the populations, committed runs "
                         "and tip sample, the paper's protocol; their twins exact)")
    if args.embedded_model is not None and args.base_url:
        raise ValueError("--embedded-model and --base-url exclude each other")
    if args.model_file is not None and not args.base_url:
        raise ValueError("--model-file names the GGUF an endpoint (--base-url) serves; an embedded model is hashed "
                         "from its own file")
    if args.until is not None and args.until not in STAGES:
        raise ValueError(f"--until must be one of {', '.join(STAGES)}; got {args.until!r}")
    smp = sampling(args)
    st = StudySettings(names=args.names, n_agents=args.n_agents, memory=args.memory, populations=args.populations,
                       max_rounds=args.max_rounds, runs_per_count=args.runs_per_count, window=args.window,
                       max_counts=args.max_counts, tip_runs=args.tip_runs, n_draws=args.draws,
                       jitter_states=args.jitter_states, measure_interactions=args.measure_interactions,
                       seed=args.seed, sampling=smp)
    # the study serves its own model (a registered name or a GGUF file): the endpoint flags without it
    endpoint = endpoint_config(argparse.Namespace(**{**vars(args), "embedded_model": None}))
    command = (("normlab " + " ".join(shlex.quote(a) for a in redact_command(sys.argv[1:])))
               if Path(sys.argv[0]).name == "normlab" else None)
    kw = dict(embedded_model=args.embedded_model, endpoint=endpoint, model_file=args.model_file)
    if args.dry_run:
        from normlab.study.pipeline import estimate_study

        plan = estimate_study(args.out, st, **kw)
        if args.json:
            import json

            print(json.dumps(plan.to_dict(), indent=1, default=str))
        else:
            print(plan)
        return 0

    def go():
        from normlab.study.pipeline import run_study

        res = run_study(args.out, st, until=args.until, progress=show_progress(args), verbose=True, command=command,
                        **kw)
        if args.json:
            import json

            print(json.dumps(res.summary if res.summary is not None else
                             {"directory": str(res.directory), "stages_done": list(res.stages)}, indent=1, default=str))
        else:
            emit(_headline(res), False)
        return 0

    code = guard("study", go, None)
    kept = any(j.stat().st_size for j in (Path(args.out) / "llm").rglob("journal.jsonl")) if Path(args.out).is_dir() \
        else False
    if code == 5:
        print(f"normlab study: every completed model answer is kept in {args.out}/llm; rerun the same command with a "
              "larger --budget to continue", file=sys.stderr)
    elif code in (3, 4, 130) and kept:
        print(f"normlab study: every completed stage and model answer is kept in {args.out}; rerun the same command "
              "to resume", file=sys.stderr)
    return code


def _headline(res) -> dict:
    out = {"directory": str(res.directory), "stages done": ", ".join(res.stages) or "none"}
    s = res.summary
    if s is None:
        return out
    g = s["glance"]
    out["model"] = s["model"]["label"]
    out["predictions inside their interval"] = f"{g['inside']} of {g['checked']} (sample mode); exact twins " \
                                               f"{g['exact_inside']} of {g['exact_checked']}"
    for r in s["predictions"]:
        if r["inside"] is False:
            out[f"outside: {r['quantity']} {r['key']}".strip()] = (f"predicted {r['predicted']} [{r['low']}, {r['high']}],"
                                                                   f" observed {r['observed']}")
    t = s.get("tip_vs_grid")
    if t:
        out[f"tip vs the grid ({t['majority']})"] = (f"tip {t['tip'].get('estimate')} [{t['tip'].get('low')}, "
                                                     f"{t['tip'].get('high')}] in {t['tip_runs']} runs; grid "
                                                     f"{t['grid_critical_mass']} in {t['grid_runs']} runs")
    out["time"] = f"{s['timing']['wall_s']:.0f} s over the stages"
    out["report"] = str(res.report)
    return out


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "study",
        help="a blind test: predictions registered (hashed) before the model's populations are played, then scored",
        description=(
            "A blind study of normlab's predictions on one model (Flint Ashery, Aiello & Baronchelli 2025). Probe the "
            "strategy table; write every prediction with its interval for the design about to be run to "
            "OUT/predictions.json (its SHA-256 in OUT/predictions.sha256 and the manifest; later stages refuse to run "
            "if it changes); play the populations and committed-minority runs in the paper's sample mode with "
            "exact-mode twins beside them; run the tip search against the full grid; score every prediction beside "
            "the rivals; write OUT/report.html, OUT/summary.json, OUT/figures/ and OUT/tables/. Each stage runs once "
            "and is journaled in OUT/stages.jsonl: a rerun (after a kill, a budget stop or --until) resumes."),
        epilog=_EXAMPLES + "\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", required=True, help="study directory (created; a rerun resumes it)")
    g = p.add_argument_group("design (fixed before anything runs; a study directory keeps its own)")
    g.add_argument("--names", default=_DEFAULTS["names"], help="the two names (default %(default)s)")
    g.add_argument("--n-agents", type=int, default=_DEFAULTS["n_agents"], help="population size N, 3-12 "
                                                                              "(default %(default)s)")
    g.add_argument("--memory", type=int, default=_DEFAULTS["memory"], help="memory length H, 1-3 (default %(default)s)")
    g.add_argument("--populations", type=int, default=_DEFAULTS["populations"],
                   help="populations from empty memories, sample mode (default %(default)s)")
    g.add_argument("--max-rounds", type=int, default=_DEFAULTS["max_rounds"],
                   help="cap of a population in rounds (default %(default)s)")
    g.add_argument("--runs-per-count", type=int, default=_DEFAULTS["runs_per_count"],
                   help="committed-minority runs per direction and count (default %(default)s)")
    g.add_argument("--window", type=int, default=_DEFAULTS["window"],
                   help="rounds of a committed run, of the flip reading and of the published rule (default %(default)s)")
    g.add_argument("--max-counts", type=int, default=_DEFAULTS["max_counts"],
                   help="most committed counts tested against the convention not searched (default %(default)s)")
    g.add_argument("--tip-runs", type=int, default=_DEFAULTS["tip_runs"],
                   help="committed runs the tip search may play; 0 skips it (default %(default)s)")
    g.add_argument("--draws", type=int, default=_DEFAULTS["draws"], help="table draws per prediction "
                                                                         "(default %(default)s)")
    g.add_argument("--jitter-states", type=int, default=_DEFAULTS["jitter_states"],
                   help="probe prompts re-asked to measure the endpoint's logprob jitter (default %(default)s)")
    g.add_argument("--measure-interactions", type=int, default=_DEFAULTS["measure_interactions"],
                   help="interactions of the timed sample-mode population of the first stage (default %(default)s)")
    m = p.add_argument_group("model")
    m.add_argument("--model-file", default=None, metavar="FILE",
                   help="with --base-url: the GGUF file the server loaded (its SHA-256 goes into predictions.json)")
    m.add_argument("--until", default=None, metavar="STAGE",
                   help="stop after this stage (measure, probe, register, populations, committed, exact, tip, score, "
                        "report); the same command without it goes on")
    add_endpoint_args(p, run_controls=True)
    for a in p._actions:
        if a.dest == "embedded_model":  # the endpoint flags' --embedded-model, widened to a GGUF file
            a.choices, a.metavar = None, "NAME|FILE.gguf"
            a.help = ("serve a registered embedded model (smollm2, gemma3-270m, ...: normlab.llm_runs.EMBEDDED_MODELS) "
                      "or a GGUF file in-process for the whole study (default: --base-url / NORMLAB_LLM_BASE_URL, "
                      "else smollm2); its SHA-256 goes into predictions.json")
        elif a.dest == "mode":
            a.help = "not used: the study fixes each stage's mode (see the stages below)"
        elif a.dest == "seed":
            a.help = "seed of every run and simulation (default %(default)s)"
        elif a.dest == "json":
            a.help = "print summary.json (or, with --dry-run, the plan) as JSON"
        elif a.dest == "dry_run":
            a.help = ("print the plan -- every stage's mode, requests, tokens and time (from the speed the first stage "
                      "measured in OUT) -- and exit; nothing is sent or written")
    p.set_defaults(func=_study, seed=1)
