"""``normlab data`` (argparse only; the checks are imported in the handler)."""

from __future__ import annotations

import argparse

_EPILOG = """\
examples:
  normlab data                                   # $NORMLAB_AINORMS, else shared/data/ai-norms nearby
  normlab data --where ~/AI-norms                # a clone of the authors' repository (searched inside)
  normlab data --where ~/ai-norms-data --json    # a folder holding the archives; every field as JSON

Finds the published AI-norms archives of Flint Ashery, Aiello & Baronchelli (2025): llama3_data.zip
and llama31_data.zip (SHA-256 pinned: normlab's checks, tables and notebooks need them) and
claude_data.zip and llama2_data.zip (optional; their hash is not known to normlab, so their
structure is checked the way the loader reads them). Says what is missing and where to get it:
the authors' repository https://github.com/Ariel-Flint-Ashery/AI-norms (MIT). Then
'export NORMLAB_AINORMS=FOLDER' points every command, notebook and script at them.

exit codes:
  0    llama3_data.zip and llama31_data.zip found and intact, nothing found damaged
  2    either of them missing, or an archive found damaged or different (said above); a --where that does not exist
  130  interrupted (Ctrl-C)
"""


def register(sub) -> None:
    p = sub.add_parser("data", help="find and check the published AI-norms archives; say what is missing and where to get it",
                       description="Find the published AI-norms archives (a folder you name, a clone of the authors' "
                                   "repository, $NORMLAB_AINORMS or shared/data/ai-norms nearby), check their SHA-256 "
                                   "(or, where normlab does not know it, their structure) and say what is missing.",
                       epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--where", metavar="DIR", help="a folder holding the archives, or a clone of the authors' repository")
    p.add_argument("--json", action="store_true", help="print every field as JSON")
    p.set_defaults(func=_run)


def _run(args) -> int:
    import json
    import sys

    from normlab.llm_runs.published.ainorms_data import check_data

    report = check_data(args.where)
    if args.json:
        print(json.dumps(report.summary(), indent=2))
    else:
        print("\n".join(report.lines()))
    if not report.ready:
        print("normlab data: error: the published archives normlab needs are not all here and intact (see above)",
              file=sys.stderr)
        return 2
    return 0
