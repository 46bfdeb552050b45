#!/bin/bash
# Session 11, seventh H200 call (issue 14): "tmaq" with the producer warp reading 32 row blocks' spans at a time (.v/q5,
# this commit's race build) beside the shipped form (.v/q2 = call 2's race build, SASS-identical to the shipped
# tmaq), from the repo root with rawindexer/_kernels, .whl, .v/q2 and .v/q5 carried:
#   bash docs/results/session11_q5_h200.sh      # results: $OUT/session11_q5.tgz
# race_q5a: tmaq (q5) graded; race_q2d: q2's tmaq; race_q5b: q5 again; race_q2e: q2 again; q5's quick sweep and racecheck (H 64).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session11_q5; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run
PACK=$RES/session11_q5.tgz
DEADLINE=${DEADLINE:-400}
Q2=$PWD/.v/q2 Q5=$PWD/.v/q5
RACE_LIMIT=80 race_run q5a "$Q5" tmaq --grade tmaq
RACE_LIMIT=60 race_run q2d "$Q2" tmaq --no-grade
RACE_LIMIT=60 race_run q5b "$Q5" tmaq --no-grade
RACE_LIMIT=60 race_run q2e "$Q2" tmaq --no-grade
RAWINDEXER_KERNEL_DIR=$Q5 run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmaq
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RAWINDEXER_KERNEL_DIR=$Q5 run_step racecheck_tmaq 100 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --racecheck-shapes 17x76,1100x256 --designs tmaq
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
