"""Fig. S4: Llama-3 with the whole Latin alphabet: first moves with empty memory (individual
bias) and the consensus of each run (collective bias).

Thin script over normlab.figures (the same as `normlab figures --only figS4`); writes figS4.png
and/or figS4.csv into --out and prints the key numbers.

Usage:  python paper_figures/figS4_latin_alphabet.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. S4.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("figS4", __doc__)
