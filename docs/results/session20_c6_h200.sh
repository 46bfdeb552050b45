#!/bin/bash
# Session 20, sixth H200 call (issue 14), from the repo root with rawindexer/_kernels (the shipped build), .whl and
# .v/qa carried (.v/qa: `RAWINDEXER_RACE_BUILD=.v/qa python bench/race_sm90.py --build --build-only tmaq
# --define TMAQ_Q_AHEAD=1`):   bash docs/results/session20_c6_h200.sh      # results: $OUT/session20_c6.tgz
# 1. Experiment TMAQ_Q_AHEAD (tmaq's Q boxes issued by their own lane as soon as a buffer is free) raced beside the
#    shipped tmaq, two rounds, graded in round 1.
# 2. Its quick sweep and racecheck (H 64, 1100 x 256: blocks reuse their Q buffers).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session20_c6; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run, race_ab
PACK=$RES/session20_c6.tgz
DEADLINE=${DEADLINE:-300}
race_ab ship "$PWD/rawindexer/_kernels" qa "$PWD/.v/qa" 2 tmaq
RAWINDEXER_KERNEL_DIR=$PWD/.v/qa TAIL=4 run_step sweep 40 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmaq
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RAWINDEXER_KERNEL_DIR=$PWD/.v/qa TAIL=4 run_step racecheck 60 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --racecheck-shapes 1100x256 --designs tmaq
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
