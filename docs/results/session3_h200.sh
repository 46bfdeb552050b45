#!/bin/bash
# The end-of-session H200 run of the merged main (issues 9, 13, 14), in one device call, from the repo root with
# rawindexer/_kernels carried (code objects, manifest, C launcher; sm_90a cubins built by the PyPI nvcc) and the
# DeepGEMM wheel under .whl/:
#   bash docs/results/session3_h200.sh
# Steps, each under its own time limit, logs under ${OUT:-/tmp/s3_out}:
#   info       python -m rawindexer info
#   nan        NaN/Inf contract of the sm_90a twin: the default (auto), mma, wg and tmas launched directly
#   sweep      small-shape sweep of the default (auto: wg below N = 4096, tmas from there) with the per-logit gate,
#              plus wg, tmas and mma launched directly on small shapes
#   graph      CUDA graph capture and replay (fp8_mqa_logits, Indexer, Indexer.bind; torch and CuPy)
#   sanitizer  compute-sanitizer memcheck on a small subset, default and tmas
#   bench      python -m rawindexer.bench: serving loop (a), device time (b), host us (c), DeepGEMM (d), host table
#   interop    torch / CuPy / JAX checks
set -u
OUT=${OUT:-/tmp/s3_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
T0=$(date +%s)
rm -rf /tmp/dg && python3 -m zipfile -e .whl/tokenspeed_deepgemm-*.whl /tmp/dg && export PYTHONPATH=/tmp/dg:$PWD
for c in /usr/local/cuda /usr/local/cuda-13.0; do [ -x "$c/bin/nvcc" ] && export CUDA_HOME=$c && break; done
nvidia-smi -L
step() { local name=$1 limit=$2; shift 2; echo "== $name (t=$(( $(date +%s) - T0 )) s): $*";
         timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$? t=$(( $(date +%s) - T0 )) s" >> "$OUT/$name.log";
         grep -v '^PASS' "$OUT/$name.log" | tail -${TAIL:-12}; }
step info 30 python3 -m rawindexer info
step nan 60 python3 tests/gpu/test_cuda_gpu.py --nan
step sweep 170 python3 tests/gpu/test_cuda_gpu.py --quick --designs wg,tmas,mma
step graph 60 python3 tests/gpu/test_graph_gpu.py
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
step sanitizer 100 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs tmas
TAIL=30 step bench 170 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
step interop 60 python3 tests/gpu/test_cuda_gpu.py --interop
tar -C "$OUT" -cf "$OUT/bench.tar" bench 2>/dev/null && rm -rf "$OUT/bench"  # the device returns at most 8 files
echo "== done (t=$(( $(date +%s) - T0 )) s)"
