#!/bin/bash
# Session 12, second H200 call (issues 14 and 10), from the repo root with rawindexer/_kernels and .whl carried:
#   bash docs/results/session12_c2_h200.sh      # results: $OUT/session12_c2.tgz
# The public benchmarks on the shipped build with each device-time measurement started after 1 s of idle (--settle 1,
# now the default), an nvidia-smi trace of the SM clock, power and throttle reasons every 50 ms beside each, phases
# stamped (--trace): the prefill benchmark (all 64 cases), then the decode benchmark (design tma beside DeepGEMM).
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session12_c2; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session12_c2.tgz
DEADLINE=${DEADLINE:-570}
smi() { nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
          --format=csv,noheader -lms 50 > "$OUT/$1" 2>&1 & SMI=$!; }
smi smi_bench.csv
TAIL=16 run_step bench 330 python3 -m rawindexer.bench --reps 10 --trace --out "$OUT/bench"
kill $SMI 2>/dev/null
smi smi_paged.csv
TAIL=60 run_step paged_bench 220 python3 -m rawindexer.bench --paged --designs tma --log "$OUT/paged_bench.md"
kill $SMI 2>/dev/null
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
