#!/bin/bash
# Session 13, fifth H200 call (issue 10), from the repo root with rawindexer/_kernels (shipped), .whl and .v/dloall
# (python bench/paged_tma_variant.py .v/dloall --all -DPAGED_TMA_DESC_LO=1: the tile loops' wgmma descriptors with
# constant high words, address fields computed once per tile and stepped) carried:
#   bash docs/results/session13_c5_h200.sh      # results: $OUT/session13_c5.tgz
# smoke, the decode tma sweep, the A/B shipped / dlo twice (decode7 cases, DeepGEMM in the same call), racecheck of the
# quick sweep at split 1.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session13_c5; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session13_c5.tgz
DEADLINE=${DEADLINE:-300}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
DLO=$PWD/.v/dloall
run_step smoke 30 env RAWINDEXER_KERNEL_DIR=$DLO python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
TAIL=4 run_step paged_sweep 40 env RAWINDEXER_KERNEL_DIR=$DLO python3 tests/gpu/test_paged_gpu.py --design tma
AB_CHILD_S=60 TAIL=30 run_step ab 150 python3 bench/paged_ab.py main=rawindexer/_kernels dlo=$DLO main=rawindexer/_kernels dlo=$DLO --cases decode7 --log "$OUT/ab.md"
TAIL=4 run_step paged_race_s1 50 env RAWINDEXER_KERNEL_DIR=$DLO "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
