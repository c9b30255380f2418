"""``normlab llm-run`` and ``normlab llm-probe`` (argparse only; heavy imports in the handlers)."""

from __future__ import annotations

import argparse
import json
import sys


def _add_endpoint_args(p: argparse.ArgumentParser, *, run_controls: bool = False) -> None:
    """Endpoint, embedded-server, price and sampling flags; ``run_controls`` adds ``--budget``
    and ``--dry-run`` (llm-run and llm-probe handle them; other commands reusing these flags
    would not)."""
    g = p.add_argument_group("endpoint (default: NORMLAB_LLM_BASE_URL, else the embedded SmolLM2 server)")
    g.add_argument("--base-url", default=None, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--model", default=None, help="model name (default: the first model the endpoint lists)")
    g.add_argument("--api-key-env", default="NORMLAB_LLM_API_KEY",
                   help="environment variable holding the API key (never logged; default %(default)s, then OPENAI_API_KEY)")
    g.add_argument("--concurrency", type=int, default=4, help="requests in flight (default %(default)s)")
    g.add_argument("--timeout", type=float, default=120.0,
                   help="seconds for a whole request attempt, however slowly the server sends (default %(default)s)")
    g.add_argument("--max-retries", type=int, default=5, help="retries on 429/5xx/timeouts (default %(default)s)")
    g.add_argument("--extra-body", default=None,
                   help='JSON object added to every request, e.g. \'{"continue_final_message": true, '
                        '"add_generation_prompt": false}\' for prefill continuation on vLLM')
    g.add_argument("--embedded-threads", type=int, default=None, metavar="N",
                   help="CPU threads of the embedded server (default: 1 on up to 2 cores, else all but one, at most 8; "
                        "more threads than free cores spin and slow every call down)")
    g.add_argument("--embedded-ctx", type=int, default=None, metavar="TOKENS",
                   help="KV-cache tokens per slot of the embedded server (default: sized to the longest prompt the "
                        "settings can produce)")
    g.add_argument("--embedded-cache-mib", type=int, default=None, metavar="MIB",
                   help="host-memory prompt cache of the embedded server in MiB (default 256; 0 turns it off)")
    c = p.add_argument_group("cost")
    c.add_argument("--price-input", type=float, default=0.0, help="USD per million prompt tokens (cost accounting)")
    c.add_argument("--price-output", type=float, default=0.0, help="USD per million completion tokens")
    if run_controls:
        _add_run_controls(c)
    s = p.add_argument_group("sampling (defaults of Flint Ashery, Aiello & Baronchelli 2025, Table S4)")
    s.add_argument("--mode", default=None, choices=("exact", "sample"),
                   help="sample: generate and parse (the paper's protocol; default of llm-run); exact: next-token "
                        "probabilities of the names, cached per prompt (default of llm-probe)")
    s.add_argument("--template", default="main", help="main | bullet | narrative | path to a JSON template")
    s.add_argument("--wrap", default="chat",
                   help="chat: system/user messages to /chat/completions (the server's chat template adds its own "
                        "tokens); raw-llama3 | raw-llama2: the exact text with the AI-norms authors' hand-written "
                        "header tokens to /completions (their protocol). Default %(default)s")
    s.add_argument("--parse", default="normlab",
                   help="sample mode: normlab (the answer field must hold one pool name; default) | authors (any pool "
                        "name between single quotes, the authors' get_response)")
    s.add_argument("--temperature", type=float, default=0.5)
    s.add_argument("--top-k", type=int, default=10, help="0 omits it (OpenAI's own API); default %(default)s")
    s.add_argument("--top-p", default="1",
                   help="sample mode: nucleus filter sent (default 1 = neutral; 'none' omits it and the server's "
                        "default applies, e.g. llama.cpp's 0.95)")
    s.add_argument("--min-p", default="0",
                   help="sample mode: min-p filter sent (default 0 = neutral; 'none' omits it, e.g. for OpenAI's "
                        "own API; llama.cpp's default is 0.05)")
    s.add_argument("--max-tokens", type=int, default=None,
                   help="tokens generated (default 6; meta-prompting: 15 in the authors' protocol, 12 in normlab's)")
    s.add_argument("--top-logprobs", type=int, default=20, help="exact mode: alternatives per position")
    s.add_argument("--reask", "--max-reasks", dest="reask", default=None,
                   help="sample mode: 'unbounded' (the paper: re-ask until a pool name appears; stops with an error "
                        "at a safety limit of 1000 requests per decision) or an integer cap, then the decision is "
                        "invalid (default 2: normlab's choice, not the paper's; meta-prompting: unbounded in the "
                        "authors' protocol)")
    s.add_argument("--prefill", default="auto", choices=("auto", "on", "off"),
                   help="continue the answer opening {'value': ' (auto: on in exact mode and for the embedded server)")
    s.add_argument("--multi-token", default="expand", choices=("expand", "first_token"),
                   help="exact mode: score full token sequences of multi-token names, or first tokens only")
    s.add_argument("--seed", type=int, default=None, help="seed (default: fresh, stored in OUT/settings.json)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")


def _add_run_controls(c) -> None:
    c.add_argument("--budget", default=None, metavar="AMOUNT",
                   help="stop cleanly before spending more: tokens (50000, 50k, 2M; prompt + completion) or USD "
                        "($1.50 or 1.5usd, with --price-input/--price-output). Counts what earlier runs in --out spent; "
                        "exit 5 when reached, and the same command with a larger --budget continues")
    c.add_argument("--dry-run", action="store_true",
                   help="print the expected requests, tokens and cost (an estimate from the prompts and the design) "
                        "and exit without sending anything or writing files")


def _endpoint(args):
    from normlab.llm_runs.backend import EndpointConfig

    if args.model and not args.base_url:
        import os

        if not (os.environ.get("NORMLAB_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL")):
            raise ValueError("--model needs --base-url (without an endpoint the embedded SmolLM2 server is used)")
    extra = None
    if args.extra_body:
        import json

        try:
            extra = json.loads(args.extra_body)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--extra-body must be a JSON object: {exc}") from None
        if not isinstance(extra, dict):
            raise ValueError("--extra-body must be a JSON object")
    tokens, usd = _budget(getattr(args, "budget", None))
    if usd is not None and not (args.price_input or args.price_output):
        raise ValueError(f"--budget {args.budget} is in USD: give --price-input/--price-output (USD per million "
                         "tokens), or a budget in tokens (e.g. --budget 200k)")
    return EndpointConfig.from_env(
        base_url=args.base_url, model=args.model, api_key_env=args.api_key_env, concurrency=args.concurrency,
        extra_body=extra,
        timeout=args.timeout, max_retries=args.max_retries, price_input=args.price_input,
        price_output=args.price_output, embedded_threads=args.embedded_threads, embedded_ctx=getattr(args, "embedded_ctx", None),
        embedded_cache_mib=getattr(args, "embedded_cache_mib", None), budget_tokens=tokens, budget_usd=usd,
    )


def _budget(text):
    """``--budget``: ``(tokens, None)`` or ``(None, usd)``; ``(None, None)`` without one."""
    if text is None:
        return None, None
    t = str(text).strip().lower().replace(",", "").replace("_", "")
    usd = t.startswith("$") or t.endswith("usd") or t.startswith("usd")
    t = t.strip("$").removesuffix("usd").removeprefix("usd").strip()
    scale = 1.0
    if not usd and t[-1:] in ("k", "m"):
        scale, t = (1e3 if t[-1] == "k" else 1e6), t[:-1]
    try:
        v = float(t) * scale
    except ValueError:
        v = float("nan")
    if not (v > 0 and v < float("inf")):
        raise ValueError(f"--budget must be a positive number of tokens (50000, 50k, 2M) or of USD ($1.50, 1.5usd); "
                         f"got {text!r}")
    return (None, v) if usd else (v, None)


def _unit_or_none(text, flag: str):
    if text is None or str(text).strip().lower() == "none":
        return None
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{flag} must be a number in [0, 1] or 'none'; got {text!r}") from None
    if not 0 <= v <= 1:
        raise ValueError(f"{flag} must be a number in [0, 1] or 'none'; got {text!r}")
    return v


def _template(text: str) -> str:
    """A template file that is not JSON is named in the error (not only the parser's position)."""
    from pathlib import Path

    path = Path(text)
    if path.suffix == ".json" and path.is_file():
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"--template {text} is not valid JSON ({exc})") from None
    return text


