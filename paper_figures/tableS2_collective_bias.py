"""Table S2: consensus of the 40 Q/M runs per model, beside the published counts. Writes
tableS2.csv.

Thin script over normlab.figures (the same as `normlab figures --only tableS2`); writes tableS2.png
and/or tableS2.csv into --out and prints the key numbers.

Usage:  python paper_figures/tableS2_collective_bias.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Table S2.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("tableS2", __doc__)
