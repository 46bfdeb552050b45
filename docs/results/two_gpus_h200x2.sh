#!/bin/bash
# Issue 16 on the nvidia-h200-x2 machine kind (two H200s), in one device call, from the repo root with
# rawindexer/_kernels carried (code objects, manifest, C launcher):
#   bash docs/results/two_gpus_h200x2.sh
# Steps (logs under ${OUT:-/tmp/two_out}):
#   prefill  python3 -m pytest -v -m two_gpus tests/gpu/test_two_gpus.py, then the script form of the same checks
#            (torch on cuda:1 through fp8_mqa_logits, Indexer and Indexer.bind; CuPy under Device(1); two threads,
#            one per GPU; mixed devices: one error, nothing launched)
#   graph    python3 tests/gpu/test_graph_gpu.py (capture and replay, torch and CuPy)
#   decode   tests/gpu/test_paged_gpu.py --checks-only: graph / allocation checks and, with two GPUs, the decode op
#            on cuda:1 (device 1's current stream, no work or allocation on device 0, the current device kept)
set -u
OUT=${OUT:-/tmp/two_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
T0=$(date +%s)
nvidia-smi -L; nvidia-smi topo -m | head -4
step() { local name=$1 limit=$2; shift 2; echo "== $name (t=$(( $(date +%s) - T0 )) s): $*";
         timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"; tail -${TAIL:-15} "$OUT/$name.log"; }
step prefill_pytest 240 python3 -m pytest -v -m two_gpus tests/gpu/test_two_gpus.py
step prefill_script 240 python3 tests/gpu/test_two_gpus.py
step graph 120 python3 tests/gpu/test_graph_gpu.py
step decode 180 python3 tests/gpu/test_paged_gpu.py --checks-only
echo "== done (t=$(( $(date +%s) - T0 )) s)"
