#!/bin/bash
# Session 10, first H200 call (issue 14): the RS-form Q staging in whole 16-byte k-slot groups (QRsItem) against
# session 9's 4-byte scatter, and tmas's Q / weight cp.async staging on unsigned offsets of one contiguous span,
# then the checks of every design whose binary they changed.
#   bash docs/results/session10_stage_h200.sh      # results: $OUT/session10_stage.tgz
# .v/s9race: race build of wg, wgpr, tmas at 96c2294 (session 9's shipped kernels but for shared-memory base
# immediates); .v/s10t: the same designs (and tmasb4, unchanged) at this commit (wg, wgpr, tmas SASS-identical to the
# shipped rawindexer/_kernels).
# Two rounds of old / new races (DeepGEMM in each, the new build graded in round 1); then on the shipped build:
# the gpu pytest tests of wgpr's sweep and the NaN/Inf contract, the quick sweep of api, wg, wgr, ws, wgpr, tmas,
# racecheck of wg, wgpr and tmas at H 32 and 64, and the public prefill benchmark with what time is left.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session10_stage; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, smoke_step, race_ab
PACK=$RES/session10_stage.tgz
DEADLINE=${DEADLINE:-570}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
smoke_step
race_ab s9 "$PWD/.v/s9race" s10 "$PWD/.v/s10t" 2 wg,wgpr,tmas
run_step pytest_gpu 90 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_cuda_gpu.py -k "row_block_pairs or nan_contract"
run_step sweep 100 python3 tests/gpu/test_cuda_gpu.py --quick --designs wg,wgr,ws,wgpr,tmas
run_step racecheck 150 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 32,64 --designs wg,wgpr,tmas
TAIL=16 run_step bench 100 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
