"""``normlab llm-run`` and ``normlab llm-probe`` (argparse only; heavy imports in the handlers).

The shared flags, settings and error handling are :mod:`normlab.llm_runs.core.cli_kit`; the probes
and their command hooks are listed in :mod:`normlab.llm_runs.probes.registry`.
"""

from __future__ import annotations

import argparse
import sys

from normlab.cli_output import emit, show_progress

from .core.cli_kit import EXIT_CODES, add_endpoint_args, endpoint_config, guard, print_estimate, sampling
from .probes.registry import PROBES


def _committed(text: str | None):
    if text is None:
        return 0, None
    k, _, name = str(text).partition(":")
    try:
        k = int(k)
    except ValueError:
        raise ValueError(f"--committed must be K or K:NAME (e.g. 4 or 4:M); got {text!r}") from None
    return k, (name or None)



def _run(args) -> int:
    committed, cname = _committed(args.committed)
    kw = sampling(args)
    endpoint = endpoint_config(args)

    design = dict(runs=args.runs, mode=args.mode or "sample", committed=committed, committed_name=cname,
                  initial=args.initial, stop=args.stop, endpoint=endpoint, name_order=args.name_order,
                  committed_placement=args.committed_placement, committed_mode=args.committed_mode,
                  groups=args.group, **kw)
    if args.out is None and not args.dry_run:
        raise ValueError("--out DIR is required: the run directory (its journal makes the run resumable)")
    if args.out is not None:
        from normlab._validate import check_out_dir

        check_out_dir(args.out)
    if args.dry_run:
        from normlab.llm_runs.runner import estimate_game

        est = estimate_game(args.n_agents, args.memory, args.names, max_interactions=args.max_interactions,
                            out=args.out, **design)
        return print_estimate(est, args.json)

    def go():
        from normlab.llm_runs.runner import run_game

        res = run_game(args.n_agents, args.memory, args.names, max_interactions=args.max_interactions,
                       out=args.out, cache=args.cache, progress=show_progress(args), rng=args.seed,
                       restart=args.restart, **design)
        emit(res.summary(), args.json)
        if res.stopped == "budget":
            print(f"normlab llm-run: stopped at --budget {args.budget}: {endpoint_cap_message(res)} (requests cut off "
                  "by a kill count at their reserved maximum, so the budget never counts less than was billed); "
                  f"completed work is kept in {args.out}: rerun the same command with a larger --budget to continue",
                  file=sys.stderr)
            return 5
        return 0

    return guard("llm-run", go, args.out)


def endpoint_cap_message(res) -> str:
    """What a budget-stopped run spent (from its ledger)."""
    t = res.totals
    if not t or not t["requests"]:
        return "nothing spent"
    return (f"{t['prompt_tokens'] + t['completion_tokens']:,} tokens, ${t['cost_usd']:.4f} spent in "
            f"{t['requests']:,} requests")



def _probe(args) -> int:
    spec = PROBES[args.probe]
    kw = sampling(args, meta=spec.own_sampling)
    endpoint = endpoint_config(args)
    mode = args.mode or "exact"
    if args.out is not None:
        from normlab._validate import check_out_dir

        check_out_dir(args.out)
    if args.dry_run:
        est = _probe_estimate(args, dict(kw), endpoint, mode)
        return print_estimate(est, args.json)
    if endpoint.embedded and endpoint.embedded_ctx is None and spec.journal:
        endpoint = _sized(endpoint, args, kw, mode)

    def go():
        from pathlib import Path

        r, frame, summary = spec.command().command_run(args, kw, endpoint, mode)
        if args.out is not None and not spec.journal:
            Path(args.out).mkdir(parents=True, exist_ok=True)
        if args.out is not None:
            path = Path(args.out) / f"{args.probe}.parquet"
            frame.to_parquet(path, index=False)
            _finish_probe_directory(Path(args.out), args.probe, endpoint)
        else:  # what the model calls computed is never lost: a CSV in the current directory
            path = _default_table_path(args.probe)
            frame.to_csv(path, index=False)
        summary["table"] = str(path)
        hooks = spec.command()
        notes = hooks.command_notes(r) if hasattr(hooks, "command_notes") else []
        if args.json and notes:
            summary["notes"] = notes
        emit(summary, args.json)
        if not args.json:
            for line in notes:
                print(f"  {line}")
            shown = _compact_table(args.probe, r, frame)
            print()
            print(shown)
            print(f"\nfull table ({len(frame)} rows): {path}" + ("" if args.out is not None else
                                                                 "  (pass --out DIR to choose where)"))
        return 0

    return guard(f"llm-probe {args.probe}", go, args.out)


