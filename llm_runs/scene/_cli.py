"""``normlab scene run`` and ``normlab scene score`` (argparse only; heavy imports in the handlers).

The endpoint, budget and error handling are :mod:`normlab.llm_runs.core.cli_kit`'s, as for ``llm-run``.
"""

from __future__ import annotations

import argparse

from normlab.cli_output import emit, exit_codes, show_progress

from ..core.cli_kit import (EXIT_CODES, add_endpoint_args, endpoint_config, guard, print_estimate, report_summary,
                      request_budget, require_out)

_RUN_EXAMPLES = """\
examples:
  normlab scene run --base-url http://127.0.0.1:8000/v1 --model judge-model \\
      --subject-base-url http://127.0.0.1:8001/v1 --subject-model my-model --tuples 20 --seed 1 --out runs/scene
  normlab scene run --base-url http://127.0.0.1:8000/v1 --model judge-model --tuples 20 --seed 1 \\
      --out runs/scene --dry-run                                       # requests, tokens, cost; nothing sent
  normlab scene run --base-url http://127.0.0.1:8000/v1 --model judge-model --tuples 20 --seed 1 \\
      --out runs/scene --budget 200k                                   # stops cleanly at 200k tokens (exit 5)
  python -m normlab.llm_runs.testing --scripted scene --port 8732 &   # a scripted local endpoint (not a model)
  normlab scene run --base-url http://127.0.0.1:8732/v1 --tuples 12 --seed 1 --out runs/scene-scripted
  normlab scene run --tuple bug_report,concise_answer_norm,address_explicit,silent_ignore,absent \\
      --max-turns 2 --out runs/scene-smol     # the embedded SmolLM2-135M cannot write the scenario: the episode
      # ends with 0 turns and the summary and a warning say why (--example plays a written scenario instead)

A killed sweep rerun with the same command resumes from OUT/journal.jsonl: finished episodes are read
back, the unfinished one is replayed (no answered call is sent again); results (measured latencies
aside) do not depend on --episodes-at-once.
"""

_SCORE_EXAMPLES = """\
examples:
  normlab scene score runs/scene                     # repair rate, Spearman rho, compliance, fidelity
  normlab scene score runs/scene/episodes.jsonl --n-boot 2000 --seed 0 --plot scene.png --json
  normlab scene score runs/scene --out scores/scene            # summary.json and scene.png saved there
"""


def _items(args):
    from normlab.llm_runs import scene

    items = []
    if args.example:
        items.append(scene.load_example_scenario())
    for path in args.scenario or []:
        items.append(scene.read_json(path, "scenario_v1"))
    for text in args.tuple or []:
        parts = [x.strip() for x in text.replace("/", ",").split(",")]
        items.append(scene.check_tuple(parts))
    if args.tuples:
        if args.seed is None:
            raise ValueError("--tuples N draws the tuples from --seed: give --seed (so that a rerun resumes the "
                             "same sweep)")
        items += list(scene.sample_tuples(args.tuples, rng=args.seed))
    if not items:
        raise ValueError("give what to play: --tuples N (with --seed), --tuple EVENT,NORM,ELICITOR,SANCTION,PRECEDENT, "
                         "--scenario FILE or --example")
    return items


def _run(args) -> int:
    import dataclasses

    max_requests = request_budget(args)
    endpoint = endpoint_config(args)
    subject = None
    if args.subject_base_url or args.subject_model:
        if not args.subject_base_url:
            raise ValueError("--subject-model needs --subject-base-url")
        subject = dataclasses.replace(endpoint, base_url=args.subject_base_url, model=args.subject_model)
    from normlab.llm_runs import scene

    settings = scene.SceneSettings(max_turns=args.max_turns, temperature=args.temperature,
                                   max_reasks=args.max_reasks)
    items = _items(args)
    kw = dict(endpoint=endpoint, subject=subject, settings=settings, judge=not args.no_judge, audit=not args.no_audit)
    if args.dry_run:
        return print_estimate(scene.estimate_scene(items, out=args.out, rng=args.seed, **kw), args.json)
    require_out(args.out, "sweep")

    def go():
        eps = scene.run_scene(items, out=args.out, model_label=args.model_label, concurrency=args.episodes_at_once,
                              max_requests=max_requests, rng=args.seed, progress=show_progress(args), **kw)
        out = _sweep_lines(scene.sweep_summary(eps))
        if any(e.judge is not None for e in eps):
            res = scene.score(eps, n_boot=args.n_boot, rng=SCORE_SEED)  # as `scene score` does by default
            out.update(_score_lines(res))
            if args.plot:
                res.plot(path=args.plot)
        out["episodes file"] = f"{args.out}/episodes.jsonl"
        emit(out if args.json else _score_text(out), args.json)
        return 0

    return guard("scene run", go, args.out)


