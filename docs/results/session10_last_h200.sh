#!/bin/bash
# Session 10, third H200 call (issues 14 and 10), from the repo root with rawindexer/_kernels (candidate: tmas as call
# 2, tmasb4 and the decode tma kernels with their Q copies on unsigned offsets of one contiguous span), .whl,
# .v/s9raceb (race build of tmas, tmasb4 at 96c2294) and .v/p9 (session 9's decode kernels) carried:
#   bash docs/results/session10_last_h200.sh      # results: $OUT/session10_last.tgz
# race_s9*/race_s10d*: tmas, tmasb4 old / new (.v/s10d = this commit's race build), DeepGEMM in each, new graded;
# ab: bench/paged_ab.py p9 / s10 twice each (decode7 cases); then the candidate's checks: sweep + NaN/Inf contract of
# tmasb4, the decode tma sweep, the public benchmark, racecheck of tmasb4 (H 64) and of the decode kernel (split 1),
# memcheck of tmasb4 and of the quick decode sweep.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session10_last; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, smoke_step, race_ab
PACK=$RES/session10_last.tgz
DEADLINE=${DEADLINE:-575}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
smoke_step
race_ab s9 "$PWD/.v/s9raceb" s10d "$PWD/.v/s10d" 1 tmas,tmasb4
AB_CHILD_S=60 TAIL=30 run_step ab 150 python3 bench/paged_ab.py p9=.v/p9 s10=rawindexer/_kernels p9=.v/p9 s10=rawindexer/_kernels --cases decode7 --log "$OUT/ab.md"
run_step sweep 40 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmasb4
run_step pytest_gpu 40 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_cuda_gpu.py -k "nan_contract"
run_step paged_sweep 70 python3 tests/gpu/test_paged_gpu.py --design tma
TAIL=16 run_step bench 70 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
run_step racecheck_tmasb4 70 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --designs tmasb4
run_step paged_race_s1 50 $RACE python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
run_step memcheck 40 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs tmasb4
run_step paged_memcheck 40 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
