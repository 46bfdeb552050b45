#!/bin/bash
# Session 7 (issue 14), one H200 call, from the repo root with rawindexer/_kernels (the shipped build) and .whl present:
#   bash docs/results/session7_profile_h200.sh      # results: $OUT/session7_profile.tgz, $OUT/session7_profile.txt
# Where the time of the cases still slower than DeepGEMM goes, per SASS instruction (ncu SourceCounters: warp-stall
# samples by instruction, bench/ncu_sass_stalls.py) and in the headline metrics (bench/ncu_summary.py), ours (the
# shipped auto choice) beside DeepGEMM's fp8_mqa_logits, one launch each (the second call of bench/prefill_profile.py):
#   4096 x 4096 multi_req H 64 c0 (tmasb4) and H 32 c0 (tmas); 1024 x 1024 causal H 64 c0 (wg); DeepGEMM on all three.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session7_prof; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session7_profile.tgz
DEADLINE=${DEADLINE:-300}
source docs/results/ncu_common.sh      # NCU_BIN, SECTIONS, M, prof, summary
# DeepGEMM JIT-compiles at first use: warm its cache outside ncu
python3 bench/prefill_profile.py --impl dg --rows 1024 --keys 1024 --window causal --heads 64 --no-clean >/dev/null 2>&1
python3 bench/prefill_profile.py --impl dg --rows 4096 --keys 4096 --window multi_req --heads 64 --no-clean >/dev/null 2>&1
if [ -n "$NCU_BIN" ]; then
  prof b4_4096_mr64 '_tmasb4$' --impl ours --rows 4096 --keys 4096 --window multi_req --heads 64
  prof dg_4096_mr64 'sm90_fp8_mqa_logits' --impl dg --rows 4096 --keys 4096 --window multi_req --heads 64
  prof tmas_4096_mr32 '_tmas$' --impl ours --rows 4096 --keys 4096 --window multi_req --heads 32
  prof dg_4096_mr32 'sm90_fp8_mqa_logits' --impl dg --rows 4096 --keys 4096 --window multi_req --heads 32
  prof wg_1024_c64 'fp8_mqa_logits_sm90' --impl ours --rows 1024 --keys 1024 --window causal --heads 64
  prof dg_1024_c64 'sm90_fp8_mqa_logits' --impl dg --rows 1024 --keys 1024 --window causal --heads 64
else
  echo "== ncu: not found"
fi
summary "session 7 H200 profile call" "$RES/session7_profile.txt"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
