#!/bin/bash
# Session 14, third H200 call (issue 10), from the repo root with rawindexer/_kernels (shipped), .whl and .v/bal
# (python bench/paged_tma_variant.py .v/bal --all -DPAGED_TMA_BALANCED=1: splits planned on the device from the real
# lengths; the manifest marks the tma entries balanced_split, so the host launches split_n + 1 blocks per sequence):
#   bash docs/results/session14_c3_h200.sh      # results: $OUT/session14_c3.tgz
# (call 2 numbered the blocks b-major, so the spare blocks ran among the first wave and real parts waited for a
# second one; this build numbers them in launch order, split-major.)
# smoke, the sweep (heuristic and split 3), the A/B shipped / bal twice on uniform and on ragged lengths (decode7
# cases, DeepGEMM in the same call), racecheck of the quick sweep at split 1 and 2.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session14_c3; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session14_c3.tgz
DEADLINE=${DEADLINE:-540}
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
BAL=$PWD/.v/bal
run_step smoke 30 env RAWINDEXER_KERNEL_DIR=$BAL python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
TAIL=4 run_step sweep_bal 40 env RAWINDEXER_KERNEL_DIR=$BAL python3 tests/gpu/test_paged_gpu.py --design tma
TAIL=4 run_step sweep_bal_s3 40 env RAWINDEXER_KERNEL_DIR=$BAL python3 tests/gpu/test_paged_gpu.py --design tma --split 3
AB_CHILD_S=60 TAIL=20 run_step ab_ragged 150 python3 bench/paged_ab.py main=rawindexer/_kernels bal=$BAL main=rawindexer/_kernels bal=$BAL --cases decode7 --ragged --log "$OUT/ab_ragged.md"
AB_CHILD_S=60 TAIL=20 run_step ab 150 python3 bench/paged_ab.py main=rawindexer/_kernels bal=$BAL main=rawindexer/_kernels bal=$BAL --cases decode7 --log "$OUT/ab.md"
TAIL=4 run_step race_s1 40 env RAWINDEXER_KERNEL_DIR=$BAL "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
TAIL=4 run_step race_s2 40 env RAWINDEXER_KERNEL_DIR=$BAL "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 2
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
