"""Table S1: first moves with empty memory, strong (M) and weak (Q) counts per model, beside
the published counts. Writes tableS1.csv.

Thin script over normlab.figures (the same as `normlab figures --only tableS1`); writes tableS1.png
and/or tableS1.csv into --out and prints the key numbers.

Usage:  python paper_figures/tableS1_individual_bias.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Table S1.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("tableS1", __doc__)
