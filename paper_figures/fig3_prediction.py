"""Critical mass predicted vs observed (normlab's addition to Fig. 3 / Table S3).

For Llama-3.1 (N = 24, H = 5) and Llama-3 (N = 48, H = 3): the flip probability against the
committed count, for a majority on M attacked by Q and on Q attacked by M. The band is the
prediction of normlab's strategy table fitted on the model's *baseline* runs only (the shipped
tables, 200 posterior draws; 20 with --small); the points are the published committed-minority
runs (when the data are present), with Clopper-Pearson intervals. The printed critical masses use
the published ensemble rule (normlab.theory.criteria); Table S3: Llama-3.1 10 (M) and 0 (Q),
Llama-3 6 (M) and 1 (Q).

Thin script over normlab.figures (`normlab figures --only fig3_prediction`).

Usage:  python paper_figures/fig3_prediction.py [--out figures] [--data DIR] [--small] [--draws 200]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. 3,
Table S3, Methods "Committed Minorities".
"""

from normlab.figures.registry import script


def _args(ap):
    ap.add_argument("--draws", type=int, default=None, help="posterior draws (default 200; 20 with --small)")


if __name__ == "__main__":
    script("fig3_prediction", __doc__, add_arguments=_args,
           options=lambda a: {"fig3_prediction": {"draws": a.draws}})
