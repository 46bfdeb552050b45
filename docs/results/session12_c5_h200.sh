#!/bin/bash
# Session 12, fifth H200 call (issue 14), from the repo root with rawindexer/_kernels, .whl, .v/s12, .v/aq and .v/aqt
# carried:   bash docs/results/session12_c5_h200.sh      # results: $OUT/session12_c5.tgz
# 1. "tmaq" whose loaders never wait for their copies (.v/aq: TMAQ_ASYNC_Q=1; the copies arrive on "Q full" as they
#    complete, the consumers fence and clamp the raw windows) raced beside the default build (.v/s12), two rounds each.
# 2. Its timeline (.v/aqt: TMAQ_ASYNC_Q=1 TMAQ_TRACE=1) at 1024^2 multi_req / causal and 4096^2 multi_req, H 64, c0.
# 3. Its quick sweep and racecheck (H 64, shapes whose blocks reuse their Q buffers).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session12_c5; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run, race_ab
PACK=$RES/session12_c5.tgz
DEADLINE=${DEADLINE:-420}
race_ab s12_ "$PWD/.v/s12" aq "$PWD/.v/aq" 2 tmaq
for c in "1024x1024 multi_req" "1024x1024 causal" "4096x4096 multi_req"; do
  set -- $c
  TAIL=40 RAWINDEXER_RACE_BUILD=$PWD/.v/aqt run_step "trace_${1}_$2" 60 python3 bench/tmaq_trace.py --shape $1 --window $2 --heads 64 --clean 0
done
RAWINDEXER_KERNEL_DIR=$PWD/.v/aq run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmaq
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
RAWINDEXER_KERNEL_DIR=$PWD/.v/aq run_step racecheck_aq 150 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --racecheck-shapes 17x76,1100x256 --designs tmaq
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
