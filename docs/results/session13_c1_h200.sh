#!/bin/bash
# Session 13, first H200 call (issue 10), from the repo root with rawindexer/_kernels (shipped), .whl and .v/tcall (the
# decode kernels built with -DPAGED_TMA_TC_REDUCE=1: the head sum on the tensor cores, bench/paged_tma_variant.py
# --all) carried:
#   bash docs/results/session13_c1_h200.sh      # results: $OUT/session13_c1.tgz
# smoke of the candidate, its decode tma sweep (graded per logit against float64), the A/B beside the shipped build
# (decode7 cases, twice each, DeepGEMM in the same call), racecheck of its quick sweep at split 1.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session13_c1; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session13_c1.tgz
DEADLINE=${DEADLINE:-570}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
TC=$PWD/.v/tcall
run_step smoke 40 env RAWINDEXER_KERNEL_DIR=$TC python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
TAIL=40 run_step paged_sweep 90 env RAWINDEXER_KERNEL_DIR=$TC python3 tests/gpu/test_paged_gpu.py --design tma
AB_CHILD_S=60 TAIL=30 run_step ab 230 python3 bench/paged_ab.py main=rawindexer/_kernels tc=$TC main=rawindexer/_kernels tc=$TC --cases decode7 --log "$OUT/ab.md"
run_step paged_race_s1 60 env RAWINDEXER_KERNEL_DIR=$TC $RACE python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
