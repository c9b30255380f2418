"""Table S5: for each probed memory of Table 1, the exact binomial test of neutrality (p-dagger;
one-sided in the observed direction as in the authors' analyse_individual_bias.py,
``--two-sided`` for the prose's test) and the one-tailed bootstrap test (p-double-dagger: 70 %
subsamples, 10 000 times). Writes tableS5.csv.

Thin script over normlab.figures (`normlab figures --only tableS5`).

Usage:  python paper_figures/tableS5_strategy_tests.py [--out figures] [--data DIR] [--two-sided]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Table S5,
Supplementary Text "Statistical Tests for Table 1".
"""

from normlab.figures.registry import script


def _args(ap):
    ap.add_argument("--two-sided", action="store_true", help="two-sided p-dagger (the prose) instead of one-sided")


if __name__ == "__main__":
    script("tableS5", __doc__, add_arguments=_args, options=lambda a: {"tableS5": {"two_sided": a.two_sided}})
