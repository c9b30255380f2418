"""Analogues of ITCMA-S Figs. 6-7 (Zhang et al., arXiv:2409.06750) from the closed-form LTRHA loop.

Fig. 6: (a) driver d_t of each agent, (b) pleasure, arousal, dominance (5-step rolling means).
Fig. 7: (a) resources S_i of each agent, (b) topic of each locale over 75 steps.
Plus the resource Gini over time for three rankers (100 runs each; 20 with --small).

The paper's curves come from one LLM-agent run in its IrollanValley sandbox; these come from
normlab.theory.itcmas.simulate_ltrha (six agents, eight locales, 75 steps), so they are
analogues, not reproductions. Thin script over normlab.figures
(`normlab figures --only itcmas_fig6,itcmas_fig7,itcmas_gini`).

Usage::

    python paper_figures/itcmas_fig6_7.py --out figures/ [--seed 2409] [--runs 100] [--small]
"""

from normlab.figures.registry import script


def _args(ap):
    ap.add_argument("--seed", type=int, default=2409)
    ap.add_argument("--runs", type=int, default=None, help="runs per ranker of the Gini figure (default 100)")


if __name__ == "__main__":
    script(["itcmas_fig6", "itcmas_fig7", "itcmas_gini"], __doc__, add_arguments=_args,
           options=lambda a: {"itcmas_fig6": {"rng": a.seed}, "itcmas_fig7": {"rng": a.seed},
                              "itcmas_gini": {"rng": a.seed, "runs": a.runs}})
