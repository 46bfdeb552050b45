#!/bin/bash
# v10 (issue 14, helper balance14), call 2 (for the lead; not yet run): tmasb2 (piece cost 4, Q prefetched into L2 by
# the producer, fill by contiguous row ranges) against tmas and tmasb (call 1's binary) and DeepGEMM on the 64 race
# cases; the sweep and NaN/Inf contract of tmasb2; racecheck on the subset (skipped with RACECHECK=0).
# From the repo root with rawindexer/_kernels, build/race (`python bench/race_sm90.py --build --build-only
# tmas,tmasb,tmasb2`) and .whl (the DeepGEMM wheel) present:   bash docs/results/balance14_h200_call2.sh
set -u
source docs/results/device_common.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
TAIL=30 step balance14_race2 240 python3 bench/race_sm90.py --impls tmas,tmasb,tmasb2 --grade tmasb2 --reps 10 --out "$OUT"
export RAWINDEXER_KERNEL_DIR=$PWD/build/race
step balance14_sweep2 100 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmasb2
step balance14_nan2 60 python3 tests/gpu/test_cuda_gpu.py --nan --designs tmasb2
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
[ "${RACECHECK:-1}" = 1 ] && step balance14_racecheck2 150 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 \
  python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 32,64 --designs tmasb2
echo "== done (t=$(( $(date +%s) - T0 )) s)"
cd "$OUT" && tar czf balance14_logs2.tgz *.log && ls -la
