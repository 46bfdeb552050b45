#!/bin/bash
# Session 13, fourth H200 call (issue 10), from the repo root with rawindexer/_kernels (shipped), .whl, .v/nx1all
# (python bench/paged_tma_variant.py .v/nx1all --all -DPAGED_TMA_NEXT_PREFETCH=1) and .v/nx2 (the same with 2, D 128)
# carried:
#   bash docs/results/session13_c4_h200.sh      # results: $OUT/session13_c4.tgz
# smoke, the quick decode tma sweep and its memcheck on nx1all, then the A/B shipped / nx1 / nx2 twice (decode7 cases,
# DeepGEMM in the same call).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session13_c4; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session13_c4.tgz
DEADLINE=${DEADLINE:-540}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
NX1=$PWD/.v/nx1all
run_step smoke 40 env RAWINDEXER_KERNEL_DIR=$NX1 python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
TAIL=6 run_step paged_sweep 90 env RAWINDEXER_KERNEL_DIR=$NX1 python3 tests/gpu/test_paged_gpu.py --design tma
TAIL=6 run_step paged_memcheck 60 env RAWINDEXER_KERNEL_DIR=$NX1 "$SAN" --tool memcheck --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma
AB_CHILD_S=60 TAIL=30 run_step ab 260 python3 bench/paged_ab.py main=rawindexer/_kernels nx1=$NX1 nx2=.v/nx2 main=rawindexer/_kernels nx1=$NX1 nx2=.v/nx2 --cases decode7 --log "$OUT/ab.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
