"""Fig. S10: memory states visited while a convention emerges (the 40 Q/M runs of each
model), for memories of 1, 2 and 3 entries; colour: p(M) of the fitted table.

Thin script over normlab.figures (the same as `normlab figures --only figS10`); writes figS10.png
and/or figS10.csv into --out and prints the key numbers.

Usage:  python paper_figures/figS10_memory_states_emergence.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. S10.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("figS10", __doc__)
