#!/bin/bash
# v9 (issue 14, helper epi14), call 3: the shipped tmas (v9, WKEEP at H >= 64) against wg and DeepGEMM in one run
# (so "auto" = tmas at N >= 4096, wg below, is derived from one run), and the NaN/Inf contract (api, mma, wg, tmas).
# From the repo root with rawindexer/_kernels, build/race and .whl (the DeepGEMM wheel) present:
#   bash docs/results/epi14_h200_call3.sh
set -u
OUT=${OUT:-/tmp/epi14_out}; mkdir -p "$OUT"
python3 -m zipfile -e .whl/tokenspeed_deepgemm-*.whl /tmp/dg
export PYTHONPATH=/tmp/dg:$PWD PYTHONUNBUFFERED=1 CUDA_HOME=/usr/local/cuda
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "== $name (t=$(( $(date +%s) - T0 )) s)";
         timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 )) s" >> "$OUT/$name.log";
         grep -v '^PASS' "$OUT/$name.log" | grep -v "cuGetProcAddress\|^========= $" | tail -${TAIL:-6}; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
TAIL=22 step epi14_race3 200 python3 bench/race_sm90.py --impls wg,tmas --grade tmas --reps 10 --out "$OUT"
step epi14_nan 90 python3 tests/gpu/test_cuda_gpu.py --nan
echo "== done (t=$(( $(date +%s) - T0 )) s)"
