"""Fig. S5: first moves with empty memory over the ten names of Fig. 1, per model, with the
chi-squared test of neutrality.

Thin script over normlab.figures (the same as `normlab figures --only figS5`); writes figS5.png
and/or figS5.csv into --out and prints the key numbers.

Usage:  python paper_figures/figS5_individual_bias.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. S5.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("figS5", __doc__)
