#!/bin/bash
# Design "tma" of the sm_90a decode kernel (branch decode2), the final H200 call, run from the repo root with
# rawindexer/_kernels (the final build: PAGED_TMA_ROW_PIPE 1), .whl (DeepGEMM's wheel) and .carry/var_rp0 (the same
# source built with PAGED_TMA_ROW_PIPE 0 by docs/results/paged_build_variant.py: the call-1 loop) carried:
#   bench (fp8, tma vs DeepGEMM, every B) -> tma sweep -> the rp0 build's tma at B 64 and its quick tma sweep ->
#   the full decode sweep (all designs; capped, PASS/FAIL lines streamed so a cut run keeps what finished).
#   bash docs/results/paged_tma_final_h200.sh        # logs under ${OUT:-/tmp/paged_out}, tarred into one file
set -u
OUT=${OUT:-/tmp/paged_out}; mkdir -p "$OUT/logs"; L=$OUT/logs
export PYTHONUNBUFFERED=1 CUDA_HOME=/usr/local/cuda
rm -rf /tmp/dg && python3 -m zipfile -e .whl/tokenspeed_deepgemm-*.whl /tmp/dg && export PYTHONPATH=/tmp/dg:$PWD
T0=$(date +%s)
step() { echo "== $1 (t=$(( $(date +%s) - T0 )) s)"; }
step "bench"
timeout "${BENCH_S:-60}" python3 -m rawindexer.bench --paged --variants fp8,tma --batches 64,256,8,1 --log "$L/paged_bench.md" > "$L/bench.out" 2>&1
echo "rc=$?"; grep -v '^#' "$L/bench.out" | grep tma | cut -c1-120
step "sweep tma"
timeout "${SWEEP_TMA_S:-35}" python3 tests/gpu/test_paged_gpu.py --variant tma --log "$L/paged_sweep_tma.log" > "$L/sweep_tma.out" 2>&1
echo "rc=$?"; grep -v '^PASS' "$L/sweep_tma.out" | tail -6 | cut -c1-300
step "rp0 build: bench tma B 64, quick tma sweep"
RAWINDEXER_KERNEL_DIR=$PWD/.carry/var_rp0 timeout "${RP0_S:-25}" python3 -m rawindexer.bench --paged --variants tma --batches 64 --log "$L/paged_bench_rp0.md" > "$L/bench_rp0.out" 2>&1
echo "rc=$?"; grep tma "$L/bench_rp0.out" | cut -c1-120
RAWINDEXER_KERNEL_DIR=$PWD/.carry/var_rp0 timeout 15 python3 tests/gpu/test_paged_gpu.py --variant tma --quick --log "$L/paged_sweep_rp0_quick.log" > "$L/sweep_rp0.out" 2>&1
echo "rc=$?"; tail -2 "$L/sweep_rp0.out"
step "sweep all designs"
timeout "${SWEEP_S:-70}" python3 tests/gpu/test_paged_gpu.py --log "$L/paged_sweep.log" > "$L/sweep.out" 2>&1
echo "rc=$?"; grep -v '^PASS' "$L/sweep.out" | tail -8 | cut -c1-300; grep -c '^PASS' "$L/sweep.out"
step done
tar -C "$OUT" -czf "$OUT/logs.tgz" logs && rm -rf "$OUT/logs"
