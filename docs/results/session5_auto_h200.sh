#!/bin/bash
# Session 5, after widening auto's tmasb2 rule at H = 64 (rule only; the cubins are the ones session5_final_h200.sh
# checked, byte-identical): the public call over the 64 cases against DeepGEMM, plus the checks that route through auto.
# From the repo root with rawindexer/_kernels and .whl/ carried:  bash docs/results/session5_auto_h200.sh
set -u
source docs/results/device_common.sh
step nan 60 python3 tests/gpu/test_cuda_gpu.py --nan
step sweep 60 python3 tests/gpu/test_cuda_gpu.py --quick
step graph 40 python3 tests/gpu/test_graph_gpu.py
TAIL=30 step bench 110 python3 -m rawindexer.bench --reps 10 --out "$OUT/bench"
(cd "$OUT" && tar -cf /tmp/auto.tar . && rm -rf ./* && mv /tmp/auto.tar "$OUT/auto.tar")
echo "== done (t=$(( $(date +%s) - T0 )) s)"
