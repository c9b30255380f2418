"""Fig. S9: memory states visited around a consensus on M, unperturbed or with one agent
committed to Q: the published Llama-3.1 runs and normlab's strategy game with each model's
fitted table (100 rounds, 10 runs; --small: 30 rounds).

Thin script over normlab.figures (the same as `normlab figures --only figS9`); writes figS9.png
and/or figS9.csv into --out and prints the key numbers.

Usage:  python paper_figures/figS9_memory_states_consensus.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. S9.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("figS9", __doc__)
