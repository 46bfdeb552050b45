#!/bin/bash
# Session 8 (issue 14), one H200 call, from the repo root with rawindexer/_kernels (the shipped v14 build) and .whl:
#   bash docs/results/session8_profile_h200.sh      # results: $OUT/session8_profile.tgz, $OUT/session8_profile.txt
# ncu's view of the v14 kernels beside DeepGEMM's fp8_mqa_logits (headline metrics: tensor pipe, issue slots, L1 /
# shared throughput, stalls; per-instruction stall samples), one launch each, clean_logits off:
#   the long causal chunk 4096 x 32768 at H 64 (auto: tmas) and at H 32 (auto: tmasb4); 4096 x 4096 multi_req H 32
#   (tmas, still slower than DeepGEMM).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session8_prof; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session8_profile.tgz
DEADLINE=${DEADLINE:-330}
source docs/results/ncu_common.sh      # NCU_BIN, SECTIONS, M, prof, summary
# DeepGEMM JIT-compiles at first use: warm its cache outside ncu
python3 bench/prefill_profile.py --impl dg --rows 4096 --keys 4096 --window multi_req --heads 32 --no-clean >/dev/null 2>&1
python3 bench/prefill_profile.py --impl dg --rows 4096 --keys 32768 --window causal --heads 64 --no-clean >/dev/null 2>&1
if [ -n "$NCU_BIN" ]; then
  PROF_LIMIT=80
  prof tmas_long_c64 '_tmas$' --impl ours --rows 4096 --keys 32768 --window causal --heads 64
  prof dg_long_c64 'sm90_fp8_mqa_logits' --impl dg --rows 4096 --keys 32768 --window causal --heads 64
  prof b4_long_c32 '_tmasb4$' --impl ours --rows 4096 --keys 32768 --window causal --heads 32
  prof dg_long_c32 'sm90_fp8_mqa_logits' --impl dg --rows 4096 --keys 32768 --window causal --heads 32
  prof tmas_4096_mr32 '_tmas$' --impl ours --rows 4096 --keys 4096 --window multi_req --heads 32
  prof dg_4096_mr32 'sm90_fp8_mqa_logits' --impl dg --rows 4096 --keys 4096 --window multi_req --heads 32
else
  echo "== ncu: not found"
fi
summary "session 8 H200 profile call" "$RES/session8_profile.txt"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
