#!/bin/bash
# Session 6, decode call 2 (issue 10): one arrive per consumer thread on the ring's empty mbarrier
# (PAGED_TMA_THREAD_RELEASE=1, build .v/arr from `python bench/paged_tma_variant.py .v/arr rawindexer/_kernels --all
# -DPAGED_TMA_THREAD_RELEASE=1`) against the shipped build (rawindexer/_kernels). Call 1 (session6_decode_h200.sh) found
# racecheck silent on DeepGEMM's kernel, whose 128 math threads each arrive, and on the global-scales build, which was
# 4-17% slower at N = 128. From the repo root with rawindexer/_kernels, .v/arr and .whl carried:
#   bash docs/results/session6_decode2_h200.sh
set -u
source docs/results/device_common.sh
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
ARR="env RAWINDEXER_KERNEL_DIR=$PWD/.v/arr"
CASE="--batch 32 --context 16384 --next-n 1 --heads 64 --calls 1"
step smoke 40 $ARR python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64
grep -q '^rc=0' "$OUT/smoke.log" || { tar -C "$OUT" -czf /tmp/s6d2.tgz . ; mv /tmp/s6d2.tgz "$OUT/"; exit 1; }
step race_arr_s1 90 $ARR $RACE python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
step race_arr_s2 90 $ARR $RACE python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 2
step race_arr_case 60 $ARR $RACE python3 bench/paged_profile.py --impl tma $CASE
step race_arr_case_n2 60 $ARR $RACE python3 bench/paged_profile.py --impl tma --batch 32 --context 16384 --next-n 2 --heads 64 --calls 1
step sweep_arr 60 $ARR python3 tests/gpu/test_paged_gpu.py --design tma --log "$OUT/sweep_arr_detail.log"
AB_CHILD_S=70 TAIL=20 step ab 170 python3 bench/paged_ab.py main=rawindexer/_kernels arr=.v/arr main=rawindexer/_kernels arr=.v/arr --cases decode7 --log "$OUT/ab.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
tar -C "$OUT" -czf /tmp/s6d2.tgz . && mv /tmp/s6d2.tgz "$OUT/s6_decode2_logs.tgz"
