#!/bin/bash
# Session 11, ninth H200 call (issue 14): the NaN/Inf contract of every shipped sm_90a prefill design, tmaq and tmasb4
# now among them, with a case of more row blocks than SMs (1100 x 256), from the repo root with rawindexer/_kernels and
# .whl carried:
#   bash docs/results/session11_nan_h200.sh      # results: $OUT/session11_nan.tgz
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session11_nan; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session11_nan.tgz
DEADLINE=${DEADLINE:-150}
TAIL=20 run_step pytest_gpu 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_cuda_gpu.py -k "nan_contract"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