def _sampling(args, *, meta: bool = False) -> dict:
    return dict(
        template=_template(args.template), temperature=args.temperature, top_k=args.top_k or None,
        max_tokens=args.max_tokens if (meta or args.max_tokens is not None) else 6,
        top_logprobs=args.top_logprobs,
        max_reasks=args.reask if (meta or args.reask is not None) else 2,
        prefill={"auto": None, "on": True, "off": False}[args.prefill], multi_token=args.multi_token,
        wrap=args.wrap, top_p=_unit_or_none(args.top_p, "--top-p"), min_p=_unit_or_none(args.min_p, "--min-p"),
        **({} if meta else {"parse": args.parse}),
    )


def _committed(text: str | None):
    if text is None:
        return 0, None
    k, _, name = str(text).partition(":")
    try:
        k = int(k)
    except ValueError:
        raise ValueError(f"--committed must be K or K:NAME (e.g. 4 or 4:M); got {text!r}") from None
    return k, (name or None)


EXIT_CODES = """exit codes:
  0    done (or resumed to the end); --dry-run printed its estimate
  2    bad input: a bad flag, a missing file (one line saying what is wrong and what is allowed; nothing was sent)
  3    the endpoint is down, refuses, or keeps failing (completed work is kept; rerun to resume)
  4    the disk or the run directory failed (full, read-only, journal deleted; completed work is kept)
  5    stopped at --budget (completed work is kept; the same command with a larger --budget continues)
  130  interrupted (Ctrl-C; completed work is kept; rerun to resume)"""


