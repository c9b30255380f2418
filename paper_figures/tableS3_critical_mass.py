"""Table S3: committed agents needed to overturn M and Q, by the published ensemble rule and
per run, beside the published values. Writes tableS3.csv.

Thin script over normlab.figures (the same as `normlab figures --only tableS3`); writes tableS3.png
and/or tableS3.csv into --out and prints the key numbers.

Usage:  python paper_figures/tableS3_critical_mass.py [--out figures] [--data DIR] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Table S3.
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script("tableS3", __doc__)