def _sweep_lines(s: dict) -> dict:
    out = {"episodes": s["episodes"], "played": s["played"], "judged": s["judged"]}
    if s["zero_turns"]:
        out["ended with 0 turns"] = "; ".join(f"{n} x {r}" for r, n in s["zero_turn_reasons"].items())
    out["end reasons"] = ", ".join(f"{r}: {n}" for r, n in s["end_reasons"].items()) or "-"
    out["audits"] = ", ".join(f"{r}: {n}" for r, n in s["audits"].items()) or "-"
    out["subject answers unparseable"] = s["subject_unparseable"]
    return out


#: The bootstrap seed of Spearman rho's interval in ``scene run`` and (default) ``scene score``: one
#: computation, so the same episodes print the same interval whichever command scores them.
SCORE_SEED = 0


def _score_lines(res) -> dict:
    """The scores as numbers (``--json`` and ``--out``'s summary.json): each estimate as ``value``,
    ``low``, ``high`` (95%) and ``n``; :func:`_score_text` formats them for the terminal."""
    out = {}
    for model, m in res.summary()["models"].items():
        pre = f"{model}: " if len(res.models) > 1 else ""
        v, lo, hi = m["repair_rate"]
        out[f"{pre}repair rate"] = {"value": v, "low": lo, "high": hi, "n": m["sanctioned"]}
        v, lo, hi = m["spearman_rho"]
        out[f"{pre}Spearman rho"] = {"value": v, "low": lo, "high": hi, "n": m["rho_n"]}
        out[f"{pre}scored episodes"] = {"scored": m["scored"], "breached": m["breached"], "sanctioned": m["sanctioned"]}
        out[f"{pre}persona breach rate"] = m["sp_breach_rate"]
        out[f"{pre}sanction"] = {"delivered": m["sanction_delivered"], "shape_match": m["sanction_shape_match"]}
    return out


def _score_text(out: dict) -> dict:
    """:func:`_score_lines`'s numbers as the terminal shows them."""
    def f(x):
        return "-" if x is None else f"{x:.3f}"

    shown = {}
    for k, v in out.items():
        if isinstance(v, dict) and "value" in v:
            shown[f"{k} [95% CI]"] = "-" if v["value"] is None else (
                f(v["value"]) + ("" if v["low"] is None else f" [{f(v['low'])}, {f(v['high'])}]") + f" (n = {v['n']})")
        elif isinstance(v, dict) and "scored" in v:
            shown[k.replace("scored episodes", "episodes scored / breached / sanctioned")] = \
                f"{v['scored']} / {v['breached']} / {v['sanctioned']}"
        elif isinstance(v, dict) and "delivered" in v:
            shown[f"{k} delivered / shape match"] = f"{v['delivered']} / {v['shape_match']}"
        else:
            shown[k] = v
    return shown


