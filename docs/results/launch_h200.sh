#!/bin/bash
# The launch-path checks on an H200 (issue 9), in one device call. Run from the repo root, with the DeepGEMM
# wheel under $WHL (default ../../.whl relative to a carried copy, or ./.whl):
#   bash docs/results/launch_h200.sh [quick|full]   (quick: bench --quick; full: the whole bench and the sweep)
# Writes logs under ${OUT:-/tmp/launch_out}.
set -u
MODE=${1:-quick}
OUT=${OUT:-/tmp/launch_out}; mkdir -p "$OUT"
WHL=${WHL:-$(ls -d .whl ../../.whl 2>/dev/null | head -1)}
export PYTHONUNBUFFERED=1
rm -rf /tmp/dg && python3 -m zipfile -e "$WHL"/tokenspeed_deepgemm-*.whl /tmp/dg
export PYTHONPATH=/tmp/dg:$PWD
if [ -z "${CUDA_HOME:-}" ]; then
  for c in /usr/local/cuda /usr/local/cuda-13.0 $(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /x/x)")"); do
    [ -x "$c/bin/nvcc" ] && export CUDA_HOME=$c && break
  done
fi
echo "CUDA_HOME=${CUDA_HOME:-unset}"; nvidia-smi -L
python3 -c "import torch, deep_gemm; print('torch', torch.__version__, 'deep_gemm', deep_gemm.__file__)" 2>&1 | tail -2
python3 -c "import cuda.bindings, cupy, jax; print('cuda-bindings', cuda.bindings.__version__, 'cupy', cupy.__version__, 'jax', jax.__version__)"
step() { local name=$1; shift; echo "== $name: $*"; timeout "${LIMIT:-240}" "$@" 2>&1 | tee "$OUT/$name.log" | grep -v '^PASS' | tail -40; }
step graph python3 tests/gpu/test_graph_gpu.py
step interop python3 tests/gpu/test_cuda_gpu.py --interop
step host python3 -m rawindexer.bench --host-only
RAWINDEXER_CUDA_LAUNCH=bindings step host_bindings python3 -m rawindexer.bench --host-only
step dlpack python3 -m rawindexer.bench --dlpack-cost
if [ "$MODE" = full ]; then
  LIMIT=3000 step bench python3 -m rawindexer.bench --out "$OUT/bench"
  LIMIT=3000 step sweep python3 tests/gpu/test_cuda_gpu.py --full
else
  step bench python3 -m rawindexer.bench --quick --reps 20
  LIMIT=${SWEEP_LIMIT:-120} step sweep python3 tests/gpu/test_cuda_gpu.py --quick
fi
python3 tests/gpu/test_two_gpus.py 2>&1 | tail -3
