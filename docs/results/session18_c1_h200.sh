#!/bin/bash
# Session 18, first H200 call (issue 10), from the repo root with rawindexer/_kernels (the shipped build), .whl and two
# builds carried: .v/wg4a = python bench/paged_tma_variant.py .v/wg4a --all -DPAGED_TMA_WG4=1 (the four-warpgroup
# persistent form at N = 96 / 128, kernels/sm90/paged_tma_wg4.cuh; the other tma kernels the persistent form) and
# .v/wg4r112 = ... -DPAGED_TMA_WG4=1 -DPAGED_TMA_WG4_REGS=112 (setmaxnreg: producers 24, consumers 112; D = 128 only).
#   bash docs/results/session18_c1_h200.sh      # results: $OUT/session18_c1.tgz
# Question: does DeepGEMM's block structure (one block per SM, four math warpgroups sharing Q, one ring and producer
# warp each) close the N = 128 gap? smoke, the tma sweep of wg4a three ways (heuristic; 5 splits on a 4-block grid;
# 1 split on a 2-block grid: several runs per block, b changing inside blocks), then the A/B.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session18_c1; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session18_c1.tgz
DEADLINE=${DEADLINE:-575}
W=$PWD/.v/wg4a; R=$PWD/.v/wg4r112; K=rawindexer/_kernels
run_step smoke 40 bash -c "RAWINDEXER_KERNEL_DIR=$W python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64 && RAWINDEXER_KERNEL_DIR=$R python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64"
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
TAIL=6 run_step sweep_wg4 120 env RAWINDEXER_KERNEL_DIR=$W python3 tests/gpu/test_paged_gpu.py --design tma
TAIL=4 run_step sweep_wg4_p4 45 env RAWINDEXER_KERNEL_DIR=$W python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 5 --persistent-grid 4
TAIL=4 run_step sweep_wg4_p2 45 env RAWINDEXER_KERNEL_DIR=$W python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1 --persistent-grid 2
TAIL=4 run_step sweep_r112 45 env RAWINDEXER_KERNEL_DIR=$R python3 tests/gpu/test_paged_gpu.py --quick --design tma
AB_CHILD_S=90 TAIL=24 run_step ab 300 python3 bench/paged_ab.py main=$K wg4=$W r112=$R main=$K wg4=$W --cases wg4 --log "$OUT/ab.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
