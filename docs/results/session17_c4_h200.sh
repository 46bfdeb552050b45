#!/bin/bash
# Session 17, fourth H200 call (issue 10), from the repo root with rawindexer/_kernels (the shipped build) and .whl
# carried. Call 3's trace: 0.5 s of warm-up timed inside the clock clamp of the load onset (1395-1545 MHz for 0.4-0.8 s,
# then 1965-1980 MHz). rawindexer.bench_paged.WARM_S is now 1.5 s.
#   bash docs/results/session17_c4_h200.sh      # results: $OUT/session17_c4.tgz
# the A/B main twice on --cases power (DeepGEMM in it) with nvidia-smi sampling, then the public decode benchmark of
# the shipped build (full lengths), both with the 1.5 s warm-up.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session17_c4; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session17_c4.tgz
DEADLINE=${DEADLINE:-560}
K=rawindexer/_kernels
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 100 > "$OUT/smi.csv" 2>&1 &
SMI=$!
AB_CHILD_S=90 TAIL=12 run_step ab 150 bash -c "python3 bench/paged_ab.py main=$K main=$K --cases power --log $OUT/ab.md | while IFS= read -r l; do echo \"\$(date +%H:%M:%S.%N) \$l\"; done"
TAIL=60 run_step paged_bench 380 python3 -m rawindexer.bench --paged --designs tma --log "$OUT/paged_bench.md"
kill $SMI 2>/dev/null
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
