#!/bin/bash
# Session 11, fourth H200 call (issue 14): the shipped build with "tmaq" in "auto" (qshared_wins: 1024^2 at H 32 / 64,
# 4096^2 at H 32 in the benchmark), from the repo root with rawindexer/_kernels and .whl carried:
#   bash docs/results/session11_final_h200.sh      # results: $OUT/session11_final.tgz
# smoke (public calls), the public benchmark, the NaN/Inf contract, the quick sweep (api + tmaq), graph capture,
# racecheck of tmaq (H 64, shapes where blocks reuse their Q buffers), memcheck subset of tmaq, then one race of the
# shipped build (wg, wgpr, tmas, tmaq beside DeepGEMM) if time is left.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session11_final; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, smoke_step, race_run
PACK=$RES/session11_final.tgz
DEADLINE=${DEADLINE:-570}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
smoke_step
TAIL=16 run_step bench 90 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
run_step pytest_gpu 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_cuda_gpu.py -k "nan_contract"
run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmaq
run_step graph 40 python3 tests/gpu/test_graph_gpu.py
run_step racecheck_tmaq 150 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --racecheck-shapes 17x76,1100x256 --designs tmaq
run_step memcheck 60 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs tmaq
RACE_LIMIT=80 race_run final "$PWD/rawindexer/_kernels" wg,wgpr,tmas,tmaq --no-grade
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
