#!/bin/bash
# Session 6, the last prefill call (issue 14): tmas and tmasb4 with 6 (shipped), 4 and 0 kept weight float4 pairs at
# H >= 64 (TMA_KEPT_PAIRS; PERFORMANCE.md "v12 static" ties the epilogue's encoded stalls to those registers), each build
# raced beside DeepGEMM, the 0-pair build graded, swept and NaN-checked. Builds (here, no GPU):
#   RAWINDEXER_RACE_BUILD=$PWD/.v/race_kpN python bench/race_sm90.py --build --build-only tmas,tmasb4 --define TMA_KEPT_PAIRS=N
# From the repo root with rawindexer/_kernels, .v/race_kp{6,4,0} and .whl carried:  bash docs/results/session6_kept_h200.sh
set -u
source docs/results/device_common.sh
for kp in 6 0 4; do
  TAIL=12 step race_kp$kp 60 env RAWINDEXER_RACE_BUILD=$PWD/.v/race_kp$kp python3 bench/race_sm90.py --impls tmas,tmasb4 \
    --no-grade --reps 5 --out "$OUT/kp$kp"
done
step sweep_kp0 40 env RAWINDEXER_KERNEL_DIR=$PWD/.v/race_kp0 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmas,tmasb4
step nan_kp0 30 env RAWINDEXER_KERNEL_DIR=$PWD/.v/race_kp0 python3 tests/gpu/test_cuda_gpu.py --nan --designs tmas,tmasb4
echo "== done (t=$(( $(date +%s) - T0 )) s)"
