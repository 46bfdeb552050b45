#!/bin/bash
# Session 10, fourth H200 call (issue 14): ncu of the shipped "tmas" (auto's choice at 4096^2 H 32; its Q staging on
# unsigned offsets since this session) and of DeepGEMM on 4096^2 multi_req H 32, clean off, with the SMs'
# active-cycle spread, as session 8's profile of the same case (docs/results/session8/session8_profile.tgz).
#   bash docs/results/session10_profile_h200.sh      # results: $OUT/session10_profile.tgz, $OUT/session10_profile.txt
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session10_prof; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session10_profile.tgz
DEADLINE=${DEADLINE:-240}
source docs/results/ncu_common.sh      # NCU_BIN, SECTIONS, M, prof, summary
shape="--rows 4096 --keys 4096 --window multi_req --heads 32"
M=$M,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_elapsed.max
python3 bench/prefill_profile.py --impl dg $shape --no-clean >/dev/null 2>&1   # DeepGEMM's JIT, outside ncu
PROF_LIMIT=80
prof tmas_4096_mr32 '_tmas$' --impl ours $shape
prof dg_4096_mr32 'sm90_fp8_mqa_logits' --impl dg $shape
summary "session 10 H200 profile of tmas, 4096^2 multi_req H 32" "$RES/session10_profile.txt"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
