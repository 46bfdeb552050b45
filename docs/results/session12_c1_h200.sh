#!/bin/bash
# Session 12, first H200 call (issue 14), from the repo root with rawindexer/_kernels, .whl, .v/q2 and .v/pf carried:
#   bash docs/results/session12_c1_h200.sh      # results: $OUT/session12_c1.tgz
# 1. "tmaq" with the next-but-one row block's Q and weights hinted into L2 by a loader lane (.v/pf: TMAQ_L2_PREFETCH=1)
#    raced beside the shipped form (.v/q2, SASS-identical to the shipped tmaq), two rounds each, DeepGEMM in every run.
# 2. The public benchmark on 1024 x 131072 only, each timed phase stamped (--trace), beside an nvidia-smi trace of the
#    SM clock, power and throttle reasons every 50 ms: does the clean_logits=False H 32 case run at a lower clock?
# 3. The candidate's quick sweep (tmaq).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session12_c1; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack, race_run, race_ab
PACK=$RES/session12_c1.tgz
DEADLINE=${DEADLINE:-480}
race_ab s11_ "$PWD/.v/q2" pf "$PWD/.v/pf" 2 tmaq
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
  --format=csv,noheader -lms 50 > "$OUT/smi.csv" 2>&1 &
SMI=$!
TAIL=10 run_step bench_long 150 python3 -m rawindexer.bench --shapes 1024x131072 --reps 10 --trace --out "$OUT/bench_long"
kill $SMI 2>/dev/null
RAWINDEXER_KERNEL_DIR=$PWD/.v/pf run_step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmaq
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
