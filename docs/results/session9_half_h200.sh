#!/bin/bash
# Session 9, first H200 call (issue 14), run at commit e8fd5dc (the experiment left the source after it): "wg" with
# its tile's wgmma issued as two halves so that one half runs on the tensor cores under the other's head reduce
# (WG_HALF_OVERLAP, kernels/sm90/prefill_wg.cuh), three race builds beside the v14 build (.v/v14), DeepGEMM in every
# run, each candidate graded in its run:
#   .v/half    WG_HALF_OVERLAP=1: pipelined across tiles (150 registers at H 64 D 128: three blocks per SM)
#   .v/half2   WG_HALF_OVERLAP=2: the two halves of one tile back to back (142 registers)
#   .v/half3c  WG_HALF_OVERLAP=3 WG_MIN_BLOCKS=2: as 1 without the interior copy, capped at 128 (H 64: 60 B spilled)
# then ncu of the shipped wg and of DeepGEMM on 1024^2 causal H 64 (clean off), with the SMs' active-cycle spread.
#   bash docs/results/session9_half_h200.sh      # results: $OUT/session9_half.tgz
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session9_half; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run
PACK=$RES/session9_half.tgz
DEADLINE=${DEADLINE:-420}
race_run v14a "$PWD/.v/v14" wg --no-grade
race_run half "$PWD/.v/half" wg --grade wg
race_run half2 "$PWD/.v/half2" wg --grade wg
race_run half3c "$PWD/.v/half3c" wg --grade wg
race_run v14b "$PWD/.v/v14" wg --no-grade
source docs/results/ncu_common.sh      # NCU_BIN, SECTIONS, M, prof, summary, prof_1024_c64_beside_dg
prof_1024_c64_beside_dg wg '_wg$' "session 9 H200 profile" "$OUT/session9_profile.txt"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
