#!/bin/bash
# Session 8, second H200 call: the decode interior peel (PAGED_TMA_PEEL) beside session 7's decode kernel.
# From the repo root with rawindexer/_kernels (candidate: prefill v14 + decode built with PAGED_TMA_PEEL 1), .v/s7,
# .v/dpeeld (decode D = 128 tma kernels, PEEL + DESC_ADD) and .whl carried:
#   bash docs/results/session8_decode_h200.sh      # results: $OUT/session8_decode.tgz
#   paged_sweep, paged_race_s1   the candidate's decode tma sweep; racecheck at split 1
#   ab          bench/paged_ab.py s7 / peel / peel+desc, three times each (decode7 case set)
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session8_decode; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session8_decode.tgz
DEADLINE=${DEADLINE:-400}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
run_step paged_sweep 80 python3 tests/gpu/test_paged_gpu.py --design tma
run_step paged_race_s1 60 $RACE python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
AB_CHILD_S=70 TAIL=30 run_step ab 240 python3 bench/paged_ab.py s7=.v/s7 peel=rawindexer/_kernels peeld=.v/dpeeld s7=.v/s7 peel=rawindexer/_kernels peeld=.v/dpeeld s7=.v/s7 peel=rawindexer/_kernels peeld=.v/dpeeld --cases decode7 --log "$OUT/ab.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
