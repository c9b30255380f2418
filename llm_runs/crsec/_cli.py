"""``normlab crsec run`` and ``normlab crsec analyse`` (argparse only; heavy imports in the handlers).

The endpoint, budget and error handling are :mod:`normlab.llm_runs.core.cli_kit`'s, as for ``llm-run``.
"""

from __future__ import annotations

import argparse
import sys

from normlab.cli_output import emit, exit_codes, show_progress

from ..core.cli_kit import (EXIT_CODES, add_endpoint_args, endpoint_config, guard, print_estimate, report_summary,
                      request_budget, require_out)

_RUN_EXAMPLES = """\
examples:
  normlab crsec run --out runs/crsec-rule --seed 1                   # rule-based operations: no model, seconds
  normlab crsec run --ops llm --base-url http://127.0.0.1:8000/v1 --model my-model \\
      --minutes 240 --seed 1 --out runs/crsec-llm                     # a capable model through the Appendix-B prompts
  normlab crsec run --ops llm --base-url http://127.0.0.1:8000/v1 --model my-model \\
      --minutes 240 --seed 1 --out runs/crsec-llm --dry-run           # requests, tokens, cost; nothing sent
  normlab crsec run --ops llm --base-url http://127.0.0.1:8000/v1 --model my-model \\
      --minutes 240 --seed 1 --out runs/crsec-llm --budget 300req     # stops cleanly at 300 requests (exit 5)
  python -m normlab.llm_runs.testing --scripted crsec --port 8731 &   # a scripted local endpoint (not a model)
  normlab crsec run --ops llm --base-url http://127.0.0.1:8731/v1 --seed 1 --out runs/crsec-scripted
  normlab crsec run --ops llm --agents "Carlos Gomez,Tamara Taylor" --minutes 20 --out runs/crsec-smol
      # the embedded SmolLM2-135M: it runs, and its summary says what it cannot do (write norms)

A killed run rerun with the same command resumes from OUT/journal.jsonl: no answered call is sent
again and the result equals an uninterrupted run with the same seed, whatever --concurrency.
"""

_ANALYSE_EXAMPLES = """\
examples:
  normlab crsec analyse runs/crsec-rule                        # adoption, events, norms, belief before behaviour
  normlab crsec analyse runs/crsec-rule --plot fig2.png --json
  normlab crsec analyse runs/crsec-rule --out analysis/crsec-rule   # summary.json and fig2.png saved there
  normlab crsec analyse ../shared/data/crsec/seed000/storage   # a published CRSEC run folder (the same reading)
"""


def _agents(text):
    if text is None:
        return None
    from pathlib import Path

    if Path(text).suffix == ".json":
        return text
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names:
        raise ValueError("--agents must list agent names, comma-separated, or name a JSON file")
    return names


def _run(args) -> int:
    max_requests = request_budget(args)
    endpoint = endpoint_config(args)
    if args.ops == "llm" and endpoint.embedded:
        import dataclasses

        endpoint = dataclasses.replace(endpoint, concurrency=1)
    kw = dict(ops=args.ops, minutes=args.minutes, dt=args.dt, n_norms=args.n_norms, p_present=args.p_present,
              p_thought=args.p_thought, plan_every=args.plan_every, threshold=args.threshold,
              endpoint=endpoint, temperature=args.temperature, max_requests=max_requests, rng=args.seed)
    agents = _agents(args.agents)
    if args.dry_run:
        from normlab.llm_runs.crsec import estimate_population

        return print_estimate(estimate_population(agents, out=args.out, **kw), args.json)
    require_out(args.out, "run")

    def go():
        from normlab.llm_runs.crsec import run_population

        run = run_population(agents, out=args.out, progress=show_progress(args), **kw)
        emit(_run_summary(run, session=True), args.json)
        if args.plot:
            run.plot(panels="both", path=args.plot)
        note = embedded_note(run)
        if note:
            print(f"normlab crsec run: note: {note}", file=sys.stderr)
        return 0

    return guard("crsec run", go, args.out)


