#!/bin/bash
# Session 8, fifth H200 call (ran at commit 9639d79; the experiment was reverted after it, so RAWINDEXER_SM90_CHUNK_SPLIT no longer exists): the chunked split of "wg" (FLAG_CHUNK_SPLIT, v14-small) on and off in the same build
# (RAWINDEXER_SM90_CHUNK_SPLIT=1 turns it off on the host), DeepGEMM in every run; the candidate's sweep and NaN
# contract. From the repo root with rawindexer/_kernels (the candidate) and .whl carried:
#   bash docs/results/session8_chunk_h200.sh      # results: $OUT/session8_chunk.tgz
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session8_chunk; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session8_chunk.tgz
DEADLINE=${DEADLINE:-300}
K=$PWD/rawindexer/_kernels
for i in 1 2; do
  mkdir -p "$OUT/race_off$i" "$OUT/race_on$i"
  TAIL=3 RAWINDEXER_SM90_CHUNK_SPLIT=1 RAWINDEXER_RACE_BUILD=$K run_step race_off$i 60 python3 bench/race_sm90.py --impls wg --no-grade --reps 5 --out "$OUT/race_off$i"
  G=--no-grade; [ $i = 1 ] && G="--grade wg"
  TAIL=3 RAWINDEXER_RACE_BUILD=$K run_step race_on$i 80 python3 bench/race_sm90.py --impls wg $G --reps 5 --out "$OUT/race_on$i"
done
run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs wg
run_step nan 50 python3 tests/gpu/test_cuda_gpu.py --nan --designs wg
run_step graph 30 python3 tests/gpu/test_graph_gpu.py
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
