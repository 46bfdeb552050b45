#!/bin/bash
# v10-small (issue 14, helper small14), call 1: the N = 1024 sweep -- every shipped sm_90a design over its host
# knobs (block_m / num_warps / split_n / reverse_rows; tmas with forced splits) beside DeepGEMM, every config graded,
# 4096 x 4096 for reference. From the repo root with rawindexer/_kernels (`make`) and .whl (the DeepGEMM wheel):
#   bash docs/results/small14_call1.sh
set -u
source docs/results/device_common.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
TAIL=60 step small_sweep 170 python3 bench/small_sm90.py --reps 15 --out "$OUT"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
