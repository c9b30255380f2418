"""Fig. S7: production of the initial convention in runs started from a consensus with
nobody committed.

Thin script over normlab.figures (the same as `normlab figures --only figS7`); writes figS7.png
and/or figS7.csv into --out and prints the key numbers.

Usage:  python paper_figures/figS7_stability.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. S7.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("figS7", __doc__)
