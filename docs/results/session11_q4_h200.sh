#!/bin/bash
# Session 11, fifth H200 call (issue 14): "tmaq" with four Q buffers and two row blocks' copies in flight (.v/q4,
# this commit's race build) beside the shipped form (.v/q2 = call 2's race build, SASS-identical to the shipped
# tmaq), from the repo root with rawindexer/_kernels, .whl, .v/q2 and .v/q4 carried:
#   bash docs/results/session11_q4_h200.sh      # results: $OUT/session11_q4.tgz
# race_q4a: tmaq (q4) graded; race_q2d: q2's tmaq; race_q4b: q4 again; race_q2e: q2 again; q4's quick sweep.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session11_q4; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run
PACK=$RES/session11_q4.tgz
DEADLINE=${DEADLINE:-300}
Q2=$PWD/.v/q2 Q4=$PWD/.v/q4
RACE_LIMIT=80 race_run q4a "$Q4" tmaq --grade tmaq
RACE_LIMIT=60 race_run q2d "$Q2" tmaq --no-grade
RACE_LIMIT=60 race_run q4b "$Q4" tmaq --no-grade
RACE_LIMIT=60 race_run q2e "$Q2" tmaq --no-grade
RAWINDEXER_KERNEL_DIR=$Q4 run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmaq
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