def _run_summary(run, session: bool = False) -> dict:
    s = run.summary()
    out = {"agents": s["agents"], "ops": s["ops"], "model": s["model"], "minutes": s["minutes"]}
    for tp, v in s["final"].items():
        out[f"final {tp}: belief / plan / action"] = f"{v['belief']:.2f} / {v['plan']:.2f} / {v['action']:.2f}"
    out.update({f"{k} events{' (norm-related)' if k in ('chat', 'thought') else ''}": v
                for k, v in s["events"].items()})
    out.update({f"norms {k}": v for k, v in s["norms"].items()})
    reach = run.reach_times(0.5)
    for tp in run.topics:
        t = [reach.get((tp, m), float("nan")) for m in ("belief", "plan", "action")]
        out[f"{tp}: 50% believe / plan / act at (min)"] = " / ".join("never" if x != x else f"{x:g}" for x in t)
    out["llm requests (all sessions)"] = s["llm_requests"]
    if session:
        out["sent this session / from the journal"] = f"{s['sent_this_session']} / {s['replayed_from_journal']}"
    out["prompt / completion tokens"] = f"{s['prompt_tokens']} / {s['completion_tokens']}"
    if s.get("answers_in_format"):
        out["answers in the asked shape"] = s["answers_in_format"]
    out["directory"] = s["directory"]
    return out


def embedded_note(run) -> str | None:
    """What the embedded model could not do in a run, in one line (``None`` for other runs)."""
    s = run.summary()
    if s["ops"] != "llm" or s.get("model") != "SmolLM2-135M-Instruct":
        return None
    fmt = s.get("answers_in_format") or {}
    shown = ", ".join(f"{k} {v}" for k, v in fmt.items() if k in ("create_norms", "identify", "plan", "act"))
    return (f"the embedded SmolLM2-135M cannot do CRSEC's tasks (answers in the asked shape: {shown or 'none'}; "
            f"{s['norms']['qualified']} norms qualified, {s['events']['chat']} chats): run --ops llm against a "
            "capable model (--base-url), or against the scripted local endpoint (python -m normlab.llm_runs.testing "
            "--scripted crsec) to see the machinery work")


