"""``normlab figures`` (argparse only; the figure code is imported in the handler)."""

from __future__ import annotations

import argparse

_EPILOG = """\
examples:
  normlab figures --out figs                       # every figure and table: a few minutes, plus up to 20 for
                                                   # Figs. S11, S12, Table S6 on the embedded model (2 busy cores)
  normlab figures --small --out figs               # fewer runs and requests: 1-2 minutes, plus 3-8 for those three
  normlab figures --only figS11,figS12,tableS6 --out figs   # just the three run on an LLM (a rerun asks nothing)
  normlab figures --only fig1a,fig3a,table1 --out figs
  normlab figures --data ~/ai-norms-data --out figs   # a folder holding any of the published archives
  normlab figures --list

Writes <key>.png (figures) and <key>.csv (the tidy data of every figure and table) into --out,
and prints each figure's key numbers. Figures drawn from LLM runs need the published AI-norms
archives (llama3_data.zip, llama31_data.zip, claude_data.zip, llama2_data.zip) in --data, in
$NORMLAB_AINORMS or in shared/data/ai-norms beside the working directory; models whose archive is
absent are left out of a figure, and a figure with none of its data is skipped (each reason is
printed once, at the end, with the figures it skips). Figs. S11, S12 and Table S6, whose runs were
not published, run the paper's procedure on an LLM -- the endpoint of NORMLAB_LLM_BASE_URL /
NORMLAB_LLM_MODEL, else the embedded SmolLM2 (offline) -- and journal every request under
OUT/llm/, so a rerun asks nothing.

exit codes:
  0    done (figures skipped for want of data included: each is printed with its reason)
  2    bad input: an unknown figure key, a missing --data folder, an --out that is a file (nothing written)
  4    the disk failed while writing into --out (full, read-only, no permission; one line naming the file)
  130  interrupted (Ctrl-C; the figures written so far are kept)
"""


def register(sub) -> None:
    p = sub.add_parser(
        "figures",
        help="regenerate the figures and tables of Flint Ashery, Aiello & Baronchelli (2025) (+ ITCMA-S analogues)",
        description="Regenerate every figure and table of Flint Ashery, Aiello & Baronchelli, 'Emergent social "
                    "conventions and collective bias in LLM populations' (Sci. Adv. 2025) from normlab's models and "
                    "the published LLM runs (Figs. S11, S12 and Table S6: the paper's procedure run on an LLM), plus "
                    "analogues of ITCMA-S Figs. 6-7.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", metavar="DIR", help="output folder (created); required unless --list")
    p.add_argument("--only", metavar="KEYS", help="comma-separated keys (see --list), e.g. fig1a,table1")
    p.add_argument("--data", metavar="DIR", help="folder holding published AI-norms archives (default: "
                                                  "$NORMLAB_AINORMS, else shared/data/ai-norms found nearby)")
    p.add_argument("--small", action="store_true", help="fewer simulation runs and posterior draws (fast; "
                                                        "theory curves noisier)")
    p.add_argument("--dpi", type=int, default=150, help="resolution of the PNG files (default 150)")
    p.add_argument("--list", action="store_true", help="list the figures and tables and exit")
    from normlab.llm_runs.core.cli_kit import ENDPOINT_GROUP, add_api_key_args, add_embedded_model_arg

    e = p.add_argument_group(ENDPOINT_GROUP + " -- the LLM of Figs. S11, S12 and Table S6")
    e.add_argument("--base-url", default=None, help="OpenAI-compatible base URL with logprobs (llama.cpp, vLLM, ...)")
    e.add_argument("--model", default=None, help="model name (default: the first model the endpoint lists)")
    add_embedded_model_arg(e)
    add_api_key_args(e)
    e.add_argument("--embedded-threads", type=int, default=None, metavar="N", help="CPU threads of the embedded server")
    e.add_argument("--budget", default=None, metavar="TOKENS",
                   help="stop cleanly before those figures spend more (tokens: 50000, 50k, 2M; each figure's journals "
                        "count what earlier runs into --out spent); exit 5")
    e.add_argument("--dry-run", action="store_true",
                   help="print the requests and tokens the figures run on an LLM would send, and exit (nothing sent or "
                        "written)")
    p.set_defaults(func=_run)


def _run(args) -> int:
    import matplotlib

    matplotlib.use("Agg")  # files only, no window
    from normlab.figures.registry import FIGURES, figure_keys, make

    if args.list:
        for k, s in FIGURES.items():
            print(f"{k:16s} {s.title}" + (f"  [published: {s.published}]" if s.published else ""))
        return 0
    if not args.out:
        raise ValueError("--out DIR is required (the folder the figures are written to)")
    if args.dpi < 30 or args.dpi > 1200:
        raise ValueError(f"--dpi must be in 30..1200; got {args.dpi}")
    from normlab._validate import check_out_dir

    check_out_dir(args.out)
    keys = figure_keys(args.only)  # bad keys fail before any work
    endpoint = _endpoint(args, keys)
    if args.dry_run:
        from normlab.figures.robustness import estimate_llm_figures
        from normlab.llm_runs.core.cli_kit import print_estimate

        return print_estimate(estimate_llm_figures(keys, small=args.small, endpoint=endpoint, out=args.out), False)

    def go():
        make(keys, out=args.out, data=args.data, small=args.small, dpi=args.dpi, endpoint=endpoint)
        return 0

    if endpoint is None:
        return go()
    from normlab.llm_runs.core.cli_kit import guard

    return guard("figures", go, None)


#: The figures run on an LLM (the endpoint flags concern only them).
LLM_FIGURES = ("figS11", "figS12", "tableS6")


def _endpoint(args, keys):
    """The EndpointConfig of the endpoint flags (None when none is given and no --budget / --dry-run)."""
    given = any(getattr(args, k) is not None for k in ("base_url", "model", "embedded_model", "embedded_threads",
                                                        "budget", "api_key")) or args.dry_run
    if not given:
        return None
    if not set(keys) & set(LLM_FIGURES) and not args.dry_run:
        raise ValueError("the endpoint flags concern Figs. S11, S12 and Table S6 only; none of them is among --only")
    from types import SimpleNamespace

    from normlab.llm_runs.core.cli_kit import endpoint_config

    ns = SimpleNamespace(**{**vars(args), "concurrency": 4, "timeout": 120.0, "max_retries": 5, "extra_body": None,
                            "price_input": 0.0, "price_output": 0.0})
    return endpoint_config(ns)
