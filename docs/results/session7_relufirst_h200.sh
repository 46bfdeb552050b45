#!/bin/bash
# Session 7, one H200 call: the ReLU applied in place before the head-sum FMA chains (TMA_RELU_FIRST for prefill's
# tmas / tmasb4, PAGED_RELU_FIRST for decode), each beside the build without it. From the repo root with
# rawindexer/_kernels (the base: main with the cp.async Q staging), .v/prf_race (`python bench/race_sm90.py --build
# --build-only tmas,tmasb4 --define TMA_RELU_FIRST=1`, copied from build/race), .v/prf (`python
# bench/paged_tma_variant.py .v/prf rawindexer/_kernels -DPAGED_RELU_FIRST=1`) and .whl carried:
#   bash docs/results/session7_relufirst_h200.sh      # results: $OUT/session7_relufirst.tgz
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session7_rf; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session7_relufirst.tgz
DEADLINE=${DEADLINE:-400}
BASE=$PWD/rawindexer/_kernels RF=$PWD/.v/prf_race
run_step smoke 40 env RAWINDEXER_KERNEL_DIR=$PWD/.v/prf python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64
for i in 1 2; do
  mkdir -p "$OUT/race_base$i" "$OUT/race_rf$i"
  TAIL=2 RAWINDEXER_RACE_BUILD=$BASE run_step race_base$i 70 python3 bench/race_sm90.py --impls tmas,tmasb4 --no-grade --reps 5 --out "$OUT/race_base$i"
  G=--no-grade; [ $i = 1 ] && G="--grade tmas,tmasb4"
  TAIL=2 RAWINDEXER_RACE_BUILD=$RF run_step race_rf$i 90 python3 bench/race_sm90.py --impls tmas,tmasb4 $G --reps 5 --out "$OUT/race_rf$i"
done
run_step paged_sweep_rf 60 env RAWINDEXER_KERNEL_DIR=$PWD/.v/prf python3 tests/gpu/test_paged_gpu.py --quick --design tma
AB_CHILD_S=70 TAIL=24 run_step ab 170 python3 bench/paged_ab.py base=rawindexer/_kernels rf=.v/prf base=rawindexer/_kernels rf=.v/prf --cases decode7 --log "$OUT/ab.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
