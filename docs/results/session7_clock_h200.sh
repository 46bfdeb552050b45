#!/bin/bash
# Session 7 (issue 10), one H200 call: the SM clock and power while the decode bench runs. nvidia-smi samples every
# 50 ms (SM clock, power, temperature, clock-event reasons) while `python -m rawindexer.bench --paged --batches 1,8,64`
# prints its rows, each stamped with the time it was printed, so a row's timing window can be read against the clock.
#   bash docs/results/session7_clock_h200.sh     # results: $OUT/clock/{smi.csv,bench_stamped.log,bench.md}
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES/clock"
OUT=/tmp/clock7; rm -rf "$OUT"
source docs/results/device_common.sh   # DeepGEMM's wheel on PYTHONPATH
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv \
  -lms 50 > "$RES/clock/smi.csv" 2>&1 &
SMI=$!
sleep 1
python3 -m rawindexer.bench --paged --batches 1,8,64 --log "$RES/clock/bench.md" 2>&1 |
  while IFS= read -r line; do echo "$(date +%Y/%m/%d\ %H:%M:%S.%3N) $line"; done > "$RES/clock/bench_stamped.log"
sleep 1
kill $SMI
grep -E "131072 \| 2 \| 64" "$RES/clock/bench_stamped.log"
