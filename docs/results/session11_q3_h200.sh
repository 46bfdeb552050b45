#!/bin/bash
# Session 11, third H200 call (issue 14): "tmaq" with one loader warp per Q buffer (.v/q3, this commit's race build)
# beside call 2's form (.v/q2), from the repo root with rawindexer/_kernels, .whl, .v/q2 and .v/q3 carried:
#   bash docs/results/session11_q3_h200.sh      # results: $OUT/session11_q3.tgz
# race_q3a: wg, wgpr, tmas, tmaq (q3) beside DeepGEMM, tmaq graded; race_q2c: call 2's tmaq; race_q3b: q3 again;
# the quick sweep of q3's tmaq.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session11_q3; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run
PACK=$RES/session11_q3.tgz
DEADLINE=${DEADLINE:-400}
Q2=$PWD/.v/q2 Q3=$PWD/.v/q3
RACE_LIMIT=150 race_run q3a "$Q3" wg,wgpr,tmas,tmaq --grade tmaq
RACE_LIMIT=80 race_run q2c "$Q2" tmaq --no-grade
RACE_LIMIT=80 race_run q3b "$Q3" tmaq --no-grade
RAWINDEXER_KERNEL_DIR=$Q3 run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmaq
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
