"""Fig. 2A: share of the 40 ten-name runs (N = 24, H = 5) reaching consensus on each name,
per model (computed from the published runs; equal to the counts the authors hard-coded).

Thin script over normlab.figures (the same as `normlab figures --only fig2a`); writes fig2a.png
and/or fig2a.csv into --out and prints the key numbers.

Usage:  python paper_figures/fig2a_collective_bias.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. 2A.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("fig2a", __doc__)