def _guard(command: str, fn, out=None):
    """Run ``fn``; endpoint failures and interrupts become one clear message, not a traceback."""
    from pathlib import Path

    from normlab.llm_runs.backend import EndpointError, NotOpenAICompatible

    saved = out is not None and (Path(out) / "journal.jsonl").exists()
    hint = f"completed work is kept in {out}; rerun the same command to resume"
    from normlab.llm_runs.backend import BudgetExhausted
    from normlab.llm_runs.journal import JournalLost
    from normlab.llm_runs.runner import ReaskLimitError

    try:
        return fn()
    except BudgetExhausted as exc:
        kept = out is not None and (Path(out) / "journal.jsonl").exists()
        print(f"normlab {command}: stopped: {exc}" + (f"; completed work is kept in {out}: rerun the same command "
                                                      "with a larger --budget to continue" if kept else ""),
              file=sys.stderr)
        return 5
    except ReaskLimitError as exc:
        kept = out is not None and (Path(out) / "journal.jsonl").exists()
        print(f"normlab {command}: error: {exc}" + (f" -- completed interactions are kept in {out}" if kept else ""),
              file=sys.stderr)
        return 3
    except NotOpenAICompatible as exc:  # nothing was sent: no resume advice
        print(f"normlab {command}: endpoint error: {exc}", file=sys.stderr)
        return 3
    except EndpointError as exc:
        kept = saved or (out is not None and (Path(out) / "journal.jsonl").exists())
        print(f"normlab {command}: endpoint error: {exc}" + (f" -- {hint}" if kept else ""), file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print(f"\nnormlab {command}: interrupted" + (f"; {hint}" if out is not None else ""), file=sys.stderr)
        return 130
    except JournalLost as exc:
        print(f"normlab {command}: error: {exc}", file=sys.stderr)
        return 4
    except FileNotFoundError:
        raise  # a missing input file is bad input: exit 2 from normlab.cli
    except OSError as exc:  # disk full, read-only directory, permissions, quota
        import errno

        what = {errno.ENOSPC: "the disk is full", errno.EROFS: "the directory is read-only",
                errno.EACCES: "permission denied", errno.EPERM: "permission denied",
                errno.EDQUOT: "the disk quota is exceeded"}.get(exc.errno, exc.strerror or str(exc))
        where = f" ({exc.filename})" if exc.filename else ""
        keep = (f"; every completed interaction is kept in {out}: make room and rerun the same command to resume"
                if out is not None and (Path(out) / "journal.jsonl").exists() else "")
        print(f"normlab {command}: error: {what}{where}{keep}", file=sys.stderr)
        return 4


def _run(args) -> int:
    from normlab.cli import emit

    committed, cname = _committed(args.committed)
    kw = _sampling(args)
    endpoint = _endpoint(args)

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
        print(json.dumps(est.to_dict(), indent=2) if args.json else est)
        return 0

    def go():
        from normlab.llm_runs.runner import run_game

        res = run_game(args.n_agents, args.memory, args.names, max_interactions=args.max_interactions,
                       out=args.out, cache=args.cache, progress=not args.no_progress, rng=args.seed, **design)
        emit(res.summary(), args.json)
        if res.stopped == "budget":
            print(f"normlab llm-run: stopped at --budget {args.budget}: {endpoint_cap_message(res)}; completed work "
                  f"is kept in {args.out}: rerun the same command with a larger --budget to continue", file=sys.stderr)
            return 5
        return 0

    return _guard("llm-run", go, args.out)


def endpoint_cap_message(res) -> str:
    """What a budget-stopped run spent (from its ledger)."""
    led = res.ledger
    if led is None or led.empty:
        return "nothing spent"
    return f"{int(led['tokens'].sum()):,} tokens, ${float(led['cost_usd'].sum()):.4f} spent in {len(led):,} requests"


def _probe(args) -> int:
    from normlab.cli import emit

    kw = _sampling(args, meta=args.probe == "meta")
    endpoint = _endpoint(args)
    mode = args.mode or "exact"
    if args.out is not None:
        from normlab._validate import check_out_dir

        check_out_dir(args.out)
    if args.dry_run:
        est = _probe_estimate(args, dict(kw), endpoint, mode)
        print(json.dumps(est.to_dict(), indent=2) if args.json else est)
        return 0
    if endpoint.embedded and endpoint.embedded_ctx is None and args.probe in ("bias", "strategy"):
        endpoint = _sized(endpoint, args, kw, mode)

    def go():
        from pathlib import Path

        from normlab.llm_runs import probes

        if args.probe == "bias":
            r = probes.individual_bias(args.names, trials=args.trials, mode=mode, endpoint=endpoint, out=args.out,
                                       progress=not args.no_progress, rng=args.seed, cache=args.cache, **kw)
            frame = r.to_frame()
            summary = {"probe": "bias", "model": r.model, "mode": r.mode, "names": list(r.names),
                       "counts": list(r.counts), "invalid": r.invalid, "test": r.test, "p_value": r.p_value,
                       "bootstrap_p": r.bootstrap_p,
                       "jsd": r.jsd, "exact_p": list(r.exact_p) if r.exact_p else None,
                       "covered_mass": r.covered_mass, "llm_calls": r.llm_calls}
        elif args.probe == "strategy":
            r = probes.strategy_table(args.names, args.memory, mode=mode, samples=args.samples, endpoint=endpoint,
                                      out=args.out, progress=not args.no_progress, rng=args.seed, cache=args.cache,
                                      **kw)
            frame = r.to_frame()
            summary = {"probe": "strategy", "model": r.model, "mode": r.mode, "names": list(r.names),
                       "memory": r.memory, "states": int(frame["memory_state"].nunique()), "llm_calls": r.llm_calls}
        elif args.probe == "meta":
            r = probes.meta_prompting(args.names, args.memory, n_states=args.states, endpoint=endpoint,
                                      template=kw["template"], temperature=kw["temperature"], top_k=kw["top_k"],
                                      max_tokens=kw["max_tokens"], prefill=kw["prefill"], wrap=kw["wrap"],
                                      top_p=kw["top_p"], min_p=kw["min_p"], max_reasks=kw["max_reasks"],
                                      protocol=args.meta_protocol, scoring=args.meta_scoring,
                                      progress=not args.no_progress, rng=args.seed)
            frame = r.to_frame()
            acc = r.accuracy()
            summary = {"probe": "meta", "model": r.model, "protocol": r.protocol, "scoring": r.scoring,
                       "questions": int(len(frame)), "llm_calls": r.llm_calls, "reasks": int(frame["reasks"].sum()),
                       "accuracy": {q: float(a) for q, a in zip(acc["question"], acc["accuracy"])}}
        else:  # neutral
            kw.pop("template")
            r = probes.find_neutral_names(n_names=args.n_names, length=args.length, threshold=args.threshold,
                                          max_pools=args.max_pools, template=args.template, endpoint=endpoint,
                                          progress=not args.no_progress, rng=args.seed, **kw)
            frame = r.to_frame()
            summary = {"probe": "neutral", "names": list(r.names) if r.names else None,
                       "pools_tried": int(len(frame)), "llm_calls": r.llm_calls}
        if args.out is not None and args.probe in ("meta", "neutral"):
            Path(args.out).mkdir(parents=True, exist_ok=True)
        if args.out is not None:
            path = Path(args.out) / f"{args.probe}.parquet"
            frame.to_parquet(path, index=False)
            _finish_probe_directory(Path(args.out), args.probe, endpoint)
        else:  # what the model calls computed is never lost: a CSV in the current directory
            path = _default_table_path(args.probe)
            frame.to_csv(path, index=False)
        summary["table"] = str(path)
        emit(summary, args.json)
        if not args.json:
            shown = _compact_table(args.probe, r, frame)
            print()
            print(shown)
            print(f"\nfull table ({len(frame)} rows): {path}" + ("" if args.out is not None else
                                                                 "  (pass --out DIR to choose where)"))
        return 0

    return _guard(f"llm-probe {args.probe}", go, args.out)


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

    from normlab.llm_runs.backend import ctx_for_prompt
    from normlab.llm_runs.runner import longest_prompt_bytes, make_settings

    memory = args.memory if args.probe == "strategy" else 1
    s, tpl, _ = make_settings(2, memory, args.names, max_interactions=1, mode=mode, embedded=True, **kw)
    ctx = ctx_for_prompt(longest_prompt_bytes(s, tpl), 1 if s.mode == "exact" else s.max_tokens)
    return dataclasses.replace(endpoint, embedded_ctx=ctx)


def _probe_estimate(args, kw, endpoint, mode):
    """``llm-probe PROBE --dry-run``: requests, tokens and cost of the probe's design."""
    import math

    from normlab.llm_runs.runner import (REASK_SAFETY_LIMIT, UNBOUNDED, _group_prices, _prompt_tokens,
                                         check_reasks, distinct_prompts, estimate_requests, make_settings)

    names = args.names if args.probe != "neutral" else ",".join(f"n{k}" for k in range(args.n_names))
    memory = getattr(args, "memory", 1) if args.probe in ("strategy", "meta") else 1
    meta = args.probe == "meta"
    if meta:  # the protocol's own defaults (normlab.llm_runs.probes.meta_prompting)
        authors = args.meta_protocol == "authors"
        kw["max_tokens"] = kw["max_tokens"] or (15 if authors else 12)
        kw["max_reasks"] = kw["max_reasks"] if kw["max_reasks"] is not None else ("unbounded" if authors else 0)
    s, tpl, _ = make_settings(2, memory, names, max_interactions=1, mode="sample" if meta else mode,
                              embedded=endpoint.embedded, **{k: v for k, v in kw.items() if k != "template"},
                              template=kw["template"])
    W = len(s.names)
    reask = check_reasks(kw["max_reasks"])
    per = None if reask == UNBOUNDED else 1 + reask
    notes = []
    if args.probe == "bias":
        n, ptok = args.trials, _prompt_tokens(s, tpl, 0)
        reqs = (min(n, math.factorial(W)),) * 2 if s.mode == "exact" else (n, None if per is None else n * per)
        what = f"individual bias: {n} empty-memory decisions, names {','.join(s.names)}, {s.mode} mode"
    elif args.probe == "strategy":
        from normlab.llm_runs.probes import check_table_size

        check_table_size(W, memory)
        counts = [(W * W) ** k for k in range(memory + 1)]
        ptok = sum(c * _prompt_tokens(s, tpl, k) for k, c in enumerate(counts)) / sum(counts)
        if s.mode == "exact":
            n = distinct_prompts(s.names, memory)
            reqs = (n, n)
        else:
            n = sum(counts) * args.samples
            reqs = (n, None if per is None else n * per)
        what = f"strategy table: {sum(counts):,} memory states up to H = {memory}, {s.mode} mode"
    elif args.probe == "meta":
        n = args.states * 9
        ptok = _prompt_tokens(s, tpl, memory)
        reqs = (n, None if per is None else n * min(per, REASK_SAFETY_LIMIT))
        what = f"meta-prompting: {args.states} memory states x up to 9 questions (sample mode)"
        notes.append("meta prompts counted as the main prompt at full memory (the question adds a line)")
    else:
        orders = min(math.factorial(args.n_names), 24)
        n = args.max_pools * orders
        ptok = _prompt_tokens(s, tpl, 0)
        reqs = (orders, n)
        what = f"neutral names: up to {args.max_pools} pools of {args.n_names} names x {orders} orders (exact)"
        notes.append("typical: the first pool is accepted; at most: every pool is tried")
    return estimate_requests(s, tpl, requests=reqs, prompt_tokens=ptok, what=what,
                             prices=_group_prices(s, endpoint, None), notes=notes,
                             completion_per_request=(1 if s.mode == "exact" and not meta else s.max_tokens))


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

    if probe == "bias":
        cols = [c for c in ("name", "count", "n", "share", "p_exact") if c in frame.columns]
        t = frame[cols]
    elif probe == "strategy":
        t = frame.pivot_table(index="memory_state", columns="name", values="p", sort=False)
        t = t[[n for n in result.names if n in t.columns]]
        t.columns = [f"p({n})" for n in t.columns]
        t = t.reset_index().replace({"memory_state": {"": "(empty)"}})
    elif probe == "meta":
        t = result.accuracy()[["question", "n", "correct", "accuracy"]]
    else:
        t = frame[[c for c in ("pool", "jsd", "p_first", "accepted") if c in frame.columns]]
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

_PROBE_EXAMPLES = """\
examples:
  normlab llm-probe bias --names Q,M --trials 100
  normlab llm-probe strategy --names Q,M --memory 3 --out probes/h3
  normlab llm-probe meta --memory 3 --states 10
  normlab llm-probe neutral --n-names 2 --length 6
"""


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
    p.add_argument("--group", action="append", default=None, metavar="SIZE:KEY=VALUE,...",
                   help="a mixed population: one --group per group of agents, in agent order, sizes adding up to "
                        "--n-agents; keys: name, model, base_url, template, temperature, top_k, top_p, min_p, "
                        "max_tokens, price_input, price_output (the rest as the run), e.g. --group 12:model=A "
                        "--group 12:model=B,temperature=0.7. The decisions table records each agent's group and model")
    _add_endpoint_args(p, run_controls=True)
    p.set_defaults(func=_run)

    q = subparsers.add_parser(
        "llm-probe",
        help="individual bias, strategy table, meta-prompting or neutral-name search with an LLM",
        description="Probes of Flint Ashery, Aiello & Baronchelli (2025): individual bias (Fig. 2B, S4, S5), "
                    "strategy table (Table 1, Fig. S8), meta-prompting comprehension (Table S7, Fig. S1) and the "
                    "search for neutral random name pools (Figs. S11, S12). Default mode: exact. Each probe prints "
                    "a compact table and saves the full one (OUT/<probe>.parquet, or llm-probe-<probe>.csv in the "
                    "current directory without --out). 'normlab llm-probe PROBE --help' lists a probe's options.",
        epilog=_PROBE_EXAMPLES + "\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    probes_sub = q.add_subparsers(dest="probe", metavar="PROBE", required=True)

    def probe_parser(name, help, description, examples):
        pp = probes_sub.add_parser(name, help=help, description=description, epilog=examples + "\n" + EXIT_CODES,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
        pp.set_defaults(func=_probe, probe=name)
        return pp

    b = probe_parser(
        "bias", "individual bias: which name an agent with empty memory picks",
        "Individual bias (Fig. 2B, S4, S5): the names a fresh agent (empty memory) picks, with a binomial or "
        "chi-square test against uniform and, in exact mode, the next-token probability of each name.",
        "examples:\n  normlab llm-probe bias --names Q,M --trials 100\n"
        "  normlab llm-probe bias --names Q,M --mode sample --trials 200 --out probes/bias\n")
    b.add_argument("--names", default="Q,M", help="name pool (default %(default)s)")
    b.add_argument("--trials", type=int, default=100, help="decisions with empty memory (default %(default)s)")
    st = probe_parser(
        "strategy", "strategy table: p(name | memory state) for every memory state",
        "Strategy table (Table 1, Fig. S8): the probability of each name in every memory state of length up to "
        "H, exact (next-token probabilities) or sampled.",
        "examples:\n  normlab llm-probe strategy --names Q,M --memory 3\n"
        "  normlab llm-probe strategy --names Q,M --memory 5 --dry-run   # requests and tokens first\n"
        "  normlab llm-probe strategy --names Q,M --memory 3 --mode sample --samples 20 --out probes/h3\n"
        "  normlab llm-probe strategy --names Q,M --memory 5 --cache runs/qm   # reuse a run's journaled calls\n")
    st.add_argument("--names", default="Q,M", help="name pool (default %(default)s)")
    st.add_argument("--memory", type=int, default=3, help="memory length H (default %(default)s)")
    st.add_argument("--samples", type=int, default=20, help="sample mode: answers per state (default %(default)s)")
    m = probe_parser(
        "meta", "meta-prompting: does the model understand the game's rules and its memory?",
        "Meta-prompting comprehension (Table S7, Fig. S1): questions about the rules, the round and the memory "
        "shown, asked in random memory states and scored against the true answers.",
        "examples:\n  normlab llm-probe meta --names Q,M --memory 3 --states 10\n"
        "  normlab llm-probe meta --memory 3 --meta-protocol normlab --meta-scoring strict\n")
    m.add_argument("--names", default="Q,M", help="name pool (default %(default)s)")
    m.add_argument("--memory", type=int, default=3, help="memory length H (default %(default)s)")
    m.add_argument("--states", type=int, default=10, help="random memory states (default %(default)s)")
    m.add_argument("--meta-protocol", default="authors",
                   help="authors (their observer line, 'Answer saying ...' questions, 15 tokens, re-asks; "
                        "default) | normlab (Table S7 wording)")
    m.add_argument("--meta-scoring", default=None,
                   help="substring (the authors', default with their protocol) | strict (normlab's)")
    ne = probe_parser(
        "neutral", "search random name pools the model treats as neutral",
        "Neutral names (Figs. S11, S12): draw random pools of names until one has no individual bias (JSD of "
        "the first-choice distribution from uniform below --threshold).",
        "examples:\n  normlab llm-probe neutral --n-names 2 --length 6 --max-pools 20\n"
        "  normlab llm-probe neutral --n-names 10 --threshold 0.01 --out probes/neutral\n")
    ne.add_argument("--n-names", type=int, default=2, help="pool size (default %(default)s)")
    ne.add_argument("--length", type=int, default=6, help="characters per name (default %(default)s)")
    ne.add_argument("--threshold", type=float, default=0.005, help="JSD from uniform (default %(default)s)")
    ne.add_argument("--max-pools", type=int, default=20, help="pools tried at most (default %(default)s)")
    for name, pp in (("bias", b), ("strategy", st), ("meta", m), ("neutral", ne)):
        pp.add_argument("--out", default=None,
                        help="directory for the journal (resumable) and <probe>.parquet (default: no journal; the "
                             "table goes to llm-probe-<probe>.csv in the current directory)")
        if name in ("bias", "strategy"):
            pp.add_argument("--cache", action="append", default=None, metavar="DIR",
                            help="exact mode: reuse next-token distributions journaled in DIR; repeatable")
        _add_endpoint_args(pp, run_controls=True)
