"""Fig. S6: Llama-3 with four two-name pools: success rate (runs and mean) and production of
the strong convention in every run.

Thin script over normlab.figures (the same as `normlab figures --only figS6`); writes figS6.png
and/or figS6.csv into --out and prints the key numbers.

Usage:  python paper_figures/figS6_binary_pools.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. S6.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("figS6", __doc__)
