#!/bin/bash
# Session 8, one H200 call: the candidate (rawindexer/_kernels: TMA_PEEL_INTERIOR 1 for prefill, PAGED_TMA_DESC_ADD 1
# for decode) beside session 7's shipped build, DeepGEMM in every run. From the repo root with rawindexer/_kernels,
# .v/s7 (session 7's shipped kernel directory), .v/dsl (decode DESC_ADD + producer-only suspend hint,
# -DPAGED_TMA_PRODUCER_SUSPEND_NS=0x989680) and .whl carried:
#   bash docs/results/session8_ab_h200.sh      # results: $OUT/session8_ab.tgz
#   smoke       the candidate's public prefill call and the decode tma kernel, once each
#   race        bench/race_sm90.py --impls wg,tmas,tmasb4, each build as RAWINDEXER_RACE_BUILD, s7 / new three times
#               (DeepGEMM in every run), the candidate graded in its first run
#   sweep, nan  the candidate: api + wg + tmas + tmasb4 quick sweep, NaN/Inf contract; decode tma sweep
#   ab          bench/paged_ab.py s7 / new / dsl, three times each (decode7 case set)
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session8_ab; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, smoke_step, race_ab
PACK=$RES/session8_ab.tgz
DEADLINE=${DEADLINE:-570}
NEW=$PWD/rawindexer/_kernels OLD=$PWD/.v/s7
smoke_step
race_ab s7_ "$OLD" new "$NEW" 3 wg,tmas,tmasb4
run_step sweep 70 python3 tests/gpu/test_cuda_gpu.py --quick --designs wg,tmas,tmasb4
run_step nan 50 python3 tests/gpu/test_cuda_gpu.py --nan
run_step paged_sweep 80 python3 tests/gpu/test_paged_gpu.py --design tma
AB_CHILD_S=70 TAIL=30 run_step ab 200 python3 bench/paged_ab.py s7=.v/s7 new=rawindexer/_kernels dsl=.v/dsl s7=.v/s7 new=rawindexer/_kernels dsl=.v/dsl s7=.v/s7 new=rawindexer/_kernels --cases decode7 --log "$OUT/ab.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
