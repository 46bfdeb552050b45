#!/bin/bash
# Session 7, one H200 call: the Q staging by cp.async / loads-first (v13, docs/PERFORMANCE.md) beside the session-6
# build. From the repo root with rawindexer/_kernels (the candidate), .v/s6 (session 6's shipped kernel directory)
# and .whl carried:   bash docs/results/session7_staging_h200.sh     # results: $OUT/session7_staging.tgz
#   smoke       the candidate's public prefill call and the decode tma kernel, once each
#   race        bench/race_sm90.py --impls wg,tmas,tmasb4 on the 64 cases with each build as RAWINDEXER_RACE_BUILD,
#               old / new / old / new (DeepGEMM in every run), the candidate graded
#   sweep, nan  the candidate: api + wg + tmas + tmasb4 quick sweep, NaN/Inf contract; decode tma sweep
#   ab          bench/paged_ab.py s6 / new twice each beside DeepGEMM (decode7 case set)
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session7_staging; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session7_staging.tgz
DEADLINE=${DEADLINE:-540}
NEW=$PWD/rawindexer/_kernels OLD=$PWD/.v/s6
run_step smoke 60 bash -c 'python3 bench/prefill_profile.py --impl ours --rows 1024 --keys 1024 --window causal --heads 64 --calls 2 &&
  python3 bench/prefill_profile.py --impl ours --rows 4096 --keys 4096 --window multi_req --heads 32 --calls 2 &&
  python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64'
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
for i in 1 2; do
  mkdir -p "$OUT/race_old$i" "$OUT/race_new$i"
  TAIL=3 RAWINDEXER_RACE_BUILD=$OLD run_step race_old$i 80 python3 bench/race_sm90.py --impls wg,tmas,tmasb4 --no-grade --reps 5 --out "$OUT/race_old$i"
  G=--no-grade; [ $i = 1 ] && G="--grade wg,tmas,tmasb4"
  TAIL=3 RAWINDEXER_RACE_BUILD=$NEW run_step race_new$i 110 python3 bench/race_sm90.py --impls wg,tmas,tmasb4 $G --reps 5 --out "$OUT/race_new$i"
done
run_step sweep 70 python3 tests/gpu/test_cuda_gpu.py --quick --designs wg,tmas,tmasb4
run_step nan 50 python3 tests/gpu/test_cuda_gpu.py --nan
run_step paged_sweep 80 python3 tests/gpu/test_paged_gpu.py --design tma
AB_CHILD_S=70 TAIL=24 run_step ab 170 python3 bench/paged_ab.py s6=.v/s6 new=rawindexer/_kernels s6=.v/s6 new=rawindexer/_kernels --cases decode7 --log "$OUT/ab.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
