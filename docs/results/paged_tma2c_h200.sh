#!/bin/bash
# Decode "tma" with two consumer warpgroups at next_n x H = 128 (branch decode3; needs PAGED_TMA_TWO_CONSUMER_{MIN,MAX}_N
# and paged_kernels.SM90_TMA_TWO_CONSUMER_N set to 128, as in commits a942eb5 and 91292aa: off now), one H200 call. Run from the root of
# a checkout of main (its rawindexer/_kernels carried: the shipped cubin, the baseline "1c") with this branch's tree,
# its rawindexer/_kernels and .whl (DeepGEMM) carried as .carry/decode3 ("2c"):
#   bash .carry/decode3/docs/results/paged_tma2c_h200.sh      # logs under ${OUT:-/tmp/tma2c_out}, tarred into one file
# Every kernel other than the six N = 128 tma kernels (h32 nn4, h64 nn2, h128 nn1; D 64, 128) is SASS-identical
# between the two cubins (cuobjdump -sass, 162 of 168). Order: smoke + quick tma sweep of 2c (a hang costs only its
# timeout), then the bench of 2c and 1c alternately, B 64 first (the N = 128 cases that decide), then B 256.
set -u
MAIN=$PWD; TWO=$MAIN/.carry/decode3
OUT=${OUT:-/tmp/tma2c_out}; mkdir -p "$OUT/logs"; L=$OUT/logs
export PYTHONUNBUFFERED=1 CUDA_HOME=/usr/local/cuda
rm -rf /tmp/dg && python3 -m zipfile -e "$TWO"/.whl/tokenspeed_deepgemm-*.whl /tmp/dg
T0=$(date +%s)
step() { echo "== $1 (t=$(( $(date +%s) - T0 )) s)"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
step "smoke + quick sweep (2c)"
(cd "$TWO" && PYTHONPATH=/tmp/dg:$TWO timeout "${SMOKE_S:-60}" python3 tests/gpu/test_paged_gpu.py --quick --design tma \
   --log "$L/tma2c_sweep_quick.log" > "$L/smoke.out" 2>&1)
rc=$?; echo "smoke rc=$rc"; grep -v '^PASS' "$L/smoke.out" | tail -8 | cut -c1-300; grep -c '^PASS' "$L/smoke.out"
[ $rc -eq 0 ] || { step abort; tar -C "$OUT" -czf "$OUT/logs.tgz" logs; exit 1; }
bench() {  # $1 = 2c | 1c, $2 = batches
  local root=$TWO; [ "$1" = 1c ] && root=$MAIN
  step "bench $1 B $2"
  (cd "$root" && PYTHONPATH=/tmp/dg:$root timeout "${BENCH_S:-75}" python3 -m rawindexer.bench --paged --designs tma \
     --batches "$2" --log "$L/tma2c_bench_${1}_b$2.md" > "$L/bench_${1}_b$2.out" 2>&1)
  echo "rc=$?"; grep '| tma |' "$L/bench_${1}_b$2.out" | cut -c1-150
}
bench 2c 64; bench 1c 64; bench 2c 256; bench 1c 256
step done
tar -C "$OUT" -czf "$OUT/logs.tgz" logs && rm -rf "$OUT/logs"
