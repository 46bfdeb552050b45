#!/bin/bash
# fp8_paged_mqa_logits on the H200 after the launch-path integration (issues 9 + 10), in one device call. Run from
# the repo root after `make` (rawindexer/_kernels: code objects + C launcher), the DeepGEMM wheel under $WHL if any:
#   bash docs/results/paged_h200.sh            # nvidia-h200: sweep (both designs), graph/allocation checks, bench
#   bash docs/results/paged_h200.sh two        # nvidia-h200-x2: the cuda:1 checks (and the graph checks) only
# Steps: which per-call CUDA route is taken; tests/gpu/test_paged_gpu.py (288 cases x {f16, fp8}: exact mask, calc_diff,
# per-logit gate per design; then graph replay of the function / PagedIndexer / bound launch, the torch-allocated
# output, and cuda:1 with two GPUs); forced context splits (pytest); python -m rawindexer.bench --paged --quick
# (GPU time vs DeepGEMM and read bandwidth, host cost per entry point). Logs under ${OUT:-/tmp/paged_out}.
set -u
OUT=${OUT:-/tmp/paged_out}; mkdir -p "$OUT"
WHL=${WHL:-$(ls -d .whl ../../.whl 2>/dev/null | head -1)}
export PYTHONUNBUFFERED=1
T0=$(date +%s)
if [ -n "$WHL" ] && ls "$WHL"/tokenspeed_deepgemm-*.whl >/dev/null 2>&1; then
  rm -rf /tmp/dg && python3 -m zipfile -e "$WHL"/tokenspeed_deepgemm-*.whl /tmp/dg && export PYTHONPATH=/tmp/dg:$PWD
else
  export PYTHONPATH=$PWD
fi
for c in /usr/local/cuda /usr/local/cuda-13.0; do [ -x "$c/bin/nvcc" ] && export CUDA_HOME=$c && break; done
nvidia-smi -L; lscpu | grep -m1 "Model name"
step() { local name=$1 limit=$2; shift 2; echo "== $name (t=$(( $(date +%s) - T0 )) s): $*";
         timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log" | grep -v '^PASS' | tail -40; }
python3 -c "
from rawindexer.backends import get_backend
raw = get_backend('cuda')._raw
print('per-call CUDA route:', 'cuda-bindings' if raw is None else 'ctypes' if raw.shim is None else 'C launcher')"
if [ "${1:-}" = "two" ]; then
  step paged_two_gpus 120 python3 tests/gpu/test_paged_gpu.py --checks-only --log "$OUT/paged_two_gpus_h200.log"
else
  step paged_sweep 300 python3 tests/gpu/test_paged_gpu.py --log "$OUT/paged_sweep_h200.log"
  step paged_splits 90 python3 -m pytest -q -m gpu tests/gpu/test_paged_gpu.py -k forced_splits
  step paged_bench 180 python3 -m rawindexer.bench --paged --quick --log "$OUT/paged_bench_h200.md"
fi
echo "== done (t=$(( $(date +%s) - T0 )) s)"
