#!/bin/bash
# Session 20, third H200 call (issue 14): the shipped build (`make`: "tmas" and "tmaq" take Q through Q's own tensor
# map, v19), from the repo root with rawindexer/_kernels and .whl carried:
#   bash docs/results/session20_c3_h200.sh      # results: $OUT/session20_c3.tgz
# racecheck of tmas (H 32 and 64, shapes with rows past M and SplitN blocks) and of tmaq (buffer reuse); memcheck of
# the sanitizer subset (api, tmas, tmaq); the NaN/Inf contract of every shipped design; the quick sweep (api, tmas,
# tmaq); graph capture and per-pointer maps; the public benchmark, settled.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session20_c3; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, smoke_step
PACK=$RES/session20_c3.tgz
DEADLINE=${DEADLINE:-575}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
smoke_step
TAIL=16 run_step bench 200 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
TAIL=6 run_step graph_maps 40 python3 tests/gpu/test_graph_gpu.py
TAIL=4 run_step nan 50 python3 tests/gpu/test_cuda_gpu.py --nan
TAIL=4 run_step sweep 80 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmas,tmaq
TAIL=6 run_step racecheck_tmas 70 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 32,64 --racecheck-shapes 17x76,128x1024 --designs tmas
TAIL=6 run_step racecheck_tmaq 60 $RACE python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --racecheck-shapes 1100x256 --designs tmaq
TAIL=8 run_step memcheck 60 "$SAN" --tool memcheck python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs tmas,tmaq
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
