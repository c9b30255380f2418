"""Fig. 1B: production probability of each of the ten names in one Llama-3.1 run (run 6
of the published file, as in the authors' plotter.ipynb).

Thin script over normlab.figures (the same as `normlab figures --only fig1b`); writes fig1b.png
and/or fig1b.csv into --out and prints the key numbers.

Usage:  python paper_figures/fig1b_word_competition.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. 1B.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("fig1b", __doc__)
