#!/bin/bash
# decode7, H200: fewer, longer splits (split_n forced through the API) and the persistent "tma" grid
# (PAGED_TMA_PERSISTENT), beside main's build and DeepGEMM in one call. Run from the root of a tree carrying
# rawindexer/_kernels (main's build), .v/pers (bench/paged_tma_variant.py .v/pers --all -DPAGED_TMA_PERSISTENT=1)
# and .whl (DeepGEMM):
#   bash docs/results/decode7_h200.sh          # logs under ${OUT:-/tmp/d7_out}, tarred into d7_logs.tgz
# Call 1: QUICK=1 RACE=0 bash docs/results/decode7_h200.sh
# Steps (each can be turned off): SMOKE (the persistent build on one small case: a hang costs 40 s), AB
# (bench/paged_ab.py over --cases decode7; entries ":w1"/":w2" force split_n = 1 or 2 waves of the resident
# blocks), SWEEP (tests/gpu/test_paged_gpu.py --design tma on $SWEEP_DIR: the whole tma sweep (QUICK=1: H 64 D 128) with the heuristic,
# then the quick one with several (b, split) units per block: --split 5 --persistent-grid 4 and --split 1
# --persistent-grid 2), RACE (compute-sanitizer racecheck of the quick sweep with --split 5 --persistent-grid 4).
set -u
OUT=${OUT:-/tmp/d7_out}; L=$OUT/logs; mkdir -p "$L"
export PYTHONUNBUFFERED=1 CUDA_HOME=/usr/local/cuda
rm -rf /tmp/dg && python3 -m zipfile -e .whl/tokenspeed_deepgemm-*.whl /tmp/dg && export PYTHONPATH=/tmp/dg:$PWD
T0=$(date +%s)
step() { echo "== $1 (t=$(( $(date +%s) - T0 )) s)"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv,noheader
SWEEP_DIR=${SWEEP_DIR:-.v/pers}
if [ "${SMOKE:-1}" = 1 ]; then
  step "smoke ($SWEEP_DIR)"
  RAWINDEXER_KERNEL_DIR=$PWD/$SWEEP_DIR timeout 40 python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 \
    --next-n 2 --heads 64 > "$L/smoke.out" 2>&1
  rc=$?; echo "smoke rc=$rc"; tail -3 "$L/smoke.out" | cut -c1-200
  [ $rc -eq 0 ] || { tar -C "$L" -czf "$OUT/d7_logs.tgz" .; exit 1; }
fi
AB=${AB:-"main=rawindexer/_kernels w1=rawindexer/_kernels:w1 pers=.v/pers w2=rawindexer/_kernels:w2 main=rawindexer/_kernels"}
if [ -n "$AB" ]; then
  step "A/B: $AB"
  AB_CHILD_S=${AB_CHILD_S:-150} timeout "${AB_S:-420}" python3 bench/paged_ab.py $AB --cases ${AB_CASES:-decode7} \
    --log "$L/ab.md" > "$L/ab.out" 2>&1
  echo "rc=$?"; grep -v '^#\|^$\|^{' "$L/ab.out" | tail -18 | cut -c1-330
fi
if [ "${SWEEP:-1}" = 1 ]; then
  export RAWINDEXER_KERNEL_DIR=$PWD/$SWEEP_DIR
  step "sweep (tma, $SWEEP_DIR${QUICK:+, quick})"
  timeout "${SWEEP_S:-150}" python3 tests/gpu/test_paged_gpu.py ${QUICK:+--quick} --design tma --log "$L/sweep_tma.log" \
    > "$L/sweep.out" 2>&1
  echo "rc=$?"; grep -v '^PASS' "$L/sweep.out" | tail -5 | cut -c1-200
  for g in "5 4" "1 2"; do
    set -- $g
    step "quick sweep (tma, --split $1 --persistent-grid $2)"
    timeout 90 python3 tests/gpu/test_paged_gpu.py --quick --design tma --split "$1" --persistent-grid "$2" \
      --log "$L/sweep_quick_s$1_g$2.log" > "$L/sweep_s$1_g$2.out" 2>&1
    echo "rc=$?"; grep -v '^PASS' "$L/sweep_s$1_g$2.out" | tail -4 | cut -c1-200
  done
  unset RAWINDEXER_KERNEL_DIR
fi
if [ "${RACE:-1}" = 1 ]; then
  SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  step "racecheck (quick tma, --split 5 --persistent-grid 4, $SWEEP_DIR)"
  RAWINDEXER_KERNEL_DIR=$PWD/$SWEEP_DIR timeout "${RACE_S:-150}" "$SAN" --tool racecheck --report-api-errors no \
    --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 5 --persistent-grid 4 \
    > "$L/racecheck_decode.log" 2>&1
  echo "rc=$?"; grep -v '^PASS' "$L/racecheck_decode.log" | tail -6 | cut -c1-200
fi
step done
tar -C "$L" -czf "$OUT/d7_logs.tgz" . && cp "$L/ab.md" "$OUT/" 2>/dev/null; rm -rf "$L"
