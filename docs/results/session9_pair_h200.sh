#!/bin/bash
# Session 9, second H200 call (issue 14): design "wgpr" (kernels/sm90/prefill_wg_pair.cuh: each block's two
# warpgroups walk a pair of row blocks, R - 1 - x and x, interleaved) beside the v14 build's "wg", DeepGEMM in every
# run; race build .v/wgpr (bench/race_sm90.py --build --build-only wgpr), wgpr graded in its first run.
#   bash docs/results/session9_pair_h200.sh      # results: $OUT/session9_pair.tgz
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session9_pair; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run
PACK=$RES/session9_pair.tgz
DEADLINE=${DEADLINE:-300}
race_run v14a "$PWD/.v/v14" wg --no-grade
race_run pr1 "$PWD/.v/wgpr" wg,wgpr --grade wgpr
race_run v14b "$PWD/.v/v14" wg --no-grade
race_run pr2 "$PWD/.v/wgpr" wg,wgpr --no-grade
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
