#!/bin/bash
# Session 16, third H200 call (issue 10), from the repo root with rawindexer/_kernels (the shipped build of 6446cf0) and
# .whl carried:
#   bash docs/results/session16_c3_h200.sh      # results: $OUT/session16_c3.tgz
# the public decode benchmark of the shipped kernels (pair reduce + pipelined peel), full lengths then ragged, DeepGEMM in each.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session16_c3; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session16_c3.tgz
DEADLINE=${DEADLINE:-330}
TAIL=60 run_step paged_bench 160 python3 -m rawindexer.bench --paged --designs tma --log "$OUT/paged_bench.md"
TAIL=60 run_step paged_bench_ragged 160 python3 -m rawindexer.bench --paged --designs tma --ragged --log "$OUT/paged_bench_ragged.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