def _score(args) -> int:
    from pathlib import Path

    from normlab.llm_runs import scene

    plot = args.plot
    if args.out is not None:
        from normlab._validate import check_out_dir

        check_out_dir(args.out)
        plot = plot or str(Path(args.out) / "scene.png")
    res = scene.score(args.path, repair_window=args.repair_window, n_boot=args.n_boot,
                      exclude_invalid=args.exclude_invalid, rng=args.seed)
    eps = scene.load_episodes(args.path)
    out = {**_sweep_lines(scene.sweep_summary(eps)), **_score_lines(res)}

    return report_summary("scene score", args, out, (lambda: res.plot(path=plot)) if plot else None,
                          text=_score_text)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "scene", help="SCENE implicit-norm benchmark (Jacniacki & Bilski 2026): run a sweep, score episodes",
        description="SCENE (arXiv 2605.07823): a subject model joins group chats whose scripted personas follow a "
                    "hidden norm and sanction breaches. 'scene run' generates scenarios from taxonomy tuples, plays, "
                    "judges and audits them (resumable, with --budget and --dry-run); 'scene score' computes repair "
                    "after sanctioning, Spearman rho, opposing-pair compliance and fidelity.",
        epilog=_RUN_EXAMPLES.split("\n\n")[0] + "\n" + _SCORE_EXAMPLES.split("\n", 1)[1] + "\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="scene_command", metavar="{run,score}", required=True)
    r = sub.add_parser(
        "run", help="generate, play, judge and audit SCENE episodes",
        description="Run a SCENE sweep. --base-url/--model: the scenario generator, personas, orchestrator, judge "
                    "and audit (the paper: one fixed capable model); --subject-base-url/--subject-model: the model "
                    "under test (default: the same endpoint). Writing scenarios and judging need a capable model: "
                    "the embedded SmolLM2-135M (the default endpoint) runs, and its generated tuples end with 0 turns "
                    "-- the summary and a warning say why; a scripted local endpoint (python -m "
                    "normlab.llm_runs.testing --scripted scene: rules and tags, not a model) runs the whole sweep "
                    "offline. Writes OUT/episodes.jsonl, an append-only OUT/journal.jsonl (every call and every "
                    "episode event as it happens) and OUT/manifest.json.",
        epilog=_RUN_EXAMPLES + "\n" + EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = r.add_argument_group("what to play")
    g.add_argument("--tuples", type=int, default=None, metavar="N",
                   help="N taxonomy tuples drawn by the coverage-greedy sampler from --seed")
    g.add_argument("--tuple", action="append", default=None, metavar="E,N,EL,S,P",
                   help="one tuple: event, norm, elicitor, sanction, precedent IDs (repeatable)")
    g.add_argument("--scenario", action="append", default=None, metavar="FILE",
                   help="a scenario_v1 JSON file, played as it is (repeatable)")
    g.add_argument("--example", action="store_true", help="the built-in example scenario (modelled on C.1)")
    s = r.add_argument_group("episodes")
    s.add_argument("--subject-base-url", default=None, help="the subject model's endpoint (default: --base-url's)")
    s.add_argument("--subject-model", default=None, help="the subject model's name")
    s.add_argument("--model-label", default=None, help="the name recorded for the subject model")
    s.add_argument("--max-turns", type=int, default=8, help="ticks per episode (the paper: 8)")
    s.add_argument("--temperature", type=float, default=0.7, help="personas, subject and generator (default %(default)s)")
    s.add_argument("--max-reasks", type=int, default=1, help="re-asks of an unparseable generator answer (default 1)")
    s.add_argument("--no-judge", action="store_true", help="do not label the transcripts")
    s.add_argument("--no-audit", action="store_true", help="do not audit fidelity")
    s.add_argument("--episodes-at-once", type=int, default=None, metavar="K",
                   help="episodes played concurrently (default: --concurrency; 1 on the embedded server); results do "
                        "not depend on it")
    s.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples of Spearman rho (default %(default)s)")
    r.add_argument("--out", default=None, help="sweep directory (created; resumed when it holds the same sweep); "
                                               "required unless --dry-run")
    r.add_argument("--plot", default=None, metavar="PNG", help="also draw the scores beside the paper's models")
    add_endpoint_args(r, run_controls=True, sampling=False)
    for a in r._actions:
        if a.dest == "budget":
            a.help += "; or a number of requests (300req)"
    r.set_defaults(func=_run)
    q = sub.add_parser(
        "score", help="score judged SCENE episodes (repair rate, Spearman rho, compliance, fidelity)",
        description="Score judged episodes: a 'scene run' directory, its episodes.jsonl, or a directory of episode "
                    "JSON files. Repair after sanctioning with Wilson 95% intervals, Spearman rho between prior "
                    "demonstrations and later breaches with a bootstrap interval, compliance under each pole of the "
                    "opposing norm pairs, fidelity rates (Sect. 5.2-5.4). Episodes without a judge output are counted, "
                    "not scored.",
        epilog=_SCORE_EXAMPLES + "\n" + exit_codes(), formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("path", help="a sweep directory, an episodes .jsonl file or a directory of episode .json files")
    q.add_argument("--repair-window", type=int, default=3, help="subject actions after a sanction that count (3)")
    q.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples of Spearman rho (default %(default)s)")
    q.add_argument("--exclude-invalid", action="store_true", help="drop episodes whose audit says INVALID")
    q.add_argument("--seed", type=int, default=SCORE_SEED,
                   help="seed of the bootstrap (default %(default)s, the one `scene run` scores with)")
    q.add_argument("--plot", default=None, metavar="PNG", help="draw the scores beside the paper's six models")
    q.add_argument("--out", default=None, metavar="DIR",
                   help="also save the summary as DIR/summary.json and the figure as DIR/scene.png (unless --plot)")
    q.add_argument("--json", action="store_true", help="print the summary as JSON")
    q.add_argument("--no-progress", action="store_true", help="accepted as by every command; it shows no progress")
    q.set_defaults(func=_score)
