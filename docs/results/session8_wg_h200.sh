#!/bin/bash
# Session 8, third H200 call: "wg" with its interior tiles peeled (WG_PEEL_INTERIOR 1, race build .v/wgpeel) beside
# the v14 build (.v/v14), DeepGEMM in every run; the peel build's wg graded in its first run.
#   bash docs/results/session8_wg_h200.sh      # results: $OUT/session8_wg.tgz
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session8_wg; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session8_wg.tgz
DEADLINE=${DEADLINE:-200}
for i in 1 2; do
  mkdir -p "$OUT/race_v14_$i" "$OUT/race_wgpeel$i"
  TAIL=3 RAWINDEXER_RACE_BUILD=$PWD/.v/v14 run_step race_v14_$i 60 python3 bench/race_sm90.py --impls wg --no-grade --reps 5 --out "$OUT/race_v14_$i"
  G=--no-grade; [ $i = 1 ] && G="--grade wg"
  TAIL=3 RAWINDEXER_RACE_BUILD=$PWD/.v/wgpeel run_step race_wgpeel$i 80 python3 bench/race_sm90.py --impls wg $G --reps 5 --out "$OUT/race_wgpeel$i"
done
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
