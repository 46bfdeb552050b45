#!/bin/bash
# Session 20, fifth H200 call (issue 14): the shipped build again (as call 3), from the repo root with
# rawindexer/_kernels and .whl carried:   bash docs/results/session20_c5_h200.sh   # results: $OUT/session20_c5.tgz
# 1. What a new pointer costs the tensor-map designs' prepared launch (bench/tensor_map_cost.py).
# 2. A second settled public benchmark of the same build, for the run-to-run spread of call 3's figures.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session20_c5; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session20_c5.tgz
DEADLINE=${DEADLINE:-400}
TAIL=8 run_step map_cost 60 python3 bench/tensor_map_cost.py
TAIL=6 run_step bench 220 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
