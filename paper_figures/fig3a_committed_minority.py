"""Fig. 3A: production of the challenger among uncommitted agents per population round, averaged
over the runs of one committed count (the authors' ensemble rule), for a majority on Q (top) and
on M (bottom). By default the two critical masses of each model (as the paper); ``--all-counts``
draws every tested count.

Thin script over normlab.figures (`normlab figures --only fig3a`).

Usage:  python paper_figures/fig3a_committed_minority.py [--out figures] [--data DIR] [--all-counts]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. 3A.
"""

from normlab.figures.registry import script


def _args(ap):
    ap.add_argument("--all-counts", action="store_true",
                    help="every tested committed count, not only the critical ones")


if __name__ == "__main__":
    script("fig3a", __doc__, add_arguments=_args,
           options=lambda a: {"fig3a": {"counts": "all" if a.all_counts else "critical"}})
