#!/bin/bash
# The launch hot path after the host-cost rework, in one short device call (issue 9's targets). Run from the repo
# root with build/ from `make` (rawindexer/_kernels/libri_cuda_launch.so is the C launcher; at the time of the run it lived in build/) and the DeepGEMM wheel under $WHL:
#   bash docs/results/launchperf_h200.sh
# Steps: which per-call route the CUDA backend takes, graph capture (tests/gpu/test_graph_gpu.py), the host-cost table
# (bench --host-only), the quick bench (bench --quick --reps 20: (a) loop, (b) device, (c) host, DeepGEMM's
# columns, each case graded), then the interop checks if time is left. Logs under ${OUT:-/tmp/launchperf_out}.
set -u
OUT=${OUT:-/tmp/launchperf_out}; mkdir -p "$OUT"
WHL=${WHL:-$(ls -d .whl ../../.whl 2>/dev/null | head -1)}
export PYTHONUNBUFFERED=1
T0=$(date +%s)
rm -rf /tmp/dg && python3 -m zipfile -e "$WHL"/tokenspeed_deepgemm-*.whl /tmp/dg
export PYTHONPATH=/tmp/dg:$PWD
for c in /usr/local/cuda /usr/local/cuda-13.0; do [ -x "$c/bin/nvcc" ] && export CUDA_HOME=$c && break; done
nvidia-smi -L; lscpu | grep -m1 "Model name"
step() { local name=$1 limit=$2; shift 2; echo "== $name (t=$(( $(date +%s) - T0 )) s): $*";
         timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log" | grep -v '^PASS' | tail -45; }
python3 -c "
from rawindexer.backends import get_backend
raw = get_backend('cuda')._raw
print('per-call CUDA route:', 'cuda-bindings' if raw is None else 'ctypes' if raw.shim is None else 'C launcher')"
step graph 60 python3 tests/gpu/test_graph_gpu.py
step host 60 python3 -m rawindexer.bench --host-only
step bench 100 python3 -m rawindexer.bench --quick --reps 20
if [ $(( $(date +%s) - T0 )) -lt 150 ]; then step interop 40 python3 tests/gpu/test_cuda_gpu.py --interop; fi
echo "== done (t=$(( $(date +%s) - T0 )) s)"
