#!/bin/bash
# Session 12, sixth H200 call (issue 14), from the repo root with rawindexer/_kernels, .whl and .v/tr2 carried:
#   bash docs/results/session12_c6_h200.sh      # results: $OUT/session12_c6.tgz
# 1. tmaq's timeline with the prologue stamped (.v/tr2: TMAQ_TRACE=1) at 1024^2 multi_req / causal H 64 c0.
# 2. A second run of the public prefill benchmark on the shipped build, settled (--settle 1, the default).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session12_c6; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session12_c6.tgz
DEADLINE=${DEADLINE:-420}
for c in "1024x1024 multi_req" "1024x1024 causal"; do
  set -- $c
  TAIL=40 RAWINDEXER_RACE_BUILD=$PWD/.v/tr2 run_step "trace_${1}_$2" 60 python3 bench/tmaq_trace.py --shape $1 --window $2 --heads 64 --clean 0
done
TAIL=16 run_step bench 330 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
