#!/bin/bash
# Session 11, eighth H200 call (issue 14): a second run of the public benchmark on the shipped build (run-to-run spread
# of the final call's), from the repo root with rawindexer/_kernels and .whl carried:
#   bash docs/results/session11_bench2_h200.sh      # results: $OUT/session11_bench2.tgz
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session11_bench2; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session11_bench2.tgz
DEADLINE=${DEADLINE:-200}
TAIL=16 run_step bench 120 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
