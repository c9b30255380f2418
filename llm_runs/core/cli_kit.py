"""The command-line kit every layer's commands share: the endpoint, price, budget and sampling flags
(:func:`add_endpoint_args`), the :class:`~normlab.llm_runs.backend.EndpointConfig` and sampling
settings built from them (:func:`endpoint_config`, :func:`sampling`), and :func:`guard`, which turns
endpoint, budget, disk and interrupt errors into one line and the documented exit codes
(:data:`EXIT_CODES`, rendered from :data:`normlab.cli_output.EXIT_CODE_TABLE`).

Light, like the ``_cli.py`` modules that use it: argparse-level imports at the top; the endpoint
and journal modules are imported inside the functions that need them (when a command runs).
"""

from __future__ import annotations

import argparse
import sys

from normlab.cli_output import add_progress_flags, describe_os_error, exit_codes

__all__ = ["EXIT_CODES", "ENDPOINT_GROUP", "add_endpoint_args", "add_embedded_model_arg", "add_api_key_args", "endpoint_config", "parse_budget", "sampling",
           "guard", "unit_or_none", "template_arg", "request_budget", "save_summary"]

#: Exit codes of the commands that call an LLM (llm-run, llm-probe, demo).
EXIT_CODES = exit_codes(llm=True)


def add_endpoint_args(p: argparse.ArgumentParser, *, run_controls: bool = False, sampling: bool = True) -> None:
    """Endpoint, embedded-server, price and sampling flags; ``run_controls`` adds ``--budget``
    and ``--dry-run`` (llm-run and llm-probe handle them; other commands reusing these flags
    would not); ``sampling=False`` leaves out the naming game's sampling flags (commands with
    prompts of their own: ``crsec``, ``scene``) and keeps ``--seed``, ``--no-progress``, ``--json``."""
    g = p.add_argument_group(ENDPOINT_GROUP)
    g.add_argument("--base-url", default=None, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1")
    g.add_argument("--model", default=None, help="model name (default: the first model the endpoint lists)")
    add_embedded_model_arg(g)
    add_api_key_args(g)
    g.add_argument("--concurrency", type=int, default=4, help="requests in flight (default %(default)s)")
    g.add_argument("--timeout", type=float, default=120.0,
                   help="seconds for a whole request attempt, however slowly the server sends (default %(default)s)")
    g.add_argument("--max-retries", type=int, default=5, help="retries on 429/5xx/timeouts (default %(default)s)")
    g.add_argument("--transport", default="auto", choices=("auto", "lean", "openai"),
                   help="HTTP client: lean (keep-alive HTTP/1.1, plain http:// only, about a tenth of the CPU per "
                        "request), openai (the openai package), auto (lean for a plain http:// URL without "
                        "credentials or proxy; default)")
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
    if not sampling:
        o = p.add_argument_group("output")
        o.add_argument("--seed", type=int, default=None, help="seed (default: fresh, stored in OUT/settings.json)")
        add_progress_flags(o, what="progress lines")
        o.add_argument("--json", action="store_true", help="print the summary as JSON")
        return
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
    add_progress_flags(s)
    s.add_argument("--json", action="store_true", help="print the summary as JSON")


#: The title of the endpoint flags' group in every ``--help``.
ENDPOINT_GROUP = "endpoint (default: NORMLAB_LLM_BASE_URL, else the embedded model of --embedded-model, offline)"


def add_embedded_model_arg(g) -> None:
    """``--embedded-model NAME``: which model the embedded server serves (choices, licences and
    installs from the registry :data:`~normlab.llm_runs.backend.models.EMBEDDED_MODELS`)."""
    from normlab.llm_runs.backend.models import DEFAULT_EMBEDDED, EMBEDDED_MODELS

    listed = "; ".join(f"{m.name}: {m.summary} [{m.install}]" for m in EMBEDDED_MODELS.values())
    g.add_argument("--embedded-model", default=None, choices=list(EMBEDDED_MODELS), metavar="NAME",
                   help=f"the model the embedded llama.cpp server serves, offline, when no --base-url is given "
                        f"(default {DEFAULT_EMBEDDED}; an explicit choice wins over NORMLAB_LLM_BASE_URL). {listed}")


def add_api_key_args(g) -> None:
    """``--api-key-env NAME`` (the variable holding the key) and ``--api-key KEY`` (the key itself;
    redacted from everything normlab records or prints, :func:`~normlab.llm_runs.backend.redact_command`)."""
    g.add_argument("--api-key-env", default="NORMLAB_LLM_API_KEY", metavar="NAME",
                   help="environment variable holding the API key (never logged; default %(default)s, then OPENAI_API_KEY)")
    g.add_argument("--api-key", default=None, metavar="KEY",
                   help="the API key itself (prefer --api-key-env: a key on the command line shows in `ps` and shell "
                        "history; normlab masks it as *** in everything it writes or prints)")


def _add_run_controls(c) -> None:
    c.add_argument("--budget", default=None, metavar="AMOUNT",
                   help="stop cleanly before spending more: tokens (50000, 50k, 2M; prompt + completion) or USD "
                        "($1.50 or 1.5usd, with --price-input/--price-output). Counts what earlier runs in --out spent; "
                        "exit 5 when reached, and the same command with a larger --budget continues")
    c.add_argument("--dry-run", action="store_true",
                   help="print the expected requests, tokens and cost (an estimate from the prompts and the design) "
                        "and exit without sending anything or writing files")


def endpoint_config(args):
    """The :class:`~normlab.llm_runs.backend.EndpointConfig` of the flags of :func:`add_endpoint_args`
    (``--budget`` too, where the command has it); a bad combination is a one-line ``ValueError``."""
    from normlab.llm_runs.backend import EndpointConfig

    import os

    chosen = getattr(args, "embedded_model", None)
    if chosen is not None and args.base_url:
        raise ValueError("--embedded-model and --base-url exclude each other: the embedded model is served here, a "
                         "base URL names another server")
    if chosen is not None and args.model:
        raise ValueError("--model names a model of --base-url's server; the embedded one is chosen with "
                         "--embedded-model")
    if args.model and not args.base_url:
        if not (os.environ.get("NORMLAB_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL")):
            raise ValueError("--model needs --base-url (without an endpoint the embedded model of --embedded-model "
                             "is served)")
    extra = None
    if args.extra_body:
        from normlab.user_files import loads_json

        try:
            extra = loads_json(args.extra_body, "--extra-body")
        except ValueError as exc:
            raise ValueError(f"--extra-body must be a JSON object: {exc}") from None
        if not isinstance(extra, dict):
            raise ValueError("--extra-body must be a JSON object")
    tokens, usd = parse_budget(getattr(args, "budget", None))
    if usd is not None and not (args.price_input or args.price_output):
        raise ValueError(f"--budget {args.budget} is in USD: give --price-input/--price-output (USD per million "
                         "tokens), or a budget in tokens (e.g. --budget 200k)")
    key_env = args.api_key_env
    if not (isinstance(key_env, str) and key_env.isidentifier() and key_env.isascii()):
        raise ValueError("--api-key-env takes the NAME of an environment variable holding the key (letters, digits, "
                         "_), not the key itself; the value given is not shown; use --api-key KEY for a key")
    make = EndpointConfig if chosen is not None else EndpointConfig.from_env  # an explicit choice beats the environment
    return make(
        base_url=args.base_url, model=args.model, api_key_env=key_env, api_key=getattr(args, "api_key", None),
        embedded_model=chosen or "smollm2", concurrency=args.concurrency,
        extra_body=extra,
        timeout=args.timeout, max_retries=args.max_retries, price_input=args.price_input,
        price_output=args.price_output, embedded_threads=args.embedded_threads, embedded_ctx=getattr(args, "embedded_ctx", None),
        embedded_cache_mib=getattr(args, "embedded_cache_mib", None), budget_tokens=tokens, budget_usd=usd,
        transport=getattr(args, "transport", "auto"),
    )


def parse_budget(text):
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


def unit_or_none(text, flag: str):
    if text is None or str(text).strip().lower() == "none":
        return None
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{flag} must be a number in [0, 1] or 'none'; got {text!r}") from None
    if not 0 <= v <= 1:
        raise ValueError(f"{flag} must be a number in [0, 1] or 'none'; got {text!r}")
    return v


def template_arg(text: str) -> str:
    """A template file that is not JSON, too large or deep, or not a regular file (a FIFO would
    block the reader) is named in the error (not only the parser's position), before any work."""
    from pathlib import Path

    path = Path(text)
    if path.suffix == ".json" and (path.exists() or path.is_symlink()):
        from normlab.user_files import TEMPLATE_MAX_BYTES, read_user_json

        read_user_json(path, f"--template {text}", max_bytes=TEMPLATE_MAX_BYTES)
    return text


def sampling(args, *, meta: bool = False) -> dict:
    """The sampling settings of the flags of :func:`add_endpoint_args`, as keyword arguments of
    :func:`~normlab.llm_runs.run_game` and the probes (``meta``: a protocol with its own
    ``max_tokens`` and ``max_reasks`` defaults, left ``None``; no ``parse``)."""
    return dict(
        template=template_arg(args.template), temperature=args.temperature, top_k=args.top_k or None,
        max_tokens=args.max_tokens if (meta or args.max_tokens is not None) else 6,
        top_logprobs=args.top_logprobs,
        max_reasks=args.reask if (meta or args.reask is not None) else 2,
        prefill={"auto": None, "on": True, "off": False}[args.prefill], multi_token=args.multi_token,
        wrap=args.wrap, top_p=unit_or_none(args.top_p, "--top-p"), min_p=unit_or_none(args.min_p, "--min-p"),
        **({} if meta else {"parse": args.parse}),
    )



def guard(command: str, fn, out=None):
    """Run ``fn``; endpoint failures and interrupts become one clear message, not a traceback."""
    from pathlib import Path

    from normlab.llm_runs.backend import EndpointError, NotOpenAICompatible

    saved = out is not None and (Path(out) / "journal.jsonl").exists()
    hint = f"completed work is kept in {out}; rerun the same command to resume"
    from normlab.llm_runs.backend import BudgetExhausted, ReaskLimitError
    from normlab.llm_runs.journal import JournalLost

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
        keep = (f"; every completed interaction is kept in {out}: make room and rerun the same command to resume"
                if out is not None and (Path(out) / "journal.jsonl").exists() else "")
        print(f"normlab {command}: error: {describe_os_error(exc)}{keep}", file=sys.stderr)
        return 4


def request_budget(args) -> int | None:
    """``--budget 300req``: a cap on requests (``crsec run``, ``scene run``), taken off ``args``
    so that :func:`endpoint_config` sees no token or USD budget; ``None`` for any other budget."""
    import re

    b = getattr(args, "budget", None)
    m = re.fullmatch(r"\s*(\d+)\s*(?:req|reqs|requests?)\s*", str(b).lower()) if b is not None else None
    if m is None:
        return None
    n = int(m.group(1))
    if n < 1:
        raise ValueError(f"--budget must be at least 1 request; got {b!r}")
    args.budget = None
    return n


def save_summary(out, summary: dict) -> str:
    """``--out DIR`` of the commands that read a run (``crsec analyse``, ``scene score``): what
    ``--json`` prints, as ``DIR/summary.json`` (the directory created); returns the file's path."""
    import contextlib
    import io
    from pathlib import Path

    from normlab.cli_output import emit

    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        emit(summary, True)
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    path = d / "summary.json"
    path.write_text(text.getvalue(), encoding="utf-8")
    return str(path)


def report_summary(command: str, args, summary: dict, draw=None) -> int:
    """How the commands that read a run end (``crsec analyse``, ``scene score``): ``summary``
    printed (``--json``: as JSON) and, with ``--out DIR``, saved by :func:`save_summary`; then
    ``draw()`` (the figure), all under :func:`guard`."""
    from normlab.cli_output import emit

    def go():
        shown = summary if args.out is None else {**summary, "summary file": save_summary(args.out, summary)}
        emit(shown, args.json)
        if draw is not None:
            draw()
        return 0

    return guard(command, go)


def print_estimate(est, as_json: bool) -> int:
    """What ``--dry-run`` prints: the estimate (``--json``: its ``to_dict()`` as JSON); exit code 0."""
    import json

    print(json.dumps(est.to_dict(), indent=2) if as_json else est)
    return 0


def require_out(out, what: str) -> None:
    """``--out DIR`` of a journaled run (``crsec run``, ``scene run``): required (its journal makes
    the ``what`` resumable) and checked before any work."""
    if out is None:
        raise ValueError(f"--out DIR is required: the {what} directory (its journal makes the {what} resumable)")
    from normlab._validate import check_out_dir

    check_out_dir(out)
