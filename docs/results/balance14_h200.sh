#!/bin/bash
# v10 (issue 14, helper balance14), call 1: grade and time the balanced candidate tmasb against the shipped tmas and
# DeepGEMM on the 64 race cases; the small-shape sweep and the NaN/Inf contract of tmasb; racecheck on the subset.
# From the repo root with rawindexer/_kernels, build/race (`python bench/race_sm90.py --build --build-only
# tmas,tmasb`) and .whl (the DeepGEMM wheel) present:   bash docs/results/balance14_h200.sh
set -u
source docs/results/device_common.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
TAIL=30 step balance14_race 220 python3 bench/race_sm90.py --impls tmas,tmasb --grade tmasb --reps 10 --out "$OUT"
export RAWINDEXER_KERNEL_DIR=$PWD/build/race  # the direct launches of tmasb (and api: auto = tmas / wg of that build)
step balance14_sweep 100 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmasb
step balance14_nan 60 python3 tests/gpu/test_cuda_gpu.py --nan --designs tmasb,tmas
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
step balance14_racecheck 120 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 \
  python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 32,64 --designs tmasb
echo "== done (t=$(( $(date +%s) - T0 )) s)"
cd "$OUT" && tar czf balance14_logs.tgz *.log && ls -la
