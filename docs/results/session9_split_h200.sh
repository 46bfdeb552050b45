#!/bin/bash
# Session 9, eighth H200 call (issue 14): the gpu pytest tests of "wgpr", with the SplitN cases added after the final
# call (its pairs' spans split over grid.y: forced 2 and 3, and auto's own SplitN 2 at 900 x 3000 H 64).
#   bash docs/results/session9_split_h200.sh      # results: $OUT/session9_split.tgz
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session9_split; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session9_split.tgz
DEADLINE=${DEADLINE:-150}
run_step pytest_gpu 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_cuda_gpu.py -k "row_block_pairs or split or nan_contract"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
