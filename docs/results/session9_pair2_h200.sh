#!/bin/bash
# Session 9, third H200 call (issue 14): two forms of design "wgpr" beside the shipped "wg" (in each race build),
# DeepGEMM in every run: .v/wgpr (commit 0189600: the pair's tiles interleaved over the two warpgroups, one loop with
# a per-tile interior branch) and .v/wgpr2 (contiguous halves, each row block's segment in wg's peeled loops,
# __launch_bounds__(256, 2)); wgpr2 graded in its first run.
#   bash docs/results/session9_pair2_h200.sh      # results: $OUT/session9_pair2.tgz
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session9_pair2; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run
PACK=$RES/session9_pair2.tgz
DEADLINE=${DEADLINE:-300}
race_run pr2a "$PWD/.v/wgpr2" wg,wgpr --grade wgpr
race_run pr1 "$PWD/.v/wgpr" wg,wgpr --no-grade
race_run pr2b "$PWD/.v/wgpr2" wg,wgpr --no-grade
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
