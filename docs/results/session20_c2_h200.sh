#!/bin/bash
# Session 20, second H200 call (issue 14), from the repo root with rawindexer/_kernels (the shipped build: `make`,
# "tmaq" now taking Q through its own tensor map), .whl and .v/s20c carried
# (.v/s20c: `RAWINDEXER_RACE_BUILD=.v/s20c python bench/race_sm90.py --build --build-only tmas,tmaq,tmast`):
#   bash docs/results/session20_c2_h200.sh      # results: $OUT/session20_c2.tgz
# 1. Experiment "tmast" (tmas with Q as four TMA boxes on a barrier only the consumers wait on) raced beside "tmas"
#    and DeepGEMM, two rounds, both orders; graded in round 1.
# 2. The shipped build: graph capture (torch at a wgpr and a tmaq shape, CuPy) and the per-(K, Q)-pointer maps; the
#    NaN/Inf contract of api and tmaq; the quick sweep of api and tmaq; the public benchmark, settled.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session20_c2; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run
PACK=$RES/session20_c2.tgz
DEADLINE=${DEADLINE:-570}
V=$PWD/.v/s20c
RACE_LIMIT=80 race_run r1 "$V" tmas,tmast --grade tmast
RACE_LIMIT=60 race_run r2 "$V" tmast,tmas --no-grade
TAIL=30 run_step graph_maps 60 python3 tests/gpu/test_graph_gpu.py
TAIL=4 run_step nan 50 python3 tests/gpu/test_cuda_gpu.py --nan --designs tmaq
TAIL=4 run_step sweep 80 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmaq
TAIL=16 run_step bench 260 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
