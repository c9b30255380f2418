"""Predicted (from baseline runs only) against published critical masses, for every AI-norms archive given.

Usage (README's table)::

    python paper_figures/critical_mass_check.py                      # the archives in ../shared/data/ai-norms
    python paper_figures/critical_mass_check.py path/to/claude_data.zip path/to/llama2_data.zip --seed 1
    python paper_figures/critical_mass_check.py --shipped            # the shipped baseline fits: no sampling, faster

For each LLM the setting with the most committed-minority runs is calibrated on its baseline runs
(hierarchical fit, run effects, the committed runs' design) and each direction's critical mass is
set beside the published rule's reading of the committed runs (Table S3 of Flint Ashery et al. 2025).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings


def check(argv=None):
    """The check for the command line ``argv`` (None when no archive is found)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("archives", nargs="*", help="AI-norms archives (.zip); default: those in ../shared/data/ai-norms")
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shipped", action="store_true", help="use the shipped baseline fits where they exist")
    ap.add_argument("--no-sensitivity", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    from normlab.calibration import check_critical_masses, load_fit
    from normlab.llm_runs.published.ainorms import ainorms_archives_log

    log, paths = ainorms_archives_log(args.archives)
    if log is None:
        return None, args
    fits = None
    if args.shipped:
        fits = {"Llama-3.1-70B-Instruct": load_fit("llama31_70b_QM_H5"), "Llama-3-70B-Instruct": load_fit("llama3_70b_QM_H3")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chk = check_critical_masses(log, n_draws=args.draws, fits=fits, sensitivity=not args.no_sensitivity,
                                    source=", ".join(p.name for p in paths), rng=args.seed)
    return chk, args


def main(argv=None) -> int:
    chk, args = check(argv)
    if chk is None:
        print("no archives given and none found in ../shared/data/ai-norms (or $NORMLAB_AINORMS)", file=sys.stderr)
        return 2
    print(json.dumps(chk.summary(), indent=1, default=str) if args.json else chk.text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
