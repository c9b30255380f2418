"""Table 1: Llama-3.1's strategy in its first three interactions with {Q, M} (the published
probes), with the interaction-level tests of the caption. Writes table1.csv.

Thin script over normlab.figures (the same as `normlab figures --only table1`); writes table1.png
and/or table1.csv into --out and prints the key numbers.

Usage:  python paper_figures/table1_strategy.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Table 1.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("table1", __doc__)