def _finish_probe_directory(out, probe: str, endpoint) -> None:
    """A probe directory with a journal gets its token/cost ledger and a closed manifest session."""
    from normlab.llm_runs.journal import SETTINGS_FILE, finish_session
    from normlab.llm_runs.runner import ledger_for_directory, ledger_totals

    if not (out / SETTINGS_FILE).exists():  # meta and neutral keep no journal
        return
    led = ledger_for_directory(out, (endpoint.price_input, endpoint.price_output))
    led.to_parquet(out / "ledger.parquet", index=False)
    finish_session(out, outcome="finished", totals=ledger_totals(led), tables={
        f"{probe}.parquet": "the probe's table (printed in short by the command)",
        "ledger.parquet": "one row per LLM request: tokens, cost and their running totals",
        "journal.jsonl": "append-only record of every request and answer (a rerun resumes from it)",
        "settings.json": "the probe's settings and their hash"})



def _sized(endpoint, args, kw, mode):
    """The embedded server's KV cache sized to the probe's longest prompt (as llm-run's)."""
    import dataclasses

    from normlab.llm_runs.runner import longest_prompt_bytes, make_settings

    names, memory = PROBES[args.probe].command().command_design(args)
    s, tpl, _ = make_settings(2, memory, names, max_interactions=1, mode=mode, embedded=True, **kw)
    ctx = s.decision.context_tokens(longest_prompt_bytes(s, tpl), s)
    return dataclasses.replace(endpoint, embedded_ctx=ctx)


def _probe_estimate(args, kw, endpoint, mode):
    """``llm-probe PROBE --dry-run``: requests, tokens and cost of the probe's design."""
    from normlab.llm_runs.runner import UNBOUNDED, check_reasks, estimate_requests, group_prices, make_settings

    hooks = PROBES[args.probe].command()
    names, memory = hooks.command_design(args)
    if hasattr(hooks, "command_protocol"):  # the protocol's own defaults (meta-prompting)
        kw, mode = hooks.command_protocol(args, kw, mode)
    s, tpl, _ = make_settings(2, memory, names, max_interactions=1, mode=mode,
                              embedded=endpoint.embedded, **{k: v for k, v in kw.items() if k != "template"},
                              template=kw["template"])
    reask = check_reasks(kw["max_reasks"])
    per = None if reask == UNBOUNDED else 1 + reask
    reqs, ptok, what, notes = hooks.command_estimate(args, s, tpl, per)
    return estimate_requests(s, tpl, requests=reqs, prompt_tokens=ptok, what=f"{what}, {endpoint.model_label}",
                             prices=group_prices(s, endpoint, None), notes=notes)


def _default_table_path(probe: str):
    """``llm-probe-<probe>.csv`` in the current directory, never overwriting an earlier one."""
    from pathlib import Path

    path = Path(f"llm-probe-{probe}.csv")
    k = 2
    while path.exists():
        path = Path(f"llm-probe-{probe}-{k}.csv")
        k += 1
    return path



def _compact_table(probe: str, result, frame, max_rows: int = 16) -> str:
    """A few readable lines of what a probe computed (the full table is saved)."""
    import pandas as pd

    t = PROBES[probe].command().command_table(result, frame)
    more = len(t) - max_rows
    text = t.head(max_rows).to_string(index=False, float_format=lambda v: f"{v:.3f}", na_rep="-")
    if more > 0:
        text += f"\n... {more} more row{'s' if more > 1 else ''}"
    return text if isinstance(t, pd.DataFrame) else str(t)


