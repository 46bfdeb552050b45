#!/bin/bash
# Session 7, the final H200 call on the shipped build (rawindexer/_kernels after `make`, .whl carried):
#   bash docs/results/session7_final_h200.sh      # results: $OUT/final7.tgz
# The public prefill benchmark (beside DeepGEMM, host cost included) and the decode benchmark, then the checks:
# NaN/Inf contract, quick sweep (api, wg, tmas, tmasb4), CUDA-graph capture, decode sweep and racecheck, racecheck
# of tmas / tmasb4 at H = 64 (their tile loop changed), memcheck subset, interop. Every step cut to DEADLINE.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/final7; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/final7.tgz
DEADLINE=${DEADLINE:-560}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
TAIL=16 run_step bench 150 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
TAIL=60 run_step paged_bench 150 python3 -m rawindexer.bench --paged --log "$OUT/paged_bench.md"
run_step nan 40 python3 tests/gpu/test_cuda_gpu.py --nan
run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs wg,tmas,tmasb4
run_step graph 30 python3 tests/gpu/test_graph_gpu.py
run_step paged_sweep 40 python3 tests/gpu/test_paged_gpu.py --design tma --log "$OUT/paged_sweep_detail.log"
run_step paged_race_s1 40 $RACE python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
run_step racecheck_h64 70 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --designs tmas,tmasb4
run_step memcheck 60 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs wg,tmas,tmasb4
run_step interop 40 python3 tests/gpu/test_cuda_gpu.py --interop
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
