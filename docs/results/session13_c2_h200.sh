#!/bin/bash
# Session 13, second H200 call (issue 10), from the repo root with rawindexer/_kernels (shipped), .whl, .v/tf32 and
# .v/tf32c carried (the decode kernels built with -DPAGED_TMA_TC_REDUCE=2, the head sum as tf32 RS wgmmas; tf32c with
# __launch_bounds__(160, 4) on those kernels at N <= 128; bench/paged_tma_variant.py --all):
#   bash docs/results/session13_c2_h200.sh      # results: $OUT/session13_c2.tgz
# smoke and decode tma sweep (graded per logit against float64) of each, the A/B beside the shipped build (decode7
# cases, twice each, DeepGEMM in the same call), racecheck of tf32c's quick sweep at split 1.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session13_c2; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session13_c2.tgz
DEADLINE=${DEADLINE:-570}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
for v in tf32 tf32c; do
  run_step smoke_$v 40 env RAWINDEXER_KERNEL_DIR=$PWD/.v/$v python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64
  grep -q '^rc=0' "$OUT/smoke_$v.log" || { echo "smoke failed"; pack; exit 1; }
  TAIL=25 run_step paged_sweep_$v 90 env RAWINDEXER_KERNEL_DIR=$PWD/.v/$v python3 tests/gpu/test_paged_gpu.py --design tma
done
AB_CHILD_S=60 TAIL=30 run_step ab 260 python3 bench/paged_ab.py main=rawindexer/_kernels tf32=.v/tf32 tf32c=.v/tf32c main=rawindexer/_kernels tf32=.v/tf32 tf32c=.v/tf32c --cases decode7 --log "$OUT/ab.md"
run_step paged_race_s1 60 env RAWINDEXER_KERNEL_DIR=$PWD/.v/tf32c $RACE python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