_RUN_EXAMPLES = """\
examples:
  normlab llm-run --n-agents 24 --memory 5 --names Q,M --max-interactions 2000 --out runs/qm
  normlab llm-run --n-agents 24 --memory 5 --names Q,M --max-interactions 2000 --out runs/qm   # resumes
  normlab llm-run --n-agents 24 --memory 5 --names Q,M --committed 6:M --initial consensus:Q --stop flip \\
      --max-interactions 2000 --out runs/cm6
  normlab llm-run --base-url http://127.0.0.1:8000/v1 --model meta-llama/Llama-3.1-70B-Instruct \\
      --n-agents 24 --memory 5 --names Q,M --max-interactions 2000 --mode sample --out runs/llama
  normlab llm-run --base-url https://api.example.com/v1 --model big-model --n-agents 24 --memory 5 --names Q,M \\
      --max-interactions 2000 --mode sample --price-input 0.6 --price-output 2.4 --dry-run   # requests, tokens, cost
  normlab llm-run --base-url https://api.example.com/v1 --model big-model --n-agents 24 --memory 5 --names Q,M \\
      --max-interactions 2000 --mode sample --price-input 0.6 --price-output 2.4 --budget '$2' --out runs/big
  normlab llm-run --base-url http://127.0.0.1:11434/v1 --n-agents 24 --memory 5 --names Q,M \\
      --max-interactions 2000 --group 12:model=llama3.1 --group 12:model=qwen2.5,temperature=0.7 --out runs/mixed
"""


_PROBE_EXAMPLES = "examples:\n" + "".join(f"  {spec.example}\n" for spec in PROBES.values())


