#!/bin/bash
# Session 17, first H200 call (issue 10), from the repo root with rawindexer/_kernels (the shipped build), .whl and one
# build carried: .v/rr = python bench/paged_tma_variant.py .v/rr --all -DPAGED_TMA_ROW_REGS=1 (H 64 next_n 2: two
# one-row N = 64 wgmma -> reduce steps per tile, the weights in registers; the other 166 kernels SASS-identical).
#   bash docs/results/session17_c1_h200.sh      # results: $OUT/session17_c1.tgz
# smoke, the tma sweep of rr, the A/B shipped / rr twice (--cases h64n2, DeepGEMM in the same call), then the public
# decode benchmark of the shipped build (session 16's call 3, never run) as far as the time allows.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session17_c1; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session17_c1.tgz
DEADLINE=${DEADLINE:-575}
C=$PWD/.v/rr; K=rawindexer/_kernels
run_step smoke 30 env RAWINDEXER_KERNEL_DIR=$C python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
TAIL=6 run_step sweep_rr 90 env RAWINDEXER_KERNEL_DIR=$C python3 tests/gpu/test_paged_gpu.py --design tma
AB_CHILD_S=60 TAIL=20 run_step ab 200 python3 bench/paged_ab.py main=$K rr=$C main=$K rr=$C --cases h64n2 --log "$OUT/ab.md"
TAIL=60 run_step paged_bench 170 python3 -m rawindexer.bench --paged --designs tma --log "$OUT/paged_bench.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
