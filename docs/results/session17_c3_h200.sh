#!/bin/bash
# Session 17, third H200 call (issue 10), from the repo root with rawindexer/_kernels (the shipped build), .whl, .v/psusp
# and .v/susp carried (as call 2). The timing now warms up: rawindexer.bench_paged.graph_time replays the graph
# untimed for WARM_S = 0.5 s after the 1 s idle, then times (call 2's nvidia-smi trace: the SM clock is clamped for a
# few hundred ms at each load onset, and 256 x 131072 H 64 next_n 2 read 1408 and 1236 us for the same kernel).
#   bash docs/results/session17_c3_h200.sh      # results: $OUT/session17_c3.tgz
# the A/B main / psusp / susp twice on --cases power with the warm-up and nvidia-smi sampling, then the public decode
# benchmark of the shipped build (full lengths) with the warm-up.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session17_c3; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session17_c3.tgz
DEADLINE=${DEADLINE:-575}
P=$PWD/.v/psusp; S=$PWD/.v/susp; K=rawindexer/_kernels
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 100 > "$OUT/smi.csv" 2>&1 &
SMI=$!
AB_CHILD_S=90 TAIL=20 run_step ab 330 bash -c "python3 bench/paged_ab.py main=$K psusp=$P susp=$S main=$K psusp=$P susp=$S --cases power --log $OUT/ab.md | while IFS= read -r l; do echo \"\$(date +%H:%M:%S.%N) \$l\"; done"
kill $SMI 2>/dev/null
TAIL=60 run_step paged_bench 230 python3 -m rawindexer.bench --paged --designs tma --log "$OUT/paged_bench.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