def _analyse(args) -> int:
    from pathlib import Path

    from normlab.llm_runs.journal import read_settings

    p = Path(args.path)
    if not p.exists():
        raise FileNotFoundError(f"{p} does not exist")
    plot = args.plot
    if args.out is not None:
        from normlab._validate import check_out_dir

        check_out_dir(args.out)
        plot = plot or str(Path(args.out) / "fig2.png")
    st = read_settings(p) if p.is_dir() else None
    if st is not None and st["settings"].get("kind") == "crsec run":
        from normlab.llm_runs.crsec import load_population

        run = load_population(p)
        out = _run_summary(run)

        def draw():
            run.plot(panels="both", bin_minutes=args.bin_minutes, path=plot)
    else:
        from normlab.llm_runs.crsec import analysis
        from normlab.llm_runs.published.crsec import load_crsec_run

        pub = load_crsec_run(p, missing="skip")
        snap = analysis.snapshot_beliefs(pub.norms, agents=pub.agents)
        ev = analysis.events_from_nodes(pub.nodes) if len(pub.nodes) else None
        kinds = ev["kind"].value_counts() if ev is not None else {}
        states = pub.norms["state"].value_counts()
        out = {"folder": str(p), "agents": len(pub.agents), "norms": int(len(pub.norms))}
        out.update({f"norms {s}": int(states.get(s, 0)) for s in ("qualified", "candidate", "synthesised")})
        for _, r in snap.iterrows():
            out[f"{r['topic']}: share believing (snapshot)"] = round(float(r["proportion"]), 3)
        out["norm-related chats"] = int(kinds.get("chat", 0))
        out["norm-related thoughts"] = int(kinds.get("thought", 0))
        n_conf = int(kinds.get("conflict", 0))
        out["conflicts"] = n_conf if n_conf else "not recorded (the published layout holds no conflict records)"

        def draw():
            if ev is None or not len(ev):
                print(f"normlab crsec analyse: note: no figure ({p} holds no norm-related events to draw)",
                      file=sys.stderr)
                return
            analysis.plot_emergence(None, analysis.event_counts(ev, bin_minutes=args.bin_minutes), path=plot)

    return report_summary("crsec analyse", args, out, draw if plot else None)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "crsec", help="CRSEC norm emergence (Ren et al. 2024): run a population, analyse a run",
        description="CRSEC norm lifecycle of Ren et al., 'Emergence of Social Norms in Generative Agent Societies' "
                    "(IJCAI 2024): a Hobbs Cafe population whose agents create, spread, check, synthesise and comply "
                    "with personal norms. 'crsec run' plays one (rule-based operations, or the Appendix-B prompts on "
                    "an LLM: resumable, with --budget and --dry-run); 'crsec analyse' reads a run directory or a "
                    "published CRSEC run folder.",
        epilog=_RUN_EXAMPLES.split("\n\n")[0] + "\n\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="crsec_command", metavar="{run,analyse}", required=True)
    r = sub.add_parser(
        "run", help="play a CRSEC population (rule-based, or an LLM through the Appendix-B prompts)",
        description="Play a CRSEC population of the Hobbs Cafe agents (Appendix A; three norm entrepreneurs) and "
                    "write OUT/states.parquet, events.parquet, norms.parquet, actions.parquet, adoption.parquet, "
                    "an append-only OUT/journal.jsonl and OUT/manifest.json. --ops rule: keyword rules and seeded "
                    "choices, no model. --ops llm: every operation is an LLM prompt; writing and checking norms needs "
                    "a capable model -- the embedded SmolLM2-135M (the default endpoint) runs and says in its summary "
                    "what it could not do; a scripted local endpoint (python -m normlab.llm_runs.testing --scripted "
                    "crsec, not a model) runs the whole LLM path offline.",
        epilog=_RUN_EXAMPLES + "\n" + EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--ops", default="rule", choices=("rule", "llm"),
                   help="rule: deterministic operations, no model (default); llm: the Appendix-B prompts on the endpoint")
    r.add_argument("--agents", default=None, metavar="NAMES|FILE",
                   help="comma-separated built-in agent names, or a JSON file of agents (default: the ten of Appendix A)")
    r.add_argument("--minutes", type=float, default=240.0, help="simulated minutes (default %(default)s)")
    r.add_argument("--dt", type=float, default=10.0, help="minutes per step (default %(default)s)")
    r.add_argument("--n-norms", type=int, default=5, help="norms created per entrepreneur (default %(default)s)")
    r.add_argument("--p-present", type=float, default=0.8, help="probability an agent is in the cafe in a step")
    r.add_argument("--p-thought", type=float, default=0.3, help="probability an observation becomes a thought")
    r.add_argument("--plan-every", type=float, default=120.0, help="minutes between an agent's plans")
    r.add_argument("--threshold", type=float, default=350.0, help="utility sum that triggers synthesis (350)")
    r.add_argument("--temperature", type=float, default=0.2, help="--ops llm: sampling temperature (default %(default)s)")
    r.add_argument("--out", default=None, help="run directory (created; resumed when it holds the same run); "
                                               "required unless --dry-run")
    r.add_argument("--plot", default=None, metavar="PNG", help="also draw Fig. 2 (both panels) there")
    add_endpoint_args(r, run_controls=True, sampling=False)
    for a in r._actions:
        if a.dest == "budget":
            a.help += "; or a number of requests (300req)"
        if a.dest == "concurrency":
            a.help = "requests in flight: the agents of a step run concurrently (default 4; 1 on the embedded server); " \
                     "results do not depend on it"
    r.set_defaults(func=_run)
    a = sub.add_parser(
        "analyse", aliases=["analyze"], help="read a CRSEC run directory or a published CRSEC run folder",
        description="Summarise a CRSEC run: a directory of 'normlab crsec run' (adoption at the end, events, norms, "
                    "when belief and action reach 50% per topic, requests and tokens) or a published CRSEC storage "
                    "folder (norm databases and Smallville memory: states, the snapshot share believing each "
                    "standard, norm-related chats and thoughts; conflicts are not recorded in that layout).",
        epilog=_ANALYSE_EXAMPLES + "\n" + exit_codes(), formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("path", help="a 'crsec run' directory or a CRSEC run folder (persona folders, or personas/)")
    a.add_argument("--bin-minutes", type=float, default=60.0, help="bin of the event counts (default %(default)s)")
    a.add_argument("--plot", default=None, metavar="PNG", help="draw Fig. 2 there")
    a.add_argument("--out", default=None, metavar="DIR",
                   help="also save the summary as DIR/summary.json and Fig. 2 as DIR/fig2.png (unless --plot)")
    a.add_argument("--json", action="store_true", help="print the summary as JSON")
    a.add_argument("--seed", type=int, default=None,
                   help="accepted as by every command; the analysis draws nothing at random")
    a.add_argument("--no-progress", action="store_true", help="accepted as by every command; it shows no progress")
    a.set_defaults(func=_analyse)
