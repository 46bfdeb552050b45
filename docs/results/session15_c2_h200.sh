#!/bin/bash
# Session 15, second H200 call (issue 10), from the repo root with rawindexer/_kernels (shipped) and .whl carried:
#   bash docs/results/session15_c2_h200.sh      # results: $OUT/session15_c2.tgz
# the public decode benchmark of the tma design with balanced_split (rawindexer/dispatch/paged_sm90.py), on ragged
# lengths (uniform in [context / 16, context]) and then at the full context, DeepGEMM in each.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session15_c2; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session15_c2.tgz
DEADLINE=${DEADLINE:-560}
TAIL=60 run_step paged_bench_ragged 270 python3 -m rawindexer.bench --paged --designs tma --ragged --log "$OUT/paged_bench_ragged.md"
TAIL=60 run_step paged_bench 280 python3 -m rawindexer.bench --paged --designs tma --log "$OUT/paged_bench.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
