#!/bin/bash
# Session 9, fifth H200 call (issue 14), run at commit b87c221 (the form left the source after it): "wgpr" with
# the partner row block's Q staged by warpgroup 1's cp.async copies while row block 0 runs (WGPR_ASYNC_PARTNER, H 64),
# beside the form measured and shipped first (.v/wgpr2): races of the two race builds (.v/wgpr2, .v/wgpr3), DeepGEMM
# in every run, the candidate graded; then, on the candidate's build in rawindexer/_kernels, the checks of the final
# call and one public benchmark.
#   bash docs/results/session9_async_h200.sh      # results: $OUT/session9_async.tgz
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session9_async; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, smoke_step, race_run
PACK=$RES/session9_async.tgz
DEADLINE=${DEADLINE:-560}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
smoke_step
race_run pr2a "$PWD/.v/wgpr2" wg,wgpr --no-grade
race_run pr3a "$PWD/.v/wgpr3" wg,wgpr --grade wgpr
race_run pr2b "$PWD/.v/wgpr2" wg,wgpr --no-grade
race_run pr3b "$PWD/.v/wgpr3" wg,wgpr --no-grade
run_step pytest_gpu 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_cuda_gpu.py -k "row_block_pairs or nan_contract"
run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs wgpr
run_step graph 30 python3 tests/gpu/test_graph_gpu.py
run_step memcheck 60 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs wgpr
run_step racecheck_wgpr_h64 70 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --designs wgpr
TAIL=16 run_step bench 120 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
