#!/bin/bash
# v11 (issue 14, helper qbuf14), the one H200 call: tmasb3 (tmasb2 + the next piece's Q staged by cp.async during the
# current piece) against wg, tmas, tmasb2 and DeepGEMM on the 64 race cases; the small-shape sweep and NaN/Inf
# contract of tmasb3; racecheck of tmasb3 at H = 64 and memcheck on the sanitizer subset. Every step is cut to the
# time left before DEADLINE s (the command's own limit is 240 s) and the logs are re-tarred after each step.
# From the repo root with rawindexer/_kernels, build/race (`python bench/race_sm90.py --build --build-only
# tmas,tmasb2,tmasb3`) and .whl (the DeepGEMM wheel) present:   bash docs/results/qbuf14_h200.sh
set -u
source docs/results/device_common.sh
DEADLINE=${DEADLINE:-228}
pack() { (cd "$OUT" && tar czf qbuf14_logs.tgz --exclude qbuf14_logs.tgz . 2>/dev/null); }
run_step() { local name=$1 limit=$2; shift 2; local left=$(( DEADLINE - ($(date +%s) - T0) ));
             [ "$left" -lt 10 ] && { echo "== $name skipped: ${left} s left"; return; }
             [ "$limit" -gt "$left" ] && limit=$left; step "$name" "$limit" "$@"; pack; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
TAIL=40 run_step qbuf14_race 130 python3 bench/race_sm90.py --impls wg,tmas,tmasb2,tmasb3 --grade tmasb3 --reps 5 --out "$OUT"
export RAWINDEXER_KERNEL_DIR=$PWD/build/race
run_step qbuf14_sweep 40 python3 tests/gpu/test_cuda_gpu.py --quick --designs tmasb3
run_step qbuf14_nan 30 python3 tests/gpu/test_cuda_gpu.py --nan --designs tmasb3
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
run_step qbuf14_racecheck 100 "$SAN" --tool racecheck --report-api-errors no --error-exitcode 9 \
  python3 tests/gpu/test_cuda_gpu.py --racecheck-subset --racecheck-heads 64 --designs tmasb3
run_step qbuf14_memcheck 60 "$SAN" --tool memcheck --error-exitcode 9 \
  python3 tests/gpu/test_cuda_gpu.py --sanitizer-subset --designs tmasb3
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$OUT"
