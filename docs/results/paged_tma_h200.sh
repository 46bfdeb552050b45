#!/bin/bash
# Design "tma" of the sm_90a decode kernel (branch decode2): one H200 call, run from the repo root with
# rawindexer/_kernels and .whl (DeepGEMM's wheel) carried. A smoke sweep of tma first (a hang costs only its timeout);
# then the bench, the target batches first (B 64, 256), then B 1, 8; then the decode sweep of tma (with the top-2048
# recall). f16 / fp8 kernels are unchanged from docs/results/paged_decodeperf_* (578/578 there).
#   bash docs/results/paged_tma_h200.sh            # logs under ${OUT:-/tmp/paged_out}, tarred into one file
set -u
OUT=${OUT:-/tmp/paged_out}; mkdir -p "$OUT/logs"; L=$OUT/logs
export PYTHONUNBUFFERED=1 CUDA_HOME=/usr/local/cuda
rm -rf /tmp/dg && python3 -m zipfile -e .whl/tokenspeed_deepgemm-*.whl /tmp/dg && export PYTHONPATH=/tmp/dg:$PWD
T0=$(date +%s)
step() { echo "== $1 (t=$(( $(date +%s) - T0 )) s)"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
step smoke
timeout "${SMOKE_S:-45}" python3 tests/gpu/test_paged_gpu.py --variant tma --quick --log "$L/paged_tma_smoke.log" > "$L/smoke.out" 2>&1
rc=$?; echo "smoke rc=$rc"; grep -v '^PASS' "$L/smoke.out" | tail -8 | cut -c1-400; grep -c '^PASS' "$L/smoke.out"
V=fp8,tma; [ $rc -eq 0 ] || V=fp8
step "bench large ($V)"
timeout "${BENCH_LARGE_S:-150}" python3 -m rawindexer.bench --paged --variants $V --batches 64,256 --log "$L/paged_bench_large.md" > "$L/bench_large.out" 2>&1
echo "rc=$?"; grep -v '^#' "$L/bench_large.out" | tail -50
step "bench small ($V)"
timeout "${BENCH_SMALL_S:-50}" python3 -m rawindexer.bench --paged --variants $V --batches 1,8 --log "$L/paged_bench_small.md" > "$L/bench_small.out" 2>&1
echo "rc=$?"; tail -30 "$L/bench_small.out"
if [ $rc -eq 0 ]; then
  step "sweep tma"
  timeout "${SWEEP_S:-60}" python3 tests/gpu/test_paged_gpu.py --variant tma --log "$L/paged_sweep_tma.log" > "$L/sweep.out" 2>&1
  echo "rc=$?"; grep -v '^PASS' "$L/sweep.out" | tail -8 | cut -c1-300; grep -c '^PASS' "$L/sweep.out"
fi
step done
tar -C "$OUT" -czf "$OUT/logs.tgz" logs && rm -rf "$OUT/logs"
