"""Fig. 3B: committed agents (fraction of N) needed to overturn a consensus on Q and on M,
by the authors' ensemble rule (normlab.theory.criteria.published_rule).

Thin script over normlab.figures (the same as `normlab figures --only fig3b`); writes fig3b.png
and/or fig3b.csv into --out and prints the key numbers.

Usage:  python paper_figures/fig3b_critical_mass.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. 3B, Table S3.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("fig3b", __doc__)
