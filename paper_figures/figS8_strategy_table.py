"""Fig. S8: the strategy p(M | memory) over all 32 x 32 memory states of H = 5, for Llama-3 and
Llama-3.1: the posterior mean of the table normlab fitted on each model's 40 baseline runs (the
paper shows the LLM's exact next-token probabilities, which are not published); ``--counts``
shows the observed frequencies instead (unvisited states blank). Needs no data.

Thin script over normlab.figures (`normlab figures --only figS8`).

Usage:  python paper_figures/figS8_strategy_table.py [--out figures] [--counts]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. S8.
"""

from normlab.figures.registry import script


def _args(ap):
    ap.add_argument("--counts", action="store_true", help="observed frequencies instead of the fitted table")


if __name__ == "__main__":
    script("figS8", __doc__, add_arguments=_args,
           options=lambda a: {"figS8": {"source": "counts" if a.counts else "fit"}})
