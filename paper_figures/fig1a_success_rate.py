"""Fig. 1A: success rate per population round of the LLM populations (N = 24, W = 10, H = 5; the
published runs of every model present) with the minimal naming game per interaction in the inset.

Theory: the authors' variant by default (``--invent discard``: an empty speaker utters a random
name without keeping it, as in their ``NG_module.py``); ``--invent keep`` draws normlab's default
rules. The authors' code shows the theory only in the inset; ``--theory-line`` also draws the
per-round theory curve as the dashed black line of the caption.

Thin script over normlab.figures (`normlab figures --only fig1a`).

Usage:  python paper_figures/fig1a_success_rate.py [--out figures] [--data DIR] [--small]
            [--runs 10000] [--invent discard|keep] [--theory-line]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Fig. 1A.
"""

from normlab.figures.registry import script


def _args(ap):
    ap.add_argument("--runs", type=int, default=None, help="theory runs (default 10000; 1000 with --small)")
    ap.add_argument("--invent", choices=("discard", "keep"), default="discard",
                    help="discard: the authors' NG_module.py (default); keep: normlab's default rules")
    ap.add_argument("--theory-line", action="store_true", help="also draw the per-round theory line (caption)")


if __name__ == "__main__":
    script("fig1a", __doc__, add_arguments=_args,
           options=lambda a: {"fig1a": {"runs": a.runs, "invent": a.invent}},
           draw_options=lambda a: {"fig1a": {"theory_line": a.theory_line}})
