#!/bin/bash
# Session 12, fourth H200 call (issue 14), from the repo root with rawindexer/_kernels, .whl, .v/s12, .v/kp and .v/tr
# carried:   bash docs/results/session12_c4_h200.sh      # results: $OUT/session12_c4.tgz
# 1. "tmaq" with the block's slice of K and its scales hinted into L2 at entry (.v/kp: TMAQ_K_PREFETCH=1) raced beside
#    this commit's default build (.v/s12: its tmaq kernels SASS-identical to the shipped ones), two rounds each.
# 2. The timeline of tmaq (.v/tr: TMAQ_TRACE=1, bench/tmaq_trace.py) at the two 1024^2 H 64 c0 cases still slower
#    than DeepGEMM, and at 4096^2 multi_req c0 H 64 for scale.
# 3. The candidate's quick sweep (tmaq).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session12_c4; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run, race_ab
PACK=$RES/session12_c4.tgz
DEADLINE=${DEADLINE:-400}
race_ab s12_ "$PWD/.v/s12" kp "$PWD/.v/kp" 2 tmaq
for c in "1024x1024 multi_req" "1024x1024 causal" "4096x4096 multi_req"; do
  set -- $c
  TAIL=40 RAWINDEXER_RACE_BUILD=$PWD/.v/tr run_step "trace_${1}_$2" 60 python3 bench/tmaq_trace.py --shape $1 --window $2 --heads 64 --clean 0
done
RAWINDEXER_KERNEL_DIR=$PWD/.v/kp run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmaq
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
