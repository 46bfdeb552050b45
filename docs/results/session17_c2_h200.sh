#!/bin/bash
# Session 17, second H200 call (issue 10), from the repo root with rawindexer/_kernels (the shipped build), .whl and two
# builds carried: .v/psusp = python bench/paged_tma_variant.py .v/psusp --all -DPAGED_TMA_PRODUCER_SUSPEND_NS=0x989680
# (the producer's free-slot wait sleeps until the phase flips instead of spinning; consumer loops SASS-identical) and
# .v/susp = ... -DPAGED_TMA_SUSPEND_NS=0x989680 (every ring wait).
#   bash docs/results/session17_c2_h200.sh      # results: $OUT/session17_c2.tgz
# Question: at the long N = 128 calls the card runs at its power cap; does a producer that sleeps instead of spinning
# leave the SM clock higher there? smoke, quick tma sweeps, the A/B main / psusp / susp twice on --cases power with
# nvidia-smi sampling clock, power and throttle reasons every 100 ms, then the shipped build's ragged public bench.
set -u
RES=${OUT:-/tmp/device_out}; mkdir -p "$RES"
OUT=/tmp/session17_c2; rm -rf "$OUT"
source docs/results/device_common.sh   # step, run_step, pack
PACK=$RES/session17_c2.tgz
DEADLINE=${DEADLINE:-575}
P=$PWD/.v/psusp; S=$PWD/.v/susp; K=rawindexer/_kernels
run_step smoke 40 bash -c "RAWINDEXER_KERNEL_DIR=$P python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64 && RAWINDEXER_KERNEL_DIR=$S python3 bench/paged_profile.py --impl tma --batch 8 --context 4096 --next-n 2 --heads 64"
grep -q '^rc=0' "$OUT/smoke.log" || { echo "smoke failed"; pack; exit 1; }
TAIL=4 run_step sweep_psusp 40 env RAWINDEXER_KERNEL_DIR=$P python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
TAIL=4 run_step sweep_susp 40 env RAWINDEXER_KERNEL_DIR=$S python3 tests/gpu/test_paged_gpu.py --quick --design tma --split 1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 100 > "$OUT/smi.csv" 2>&1 &
SMI=$!
AB_CHILD_S=90 TAIL=20 run_step ab 330 bash -c "python3 bench/paged_ab.py main=$K psusp=$P susp=$S main=$K psusp=$P susp=$S --cases power --log $OUT/ab.md | while IFS= read -r l; do echo \"\$(date +%H:%M:%S.%N) \$l\"; done"
kill $SMI 2>/dev/null
TAIL=60 run_step paged_bench_ragged 170 python3 -m rawindexer.bench --paged --designs tma --ragged --log "$OUT/paged_bench_ragged.md"
echo "== done (t=$(( $(date +%s) - T0 )) s)"
pack; ls -la "$RES"
