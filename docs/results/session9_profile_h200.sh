#!/bin/bash
# Session 9, sixth H200 call (issue 14): ncu of the shipped "wgpr" (auto's choice at 1024^2 H 64) and of DeepGEMM on
# 1024^2 causal H 64, clean off, with the SMs' active-cycle spread (as session9_half_h200.sh did for "wg").
#   bash docs/results/session9_profile_h200.sh      # results: $OUT/session9_profile.tgz, $OUT/session9_profile2.txt
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session9_prof; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session9_profile.tgz
DEADLINE=${DEADLINE:-200}
source docs/results/ncu_common.sh      # NCU_BIN, SECTIONS, M, prof, summary, prof_1024_c64_beside_dg
prof_1024_c64_beside_dg wgpr '_wgpr$' "session 9 H200 profile of wgpr" "$RES/session9_profile2.txt"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
