#!/bin/bash
# Session 6, decode call 4 (issue 10): quad-leader release (PAGED_TMA_THREAD_RELEASE=2, build .v/q8: lane 4g of each
# quad reads the quad's scales, shuffles them to the quad and arrives, 32 arrivals per slot) beside the per-thread
# release (.v/arr, 128) and the shipped build (4), three of each interleaved, with racecheck and the sweep of q8.
# From the repo root with rawindexer/_kernels, .v/arr, .v/q8 and .whl carried:   bash docs/results/session6_decode4_h200.sh
set -u
source docs/results/device_common.sh
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
Q8="env RAWINDEXER_KERNEL_DIR=$PWD/.v/q8"
step smoke 40 $Q8 python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64
grep -q '^rc=0' "$OUT/smoke.log" || exit 1
step race_q8_s1 90 $Q8 $RACE python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
step race_q8_case 60 $Q8 $RACE python3 bench/paged_profile.py --impl tma --batch 32 --context 16384 --next-n 2 --heads 64 --calls 1
step sweep_q8 60 $Q8 python3 tests/gpu/test_paged_gpu.py --design tma
AB_CHILD_S=70 TAIL=20 step ab4 240 python3 bench/paged_ab.py main=rawindexer/_kernels q8=.v/q8 arr=.v/arr main=rawindexer/_kernels q8=.v/q8 arr=.v/arr main=rawindexer/_kernels q8=.v/q8 arr=.v/arr --cases decode7 --log "$OUT/ab4.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
