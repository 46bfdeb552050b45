#!/bin/bash
# Session 8, the final H200 call on the shipped build (rawindexer/_kernels after `make`, .whl carried):
#   bash docs/results/session8_final_h200.sh      # results: $OUT/final8.tgz
# The public prefill benchmark twice (beside DeepGEMM, host cost included) and the decode benchmark, then the checks:
# NaN/Inf contract, quick sweep (api, wg, tmas, tmasb4), CUDA-graph capture, decode sweep and racecheck at split 1,
# racecheck of tmas and tmasb4 at H = 64 and of tmas at H = 32 (one run each: their tile loops changed), memcheck
# subset, interop. Every step cut to DEADLINE.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/final8; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/final8.tgz
DEADLINE=${DEADLINE:-585}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
TAIL=16 run_step bench 150 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
TAIL=60 run_step paged_bench 150 python3 -m rawindexer.bench --paged --log "$OUT/paged_bench.md"
TAIL=16 run_step bench2 150 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench2"
run_step nan 50 python3 tests/gpu/test_cuda_gpu.py --nan
run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs wg,tmas,tmasb4
run_step graph 30 python3 tests/gpu/test_graph_gpu.py
run_step paged_sweep 40 python3 tests/gpu/test_paged_gpu.py --design tma --log "$OUT/paged_sweep_detail.log"
run_step paged_race_s1 40 $RACE python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
run_step interop 40 python3 tests/gpu/test_cuda_gpu.py --interop
run_step racecheck_h64_tmas 75 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --designs tmas
run_step racecheck_h64_tmasb4 75 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --designs tmasb4
run_step memcheck 90 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs wg,tmas,tmasb4
run_step racecheck_h32_tmas 75 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 32 --designs tmas
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
