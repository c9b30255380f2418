"""Figs. S11, S12 and Table S6: collective bias with random, initially neutral name pools (S11, main
prompt), with the narrative and bullet-point prompts (S12), and the exact strategy of the first
three interactions for such a pool (Table S6) -- the paper's procedure run on an LLM: the endpoint
of NORMLAB_LLM_BASE_URL / NORMLAB_LLM_MODEL, else the embedded SmolLM2 (offline; a small
instruction-tuned model, not the paper's Llama-3-70B or pre-trained Llama-3.1-70B). Every request
is journaled under OUT/llm/: a rerun asks nothing.

Thin script over normlab.figures (the same as `normlab figures --only figS11,figS12,tableS6`);
writes figS11.png, figS12.png and the CSVs into --out and prints the key numbers.

Usage:  python paper_figures/figS11_S12_tableS6_random_names.py [--out figures] [--small]

Reference: A. Flint Ashery, L. M. Aiello, A. Baronchelli, Sci. Adv. 11, eadu9368 (2025), Figs. S11,
S12, Table S6, Supplementary Text "Alternative Prompts and Name Pools", "Effect of Fine-Tuning".
"""

from normlab.figures.registry import script

if __name__ == "__main__":
    script(["figS11", "figS12", "tableS6"], __doc__)
