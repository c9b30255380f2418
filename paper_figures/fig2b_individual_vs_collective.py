"""Fig. 2B: individual bias (first moves with empty memory, {Q, M}; asterisk: exact binomial
test cannot reject neutrality) against collective bias (consensus of the 40 Q/M runs).

Thin script over normlab.figures (the same as `normlab figures --only fig2b`); writes fig2b.png
and/or fig2b.csv into --out and prints the key numbers.

Usage:  python paper_figures/fig2b_individual_vs_collective.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. 2B, Tables S1-S2.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("fig2b", __doc__)
