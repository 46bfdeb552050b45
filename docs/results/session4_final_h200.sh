#!/bin/bash
# The end-of-session-4 H200 run of the merged main, one device call from the repo root with rawindexer/_kernels and
# .whl/ carried:  bash docs/results/session4_final_h200.sh   (PAGED=0 skips the decode sweep, PAGED_BENCH=1 adds
# the decode benchmark, RACE_LIMIT bounds the last step)
#   info, nan, sweep, graph, interop, memcheck, racecheck64 (tmas at H 64 and 128)   correctness of the merged sm_90a kernels and launch path
#   bench         python -m rawindexer.bench --reps 10: (a), (a) bound, (b), (c), DeepGEMM, host table
#   paged_sweep, paged_bench   the decode op: every design over the sweep; the --paged benchmark against DeepGEMM
#   racecheck64   compute-sanitizer racecheck of tmas at H 64 and 128 (weights partly in registers there)
# Everything under $OUT ends in one tar (the device returns at most 8 files).
set -u
source docs/results/device_common.sh
step info 30 python3 -m rawindexer info
step nan 60 python3 tests/gpu/test_cuda_gpu.py --nan
step sweep 170 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmas
step graph 60 python3 tests/gpu/test_graph_gpu.py
step interop 60 python3 tests/gpu/test_cuda_gpu.py --interop
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
step memcheck 100 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs tmas
TAIL=40 step bench 240 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
if [ "${PAGED:-1}" = 1 ]; then
  step paged_sweep 200 python3 tests/gpu/test_paged_gpu.py --log "$OUT/paged_sweep_detail.log"
fi
if [ "${PAGED_BENCH:-0}" = 1 ]; then
  TAIL=16 step paged_bench 240 python3 -m rawindexer.bench --paged --log "$OUT/paged_bench.md"
fi
step racecheck64 ${RACE_LIMIT:-200} "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64,128 --designs tmas
(cd "$OUT" && tar -cf /tmp/final.tar . && rm -rf ./* && mv /tmp/final.tar "$OUT/final.tar")
echo "== done (t=$(( $(date +%s) - T0 )) s)"
