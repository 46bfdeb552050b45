#!/bin/bash
# Session 14, fourth H200 call (issue 10), from the repo root with rawindexer/_kernels (shipped) and .whl carried:
#   bash docs/results/session14_c4_h200.sh      # results: $OUT/session14_c4.tgz
# the public decode benchmark of the shipped tma design, every sequence at the full context and then on ragged lengths
# (python -m rawindexer.bench --paged --ragged: uniform in [context / 16, context]), DeepGEMM in each; the uniform run
# only where the deadline leaves time (this session had ~300 s of device time left for the call).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session14_c4; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session14_c4.tgz
DEADLINE=${DEADLINE:-230}
TAIL=60 run_step paged_bench_ragged 240 python3 -m rawindexer.bench --paged --designs tma --ragged --log "$OUT/paged_bench_ragged.md"
TAIL=60 run_step paged_bench 240 python3 -m rawindexer.bench --paged --designs tma --log "$OUT/paged_bench.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
