#!/bin/bash
# Session 8, third H200 call: "wg" with its interior tiles peeled (WG_PEEL_INTERIOR 1, race build .v/wgpeel) beside
# the v14 build (.v/v14), DeepGEMM in every run; the peel build's wg graded in its first run.
#   bash docs/results/session8_wg_h200.sh      # results: $OUT/session8_wg.tgz
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session8_wg; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_ab
PACK=$RES/session8_wg.tgz
DEADLINE=${DEADLINE:-200}
race_ab v14_ "$PWD/.v/v14" wgpeel "$PWD/.v/wgpeel" 2 wg
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
