#!/bin/bash
# Session 6, decode call 1 (issue 10): the key scales out of the ring (PAGED_TMA_GLOBAL_SCALES=1, build .v/gsc from
# `python bench/paged_tma_variant.py .v/gsc rawindexer/_kernels --all -DPAGED_TMA_GLOBAL_SCALES=1`) against the shipped
# build (rawindexer/_kernels), and racecheck of DeepGEMM's paged kernel, which fills its scale ring by TMA and reads it
# with ld.shared as the shipped kernel does. From the repo root with rawindexer/_kernels, .v/gsc and .whl carried:
#   bash docs/results/session6_decode_h200.sh
#   smoke            the candidate on one small N = 128 case (a hang costs 40 s)
#   race_gsc_s1      racecheck of the quick tma sweep at split_n 1 (every block's ring wraps) on the candidate
#   race_{main,gsc,dg}_case  racecheck of one 32 x 16384, H 64, next_n 1 call (rings wrap in all three kernels)
#   sweep_gsc        the tma decode sweep on the candidate
#   ab               shipped vs candidate, twice each, beside DeepGEMM, decode7's cases
set -u
source docs/results/device_common.sh
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RACE="$SAN --tool racecheck --report-api-errors no --error-exitcode 9"
GSC="env RAWINDEXER_KERNEL_DIR=$PWD/.v/gsc"
CASE="--batch 32 --context 16384 --next-n 1 --heads 64 --calls 1"
step smoke 40 $GSC python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64
grep -q '^rc=0' "$OUT/smoke.log" || { tar -C "$OUT" -czf "$OUT/s6_decode_logs.tgz" --exclude '*.tgz' .; exit 1; }
step race_gsc_s1 90 $GSC $RACE python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
step race_main_case 60 $RACE python3 bench/paged_profile.py --impl tma $CASE
step race_gsc_case 60 $GSC $RACE python3 bench/paged_profile.py --impl tma $CASE
step race_dg_case 120 $RACE python3 bench/paged_profile.py --impl dg $CASE
step sweep_gsc 60 $GSC python3 tests/gpu/test_paged_gpu.py --design tma
AB_CHILD_S=70 TAIL=20 step ab 160 python3 bench/paged_ab.py main=rawindexer/_kernels gsc=.v/gsc main=rawindexer/_kernels gsc=.v/gsc --cases decode7 --log "$OUT/ab.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
tar -C "$OUT" -czf "$OUT/s6_decode_logs.tgz" --exclude '*.tgz' .
