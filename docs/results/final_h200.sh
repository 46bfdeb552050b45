#!/bin/bash
# The end-of-session H200 run of the merged main (issues 9, 10, 11, 15), in one device call, from the repo root
# with rawindexer/_kernels carried (code objects, manifest, C launcher; the sm_90a cubins built by the PyPI nvcc
# 13.0.88, byte-identical to the system nvcc's) and the DeepGEMM wheel under .whl/:
#   bash docs/results/final_h200.sh
# Steps, each under its own time limit, logs under ${OUT:-/tmp/final_out}:
#   info         python -m rawindexer info (toolchain that built each target, driver match)
#   nan          NaN/Inf contract of the sm_90a twin (api = wg, and mma)
#   sweep        the seed's sweep on small shapes, api (wg) and mma, with the per-logit gate of each design
#   paged        fp8_paged_mqa_logits sweep (f16 and fp8 designs), graph / allocation checks
#   bench        python -m rawindexer.bench: serving loop (a), device time (b), host us (c), DeepGEMM (d)
#   paged_bench  python -m rawindexer.bench --paged --quick: decode time, read bandwidth, DeepGEMM
set -u
OUT=${OUT:-/tmp/final_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
rm -rf /tmp/dg && python3 -m zipfile -e .whl/tokenspeed_deepgemm-*.whl /tmp/dg && export PYTHONPATH=/tmp/dg:$PWD
for c in /usr/local/cuda /usr/local/cuda-13.0; do [ -x "$c/bin/nvcc" ] && export CUDA_HOME=$c && break; done
nvidia-smi -L
step() { local name=$1 limit=$2; shift 2; echo "== $name (t=$(( $(date +%s) - T0 )) s): $*";
         timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log";
         grep -v '^PASS' "$OUT/$name.log" | tail -${TAIL:-12}; }
step info 30 python3 -m rawindexer info
step nan 60 python3 tests/gpu/test_cuda_gpu.py --nan
step sweep 140 python3 tests/gpu/test_cuda_gpu.py --quick --mma
step paged 130 python3 tests/gpu/test_paged_gpu.py
step bench 150 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
TAIL=20 step paged_bench 80 python3 -m rawindexer.bench --paged --quick
tar -C "$OUT" -cf "$OUT/bench.tar" bench 2>/dev/null && rm -rf "$OUT/bench"  # the device returns at most 8 files
echo "== done (t=$(( $(date +%s) - T0 )) s)"
