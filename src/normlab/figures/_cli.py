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
    make(keys, out=args.out, data=args.data, small=args.small, dpi=args.dpi)
    return 0
