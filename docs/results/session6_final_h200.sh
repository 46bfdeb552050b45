#!/bin/bash
# The end-of-session-6 H200 run of the merged main (one device call), from the repo root with rawindexer/_kernels (the
# shipped build: prefill auto's balanced design now tmasb4; decode tma with one arrive per consumer thread) and .whl/:
#   bash docs/results/session6_final_h200.sh
# Steps (each cut to the time left before DEADLINE s, the important ones first):
#   nan, sweep, graph, memcheck   the sm_90a prefill kernels as shipped (sweep: api + tmas + tmasb4)
#   paged_race_s1, paged_sweep    racecheck of the decode tma kernel at split_n 1 (rings wrap), its sweep
#   bench            python -m rawindexer.bench --reps 10: the public call against DeepGEMM, the 64 cases
#   racecheck_b4_h64, _h32        racecheck of tmasb4 on the racecheck subset
#   interop          DLPack interop checks
set -u
source docs/results/device_common.sh
DEADLINE=${DEADLINE:-560}
run_step() { local name=$1 limit=$2; shift 2; local left=$(( DEADLINE - ($(date +%s) - T0) ));
             [ "$left" -lt 15 ] && { echo "== $name skipped: ${left} s left"; return; }
             [ "$limit" -gt "$left" ] && limit=$left; step "$name" "$limit" "$@"; }
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
run_step nan 60 python3 tests/gpu/test_cuda_gpu.py --nan
run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmas,tmasb4
run_step graph 40 python3 tests/gpu/test_graph_gpu.py
run_step memcheck 80 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs tmas,tmasb4
run_step paged_race_s1 50 $RACE python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
run_step paged_sweep 50 python3 tests/gpu/test_paged_gpu.py --design tma --log "$OUT/paged_sweep_detail.log"
TAIL=30 run_step bench 130 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
run_step racecheck_b4_h64 80 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --designs tmasb4
run_step racecheck_b4_h32 80 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 32 --designs tmasb4
run_step interop 40 python3 tests/gpu/test_cuda_gpu.py --interop
echo "== done (t=$(( $(date +%s) - T0 )) s)"
(cd "$OUT" && tar -cf /tmp/final.tar . && rm -rf ./* && mv /tmp/final.tar "$OUT/final.tar")
