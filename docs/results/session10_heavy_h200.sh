#!/bin/bash
# Session 10, fifth H200 call (issue 14): "tmas" with heaviest-first row blocks (TMA_HEAVY_FIRST) against the shipped
# order, from the repo root with rawindexer/_kernels (the candidate build), .whl, .v/s10d (race build of the shipped
# tmas) and .v/s10h (race build of the candidate) carried:
#   bash docs/results/session10_heavy_h200.sh      # results: $OUT/session10_heavy.tgz
# smoke; race round 1 (candidate graded); the candidate's quick sweep (api, tmas), NaN/Inf contract, racecheck of tmas
# at H 64 and H 32; the public benchmark; race round 2; memcheck of tmas.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session10_heavy; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, smoke_step, race_run, race_ab
PACK=$RES/session10_heavy.tgz
DEADLINE=${DEADLINE:-330}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
smoke_step
race_ab s10 "$PWD/.v/s10d" hf "$PWD/.v/s10h" 1 tmas
run_step sweep 40 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmas
run_step pytest_gpu 40 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_cuda_gpu.py -k "nan_contract"
run_step racecheck_tmas 90 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64,32 --designs tmas
TAIL=16 run_step bench 60 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
RACE_LIMIT=40 race_run s102 "$PWD/.v/s10d" tmas --no-grade
RACE_LIMIT=40 race_run hf2 "$PWD/.v/s10h" tmas --no-grade
run_step memcheck 40 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs tmas
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
