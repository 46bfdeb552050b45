#!/bin/bash
# Session 9, the H200 call on the shipped build with "wgpr" in "auto" (rawindexer/_kernels after `make`, .whl carried):
#   bash docs/results/session9_final_h200.sh      # results: $OUT/final9.tgz
# The public prefill benchmark (beside DeepGEMM, host cost included), then the checks of the new design: the gpu
# pytest tests that name it (its sweep, the NaN/Inf contract), the quick sweep of api and wgpr, the NaN/Inf contract
# of api and wgpr, CUDA-graph capture, memcheck and racecheck subsets of wgpr. Every step cut to DEADLINE.
# BENCH_ONLY=1: the benchmark alone (a second run).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/final9; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, smoke_step
PACK=$RES/final9${BENCH_ONLY:+_bench}.tgz
DEADLINE=${DEADLINE:-570}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
smoke_step
TAIL=16 run_step bench 170 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
if [ -z "${BENCH_ONLY:-}" ]; then
  run_step pytest_gpu 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_cuda_gpu.py -k "row_block_pairs or nan_contract"
  run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs wgpr
  run_step graph 30 python3 tests/gpu/test_graph_gpu.py
  run_step memcheck 60 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs wgpr
  run_step racecheck_wgpr 60 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 32,64 --designs wgpr
fi
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
