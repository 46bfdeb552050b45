#!/bin/bash
# Session 12, third H200 call (issue 14), from the repo root with rawindexer/_kernels and .whl carried:
#   bash docs/results/session12_c3_h200.sh      # results: $OUT/session12_c3.tgz
# Where the public benchmark's (b) column at 1024^2 H 64 c0 (the two cases slower than DeepGEMM) differs from the
# race: each entry point timed by the (b) method in alternating rounds, and the GPU activities of the public call.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session12_c3; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session12_c3.tgz
DEADLINE=${DEADLINE:-300}
export RAWINDEXER_RACE_BUILD=$PWD/rawindexer/_kernels   # the race launcher on the shipped build
TAIL=30 run_step entry_mr 90 python3 bench/entry_points_device.py --shape 1024x1024 --heads 64 --window multi_req --clean 0
TAIL=30 run_step entry_causal 90 python3 bench/entry_points_device.py --shape 1024x1024 --heads 64 --window causal --clean 0
TAIL=30 run_step entry_4096 90 python3 bench/entry_points_device.py --shape 4096x4096 --heads 64 --window multi_req --clean 0 --design tmas
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
