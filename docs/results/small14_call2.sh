#!/bin/bash
# v10-small (issue 14, helper small14), call 2: the zigzag row order of wg through the public call beside DeepGEMM
# (1024^2, 4096^2, 128 x 32768; at 1024 also the old forward order, other wg grids and tmas), the NaN/Inf contract,
# and the small-shape sweep of the default and of wg. From the repo root with rawindexer/_kernels (`make`) and .whl:
#   bash docs/results/small14_call2.sh
set -u
source docs/results/device_common.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
TAIL=40 step small_confirm 150 python3 bench/small_sm90.py --confirm --reps 20 --out "$OUT"
step nan 60 python3 tests/gpu/test_cuda_gpu.py --nan
step sweep 90 python3 tests/gpu/test_cuda_gpu.py --quick --designs wg
echo "== done (t=$(( $(date +%s) - T0 )) s)"
