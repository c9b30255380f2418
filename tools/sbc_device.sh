#!/usr/bin/env bash
# Simulation-based calibration (benchmarks/bench_coverage.py) on a many-core machine without PyMC,
# normlab not installed: the repository alone, numpy/scipy/numba/pandas/pyarrow (issue 32).
#
#   OUT=/some/folder bash tools/sbc_device.sh [SECONDS] [WORKERS] [SEED] [more bench_coverage.py flags]
#
# SECONDS (default 330): no truth starts after this many seconds (bench_coverage.py --max-seconds;
# the truths running then get a minute's grace, so the script ends about SECONDS + 70 s after it
# starts; the first truth of every worker includes compiling the Numba kernels, in parallel). WORKERS (default: the cores, nproc). SEED (2026).
# In-family truths and wider ones (run_effects, shared_order, non_logit) interleave 8 : 1 : 1 : 1.
# Smoke test of the script itself (seconds of work): OUT=/tmp/x bash tools/sbc_device.sh 1 2 1 --tiny
#
# The fit per truth is the cheap one, ``--fit-model empirical`` (per-state Beta posteriors, run
# effects by the marginal fit: no PyMC). That is the coverage of the *empirical* fit kind; it stands
# for the default (hierarchical, NUTS) only where ``bench_coverage.py --equality K --cheap-model
# empirical`` has accepted it (docs/validation/calibration.md says whether it has).
#
# Writes under $OUT: coverage.jsonl (one line per finished truth: rerun with the same file to resume
# or to add truths), coverage.json (the summary: coverage.{critical_mass,flip,consensus,tip}.{0.5,0.8,0.95},
# n_truths, seconds, by_family: in-family truths and, one in four each, the three wider families), log.txt.
set -u -o pipefail
SECONDS_MAX=${1:-330}
CORES=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc alone reads OMP_NUM_THREADS
WORKERS=${2:-$CORES}
SEED=${3:-2026}
: "${OUT:?set OUT to the folder the results go to}"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
BOOT=$(mktemp -d)
# normlab from the repository without installing it: its three code folders are sub-packages of
# normlab (pyproject's package-dir), in this process and in every worker it spawns.
cat >"$BOOT/sitecustomize.py" <<'EOF'
import os, sys
root = os.environ.get("NORMLAB_ROOT")
if root:
    sys.path.insert(0, os.path.join(root, "src"))
    import normlab
    normlab.__path__.append(root)
EOF
export NORMLAB_ROOT="$ROOT" PYTHONPATH="$BOOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
PY=${PYTHON:-$(command -v python3 || command -v python)}
cd "$ROOT"
{
  echo "# $(date -u) sbc_device.sh: $WORKERS workers, --max-seconds $SECONDS_MAX, seed $SEED, $CORES cores"
  "$PY" -c "import numpy, scipy, numba, pandas; print('# numpy', numpy.__version__, 'scipy', scipy.__version__, 'numba', numba.__version__, 'pandas', pandas.__version__)"
  "$PY" -c "import pymc" 2>/dev/null && echo "# PyMC present (not used: --fit-model empirical)"
  t0=$(date +%s)
  "$PY" benchmarks/bench_coverage.py --truths 2000 --wider 250 --fit-model empirical \
      --workers "$WORKERS" --seed "$SEED" --max-seconds "$SECONDS_MAX" \
      --results "$OUT/coverage.jsonl" --json "$OUT/coverage.json" "${@:4}"
  rc=$?
  echo "# fan-out: $(( $(date +%s) - t0 )) s, rc $rc, truths finished: $(wc -l <"$OUT/coverage.jsonl" 2>/dev/null || echo 0)"
} 2>&1 | tee "$OUT/log.txt"
