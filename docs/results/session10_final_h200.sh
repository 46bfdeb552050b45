#!/bin/bash
# Session 10, second H200 call (issue 14), from the repo root with rawindexer/_kernels (the shipped build: session 9's
# kernels but tmas's unsigned contiguous-span Q staging), .whl, .v/s9race and .v/s10c carried:
#   bash docs/results/session10_final_h200.sh      # results: $OUT/session10_final.tgz
# 1. One more old / new race round: .v/s9race (96c2294) against .v/s10c (commit a561cb8: tmas as shipped, and the
#    experiment of wg / wgpr staging Q from one coalesced load per chunk, 4-byte scatter at unsigned addresses).
# 2. On the shipped build: the NaN/Inf contract tests, the quick sweep of api and tmas, CUDA-graph capture, memcheck
#    and racecheck of tmas (H 64; call 1's three-design racecheck ran past its limit), and the public benchmark.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session10_final; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, smoke_step, race_ab
PACK=$RES/session10_final.tgz
DEADLINE=${DEADLINE:-570}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
smoke_step
race_ab s9 "$PWD/.v/s9race" s10c "$PWD/.v/s10c" 1 wg,wgpr,tmas
run_step pytest_gpu 60 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_cuda_gpu.py -k "nan_contract"
run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmas
run_step graph 40 python3 tests/gpu/test_graph_gpu.py
run_step memcheck 70 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs tmas
TAIL=16 run_step bench 90 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
run_step racecheck_tmas 150 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --designs tmas
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
