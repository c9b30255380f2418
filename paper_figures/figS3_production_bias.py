"""Fig. S3: production probability of name '1' in the minimal naming game with W = 2 and a bias.

A speaker choosing between the two names (holding both, or holding none) says '1' with
probability b (the bias); b = 0.5 is the unbiased game, b = 0, 0.05, ..., 1 are drawn. A bias makes
the population converge on name '1' faster and more often. As in the authors' plotter.ipynb, a
run that stopped (3N consecutive successes) is padded with 1 when b > 0.5 (0 when b < 0.5),
whichever name it reached; ``--pad consensus`` pads it with the name it reached, and the curves
then level off at P(consensus on '1'), which the script prints per bias. In a finite population
that probability is below 1 for a small bias (printed by this script at b = 0.55: 0.70 for N = 24
with the defaults; 0.975 with --n-agents 400 --runs 2000; 0.98 with --n-agents 1600 --runs 400):
the caption's "inevitable" convergence is the large-N limit.

Thin script over normlab.figures (`normlab figures --only figS3`); needs no data.

Usage:  python paper_figures/figS3_production_bias.py [--out figures] [--small] [--runs 10000]
            [--n-agents 24] [--pad bias_side|consensus]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. S3.
"""

from normlab.figures.bias import figS3_data
from normlab.figures.registry import script


def curves(biases, runs: int, rounds: int, seed: int, n_agents: int = 24):
    """The data of the figure (``bias``, ``round``, ``p_name_1``, ``p_consensus_1``) for ``biases``."""
    return figS3_data(runs=runs, rounds=rounds, n_agents=n_agents, biases=biases, rng=seed)


def _args(ap):
    ap.add_argument("--runs", type=int, default=None, help="runs per bias (default 10000; 1000 with --small)")
    ap.add_argument("--n-agents", type=int, default=24, help="population size N (default 24, the paper's)")
    ap.add_argument("--pad", choices=("bias_side", "consensus"), default="bias_side",
                    help="how a stopped run counts afterwards (default: the authors' bias side)")


if __name__ == "__main__":
    script("figS3", __doc__, add_arguments=_args,
           options=lambda a: {"figS3": {"runs": a.runs, "n_agents": a.n_agents, "pad": a.pad}})
