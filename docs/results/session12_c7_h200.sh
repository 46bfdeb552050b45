#!/bin/bash
# Session 12, seventh H200 call (issue 14), from the repo root with rawindexer/_kernels (this commit's full build:
# TMAQ_EARLY_START=1), .whl, .v/q2 (session 11's shipped tmaq), .v/es (this commit's tmaq race build) and .v/est (the
# same with TMAQ_TRACE=1) carried:   bash docs/results/session12_c7_h200.sh      # results: $OUT/session12_c7.tgz
# 1. q2 / es races of tmaq (es graded); 2. es's timeline at 1024^2 multi_req H 64 c0; 3. the quick sweep (api, tmaq)
# of the full build; 4. the public prefill benchmark on it, settled; 5. racecheck of its tmaq (H 64).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session12_c7; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run
PACK=$RES/session12_c7.tgz
DEADLINE=${DEADLINE:-330}
RACE_LIMIT=40 race_run q2 "$PWD/.v/q2" tmaq --no-grade
RACE_LIMIT=40 race_run es "$PWD/.v/es" tmaq --grade tmaq
TAIL=40 RAWINDEXER_RACE_BUILD=$PWD/.v/est run_step trace_mr 40 python3 bench/tmaq_trace.py --shape 1024x1024 --window multi_req --heads 64 --clean 0
run_step sweep 40 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmaq
TAIL=16 run_step bench 230 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
run_step racecheck_es 100 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --racecheck-shapes 17x76,1100x256 --designs tmaq
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
