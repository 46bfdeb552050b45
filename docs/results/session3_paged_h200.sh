#!/bin/bash
# Decode on the H200 at the end of session 3 (main with the decode2 merge: default "auto" = tma at block size 64),
# one device call from the repo root with rawindexer/_kernels and .whl (DeepGEMM) carried:
#   bash docs/results/session3_paged_h200.sh
#   sweep  python3 tests/gpu/test_paged_gpu.py: every design (f16, fp8, tma) over the sweep + graph/allocation checks
#   bench  python3 -m rawindexer.bench --paged: B {1,8,64,256} x context {4096,32768,131072} x next_n {1,2} x H {32,64},
#          every design, against DeepGEMM's fp8_paged_mqa_logits, read bandwidth measured in the same run
set -u
OUT=${OUT:-/tmp/s3p_out}; mkdir -p "$OUT"; export PYTHONUNBUFFERED=1 CUDA_HOME=/usr/local/cuda
rm -rf /tmp/dg && python3 -m zipfile -e .whl/tokenspeed_deepgemm-*.whl /tmp/dg && export PYTHONPATH=/tmp/dg:$PWD
T0=$(date +%s)
step() { local name=$1 limit=$2; shift 2; echo "== $name (t=$(( $(date +%s) - T0 )) s): $*";
         timeout "$limit" "$@" > "$OUT/$name.out" 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 )) s" >> "$OUT/$name.out";
         grep -v '^PASS' "$OUT/$name.out" | tail -${TAIL:-10} | cut -c1-200; }
step sweep 200 python3 tests/gpu/test_paged_gpu.py --log "$OUT/paged_sweep.log"
TAIL=14 step bench 240 python3 -m rawindexer.bench --paged --log "$OUT/paged_bench.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
