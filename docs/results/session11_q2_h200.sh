#!/bin/bash
# Session 11, second H200 call (issue 14): "tmaq" with one Q-buffer release per consumer thread and the producer's
# spans read from global memory (.v/q2, this commit's race build) beside call 1's form (.v/q1), from the repo root
# with rawindexer/_kernels, .whl, .v/q1 and .v/q2 (race builds with the CUDA launcher's .so files) carried:
#   bash docs/results/session11_q2_h200.sh      # results: $OUT/session11_q2.tgz
# race_q2a: wg, wgpr, tmas, tmaq (q2) beside DeepGEMM, tmaq graded; racecheck of tmaq (H 64, shapes where blocks reuse
# their Q buffers); the quick sweep of tmaq; race_q1c: call 1's tmaq alone (A/B); race_q2b: q2 again.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session11_q2; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run
PACK=$RES/session11_q2.tgz
DEADLINE=${DEADLINE:-560}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
Q1=$PWD/.v/q1 Q2=$PWD/.v/q2
RACE_LIMIT=150 race_run q2a "$Q2" wg,wgpr,tmas,tmaq --grade tmaq
RAWINDEXER_KERNEL_DIR=$Q2 run_step racecheck_tmaq 100 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 32,64 --racecheck-shapes 17x76,1100x256 --designs tmaq
RAWINDEXER_KERNEL_DIR=$Q2 run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmaq
RACE_LIMIT=80 race_run q1c "$Q1" tmaq --no-grade
RACE_LIMIT=80 race_run q2b "$Q2" tmaq --no-grade
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
