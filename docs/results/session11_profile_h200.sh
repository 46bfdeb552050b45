#!/bin/bash
# Session 11, sixth H200 call (issue 14): ncu of the shipped "tmaq" beside DeepGEMM at the two cases still slower than
# DeepGEMM at 1024^2 (H 64, clean off: causal and multi_req), with the SMs' active-cycle spread, from the repo root
# with rawindexer/_kernels and .whl carried:
#   bash docs/results/session11_profile_h200.sh      # results: $OUT/session11_profile.tgz
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session11_prof; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session11_profile.tgz
DEADLINE=${DEADLINE:-300}
source docs/results/ncu_common.sh      # NCU_BIN, SECTIONS, M, prof, summary
M=$M,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_active.min,sm__cycles_elapsed.max
causal="--rows 1024 --keys 1024 --window causal --heads 64"
mr="--rows 1024 --keys 1024 --window multi_req --heads 64"
python3 bench/prefill_profile.py --impl dg $causal --no-clean >/dev/null 2>&1   # DeepGEMM's JIT, outside ncu
PROF_LIMIT=60
prof tmaq_1024_c64 '_tmaq$' --impl ours $causal
prof dg_1024_c64 'sm90_fp8_mqa_logits' --impl dg $causal
prof tmaq_1024_mr64 '_tmaq$' --impl ours $mr
prof dg_1024_mr64 'sm90_fp8_mqa_logits' --impl dg $mr
summary "session 11 H200 profile of tmaq beside DeepGEMM, 1024^2 H 64, clean off" "$RES/session11_profile.txt"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
