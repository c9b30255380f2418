"""Fig. S2: mean success rate of Llama-3 populations for other pool sizes W, memories H and
population sizes N.

Thin script over normlab.figures (the same as `normlab figures --only figS2`); writes figS2.png
and/or figS2.csv into --out and prints the key numbers.

Usage:  python paper_figures/figS2_robust_emergence.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. S2.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("figS2", __doc__)
