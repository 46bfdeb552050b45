#!/bin/bash
# Session 13, third H200 call (issue 10), from the repo root with .v/ptr carried (python bench/paged_tma_variant.py
# .v/ptr -DPAGED_TMA_TRACE=1: the shipped decode kernels with the per-block stamps):
#   bash docs/results/session13_c3_h200.sh      # results: $OUT/session13_c3.tgz
# bench/paged_trace.py at 64 x 32768 next_n 2 H 64 (the heuristic's 33 splits, and 8), 256 x 32768 and 64 x 131072
# next_n 2, and 64 x 32768 next_n 1, each beside nvidia-smi's SM clock.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session13_c3; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session13_c3.tgz
DEADLINE=${DEADLINE:-420}
export RAWINDEXER_KERNEL_DIR=$PWD/.v/ptr
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv,noheader -lms 50 > "$OUT/smi.csv" 2>&1 &
SMI=$!
TAIL=30 run_step t64x32k 60 python3 bench/paged_trace.py --batch 64 --context 32768 --next-n 2 --heads 64
TAIL=30 run_step t64x32k_s8 60 python3 bench/paged_trace.py --batch 64 --context 32768 --next-n 2 --heads 64 --split 8
TAIL=30 run_step t256x32k 80 python3 bench/paged_trace.py --batch 256 --context 32768 --next-n 2 --heads 64
TAIL=30 run_step t64x128k 80 python3 bench/paged_trace.py --batch 64 --context 131072 --next-n 2 --heads 64
TAIL=30 run_step t64x32k_n1 60 python3 bench/paged_trace.py --batch 64 --context 32768 --next-n 1 --heads 64
kill $SMI 2>/dev/null
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
