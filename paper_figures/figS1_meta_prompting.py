"""Fig. S1: meta-prompting accuracy per comprehension question (mean over replayed players,
error bar: standard error), per model.

Thin script over normlab.figures (the same as `normlab figures --only figS1`); writes figS1.png
and/or figS1.csv into --out and prints the key numbers.

Usage:  python paper_figures/figS1_meta_prompting.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. S1, Table S7.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("figS1", __doc__)
