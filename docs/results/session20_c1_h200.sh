#!/bin/bash
# Session 20, first H200 call (issue 14), from the repo root with rawindexer/_kernels, .whl and .v/s20 carried
# (.v/s20: `RAWINDEXER_RACE_BUILD=.v/s20 python bench/race_sm90.py --build --build-only tmas,tmaq,tmaqt`):
#   bash docs/results/session20_c1_h200.sh      # results: $OUT/session20_c1.tgz
# 1. "tmaqt" (tmaq with each row block's Q copied by one TMA box of a second tensor map) raced beside "tmaq" and
#    DeepGEMM, three rounds, both orders; tmaqt graded in round 1.
# 2. tmaqt's quick sweep through the public call (the launch path's per-(K, Q)-pointer maps) and its racecheck
#    (H 64, shapes whose blocks reuse their Q buffers).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session20_c1; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run
PACK=$RES/session20_c1.tgz
DEADLINE=${DEADLINE:-560}
V=$PWD/.v/s20
RACE_LIMIT=100 race_run r1 "$V" tmaq,tmaqt --grade tmaqt
RACE_LIMIT=70 race_run r2 "$V" tmaqt,tmaq --no-grade
RACE_LIMIT=70 race_run r3 "$V" tmaq,tmaqt --no-grade
RAWINDEXER_KERNEL_DIR=$V run_step sweep 70 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmaqt
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RAWINDEXER_KERNEL_DIR=$V run_step racecheck 120 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --racecheck-shapes 17x76,1100x256 --designs tmaqt
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
