#!/bin/bash
# Session 11, first H200 call (issue 14): the "tmaq" experiment (kernels/sm90/prefill_tma_qshared.cuh, PERFORMANCE.md
# v17), from the repo root with rawindexer/_kernels, .whl and .v/q1 (race build: wg, wgpr, tmas, tmasb4, tmaq, with the
# CUDA launcher's .so files copied in) carried:
#   bash docs/results/session11_q1_h200.sh      # results: $OUT/session11_q1.tgz
# race_q1a: wg, wgpr, tmas, tmaq beside DeepGEMM over the 64 cases, tmaq graded; sweep: the quick sweep of tmaq;
# racecheck of tmaq at H 64; race_q1b: the same race again (run-to-run spread), no grading.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session11_q1; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run
PACK=$RES/session11_q1.tgz
DEADLINE=${DEADLINE:-575}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
Q1=$PWD/.v/q1
RACE_LIMIT=150 race_run q1a "$Q1" wg,wgpr,tmas,tmaq --grade tmaq
RAWINDEXER_KERNEL_DIR=$Q1 run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmaq
RAWINDEXER_KERNEL_DIR=$Q1 run_step racecheck_tmaq 90 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --racecheck-shapes 17x76,1100x256 --designs tmaq
RACE_LIMIT=130 race_run q1b "$Q1" wg,wgpr,tmas,tmaq --no-grade
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