def _listed(parts) -> str:
    """``a, b, c and d``."""
    parts = list(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else "".join(parts)


def _alternatives(parts) -> str:
    """``a, b, c or d``."""
    parts = list(parts)
    return ", ".join(parts[:-1]) + " or " + parts[-1] if len(parts) > 1 else "".join(parts)


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "llm-run",
        help="play the naming game with LLM agents (Flint Ashery, Aiello & Baronchelli 2025); resumable",
        description=(
            "Play (or resume) replicate runs of the LLM naming game of Flint Ashery et al. (2025) through an "
            "OpenAI-compatible endpoint, or the embedded llama.cpp server with SmolLM2-135M-Instruct when none is "
            "configured. Writes OUT/decisions.parquet and OUT/runs.parquet (normlab.schema.GameLog), "
            "OUT/calls.parquet and an append-only OUT/journal.jsonl; rerunning with the same settings resumes."
        ),
        epilog=_RUN_EXAMPLES + "\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--n-agents", type=int, required=True, help="population size N")
    p.add_argument("--memory", type=int, required=True, help="memory length H")
    p.add_argument("--names", required=True, help="comma-separated name pool, e.g. Q,M")
    p.add_argument("--max-interactions", type=int, required=True, help="cap on interactions per run")
    p.add_argument("--runs", type=int, default=1, help="replicate runs (default %(default)s)")
    p.add_argument("--committed", default=None, help="K or K:NAME committed agents (default name: the last of --names)")
    p.add_argument("--initial", default="empty",
                   help="empty | consensus:NAME (H successful plays of NAME) | random (H random entries from the "
                        "first two names, the authors' initial='random')")
    p.add_argument("--name-order", default="auto",
                   help="auto (default: one shuffled order per interaction shown to both players when the run starts "
                        "from prepared memories, as the authors' simulate_CM; per agent from empty memories, as their "
                        "converge) | per_agent | shared")
    p.add_argument("--committed-placement", default="last",
                   help="last (the last K ids, as the theory simulators; default) | random (K ids drawn per run, "
                        "the authors' swap_committed)")
    p.add_argument("--committed-mode", default="swap",
                   help="swap (K of the N agents are committed; default, all published runs) | inject (K committed "
                        "agents are added: N + K agents, the authors' version='inject')")
    p.add_argument("--stop", default="streak", choices=("streak", "success95", "consensus", "flip", "max"),
                   help="streak: 3N consecutive successes (default); success95: 95%% of the last 3N; "
                        "consensus: every memory full of one name; flip: the committed name reached 2.849/3 "
                        "of uncommitted productions over 3 rounds; max: run to --max-interactions")
    p.add_argument("--out", default=None,
                   help="run directory (created; resumed when it holds the same run); required unless --dry-run")
    p.add_argument("--cache", action="append", default=None, metavar="DIR",
                   help="exact mode: reuse next-token distributions journaled in DIR (another run or a strategy "
                        "table with the same model, template and memory); repeatable")
    p.add_argument("--restart", action="store_true",
                   help="start the run in --out afresh: remove its settings, journal, manifest and tables (other "
                        "files stay) and pay for every request again; without it a directory whose tables remain "
                        "but whose journal is missing is refused")
    p.add_argument("--group", action="append", default=None, metavar="SIZE:KEY=VALUE,...",
                   help="a mixed population: one --group per group of agents, in agent order, sizes adding up to "
                        "--n-agents; keys: name, model, base_url, template, temperature, top_k, top_p, min_p, "
                        "max_tokens, price_input, price_output (the rest as the run), e.g. --group 12:model=A "
                        "--group 12:model=B,temperature=0.7. The decisions table records each agent's group and model")
    add_endpoint_args(p, run_controls=True)
    p.set_defaults(func=_run)

    q = subparsers.add_parser(
        "llm-probe",
        help=f"{_alternatives(s.label for s in PROBES.values())} with an LLM",
        description=f"Probes of Flint Ashery, Aiello & Baronchelli (2025): "
                    f"{_listed(s.summary for s in PROBES.values())}. Default mode: exact. Each probe prints "
                    "a compact table and saves the full one (OUT/<probe>.parquet, or llm-probe-<probe>.csv in the "
                    "current directory without --out). 'normlab llm-probe PROBE --help' lists a probe's options.",
        epilog=_PROBE_EXAMPLES + "\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    probes_sub = q.add_subparsers(dest="probe", metavar="PROBE", required=True)
    for spec in PROBES.values():
        pp = probes_sub.add_parser(spec.key, help=spec.help, description=spec.description,
                                   epilog=spec.examples + "\n" + EXIT_CODES,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
        pp.set_defaults(func=_probe, probe=spec.key)
        for flags, options in spec.arguments:
            pp.add_argument(*flags, **options)
        pp.add_argument("--out", default=None,
                        help="directory for the journal (resumable) and <probe>.parquet (default: no journal; the "
                             "table goes to llm-probe-<probe>.csv in the current directory)")
        if spec.journal:
            pp.add_argument("--cache", action="append", default=None, metavar="DIR",
                            help="exact mode: reuse next-token distributions journaled in DIR; repeatable")
        add_endpoint_args(pp, run_controls=True)
    register_journal(subparsers)


_JOURNAL_EXAMPLES = """\
examples:
  normlab journal check runs/qm            # is the journal whole, and this directory's run's?
  normlab journal repair runs/qm           # keep the records before the first damage; then rerun
                                           # the run's own command to play on from there
"""


def _journal(args) -> int:
    from normlab.llm_runs import journal as jr

    if args.action == "check":
        out = jr.check_journal(args.directory)
        emit(out, args.json)
        return 0 if out["whole"] else 4
    out = jr.repair_journal(args.directory)
    emit(out, args.json)
    return 0


def register_journal(subparsers) -> None:
    """``normlab journal check|repair DIR`` (any run directory: llm-run, probes, CRSEC, SCENE, the demo's)."""
    p = subparsers.add_parser(
        "journal", help="check or repair the journal of a run directory",
        description="Every record of a journal carries its place and the fingerprint of its run's settings: a "
                    "record missing, repeated or out of place, or a journal copied from another run, is refused "
                    "when a run resumes. 'check' says whether a directory's journal is whole (exit 4 if not); "
                    "'repair' keeps the records before the first damage and moves the rest to "
                    "journal.after-gap-<n>.jsonl beside it (nothing is deleted), so that rerunning the run's "
                    "command replays what is whole and plays on. A journal from another run is never cut.",
        epilog=_JOURNAL_EXAMPLES + "\n" + EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=("check", "repair"))
    p.add_argument("directory", metavar="DIR", help="a run directory (holding journal.jsonl)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_journal)
