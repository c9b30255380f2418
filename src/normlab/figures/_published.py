"""Numbers printed in Flint Ashery, Aiello & Baronchelli (2025) (and hard-coded in the authors'
``plotter.ipynb``), shown beside normlab's values in the tables. Tests restate them independently.

References
----------
A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025): Tables S1-S3,
Table 1 and its caption, Fig. 2 caption, Fig. S5 caption; ``plotter.ipynb`` cells 5, 10 (MIT).
"""

#: Table S1: first moves with empty memory, (strong M, weak Q).
TABLE_S1 = {"Llama-3-70B-Instruct": (2435, 2565), "Llama-3.1-70B-Instruct": (5079, 4921),
            "Claude-3.5-Sonnet": (5016, 4984), "Llama-2-70B-Chat": (5010, 4090)}
#: Fig. 2B caption: p-values of the exact binomial test of Table S1.
TABLE_S1_P = {"Llama-3-70B-Instruct": 0.068, "Llama-3.1-70B-Instruct": 0.116, "Claude-3.5-Sonnet": 0.757,
              "Llama-2-70B-Chat": 0.849}
#: Table S2: consensus of the 40 Q/M runs, (strong M, weak Q).
TABLE_S2 = {"Llama-3-70B-Instruct": (40, 0), "Llama-3.1-70B-Instruct": (40, 0), "Claude-3.5-Sonnet": (26, 14),
            "Llama-2-70B-Chat": (36, 4)}
#: Table S3: committed agents needed to overturn (M, Q).
TABLE_S3 = {"Llama-3-70B-Instruct": (6, 1), "Llama-3.1-70B-Instruct": (10, 0), "Claude-3.5-Sonnet": (5, 5),
            "Llama-2-70B-Chat": (16, 11)}
#: Table 1 values printed in the main text: p(name | memory state).
TABLE_1 = {("M", "M,Q;Q,M"): 0.848, ("Q", "Q,M;M,Q"): 0.451}
#: Table 1 caption: interaction-level p-values (interactions 1, 2; 3 is below 2.2e-16).
TABLE_1_P = {1: 0.116, 2: 0.110}
